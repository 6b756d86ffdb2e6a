#!/usr/bin/python3
"""Check that src/ spells statuses one way (src/base/status.h).

    /usr/bin/python3 scripts/check_status.py [SRC_DIR]

A function that reports success or failure returns ST_OK, ST_DONE,
ST_AGAIN, ST_ERROR or a negated errno; a lookup that finds nothing returns
NOT_FOUND. A bare -1 says neither, so this fails, naming file and line, on

- `return -1;`
- a status chosen by a condition: `return x ? 0 : -1;`, `? -1 : 0`
- a status stored for later: `rc = -1;`, `->rc = -1;`, `.rc = -1`

Comparators (`a < b ? -1 : 1`) and arithmetic keep their -1: only the
forms above are statuses. Comments and string literals are skipped.
Exit status 0 with a one-line summary when clean, 1 otherwise.
"""

import os
import re
import sys

BARE = [
    (re.compile(r"\breturn\s+\(?-1\)?\s*;"), "return -1 (ST_ERROR, a -errno, or NOT_FOUND for a lookup)"),
    (re.compile(r"\?\s*0\s*:\s*-1\s*;|\?\s*-1\s*:\s*0\s*;"), "a status of 0 or -1 (ST_OK : ST_ERROR)"),
    (re.compile(r"(?:\brc|->rc|\.rc)\s*=\s*-1\b"), "rc = -1 (ST_ERROR)"),
]


def strip(line, in_comment):
    """The line without comments and string literals; and whether a block
    comment is still open at its end."""
    out, i, n = [], 0, len(line)
    while i < n:
        if in_comment:
            j = line.find("*/", i)
            if j < 0:
                return "".join(out), True
            i, in_comment = j + 2, False
        elif line.startswith("/*", i):
            in_comment, i = True, i + 2
        elif line.startswith("//", i):
            break
        elif line[i] in "\"'":
            q, i = line[i], i + 1
            while i < n and line[i] != q:
                i += 2 if line[i] == "\\" else 1
            i += 1
            out.append('""')
        else:
            out.append(line[i])
            i += 1
    return "".join(out), in_comment


def check(src):
    problems, files = [], 0
    for root, _, names in sorted(os.walk(src)):
        for name in sorted(names):
            if not name.endswith((".c", ".h")):
                continue
            files += 1
            path = os.path.join(root, name)
            in_comment = False
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    code, in_comment = strip(line, in_comment)
                    for pattern, what in BARE:
                        if pattern.search(code):
                            problems.append("%s:%d: %s: %s" % (os.path.relpath(path), lineno, what, line.strip()))
    return files, problems


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
    files, problems = check(os.path.normpath(src))
    for p in problems:
        print(p)
    if problems:
        print("check_status: %d bare -1 status%s (src/base/status.h)"
              % (len(problems), "" if len(problems) == 1 else "es"))
        return 1
    print("check_status: %d files, every status spelt ST_*, -errno or NOT_FOUND" % files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
