/*
 * wav: the RIFF/WAVE container, read from memory (audio.c's decoder).
 *
 * Accepted: a "RIFF" file of form "WAVE" whose "fmt " chunk comes before
 * its "data" chunk, in one of these encodings (format tag, bits per
 * sample), also as the subformat of WAVE_FORMAT_EXTENSIBLE (0xFFFE):
 *   PCM (1): 8 (unsigned), 16, 24, 32 (signed, little-endian)
 *   IEEE float (3): 32, 64 (little-endian)
 * with 1..WAV_MAX_CHANNELS interleaved channels and a sample rate from
 * WAV_MIN_RATE to WAV_MAX_RATE Hz. Other chunks ("LIST", "fact", ...) are
 * skipped; a chunk of odd size is followed by one pad byte (a missing pad
 * byte at the very end is tolerated). A "data" chunk of size 0xFFFFFFFF,
 * as streaming writers leave it (espeak-ng --stdout), holds the whole
 * frames up to the end of the file. Every offset is checked against the
 * buffer: nothing is read outside [p, p + len).
 *
 * Samples become floats in [-1, 1): PCM8 (v - 128) / 128, PCM16 v / 32768,
 * PCM24 v / 8388608, PCM32 v / 2147483648, floats as they are; channels
 * are averaged to mono.
 *
 * Thread: any (no state).
 */
#ifndef INFERD_PREPROCESS_WAV_H
#define INFERD_PREPROCESS_WAV_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define WAV_MAX_CHANNELS 32
#define WAV_MIN_RATE 1000
#define WAV_MAX_RATE 384000

enum wav_encoding {
    WAV_PCM,
    WAV_FLOAT,
};

struct wav_info {
    enum wav_encoding encoding;
    uint16_t channels;
    uint16_t bits;        /* per sample of one channel */
    uint32_t sample_rate; /* Hz */
    uint64_t frames;      /* one sample of every channel each */
    const uint8_t *data;  /* frames * channels * bits / 8 bytes, into the buffer */
};

/* Reads the header of the WAV file at p[0..len) into *out, without
 * decoding samples. The duration is taken from the size the "data" chunk
 * declares, before the chunk is checked to be complete: a header claiming
 * more than max_seconds fails with 413 whatever follows it. Returns 0, or
 * -1 with err: 413 over max_seconds, 400 for anything else (not RIFF/WAVE,
 * a truncated chunk, no "fmt " or "data" chunk, an unsupported encoding
 * naming its format tag and bits, inconsistent sizes). */
int wav_parse(const uint8_t *p, size_t len, double max_seconds, struct wav_info *out,
              struct error *err);

/* Decodes frames [0, n) of w (n <= w->frames) into out[0..n), averaged to
 * mono. Returns 0, or ST_ERROR with err 400 if a float sample is NaN or
 * infinite. */
int wav_decode_mono(const struct wav_info *w, uint64_t n, float *out, struct error *err);

#endif
