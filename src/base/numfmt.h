/*
 * numfmt: fast number to text conversion for JSON output.
 *
 * numfmt_f32() and numfmt_f64() write the SHORTEST decimal that reads back
 * (strtof / strtod, round to nearest) to exactly the same bits; among the
 * shortest candidates, the one closest to the value (ties: even last digit).
 * The algorithm is Schubfach (R. Giulietti, "The Schubfach way to render
 * doubles", 2020): a few 64x128-bit multiplications by a precomputed power of
 * ten, no loops over digits and no big integers.
 *
 * Layout (ECMAScript Number.prototype.toString), with n the position of the
 * decimal point relative to the first significant digit (value = 0.D * 10^n):
 *   integers below 1e21 in plain digits:   "0", "-0", "100", "123456789"
 *   plain decimals when -6 < n <= 21:      "0.1", "1.5", "0.000001"
 *   exponent form otherwise:               "1e+21", "1e-7", "3.4028235e+38",
 *                                          "1e-45", "4.9406564584124654e-324"
 * Every finite output is a valid JSON number. Non-finite values are written
 * as NaN, Infinity and -Infinity (the Python json extension; JSON has no
 * spelling for them).
 *
 * All functions write at most NUMFMT_MAX bytes to `out` including a
 * terminating NUL, and return the length without the NUL. They are pure:
 * no allocation, no locale, thread-safe.
 */
#ifndef INFERD_BASE_NUMFMT_H
#define INFERD_BASE_NUMFMT_H

#include <stddef.h>
#include <stdint.h>

/* Longest outputs: "-0.0000012345678901234567" (25 bytes) for doubles,
 * "-18446744073709551615" is 21 for the integer forms. */
#define NUMFMT_MAX 32

size_t numfmt_f32(char *out, float v);
size_t numfmt_f64(char *out, double v);
size_t numfmt_i64(char *out, int64_t v);
size_t numfmt_u64(char *out, uint64_t v);

#endif
