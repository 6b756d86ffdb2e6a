#include "base/numparse.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/*
 * One pass over the token collects the first 19 significant digits in a
 * uint64 (mant) and the power of ten that scales them (exp10), so that the
 * token's value is mant * 10^exp10 exactly unless `inexact` (a nonzero digit
 * after the 19th was dropped). Dropped zeros keep the value exact.
 */
struct token {
    const char *digits;   /* first digit, after the '-' */
    const char *mant_end; /* end of the integer and fraction digits */
    uint64_t mant;
    int64_t exp10;
    int64_t exp_value; /* the explicit exponent, saturated at +-EXP_SATURATE */
    bool neg;
    bool is_int;  /* no fraction, no exponent */
    bool inexact;
    char special; /* 0, 'N' (NaN) or 'I' (infinity) */
};

#define MAX_FAST_DIGITS 19
/* Exponents beyond this are far outside every range; saturating keeps the
 * arithmetic on exp10 from overflowing for any token length that fits in
 * memory. */
#define EXP_SATURATE INT64_C(100000000000000000)

static inline bool is_digit(char c)
{
    return (unsigned char)(c - '0') < 10;
}

/* The 8 bytes at p as a little-endian integer (first byte lowest). */
static inline uint64_t load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Whether all 8 bytes of v are ASCII digits: each byte's high nibble is 3,
 * and adding 6 does not carry out of the low nibble (digit <= 9). */
static inline bool eight_digits(uint64_t v)
{
    return ((v & UINT64_C(0xF0F0F0F0F0F0F0F0)) |
            (((v + UINT64_C(0x0606060606060606)) & UINT64_C(0xF0F0F0F0F0F0F0F0)) >> 4)) ==
           UINT64_C(0x3333333333333333);
}

/* The value of 8 ASCII digits (first byte most significant), combining
 * neighbours pairwise in three multiplications instead of eight. */
static inline uint64_t parse8(uint64_t v)
{
    v -= UINT64_C(0x3030303030303030);
    v = v * 10 + (v >> 8); /* bytes 0,2,4,6: two-digit values */
    v = (((v & UINT64_C(0x000000FF000000FF)) * UINT64_C(0x000F424000000064)) +
         (((v >> 16) & UINT64_C(0x000000FF000000FF)) * UINT64_C(0x0000271000000001))) >>
        32;
    return v & 0xFFFFFFFF;
}

/* Inlined into each conversion: the token then lives in registers. */
static inline __attribute__((always_inline)) int scan(const char *p, const char *end,
                                                      unsigned flags, struct token *t,
                                                      const char **next)
{
    const char *q = p;
    uint64_t m = 0;
    int64_t exp10 = 0;
    int nd = 0; /* significant digits in m */
    bool inexact = false;

    t->neg = q < end && *q == '-';
    q += t->neg;
    t->special = 0;
    t->is_int = true;
    if (q == end || !is_digit(*q)) {
        if (q < end && (flags & NUMPARSE_NONFINITE)) {
            if (*q == 'I' && end - q >= 8 && memcmp(q, "Infinity", 8) == 0) {
                t->special = 'I';
                *next = q + 8;
                return 0;
            }
            if (*q == 'N' && !t->neg && end - q >= 3 && memcmp(q, "NaN", 3) == 0) {
                t->special = 'N';
                *next = q + 3;
                return 0;
            }
        }
        *next = q;
        return -EILSEQ;
    }
    t->digits = q;
    if (*q == '0') {
        q++;
        if (q < end && is_digit(*q)) { /* leading zero */
            *next = q;
            return -EILSEQ;
        }
    } else {
        const char *stop = end - q > MAX_FAST_DIGITS ? q + MAX_FAST_DIGITS : end;
        while (stop - q >= 8 && eight_digits(load8(q))) {
            m = m * 100000000 + parse8(load8(q));
            q += 8;
        }
        while (q < stop && is_digit(*q))
            m = m * 10 + (uint64_t)(*q++ - '0');
        nd = (int)(q - t->digits);
        for (; q < end && is_digit(*q); q++) {
            inexact |= *q != '0';
            exp10++;
        }
    }
    if (q < end && *q == '.') {
        t->is_int = false;
        q++;
        if (q == end || !is_digit(*q)) {
            *next = q;
            return -EILSEQ;
        }
        if (nd == 0) /* "0.000ddd": zeros before the first significant digit */
            for (; q < end && *q == '0'; q++)
                exp10--;
        while (end - q >= 8 && nd <= MAX_FAST_DIGITS - 8 && eight_digits(load8(q))) {
            m = m * 100000000 + parse8(load8(q));
            q += 8;
            nd += 8;
            exp10 -= 8;
        }
        for (; q < end && is_digit(*q) && nd < MAX_FAST_DIGITS; q++, nd++) {
            m = m * 10 + (uint64_t)(*q - '0');
            exp10--;
        }
        for (; q < end && is_digit(*q); q++)
            inexact |= *q != '0';
    }
    t->mant_end = q;
    t->exp_value = 0;
    if (q < end && (*q == 'e' || *q == 'E')) {
        t->is_int = false;
        q++;
        bool eneg = false;
        if (q < end && (*q == '+' || *q == '-')) {
            eneg = *q == '-';
            q++;
        }
        if (q == end || !is_digit(*q)) {
            *next = q;
            return -EILSEQ;
        }
        int64_t ev = 0;
        for (; q < end && is_digit(*q); q++)
            if (ev < EXP_SATURATE)
                ev = ev * 10 + (*q - '0');
        t->exp_value = eneg ? -ev : ev;
        exp10 += t->exp_value;
    }
    t->mant = m;
    t->exp10 = exp10;
    t->inexact = inexact;
    *next = q;
    return 0;
}

int numparse_skip(const char *p, const char *end, unsigned flags, const char **next)
{
    struct token t;
    return scan(p, end, flags, &t, next);
}

/* ---- integers --------------------------------------------------------- */

/* The magnitude of an integer token, exactly. */
static int integer_magnitude(const struct token *t, uint64_t *mag)
{
    if (t->special || !t->is_int)
        return -EINVAL;
    if (!t->inexact && t->exp10 == 0) { /* at most 19 digits */
        *mag = t->mant;
        return 0;
    }
    uint64_t m = 0; /* 20 digits or more: may still fit in a uint64 */
    for (const char *s = t->digits; s < t->mant_end; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (m > (UINT64_MAX - d) / 10)
            return -ERANGE;
        m = m * 10 + d;
    }
    *mag = m;
    return 0;
}

int numparse_i64(const char *p, const char *end, unsigned flags, int64_t *out, const char **next)
{
    bool neg;
    uint64_t m;
    if (numparse_small_integer(p, end, &neg, &m, next)) { /* 18 digits: never out of range */
        *out = neg ? -(int64_t)m : (int64_t)m;
        return 0;
    }
    struct token t;
    uint64_t mag;
    int rc = scan(p, end, flags, &t, next);
    if (rc == 0)
        rc = integer_magnitude(&t, &mag);
    if (rc)
        return rc;
    if (t.neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return -ERANGE;
        /* In unsigned arithmetic: -(INT64_MIN) does not fit in int64_t. */
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > INT64_MAX)
            return -ERANGE;
        *out = (int64_t)mag;
    }
    return 0;
}

int numparse_u64(const char *p, const char *end, unsigned flags, uint64_t *out, const char **next)
{
    bool neg;
    uint64_t m;
    if (numparse_small_integer(p, end, &neg, &m, next)) {
        if (neg && m != 0) /* "-0" is zero */
            return -ERANGE;
        *out = m;
        return 0;
    }
    struct token t;
    uint64_t mag;
    int rc = scan(p, end, flags, &t, next);
    if (rc == 0)
        rc = integer_magnitude(&t, &mag);
    if (rc)
        return rc;
    if (t.neg && mag != 0) /* "-0" is zero */
        return -ERANGE;
    *out = mag;
    return 0;
}

/* ---- floating point --------------------------------------------------- */

/* 10^0 .. 10^22 are exact doubles (5^22 < 2^53). */
static const double exact_pow10[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

#define MAX_EXACT_MANT (UINT64_C(1) << 53)

/*
 * Clinger's fast path: when mant <= 2^53 and |exp10| <= 22, mant and
 * 10^|exp10| are exact doubles, so ONE IEEE multiplication or division
 * (correctly rounded by definition) gives the correctly rounded double of
 * the exact decimal value. Also when exp10 > 22 but mant * 10^(exp10-22)
 * is still an exact integer below 2^53 ("1234e25"). Returns false when
 * the token is not eligible.
 */
static inline bool fast_double(const struct token *t, double *out)
{
    if (t->inexact || t->mant > MAX_EXACT_MANT)
        return false;
    double m = (double)t->mant;
    int64_t e = t->exp10;
    if (e < -22 || e > 22 + 15)
        return false;
    if (e < 0) {
        m /= exact_pow10[-e];
    } else if (e <= 22) {
        m *= exact_pow10[e];
    } else {
        m *= exact_pow10[e - 22];
        if (m > (double)MAX_EXACT_MANT) /* still exact: both factors are integers < 2^53 */
            return false;
        m *= 1e22;
    }
    *out = t->neg ? -m : m;
    return true;
}

/*
 * Digits kept for the library fallback. A double rounding boundary (a
 * double, or the midpoint between two adjacent doubles) has at most 767
 * significant decimal digits, a float one 112. Keeping the first 800
 * significant digits D and, if any dropped digit is nonzero, appending one
 * '1' gives a number x' that lies strictly between D*10^j and (D+1)*10^j
 * exactly when the true x does; no boundary lies strictly inside that gap
 * (it would need more than 800 digits), so x and x' are on the same side
 * of every boundary and round to the same value. This bounds the copy on
 * the stack however long the token is.
 */
#define FALLBACK_DIGITS 800
#define FALLBACK_EXP_LIMIT 999999 /* beyond: 0 or infinity whatever the digits */
#define FALLBACK_BUF (1 + FALLBACK_DIGITS + 1 + 2 + 7 + 1)

/* Writes a strtod-ready copy of a finite nonzero token into buf. */
static void fallback_text(const struct token *t, char *buf)
{
    char *o = buf;
    int64_t frac = 0, sig = 0, kept = 0;
    bool in_frac = false, sticky = false;

    if (t->neg)
        *o++ = '-';
    for (const char *s = t->digits; s < t->mant_end; s++) {
        if (*s == '.') {
            in_frac = true;
            continue;
        }
        frac += in_frac;
        if (sig == 0 && *s == '0')
            continue; /* leading zeros */
        sig++;
        if (kept < FALLBACK_DIGITS)
            o[kept++] = *s;
        else
            sticky |= *s != '0';
    }
    o += kept;
    /* value = digits * 10^(exp_value - frac) with all `sig` digits */
    int64_t e = t->exp_value - frac + (sig - kept);
    if (sticky) {
        *o++ = '1';
        e--;
    }
    if (e > FALLBACK_EXP_LIMIT)
        e = FALLBACK_EXP_LIMIT;
    if (e < -FALLBACK_EXP_LIMIT)
        e = -FALLBACK_EXP_LIMIT;
    *o++ = 'e';
    if (e < 0) {
        *o++ = '-';
        e = -e;
    }
    char tmp[8];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + e % 10);
        e /= 10;
    } while (e);
    while (n)
        *o++ = tmp[--n];
    *o = '\0';
}

/* Out of line, so the fast path's frame does not carry the buffer. */
static __attribute__((noinline)) int slow_f64(const struct token *t, double *out)
{
    char buf[FALLBACK_BUF];
    fallback_text(t, buf);
    double d = strtod(buf, NULL);
    if (isinf(d))
        return -ERANGE;
    *out = d;
    return 0;
}

static __attribute__((noinline)) int slow_f32(const struct token *t, float *out)
{
    char buf[FALLBACK_BUF];
    fallback_text(t, buf);
    float f = strtof(buf, NULL);
    if (isinf(f))
        return -ERANGE;
    *out = f;
    return 0;
}

int numparse_f64(const char *p, const char *end, unsigned flags, double *out, const char **next)
{
    struct token t;
    int rc = scan(p, end, flags, &t, next);
    if (rc)
        return rc;
    if (t.special) {
        *out = t.special == 'N' ? NAN : t.neg ? -INFINITY : INFINITY;
        return 0;
    }
    if (t.mant == 0) { /* every digit was zero (nonzero ones set mant first) */
        *out = t.neg ? -0.0 : 0.0;
        return 0;
    }
    if (fast_double(&t, out))
        return 0;
    return slow_f64(&t, out);
}

/*
 * Whether the double r > 0 lies exactly halfway between two adjacent floats
 * (counting 2^128, where rounding overflows, as the float after FLT_MAX).
 * r = M * 2^e with a 53-bit M; the float spacing at r is 2^u with
 * u = floor(log2 r) - 23, or 2^-149 below FLT_MIN. r is a midpoint iff the
 * s = u - e low bits of M are exactly 100..0.
 */
static bool is_float_midpoint(double r)
{
    uint64_t bits;
    memcpy(&bits, &r, sizeof bits);
    int be = (int)(bits >> 52); /* r > 0: no sign bit */
    if (be == 0)
        return false; /* below 2^-1022: far below 2^-150, the lowest midpoint */
    uint64_t m = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    int e = be - 1075;
    int u = be - 1023 - 23;
    if (u < -149)
        u = -149;
    int s = u - e; /* >= 29 */
    if (s > 53)
        return false; /* r < 2^-150 */
    uint64_t half = UINT64_C(1) << (s - 1);
    return (m & (2 * half - 1)) == half;
}

int numparse_f32(const char *p, const char *end, unsigned flags, float *out, const char **next)
{
    struct token t;
    double r;
    int rc = scan(p, end, flags, &t, next);
    if (rc)
        return rc;
    if (t.special) {
        *out = t.special == 'N' ? NAN : t.neg ? -INFINITY : INFINITY;
        return 0;
    }
    if (t.mant == 0) {
        *out = t.neg ? -0.0f : 0.0f;
        return 0;
    }
    /*
     * Why (float)r is the correctly rounded float of the exact value x when
     * r = RN_double(x) is not a float midpoint:
     * Every float and every midpoint between adjacent floats (including the
     * overflow threshold FLT_MAX + ulp/2) has at most 25 significant bits
     * and an exponent inside the double range, so it is a double. Rounding
     * to double is monotonic and leaves doubles fixed, so for any such
     * midpoint mu: x < mu implies r <= mu, x > mu implies r >= mu, and
     * x = mu implies r = mu. Hence if r != mu, then r < mu implies x < mu
     * and r > mu implies x > mu: x and r lie strictly on the same side of
     * every float midpoint, i.e. in the same float rounding interval, and
     * RN_float(x) = RN_float(r) = (float)r. Only when r IS a midpoint can
     * x lie on either side (or on it), and the library decides.
     * (That case is the double-rounding trap: for "1.000000059604644775390625001",
     * just above the midpoint 1 + 2^-24, r is the midpoint and (float)r
     * would give 1 instead of 1 + 2^-23.)
     */
    if (fast_double(&t, &r) && !is_float_midpoint(fabs(r))) {
        *out = (float)r; /* the fast path never reaches the float overflow range */
        return 0;
    }
    return slow_f32(&t, out);
}
