/*
 * image_decode: JPEG (libjpeg-turbo) and PNG (libpng) files in memory to
 * 8-bit pixels, for the image modality (image.c).
 *
 * What comes out (struct image_pixels, image_ops.h): interleaved 8-bit
 * samples, 1 channel for grayscale
 * sources (gray JPEG, gray PNG with or without alpha) and 3 (R, G, B) for
 * everything else; rows of w * channels bytes, no padding. As Pillow
 * reads them: a PNG's alpha (or tRNS) is dropped, 16-bit samples keep
 * their high byte, palette entries and 1/2/4-bit grays are expanded.
 * CMYK JPEGs are refused.
 *
 * Limits. The pixel count w * h from the header is checked against
 * opts->max_pixels BEFORE any pixel memory is allocated or any data
 * decoded (413). libjpeg and libpng never print: their errors become the
 * message (400), their warnings are ignored. A JPEG whose data ends early
 * is an error (libjpeg would pad it with gray), as is one with more than
 * IMAGE_MAX_SCANS progressive scans (a CPU bomb). Errors are handled with
 * setjmp/longjmp inside this file; everything allocated is released on
 * every path.
 *
 * Draft (JPEG only): with opts->draft_w/draft_h set, libjpeg's DCT scaling
 * decodes at 1/s (s in 8, 4, 2, 1: the largest with s <= min(W / draft_w,
 * H / draft_h), integer divisions, as Pillow's Image.draft("RGB", size)),
 * giving ceil(W / s) x ceil(H / s). The draft size is in the stored
 * (unrotated) orientation; draft_for() computes it from the caller's
 * oriented target.
 *
 * EXIF orientation (JPEG only): with opts->exif, the APP1 "Exif" segment's
 * IFD0 tag 0x0112 (values 1..8) is read with a bounded TIFF reader and the
 * pixels are transposed as Pillow's ImageOps.exif_transpose does; any
 * malformed EXIF is ignored (orientation 1).
 *
 * Thread: any; no shared state. Memory through base/mem.h.
 */
#ifndef INFERD_PREPROCESS_IMAGE_DECODE_H
#define INFERD_PREPROCESS_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "preprocess/image_ops.h"

#define IMAGE_MAX_SCANS 500 /* progressive JPEG scans */

enum image_format {
    IMAGE_NONE = 0,
    IMAGE_JPEG = 1,
    IMAGE_PNG = 2,
};

/* A decode's options: the caller's limit and wishes. */
struct image_decode_opts {
    unsigned formats;    /* accepted formats: IMAGE_JPEG | IMAGE_PNG */
    uint64_t max_pixels; /* w * h from the header above it: 413 */
    int exif;            /* nonzero: apply a JPEG's EXIF orientation */
    /* Draft target (JPEG): either 0 (no draft), or the size the caller
     * will resize to, in the oriented image. With shorter_side set instead
     * (and draft_w = draft_h = 0), the target is derived from the image's
     * own size (see image_resize_target in image_ops.h). */
    uint32_t draft_w, draft_h, draft_shorter;
};

/* The format the first bytes announce (IMAGE_NONE when neither). */
enum image_format image_sniff(const uint8_t *data, size_t len);

/* Decodes data[0..len) into *out (oriented, as described above). 0, or
 * -1 with err: 400 (not an accepted format, corrupt or truncated data),
 * 413 (over max_pixels), 500 (out of memory); *out is then empty. */
int image_decode(const uint8_t *data, size_t len, const struct image_decode_opts *opts,
                 struct image_pixels *out, struct error *err);

/* The EXIF orientation (1..8) of a TIFF block (the APP1 payload after
 * "Exif\0\0"), 1 when absent or malformed. Exposed for tests. */
int image_exif_orientation(const uint8_t *tiff, size_t len);

#endif
