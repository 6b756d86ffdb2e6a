/*
 * tokenizer: the byte-level BPE tokenizer of a generative model (the
 * tokenizer.json that generation.json names; docs/generative.md) and of a
 * text input's preprocessing (preprocess.json's "text"; text.c). It lives
 * in preprocess so that gen, above it, and text.c share it.
 *
 * The file:
 *   {"type": "byte-bpe", "vocab_size": V, "eos_token": "<|endoftext|>",
 *    "eos_token_id": V - 1, "merges": [[a, b], ...]}
 * Ids 0..255 are the bytes; merge k (0-based, file order = rank) makes id
 * 256 + k from the pair [a, b], where a and b are below 256 + k; the eos id
 * is the last one and has no bytes, so V = 256 + len(merges) + 1. A pair
 * may appear only once. "eos_token" is optional (a string, for people).
 *
 * Encoding rule (what the Python and JS reference implementations do):
 *   - pre-tokenization: the bytes are cut into pieces; a piece starts at
 *     offset 0 and before every space (0x20) and newline (0x0A) byte;
 *   - each piece, independently: start from its bytes as ids; repeat: take
 *     the adjacent pair with the lowest merge rank; if no adjacent pair is a
 *     merge, stop; replace every occurrence of that pair, scanning left to
 *     right without overlap, by the merged id;
 *   - the ids of the pieces are concatenated. The text "<|endoftext|>" is
 *     not special (encoded as its bytes), so encoding never yields eos.
 * Implementation: merges are found through a hash of the pair; a piece is
 * merged with a heap ordered by (rank, position), O(n log n) per piece of n
 * bytes. A merged id's pairs all have higher ranks than its own merge, so
 * the heap pops the ranks in the rule's order and, within one rank, the
 * occurrences left to right.
 *
 * Decoding: an id's bytes are its pair's bytes concatenated (recursively);
 * they are stored contiguously at parse time (at most TOKENIZER_MAX_TOKEN
 * bytes per token, TOKENIZER_MAX_BYTES in all).
 *
 * Lifecycle and threads: tokenizer_parse/load create an immutable object
 * owned by the caller (tokenizer_free). All other functions only read it and
 * may be called from any thread at once; tokenizer_encode uses a stack
 * buffer, or a temporary heap one for pieces longer than 256 bytes.
 */
#ifndef INFERD_PREPROCESS_TOKENIZER_H
#define INFERD_PREPROCESS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define TOKENIZER_MAX_VOCAB 65536u
#define TOKENIZER_MAX_FILE (8u << 20)
#define TOKENIZER_MAX_TOKEN 4096u       /* bytes of one token */
#define TOKENIZER_MAX_BYTES (16u << 20) /* bytes of all tokens together */

struct tokenizer;

/* Parses tokenizer.json text. 0, or ST_ERROR with err (status 400, message names the field). Limits:
 * vocab <= 65536, file <= 8 MiB; merges must refer to ids below 256 + their own index. Out of
 * memory: -1 with status 500. */
int tokenizer_parse(const char *json, size_t len, struct tokenizer **out, struct error *err);
/* Reads the file, then parses it (errors prefixed with the path; an unreadable file is a 400). */
int tokenizer_load(const char *path, struct tokenizer **out, struct error *err);
void tokenizer_free(struct tokenizer *t); /* NULL: no-op */
uint32_t tokenizer_vocab_size(const struct tokenizer *t);
int32_t tokenizer_eos(const struct tokenizer *t);
/* Encodes text[0..len) (any bytes). Writes at most max ids; returns the total number of tokens the
 * text has (which may exceed max: then only the first max were written), or ST_ERROR when out of memory.
 * Any thread. */
int64_t tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, int32_t *ids,
                         size_t max);
/* The bytes of one id (NULL/0 for eos or an id out of range); valid for the tokenizer's life. */
const char *tokenizer_token(const struct tokenizer *t, int32_t id, size_t *len);

#endif
