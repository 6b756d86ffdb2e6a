/* fp16: IEEE 754 binary16 <-> binary32 conversions (round to nearest even). */
#ifndef INFERD_CORE_FP16_H
#define INFERD_CORE_FP16_H

#include <stdint.h>

uint16_t fp16_from_float(float f);
float fp16_to_float(uint16_t h);

#endif
