#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("inferd %s\n", INFERD_VERSION);
        return 0;
    }
    fprintf(stderr, "usage: inferd --version\n");
    return 2;
}
