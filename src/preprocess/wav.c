/*
 * wav.c: the RIFF/WAVE reader (wav.h).
 */
#include <math.h>
#include <string.h>

#include "preprocess/wav.h"

#include "base/status.h"

#define TAG_PCM 0x0001
#define TAG_FLOAT 0x0003
#define TAG_EXTENSIBLE 0xFFFE
#define WAV_SIZE_UNKNOWN 0xFFFFFFFFu /* the data size a writer that cannot seek back leaves */

/* The 14 bytes after the format tag in every KSDATAFORMAT_SUBTYPE_* GUID
 * that stands for a WAVE format tag: the GUID is the 16-bit tag, two zero
 * bytes, then 0000-0010-8000-00aa00389b71. */
static const uint8_t guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                      0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads a "fmt " chunk body of n bytes into w (not frames, not data). */
static int parse_fmt(const uint8_t *b, uint32_t n, struct wav_info *w, struct error *err)
{
    if (n < 16)
        return error_set(err, 400, "WAV fmt chunk is %u bytes, under 16", n);
    uint16_t tag = le16(b);
    uint16_t channels = le16(b + 2);
    uint32_t rate = le32(b + 4);
    uint16_t block_align = le16(b + 12);
    uint16_t bits = le16(b + 14);
    if (tag == TAG_EXTENSIBLE) {
        if (n < 40 || le16(b + 16) < 22)
            return error_set(err, 400, "WAV fmt chunk of WAVE_FORMAT_EXTENSIBLE is too short");
        if (memcmp(b + 26, guid_tail, sizeof guid_tail) != 0)
            return error_set(err, 400,
                             "unsupported WAV encoding (an extensible subformat GUID "
                             "that is not a WAVE format tag)");
        tag = le16(b + 24);
    }
    if (tag == TAG_PCM && (bits == 8 || bits == 16 || bits == 24 || bits == 32))
        w->encoding = WAV_PCM;
    else if (tag == TAG_FLOAT && (bits == 32 || bits == 64))
        w->encoding = WAV_FLOAT;
    else
        return error_set(err, 400,
                         "unsupported WAV encoding (format tag %u, %u bits): PCM 8/16/24/32 "
                         "and IEEE float 32/64 are",
                         tag, bits);
    if (channels < 1 || channels > WAV_MAX_CHANNELS)
        return error_set(err, 400, "WAV has %u channels: 1 to %d are supported", channels,
                         WAV_MAX_CHANNELS);
    if (rate < WAV_MIN_RATE || rate > WAV_MAX_RATE)
        return error_set(err, 400, "WAV sample rate %u Hz is outside %d..%d", rate, WAV_MIN_RATE,
                         WAV_MAX_RATE);
    if (block_align != (uint32_t)channels * bits / 8)
        return error_set(err, 400, "WAV block align %u does not match %u channels of %u bits",
                         block_align, channels, bits);
    w->channels = channels;
    w->bits = bits;
    w->sample_rate = rate;
    return 0;
}

int wav_parse(const uint8_t *p, size_t len, double max_seconds, struct wav_info *out,
              struct error *err)
{
    if (len < 12 || memcmp(p, "RIFF", 4) != 0 || memcmp(p + 8, "WAVE", 4) != 0)
        return error_set(err, 400, "not a WAV file (no RIFF/WAVE header)");
    struct wav_info w = {0};
    int have_fmt = 0;
    size_t off = 12;
    for (;;) {
        if (len - off < 8)
            return error_set(err, 400,
                             have_fmt ? "WAV has no data chunk (truncated?)"
                                      : "WAV has no fmt chunk (truncated?)");
        const uint8_t *h = p + off;
        uint32_t size = le32(h + 4);
        off += 8;
        if (memcmp(h, "data", 4) == 0) {
            if (!have_fmt)
                return error_set(err, 400, "WAV data chunk comes before the fmt chunk");
            uint32_t frame_bytes = (uint32_t)w.channels * w.bits / 8;
            if (size == WAV_SIZE_UNKNOWN) /* the whole frames present */
                size = (uint32_t)((len - off < UINT32_MAX - 1 ? len - off : UINT32_MAX - 1) /
                                  frame_bytes * frame_bytes);
            w.frames = size / frame_bytes;
            double seconds = (double)w.frames / w.sample_rate;
            if (seconds > max_seconds)
                return error_set(err, 413, "WAV of %.1f seconds is over the limit of %g", seconds,
                                 max_seconds);
            if (size > len - off)
                return error_set(err, 400,
                                 "WAV data chunk is truncated (%u bytes declared, %zu "
                                 "present)",
                                 size, len - off);
            if (size % frame_bytes)
                return error_set(err, 400, "WAV data chunk of %u bytes is not whole frames of %u",
                                 size, frame_bytes);
            w.data = p + off;
            *out = w;
            return 0;
        }
        if (size > len - off)
            return error_set(err, 400, "WAV chunk '%.4s' is truncated", (const char *)h);
        if (memcmp(h, "fmt ", 4) == 0) {
            if (have_fmt)
                return error_set(err, 400, "WAV has two fmt chunks");
            if (parse_fmt(p + off, size, &w, err))
                return ST_ERROR;
            have_fmt = 1;
        }
        off += size;
        if (size & 1u && off < len)
            off++;
    }
}

static float sample(const struct wav_info *w, const uint8_t *s)
{
    if (w->encoding == WAV_FLOAT) {
        if (w->bits == 32) {
            float f;
            uint32_t u = le32(s);
            memcpy(&f, &u, sizeof f);
            return f;
        }
        uint64_t u = (uint64_t)le32(s) | (uint64_t)le32(s + 4) << 32;
        double d;
        memcpy(&d, &u, sizeof d);
        return (float)d;
    }
    switch (w->bits) {
    case 8:
        return (float)((int)s[0] - 128) / 128.0f;
    case 16:
        return (float)(int16_t)le16(s) / 32768.0f;
    case 24: {
        int32_t v = (int32_t)((uint32_t)s[0] << 8 | (uint32_t)s[1] << 16 | (uint32_t)s[2] << 24);
        return (float)(v >> 8) / 8388608.0f;
    }
    default:
        return (float)((double)(int32_t)le32(s) / 2147483648.0);
    }
}

int wav_decode_mono(const struct wav_info *w, uint64_t n, float *out, struct error *err)
{
    size_t bytes = w->bits / 8;
    const uint8_t *s = w->data;
    for (uint64_t i = 0; i < n; i++) {
        float sum = 0.0f;
        for (uint16_t c = 0; c < w->channels; c++, s += bytes)
            sum += sample(w, s);
        if (!isfinite(sum))
            return error_set(err, 400, "WAV sample %llu is not a finite number",
                             (unsigned long long)i);
        out[i] = sum / (float)w->channels;
    }
    return 0;
}
