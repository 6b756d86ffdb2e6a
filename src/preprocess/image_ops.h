/*
 * image_ops: the pixel arithmetic of the image modality (image.c), made to
 * give what Pillow gives.
 *
 *   image_fit_shorter  the size that gives the shorter side s, the longer
 *                      one rounded to nearest (halves up)
 *   image_to_gray      RGB to luma as Pillow's convert("L"): ITU-R 601-2,
 *                      L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16
 *   image_resample     Pillow's separable resampling (Resample.c) in float:
 *                      Pillow's weights (normalised to sum 1 in double),
 *                      applied in float, vertical pass then horizontal
 *                      (both linear: the order changes only rounding,
 *                      ~1e-4 on the 0..255 scale), four lanes at a time;
 *                      only the pixels of a window (the crop) are computed.
 *                      BILINEAR is the triangle filter of support 1, BOX
 *                      the box of support 1/2, both scaled by the
 *                      downscale factor (antialiased), as Image.BILINEAR
 *                      and Image.BOX resizing a mode "F" image.
 *   image_emit         invert, scale/offset per channel, channel
 *                      order, layout and element type in one pass.
 *
 * Thread: any. image_resample allocates its scratch (mem_alloc) and
 * frees it before returning.
 */
#ifndef INFERD_PREPROCESS_IMAGE_OPS_H
#define INFERD_PREPROCESS_IMAGE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"

/* Decoded pixels (image_decode.h): rows of w * channels bytes. */
struct image_pixels {
    uint8_t *px; /* w * h * channels bytes, mem_alloc'd; image_pixels_free() */
    uint32_t w, h;
    uint32_t channels; /* 1 or 3 */
};

/* Frees px and empties img. */
void image_pixels_free(struct image_pixels *img);

enum image_filter {
    IMAGE_BILINEAR,
    IMAGE_BOX,
};

/* (w, h) scaled so that min(ow, oh) == s; the other side is
 * round(side * s / shorter), at least 1. */
void image_fit_shorter(uint32_t w, uint32_t h, uint32_t s, uint32_t *ow, uint32_t *oh);

/* 3 channels to 1 in place (no-op for 1 channel). */
void image_to_gray(struct image_pixels *img);

/* A window of the resized image: its left, top, width and height. */
struct image_window {
    uint32_t x0, y0, w, h;
};

/* Resamples img (w x h, interleaved channels) to ow x oh and keeps the
 * window win (inside ow x oh; only its pixels are computed, each as in the
 * whole resized image), writing img->channels planes of win->w * win->h
 * floats (plane c at dst + c * win->w * win->h), values in the 0..255
 * scale unrounded. 0, or -ENOMEM. */
int image_resample(const struct image_pixels *img, enum image_filter filter, uint32_t ow,
                   uint32_t oh, const struct image_window *win, float *dst);

/* How image_emit turns planes into the output row. */
struct image_emit {
    uint32_t src_channels;     /* the planes (1 or 3 channels) */
    uint32_t w, h;             /* the planes' size, and the output's */
    uint32_t channels;         /* output channels: 1 or 3 */
    bool bgr;                  /* output channel c = plane 2 - c */
    bool replicate;            /* 1 plane to 3 channels */
    bool invert;               /* x -> 255 - x first */
    float scale[3], offset[3]; /* y = x * scale[c] + offset[c] (FP32) */
    bool hwc;                  /* [H,W,C], else [C,H,W] */
    enum dtype dtype;          /* DT_FP32, or DT_UINT8: round, clamp 0..255 */
};

/* Writes w * h * channels elements of e->dtype to out. */
void image_emit(const struct image_emit *e, const float *planes, void *out);

#endif
