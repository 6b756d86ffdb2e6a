/*
 * auth_key: API keys and the salted hashes the configuration stores in
 * their place (docs/security.md).
 *
 * A key is what a client sends (`Authorization: Bearer <key>` or
 * `x-api-key: <key>`): AUTH_KEY_MIN to AUTH_KEY_MAX visible ASCII
 * characters (0x21-0x7e: it travels in an HTTP header). auth_key_new()
 * makes "inferd_" followed by the URL-safe base64 (no padding) of 32
 * random bytes from getrandom(2).
 *
 * The configuration never holds a key, only its hash:
 *
 *     inferd-sha256$<salt: 32 lower-case hex digits>$<digest: 64 lower-case hex digits>
 *
 * salt: 16 bytes from getrandom(2), one per hash; digest: SHA-256(salt ||
 * key). Verifying a presented key hashes it with the stored salt and
 * compares the digests in constant time (auth_ct_equal).
 *
 * Nothing here logs or formats a key; functions that see one wipe their
 * copies of it (the SHA-256 state) before they return. Pure functions,
 * any thread.
 */
#ifndef INFERD_POLICY_AUTH_KEY_H
#define INFERD_POLICY_AUTH_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/sha256.h"

#define AUTH_KEY_MIN 16
#define AUTH_KEY_MAX 256
#define AUTH_SALT_SIZE 16
#define AUTH_HASH_PREFIX "inferd-sha256$"
/* Characters of a hash in its text form (without the NUL). */
#define AUTH_HASH_LEN                                                                              \
    (sizeof AUTH_HASH_PREFIX - 1 + 2 * AUTH_SALT_SIZE + 1 + 2 * SHA256_DIGEST_SIZE)
#define AUTH_KEY_PREFIX "inferd_"
#define AUTH_NEW_KEY_BYTES 32
/* Characters of a key made by auth_key_new() (without the NUL). */
#define AUTH_NEW_KEY_LEN (sizeof AUTH_KEY_PREFIX - 1 + (4 * AUTH_NEW_KEY_BYTES + 2) / 3)

struct auth_key_hash {
    uint8_t salt[AUTH_SALT_SIZE];
    uint8_t digest[SHA256_DIGEST_SIZE];
};

/* Whether key[0..len) can be a key: length and characters (above). */
bool auth_key_valid(const char *key, size_t len);

/* Hashes a valid key with a new random salt. 0, -EINVAL (not a valid
 * key: nothing hashed) or -EIO (no random bytes). */
int auth_key_hash(const char *key, size_t len, struct auth_key_hash *out);
/* The digest of key under salt (SHA-256(salt || key)). */
void auth_key_digest(const uint8_t salt[AUTH_SALT_SIZE], const char *key, size_t len,
                     uint8_t out[SHA256_DIGEST_SIZE]);
/* Whether key hashes to h: one SHA-256 and a constant-time compare. */
bool auth_key_matches(const struct auth_key_hash *h, const char *key, size_t len);

/* The text form of h, NUL-terminated. */
void auth_key_format(const struct auth_key_hash *h, char out[AUTH_HASH_LEN + 1]);
/* Reads the text form (hex digits in either case). 0, or ST_ERROR when text is
 * not one. */
int auth_key_parse(const char *text, size_t len, struct auth_key_hash *out);

/* A new random key, NUL-terminated. 0 or -EIO. */
int auth_key_new(char out[AUTH_NEW_KEY_LEN + 1]);

/* a[0..n) == b[0..n) in a time that depends on n only. */
bool auth_ct_equal(const void *a, const void *b, size_t n);

#endif
