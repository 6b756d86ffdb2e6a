/*
 * Fuzz target for the image modality's JPEG path (preprocess/image.c,
 * image_decode.c): every input is one raw image element, run through a
 * fixed configuration (rgb, EXIF orientation on, draft decoding, bilinear
 * resize to 16x16, FP32 CHW, at most 2^20 pixels). The properties checked
 * are fuzz_image.h's (a [3,16,16] tensor in 0..255, or 400/413).
 */
#include "fuzz_image.h"

static const char config[] = "{\"formats\": [\"jpeg\"], \"max_pixels\": 1048576, \"draft\": true,"
                             " \"resize\": {\"width\": 16, \"height\": 16}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_image_run("fuzz_image_jpeg", config, sizeof config - 1, data, size);
}
