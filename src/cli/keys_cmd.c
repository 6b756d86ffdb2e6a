#include "cli/keys_cmd.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "policy/auth_key.h"

static const char usage_text[] =
    "usage: inferd keys new | hash\n"
    "\n"
    "API keys for the `auth` section of the configuration file (docs/security.md):\n"
    "  new    print a new random key, and its hash on the next line\n"
    "  hash   read a key from the first line of stdin and print its hash\n"
    "\n"
    "The configuration takes the hash; only the client gets the key.\n";

static int print_hash(const char *key, size_t len)
{
    struct auth_key_hash h;
    int rc = auth_key_hash(key, len, &h);
    if (rc != 0) {
        fputs(rc == -EINVAL ? "inferd keys: a key has 16 to 256 characters, printable ASCII "
                              "without spaces\n"
                            : "inferd keys: cannot read random bytes for the salt\n",
              stderr);
        return rc == -EINVAL ? 2 : 1;
    }
    char text[AUTH_HASH_LEN + 1];
    auth_key_format(&h, text);
    printf("%s\n", text);
    return 0;
}

static int cmd_new(void)
{
    char key[AUTH_NEW_KEY_LEN + 1];
    if (auth_key_new(key) != 0) {
        fputs("inferd keys: cannot read random bytes\n", stderr);
        return 1;
    }
    printf("%s\n", key);
    int rc = print_hash(key, strlen(key));
    explicit_bzero(key, sizeof key);
    return rc;
}

static int cmd_hash(void)
{
    /* One line: the key, its line end, and room to tell a longer line. */
    char line[AUTH_KEY_MAX + 3];
    if (!fgets(line, sizeof line, stdin)) {
        fputs("inferd keys hash: expected the key on stdin\n", stderr);
        return 2;
    }
    size_t len = strlen(line);
    bool whole = len && line[len - 1] == '\n';
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    int rc;
    if (!whole && !feof(stdin)) {
        fputs("inferd keys hash: a key has at most 256 characters\n", stderr);
        rc = 2;
    } else {
        rc = print_hash(line, len);
    }
    explicit_bzero(line, sizeof line);
    return rc;
}

int keys_main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "new") == 0)
        return cmd_new();
    if (argc == 2 && strcmp(argv[1], "hash") == 0)
        return cmd_hash();
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage_text, stdout);
        return 0;
    }
    fputs(usage_text, stderr);
    return 2;
}
