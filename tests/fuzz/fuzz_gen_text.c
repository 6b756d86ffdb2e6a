/*
 * Fuzz target for gen/gen_text. The input is
 *   h, then h % 5 stops (a byte n, then 1 + n % 64 bytes of stop),
 *   then tokens: a byte b, then b & 15 bytes; b & 0x80 asks for a take
 *   (not final) after that token.
 * The same tokens are replayed through a naive model of the contract: the
 * whole text is searched for every stop after each token (the text ends
 * before the earliest-starting occurrence), and the final text is decoded
 * by a brute-force "maximal subpart" decoder (the longest prefix of a bad
 * sequence that some continuation bytes would complete is one U+FFFD).
 * Properties checked:
 *   - gen_text_append returns 1 exactly at the token where the model stops;
 *   - the concatenation of all takes equals the model's decoded text, and
 *     it is valid UTF-8;
 *   - no take before the end releases bytes past what the model's final
 *     text decodes to (a prefix at every point).
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "gen/gen_text.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_gen_text: %s\n", what);
        abort();
    }
}

/* Whether s[0..m) (1 <= m <= 3) begins some well-formed character: tried by
 * completing it with continuation bytes, json_utf8_seq_len as the oracle.
 * Only the byte after the lead has a narrowed range, so varying the first
 * filler byte and setting the others to 0x80 covers every case. */
static bool completable(const unsigned char *s, size_t m)
{
    unsigned char b[4] = {0x80, 0x80, 0x80, 0x80};
    memcpy(b, s, m);
    for (unsigned x = 0x80; x <= 0xBF; x++) {
        b[m] = (unsigned char)x;
        if (json_utf8_seq_len(b, 4) > m)
            return true;
    }
    return false;
}

static void ref_decode(const unsigned char *s, size_t n, struct buf *out)
{
    for (size_t i = 0; i < n;) {
        size_t k = json_utf8_seq_len(s + i, n - i);
        if (k) {
            buf_append(out, s + i, k);
            i += k;
            continue;
        }
        size_t m = 1;
        for (size_t c = 3; c >= 1; c--) {
            if (c <= n - i && completable(s + i, c)) {
                m = c;
                break;
            }
        }
        buf_append(out, "\xEF\xBF\xBD", 3);
        i += m;
    }
}

static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = json_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t at = 0;
    if (size == 0)
        return 0;
    uint32_t nstops = data[at++] % 5;
    const char *stops[GEN_MAX_STOPS];
    size_t lens[GEN_MAX_STOPS];
    for (uint32_t k = 0; k < nstops; k++) {
        if (at >= size)
            return 0;
        size_t n = 1 + data[at++] % GEN_MAX_STOP_LEN;
        if (n > size - at)
            return 0;
        stops[k] = (const char *)data + at;
        lens[k] = n;
        at += n;
    }
    struct gen_text t;
    check(gen_text_init(&t, stops, lens, nstops) == 0, "init failed");

    struct buf text, out;
    buf_init(&text, 1 << 20);
    buf_init(&out, 4 << 20);
    bool stopped = false;
    while (at < size && !stopped) {
        uint8_t b = data[at++];
        size_t n = b & 15;
        if (n > size - at)
            n = size - at;
        int rc = gen_text_append(&t, (const char *)data + at, n);
        check(rc == 0 || rc == 1, "append failed");
        buf_append(&text, data + at, n);
        at += n;
        size_t cut = text.len + 1;
        for (uint32_t k = 0; k < nstops; k++)
            for (size_t s = 0; s + lens[k] <= text.len && s < cut; s++)
                if (memcmp(text.data + s, stops[k], lens[k]) == 0)
                    cut = s;
        if (cut <= text.len) {
            text.len = cut;
            stopped = true;
        }
        check(rc == stopped, "append's stop differs from the model's");
        if (b & 0x80)
            gen_text_take(&t, false, &out);
    }
    /* What was released so far is a prefix of the final decoded text. */
    struct buf want;
    buf_init(&want, 4 << 20);
    ref_decode((const unsigned char *)text.data, text.len, &want);
    check(out.len <= want.len && (out.len == 0 || memcmp(out.data, want.data, out.len) == 0),
          "an early take released text the final text does not start with");
    gen_text_take(&t, true, &out);
    check(out.err == 0 && want.err == 0, "buffer error");
    check(out.len == want.len && (out.len == 0 || memcmp(out.data, want.data, out.len) == 0),
          "output differs from the model");
    check(valid_utf8(out.data, out.len), "output is not valid UTF-8");
    buf_free(&want);
    buf_free(&out);
    buf_free(&text);
    gen_text_free(&t);
    return 0;
}
