#include "policy/auth_key.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "base/base64.h"
#include "base/hex.h"
#include "base/status.h"

static int random_bytes(uint8_t *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -EIO;
        got += (size_t)r;
    }
    return 0;
}

bool auth_key_valid(const char *key, size_t len)
{
    if (len < AUTH_KEY_MIN || len > AUTH_KEY_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (key[i] < 0x21 || key[i] > 0x7e)
            return false;
    return true;
}

bool auth_ct_equal(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(x[i] ^ y[i]);
    return diff == 0;
}

void auth_key_digest(const uint8_t salt[AUTH_SALT_SIZE], const char *key, size_t len,
                     uint8_t out[SHA256_DIGEST_SIZE])
{
    struct sha256 s;
    sha256_init(&s);
    sha256_update(&s, salt, AUTH_SALT_SIZE);
    sha256_update(&s, key, len);
    sha256_final(&s, out);
    explicit_bzero(&s, sizeof s); /* its block held the key */
}

bool auth_key_matches(const struct auth_key_hash *h, const char *key, size_t len)
{
    uint8_t d[SHA256_DIGEST_SIZE];
    auth_key_digest(h->salt, key, len, d);
    return auth_ct_equal(d, h->digest, sizeof d);
}

int auth_key_hash(const char *key, size_t len, struct auth_key_hash *out)
{
    if (!auth_key_valid(key, len))
        return -EINVAL;
    if (random_bytes(out->salt, sizeof out->salt) != 0)
        return -EIO;
    auth_key_digest(out->salt, key, len, out->digest);
    return 0;
}

static char *put_hex(char *p, const uint8_t *b, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        *p++ = digits[b[i] >> 4];
        *p++ = digits[b[i] & 15];
    }
    return p;
}

void auth_key_format(const struct auth_key_hash *h, char out[AUTH_HASH_LEN + 1])
{
    char *p = out;
    memcpy(p, AUTH_HASH_PREFIX, sizeof AUTH_HASH_PREFIX - 1);
    p += sizeof AUTH_HASH_PREFIX - 1;
    p = put_hex(p, h->salt, sizeof h->salt);
    *p++ = '$';
    p = put_hex(p, h->digest, sizeof h->digest);
    *p = '\0';
}

static int get_hex(const char *p, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex_value(p[2 * i]), lo = hex_value(p[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return ST_ERROR;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int auth_key_parse(const char *text, size_t len, struct auth_key_hash *out)
{
    const size_t prefix = sizeof AUTH_HASH_PREFIX - 1;
    const char *salt = text + prefix, *digest = salt + 2 * AUTH_SALT_SIZE + 1;
    if (len != AUTH_HASH_LEN || memcmp(text, AUTH_HASH_PREFIX, prefix) != 0 || digest[-1] != '$')
        return ST_ERROR;
    if (get_hex(salt, out->salt, sizeof out->salt) != 0 ||
        get_hex(digest, out->digest, sizeof out->digest) != 0)
        return ST_ERROR;
    return 0;
}

int auth_key_new(char out[AUTH_NEW_KEY_LEN + 1])
{
    uint8_t raw[AUTH_NEW_KEY_BYTES];
    if (random_bytes(raw, sizeof raw) != 0)
        return -EIO;
    char *p = out;
    memcpy(p, AUTH_KEY_PREFIX, sizeof AUTH_KEY_PREFIX - 1);
    p += sizeof AUTH_KEY_PREFIX - 1;
    p += base64_encode(p, raw, sizeof raw, BASE64_URL);
    *p = '\0';
    explicit_bzero(raw, sizeof raw);
    return 0;
}
