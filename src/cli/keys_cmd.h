/*
 * keys_cmd: `inferd keys new|hash`, the API keys of the `auth` section
 * (policy/auth.h, policy/auth_key.h, docs/security.md).
 *
 *   inferd keys new     prints a new random key ("inferd_" + 43 URL-safe
 *                       base64 characters) and, on the next line, its hash
 *   inferd keys hash    reads one key from the first line of stdin and
 *                       prints its hash (a new random salt each time)
 *
 * A hash is what goes into the configuration; the key goes to the client
 * only. Keys shorter than 16 or longer than 256 characters, or with
 * characters outside 0x21-0x7e (a key travels in an HTTP header), are
 * refused. Exit status: 0, 1 when no random bytes could be read, 2 for a
 * usage error or a refused key.
 */
#ifndef INFERD_CLI_KEYS_CMD_H
#define INFERD_CLI_KEYS_CMD_H

/* argv[0] is "keys". Returns the exit status. */
int keys_main(int argc, char **argv);

#endif
