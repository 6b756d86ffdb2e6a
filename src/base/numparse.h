/*
 * numparse: exact conversion of one JSON number token to int64, uint64,
 * double or float, without NUL termination, allocation or locale.
 *
 * Each function reads the token starting at p (p < end; nothing at or past
 * `end` is read) and sets *next to the first byte after it. The grammar is
 * strict RFC 8259:  -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
 * (no leading zeros, no '+', no ".5", no "1."); with NUMPARSE_NONFINITE the
 * tokens NaN, Infinity and -Infinity are numbers too (the Python json
 * extension). What follows the token is the caller's business.
 *
 * Results:
 *   0        *out holds the value.
 *   -EILSEQ  p does not start a valid token; *next points at the byte where
 *            the grammar failed (for an error offset). *out is unchanged.
 *   -EINVAL  (integer forms only) a valid token that is not an integer
 *            literal: it has a fraction or an exponent ("1.0", "1e2" are
 *            not integers), or is NaN/Infinity. *next is after the token.
 *   -ERANGE  a valid token whose value does not fit: outside the integer
 *            type, or a finite literal that overflows to infinity. Tiny
 *            values underflow to (signed) zero or subnormals without error,
 *            as with strtod. *next is after the token.
 *
 * The floating forms are correctly rounded (to nearest, ties to even),
 * bit-identical to glibc's strtod/strtof on the same text, -0 included:
 * common tokens (at most 19 significant digits, small exponents) take an
 * exact fast path; the rest are handed to strtod/strtof on a bounded stack
 * copy (see numparse.c for why the copy may drop digits after the 800th).
 */
#ifndef INFERD_BASE_NUMPARSE_H
#define INFERD_BASE_NUMPARSE_H

#include <stdbool.h>
#include <stdint.h>

/* Flag: accept NaN, Infinity, -Infinity. */
#define NUMPARSE_NONFINITE 1u

int numparse_i64(const char *p, const char *end, unsigned flags, int64_t *out,
                 const char **next);
int numparse_u64(const char *p, const char *end, unsigned flags, uint64_t *out,
                 const char **next);
int numparse_f64(const char *p, const char *end, unsigned flags, double *out,
                 const char **next);
int numparse_f32(const char *p, const char *end, unsigned flags, float *out,
                 const char **next);
/* Only checks the grammar: 0 or -EILSEQ, *next as above. */
int numparse_skip(const char *p, const char *end, unsigned flags, const char **next);

/* The common case of an integer, "-?[1-9][0-9]{0,17}" or "-?0", not
 * followed by a digit, fraction or exponent: its sign and magnitude (below
 * 10^18: it fits any int64), without the general scanner. Inline so that a
 * tensor decoder's loop over small integers stays in registers. Returns
 * false for anything else; numparse_i64/_u64 then read it, with their exact
 * errors. */
static inline bool numparse_small_integer(const char *p, const char *end, bool *neg,
                                          uint64_t *mag, const char **next)
{
    const char *q = p;
    *neg = false;
    if (q < end && *q == '-') { /* a branch: the sign is rare */
        *neg = true;
        q++;
    }
    unsigned d;
    if (q == end || (d = (unsigned char)(*q - '0')) > 9)
        return false;
    q++;
    uint64_t m = d;
    if (m != 0) /* at most 18 digits: m stays below 10^18 */
        while (q < end && (d = (unsigned char)(*q - '0')) <= 9 &&
               m < UINT64_C(100000000000000000)) {
            m = m * 10 + d;
            q++;
        }
    if (q < end && ((unsigned char)(*q - '0') <= 9 || *q == '.' || *q == 'e' || *q == 'E'))
        return false;
    *mag = m;
    *next = q;
    return true;
}

#endif
