# Writes a C header with the bytes of a file as a NUL-terminated char array:
#   cmake -DIN=<file> -DOUT=<header> -DNAME=<identifier> -P embed_file.cmake
# defines `static const char NAME[]` and `#define NAME_LEN` (bytes, without the NUL).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR len "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from ${IN} by scripts/embed_file.cmake; do not edit. */\n"
     "static const char ${NAME}[] = {\n${bytes}0x00};\n#define ${NAME}_LEN ${len}u\n")
