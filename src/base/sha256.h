/*
 * sha256: SHA-256 (FIPS 180-4), self-contained, for model identity (the
 * digest of a model file tells two loads of "the same" version apart).
 *
 * Streaming use: sha256_init(), any number of sha256_update() calls with
 * any split of the message, sha256_final(). A struct sha256 lives wherever
 * the caller puts it (no allocation); it is not thread-safe, and after
 * sha256_final() it must be initialized again before reuse.
 *
 * sha256_file() hashes a whole file, reading it in SHA256_FILE_CHUNK-byte
 * pieces into a buffer of its own on the heap (never the whole file).
 */
#ifndef INFERD_BASE_SHA256_H
#define INFERD_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32
#define SHA256_BLOCK_SIZE 64
/* Lower-case hex digest plus the NUL. */
#define SHA256_HEX_SIZE (2 * SHA256_DIGEST_SIZE + 1)
#define SHA256_FILE_CHUNK (64 * 1024)

struct sha256 {
    uint32_t h[8];
    uint64_t nbytes; /* message length so far */
    uint8_t block[SHA256_BLOCK_SIZE];
    uint32_t fill; /* bytes waiting in block[] */
};

void sha256_init(struct sha256 *s);
/* Adds data[0..len) to the message; data may be NULL when len is 0. */
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* Writes the digest of the whole message to out. */
void sha256_final(struct sha256 *s, uint8_t out[SHA256_DIGEST_SIZE]);

/* One-shot digest of data[0..len). */
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_SIZE]);

/* Writes the 64 lower-case hex digits of digest and a NUL to hex. */
void sha256_hex(const uint8_t digest[SHA256_DIGEST_SIZE], char hex[SHA256_HEX_SIZE]);

/*
 * Digest of the file at path into out and (if hex is not NULL) its hex form
 * into hex. Returns 0, or a negated errno: from open/read (-ENOENT,
 * -EACCES, -EISDIR, ...), or -ENOMEM for the read buffer. On error out and
 * hex are left unchanged. Blocking; any thread.
 */
int sha256_file(const char *path, uint8_t out[SHA256_DIGEST_SIZE], char hex[SHA256_HEX_SIZE]);

#endif
