/*
 * Unit tests for base/numparse and base/numfmt.
 *
 * numparse is checked differentially against glibc's strtod/strtof (which
 * are correctly rounded) on millions of generated tokens; numfmt by reading
 * every output back and proving that no shorter decimal reads back too.
 * The random streams are deterministic (fixed seeds) so a failure repeats.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/mem.h"
#include "base/numfmt.h"
#include "base/numparse.h"

/* ---- helpers ---------------------------------------------------------- */

/* The sanitizer build looks for memory errors, which the first rounds
 * already exercise; it runs 8x fewer random rounds so that it stays fast.
 * The normal build runs the full counts. */
#if defined(__SANITIZE_ADDRESS__)
#define ROUNDS_DIVISOR 8
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROUNDS_DIVISOR 8
#endif
#endif
#ifndef ROUNDS_DIVISOR
#define ROUNDS_DIVISOR 1
#endif

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static unsigned rnd_below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

static bool same_f64(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static bool same_f32(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/*
 * Parses text (NUL-terminated, but numparse is given only its length, and
 * the copy it reads from is followed by a ',' to catch reads past the end
 * of the token) and checks the result against strtod and strtof.
 */
static char probe[4096];

static int check_floats(const char *text, size_t len)
{
    const char *next;
    double d = 0, want_d;
    float f = 0, want_f;

    assert_true(len + 1 < sizeof probe);
    memcpy(probe, text, len);
    probe[len] = ',';
    probe[len + 1] = '\0';
    want_d = strtod(text, NULL);
    want_f = strtof(text, NULL);

    int rc = numparse_f64(probe, probe + len, 0, &d, &next);
    if (isinf(want_d) ? rc != -ERANGE : (rc != 0 || !same_f64(d, want_d)) || next != probe + len) {
        print_error("f64 \"%s\": rc=%d %a, strtod %a\n", text, rc, d, want_d);
        return -1;
    }
    rc = numparse_f32(probe, probe + len, 0, &f, &next);
    if (isinf(want_f) ? rc != -ERANGE
                      : (rc != 0 || !same_f32(f, want_f)) || next != probe + len) {
        print_error("f32 \"%s\": rc=%d %a, strtof %a\n", text, rc, (double)f, (double)want_f);
        return -1;
    }
    return 0;
}

static void expect_floats(const char *text)
{
    assert_int_equal(check_floats(text, strlen(text)), 0);
}

/* ---- grammar ---------------------------------------------------------- */

static void test_grammar(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        unsigned flags;
        int rc;        /* of numparse_skip */
        size_t next;   /* offset of *next */
    } cases[] = {
        {"0", 0, 0, 1},         {"-0", 0, 0, 2},         {"123", 0, 0, 3},
        {"1.5", 0, 0, 3},       {"1e5", 0, 0, 3},        {"1E+5", 0, 0, 4},
        {"1e-5", 0, 0, 4},      {"-0.0e0", 0, 0, 6},     {"12,3", 0, 0, 2},
        {"1]", 0, 0, 1},        {"1 ", 0, 0, 1},         {"0x10", 0, 0, 1},
        {"1.5.3", 0, 0, 3},     {"1e5e5", 0, 0, 3},      {"01", 0, -EILSEQ, 1},
        {"-01", 0, -EILSEQ, 2}, {"+1", 0, -EILSEQ, 0},   {".5", 0, -EILSEQ, 0},
        {"1.", 0, -EILSEQ, 2},  {"1.e5", 0, -EILSEQ, 2}, {"1e", 0, -EILSEQ, 2},
        {"1e+", 0, -EILSEQ, 3}, {"-", 0, -EILSEQ, 1},    {"-a", 0, -EILSEQ, 1},
        {"a", 0, -EILSEQ, 0},   {"- 1", 0, -EILSEQ, 1},  {"NaN", 0, -EILSEQ, 0},
        {"Infinity", 0, -EILSEQ, 0},
        {"NaN", NUMPARSE_NONFINITE, 0, 3},
        {"Infinity", NUMPARSE_NONFINITE, 0, 8},
        {"-Infinity", NUMPARSE_NONFINITE, 0, 9},
        {"-NaN", NUMPARSE_NONFINITE, -EILSEQ, 1},
        {"Inf", NUMPARSE_NONFINITE, -EILSEQ, 0},
        {"Infinit", NUMPARSE_NONFINITE, -EILSEQ, 0},
        {"nan", NUMPARSE_NONFINITE, -EILSEQ, 0},
        {"NaNx", NUMPARSE_NONFINITE, 0, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *t = cases[i].text, *next = NULL;
        /* An exact-size heap copy, so ASan catches a read past the end. */
        size_t n = strlen(t);
        char *copy = malloc(n);
        assert_non_null(copy);
        memcpy(copy, t, n);
        int rc = numparse_skip(copy, copy + n, cases[i].flags, &next);
        if (rc != cases[i].rc || (size_t)(next - copy) != cases[i].next)
            print_error("\"%s\": rc %d next %td, want %d %zu\n", t, rc, next - copy,
                        cases[i].rc, cases[i].next);
        assert_int_equal(rc, cases[i].rc);
        assert_int_equal(next - copy, cases[i].next);
        /* The conversions agree on the grammar. */
        double d;
        float f;
        rc = numparse_f64(copy, copy + n, cases[i].flags, &d, &next);
        assert_true(cases[i].rc ? rc == cases[i].rc : rc == 0);
        rc = numparse_f32(copy, copy + n, cases[i].flags, &f, &next);
        assert_true(cases[i].rc ? rc == cases[i].rc : rc == 0);
        free(copy);
    }
}

/* ---- integers --------------------------------------------------------- */

static void test_integers(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int rc_i;
        int64_t i;
        int rc_u;
        uint64_t u;
    } cases[] = {
        {"0", 0, 0, 0, 0},
        {"-0", 0, 0, 0, 0},
        {"7", 0, 7, 0, 7},
        {"-7", 0, -7, -ERANGE, 0},
        {"9223372036854775807", 0, INT64_MAX, 0, INT64_MAX},
        {"-9223372036854775808", 0, INT64_MIN, -ERANGE, 0},
        {"9223372036854775808", -ERANGE, 0, 0, UINT64_C(9223372036854775808)},
        {"-9223372036854775809", -ERANGE, 0, -ERANGE, 0},
        {"18446744073709551615", -ERANGE, 0, 0, UINT64_MAX},
        {"18446744073709551616", -ERANGE, 0, -ERANGE, 0},
        {"10000000000000000000", -ERANGE, 0, 0, UINT64_C(10000000000000000000)},
        {"1000000000000000000", 0, INT64_C(1000000000000000000), 0,
         UINT64_C(1000000000000000000)},
        {"100000000000000000000", -ERANGE, 0, -ERANGE, 0},
        {"99999999999999999999999999999999", -ERANGE, 0, -ERANGE, 0},
        {"1.0", -EINVAL, 0, -EINVAL, 0},
        {"1e2", -EINVAL, 0, -EINVAL, 0},
        {"-1.5", -EINVAL, 0, -EINVAL, 0},
        {"1e99999999999999999999", -EINVAL, 0, -EINVAL, 0},
        {"99999999999999999999999.5", -EINVAL, 0, -EINVAL, 0},
        {"01", -EILSEQ, 0, -EILSEQ, 0},
        {"NaN", -EINVAL, 0, -EINVAL, 0},
        {"-Infinity", -EINVAL, 0, -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *t = cases[i].text, *next;
        const char *end = t + strlen(t);
        int64_t vi = 0;
        uint64_t vu = 0;
        int rc = numparse_i64(t, end, NUMPARSE_NONFINITE, &vi, &next);
        if (rc != cases[i].rc_i || (rc == 0 && vi != cases[i].i))
            print_error("i64 \"%s\": rc %d %" PRId64 "\n", t, rc, vi);
        assert_int_equal(rc, cases[i].rc_i);
        if (rc == 0)
            assert_true(vi == cases[i].i);
        if (rc != -EILSEQ)
            assert_ptr_equal(next, end);
        rc = numparse_u64(t, end, NUMPARSE_NONFINITE, &vu, &next);
        if (rc != cases[i].rc_u || (rc == 0 && vu != cases[i].u))
            print_error("u64 \"%s\": rc %d %" PRIu64 "\n", t, rc, vu);
        assert_int_equal(rc, cases[i].rc_u);
        if (rc == 0)
            assert_true(vu == cases[i].u);
    }
    /* Every int64 printed and parsed back; uint64 likewise. */
    rng_state = 7;
    for (int i = 0; i < 200000; i++) {
        uint64_t u = rnd() >> rnd_below(64);
        int64_t s = (int64_t)u * (rnd() & 1 ? -1 : 1);
        char buf[NUMFMT_MAX];
        const char *next;
        int64_t vi;
        uint64_t vu;
        size_t n = numfmt_i64(buf, s);
        assert_int_equal(n, strlen(buf));
        char want[32];
        snprintf(want, sizeof want, "%" PRId64, s);
        assert_string_equal(buf, want);
        assert_int_equal(numparse_i64(buf, buf + n, 0, &vi, &next), 0);
        assert_true(vi == s);
        n = numfmt_u64(buf, u);
        snprintf(want, sizeof want, "%" PRIu64, u);
        assert_string_equal(buf, want);
        assert_int_equal(numparse_u64(buf, buf + n, 0, &vu, &next), 0);
        assert_true(vu == u);
    }
    char buf[NUMFMT_MAX];
    numfmt_i64(buf, INT64_MIN);
    assert_string_equal(buf, "-9223372036854775808");
    numfmt_u64(buf, UINT64_MAX);
    assert_string_equal(buf, "18446744073709551615");
    numfmt_u64(buf, 0);
    assert_string_equal(buf, "0");
    /* Each side of every power of ten, where the digit count changes. */
    uint64_t p10 = 1;
    for (int k = 0; k < 20; k++, p10 *= 10) {
        for (uint64_t v = p10 - 1; v <= p10 + 1; v++) {
            char want[32];
            snprintf(want, sizeof want, "%" PRIu64, v);
            assert_int_equal(numfmt_u64(buf, v), strlen(want));
            assert_string_equal(buf, want);
        }
    }
}

/* ---- floating point: fixed cases -------------------------------------- */

static void test_float_cases(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "0", "-0", "0.0", "-0.0e5", "0e-999999", "-0e999999999999999999999",
        "1", "-1", "0.1", "0.5", "1.5", "3.14159", "1e22", "1e23", "1e-22", "1e-23",
        "9007199254740992", "9007199254740993", "9007199254740994", "9007199254740995",
        "9007199254740991", "18014398509481985", "1e-45", "1.4e-45", "7e-46", "7.1e-46",
        "1.401298464324817e-45", "7.006492321624085e-46", "7.006492321624086e-46",
        "1.1754943508222875e-38", "1.1754942e-38", "1.17549435e-38",
        "3.4028235e38", "3.4028236e38", "3.40282346638528859811704183484516925440e+38",
        "3.40282356779733661637539395458142568447e+38",
        "3.40282356779733661637539395458142568448e+38",
        "3.40282356779733661637539395458142568449e+38", "3.5e38", "1e39",
        "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
        "2.2250738585072011e-308", "2.2250738585072012e-308", "2.2250738585072014e-308",
        "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
        "1e308", "1e309", "1e-400", "-1e-400", "1e400", "-1e400",
        "123456789012345678901234567890", "0.000000000000000000000000000001",
        "1.000000059604644775390625", "1.000000059604644775390625001",
        "1.000000059604644775390624999", "1.00000017881393432617187499",
        "1.00000017881393432617187500", "1.00000017881393432617187501",
        "9999999999999999999", "99999999999999999999", "0.9999999999999999999",
        "123456789e-30", "123456789e30", "1234e25", "9007199254740992e15",
        "9007199254740993e15", "1e37", "8388608.5", "16777217", "16777219",
        "33554434", "33554435", "33554433", "4503599627370497.5",
        "0.30000000000000004", "2.2250738585072013e-308",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_floats(cases[i]);

    const char *next;
    double d;
    float f;
    assert_int_equal(numparse_f64("-0", NULL, 0, &d, &next), -EILSEQ); /* empty span */
    assert_int_equal(numparse_f64("NaN", (const char *)"NaN" + 3, NUMPARSE_NONFINITE, &d, &next),
                     0);
    assert_true(isnan(d));
    assert_int_equal(numparse_f32("-Infinity", (const char *)"-Infinity" + 9,
                                  NUMPARSE_NONFINITE, &f, &next),
                     0);
    assert_true(isinf(f) && f < 0);
    assert_int_equal(numparse_f64("-0", (const char *)"-0" + 2, 0, &d, &next), 0);
    assert_true(d == 0 && signbit(d));
}

/* Short decimals (15..17 digits, so many take the fast path) within a few
 * double ulps of a float rounding midpoint: where converting the double
 * result to float would round the wrong way if the midpoint check failed. */
static void test_float_near_midpoints(void **state)
{
    (void)state;
    char text[64];
    rng_state = 13;
    for (int i = 0; i < 100000 / ROUNDS_DIVISOR; i++) {
        uint32_t bits = (uint32_t)rnd() & 0x7F7FFFFFu;
        float a;
        memcpy(&a, &bits, 4);
        double mid = ((double)a + (double)nextafterf(a, INFINITY)) / 2; /* exact */
        for (int prec = 14; prec <= 16; prec++) {
            int n = snprintf(text, sizeof text, "%.*e", prec, mid);
            assert_int_equal(check_floats(text, (size_t)n), 0);
            /* one unit more in the last digit (digits stay below '9' + 1 here
             * only when the last digit is not 9; skip that case) */
            char *last = strchr(text, 'e') - 1;
            if (*last != '9') {
                (*last)++;
                assert_int_equal(check_floats(text, (size_t)n), 0);
                (*last)--;
            }
            if (*last != '0') {
                (*last)--;
                assert_int_equal(check_floats(text, (size_t)n), 0);
            }
        }
    }
}

/* ---- floating point: long mantissas ----------------------------------- */

static void test_float_long(void **state)
{
    (void)state;
    static char text[4000];
    rng_state = 11;
    for (int i = 0; i < 3000; i++) {
        /* 780..1000 random digits around the decimal point. */
        size_t n = 0, digits = 780 + rnd_below(220), point = rnd_below((unsigned)digits);
        if (rnd() & 1)
            text[n++] = '-';
        text[n++] = (char)('1' + rnd_below(9));
        for (size_t k = 1; k < digits; k++) {
            if (k == point)
                text[n++] = '.';
            text[n++] = (char)('0' + rnd_below(10));
        }
        n += (size_t)snprintf(text + n, 16, "e%d", (int)rnd_below(700) - 350 - (int)point);
        assert_int_equal(check_floats(text, n), 0);
    }
    /* Exact midpoints between adjacent doubles and floats written out in
     * full (up to 767 significant digits), then nudged by one unit at the
     * 850th decimal, far past the digits numparse keeps: only a correct
     * sticky digit keeps them rounding the right way. */
    for (int i = 0; i < 3000; i++) {
        long double mid; /* exact: 54 significant bits at most */
        if (i & 1) {
            uint32_t bits = (uint32_t)rnd() & 0x7F7FFFFFu;
            float a;
            memcpy(&a, &bits, 4);
            mid = ((long double)a + (long double)nextafterf(a, INFINITY)) / 2;
        } else {
            uint64_t bits = rnd() & UINT64_C(0x7FEFFFFFFFFFFFFF);
            if (i % 3 == 0)
                bits &= UINT64_C(0x000FFFFFFFFFFFFF); /* subnormals */
            double a;
            memcpy(&a, &bits, 8);
            mid = ((long double)a + (long double)nextafter(a, INFINITY)) / 2;
        }
        for (int variant = 0; variant < 3; variant++) {
            int n = snprintf(text, sizeof text, "%.900Le", mid); /* "d.<900 decimals>e-X" */
            assert_true(n > 0 && (size_t)n < sizeof text);
            const size_t pos = 1 + 850; /* the 850th decimal, a zero */
            if (variant == 1) {
                text[pos] = '1';
            } else if (variant == 2) { /* minus one unit: borrow */
                size_t q = pos;
                while (text[q] == '0' || text[q] == '.') {
                    if (text[q] == '0')
                        text[q] = '9';
                    q--;
                }
                text[q]--;
                text[pos] = '9';
            }
            assert_int_equal(check_floats(text, (size_t)n), 0);
        }
    }
}

/* ---- floating point: differential on random tokens -------------------- */

/* A random JSON number: 1..25 significant digits split between the integer
 * part and the fraction, with or without an exponent. */
static size_t random_decimal(char *out, int min_exp, int max_exp)
{
    size_t n = 0;
    unsigned digits = 1 + rnd_below(25);
    if (rnd() & 1)
        out[n++] = '-';
    unsigned int_digits = rnd_below(digits + 1);
    if (int_digits == 0) {
        out[n++] = '0';
    } else {
        out[n++] = (char)('1' + rnd_below(9));
        for (unsigned k = 1; k < int_digits; k++)
            out[n++] = (char)('0' + rnd_below(10));
    }
    if (int_digits < digits) {
        out[n++] = '.';
        if (int_digits == 0)
            for (unsigned z = rnd_below(4); z > 0; z--)
                out[n++] = '0';
        for (unsigned k = int_digits; k < digits; k++)
            out[n++] = (char)('0' + rnd_below(10));
    }
    if (rnd_below(4) != 0) {
        int e = min_exp + (int)rnd_below((unsigned)(max_exp - min_exp + 1));
        n += (size_t)snprintf(out + n, 16, "%s%d", rnd() & 1 ? "e" : "E", e);
    }
    out[n] = '\0';
    return n;
}

#define RANDOM_TOKENS (1000000 / ROUNDS_DIVISOR)

static void test_float_random_decimal(void **state)
{
    (void)state;
    char text[64];
    rng_state = 1;
    for (int i = 0; i < RANDOM_TOKENS; i++) {
        size_t n = i & 1 ? random_decimal(text, -350, 350) : random_decimal(text, -50, 40);
        if (check_floats(text, n) != 0)
            fail();
    }
}

static void test_float_random_bits(void **state)
{
    (void)state;
    char text[64];
    rng_state = 2;
    for (int i = 0; i < RANDOM_TOKENS; i++) {
        uint64_t bits = rnd();
        double d;
        float f;
        int n;
        switch (i % 4) {
        case 0: /* doubles printed as a client would */
            memcpy(&d, &bits, 8);
            if (!isfinite(d))
                continue;
            n = snprintf(text, sizeof text, "%.17g", d);
            break;
        case 1: /* floats likewise */
            memcpy(&f, &bits, 4);
            if (!isfinite(f))
                continue;
            n = snprintf(text, sizeof text, "%.9g", (double)f);
            break;
        case 2: /* a random precision: rounding cases near halfway */
            memcpy(&d, &bits, 8);
            if (!isfinite(d))
                continue;
            n = snprintf(text, sizeof text, "%.*e", (int)rnd_below(25), d);
            break;
        default: /* floats, random precision, subnormals included */
            memcpy(&f, &bits, 4);
            if (!isfinite(f))
                continue;
            n = snprintf(text, sizeof text, "%.*e", (int)rnd_below(12), (double)f);
            break;
        }
        /* %g can print "1e+100" (valid JSON) but also "inf": skipped above */
        if (check_floats(text, (size_t)n) != 0)
            fail();
    }
}

/* ---- numfmt: round trip, shortest, closest ---------------------------- */

/* Significant digits (no trailing zeros) and exponent of a decimal text. */
static void dec_parse(const char *s, uint64_t *digits, int *exp)
{
    uint64_t d = 0;
    int e = 0, nd = 0;
    bool point = false;
    if (*s == '-')
        s++;
    for (; *s && *s != 'e' && *s != 'E'; s++) {
        if (*s == '.') {
            point = true;
            continue;
        }
        if (d == 0 && *s == '0') {
            e -= point;
            continue;
        }
        if (nd < 19) {
            d = d * 10 + (uint64_t)(*s - '0');
            nd++;
            e -= point;
        } else {
            e += !point;
        }
    }
    if (*s)
        e += atoi(s + 1);
    while (d && d % 10 == 0) {
        d /= 10;
        e++;
    }
    *digits = d;
    *exp = e;
}

static int ndigits(uint64_t d)
{
    int n = 1;
    while (d >= 10) {
        d /= 10;
        n++;
    }
    return n;
}

/* Checks the JSON shape of a numfmt output: -?digits[.digits][e[+-]digits]. */
static bool json_number_shape(const char *s)
{
    const char *next;
    size_t n = strlen(s);
    return numparse_skip(s, s + n, 0, &next) == 0 && next == s + n;
}

/*
 * 0 if numfmt's text for v reads back to v and has the fewest significant
 * digits of all decimals that do; with `closest`, also that it is the
 * closest of those (ties: even last digit).
 * Shortest: let the output be D * 10^e with n digits (no trailing zeros),
 * and L < D*10^e < U the two neighbouring multiples of 10^(e+1) (U - L =
 * 10^(e+1)). The reals that read back to v form an interval R containing
 * D*10^e. If R held a decimal c of fewer digits (a multiple of 10^(e+1)),
 * then either R reaches from D to c, past L or U (which are between), or
 * c is L or U; so L or U would read back. Hence: neither may.
 * Closest: if the correctly rounded n-digit decimal of v reads back, it
 * must be the output (%.*e rounds exactly, ties to even like numfmt).
 */
static int check_format(double v, bool single, bool closest)
{
    char s[NUMFMT_MAX + 8], t[64];
    memset(s, 'X', sizeof s);
    size_t len = single ? numfmt_f32(s, (float)v) : numfmt_f64(s, v);
    if (len >= NUMFMT_MAX || strlen(s) != len || !json_number_shape(s))
        return 1;
#define READS_BACK(text)                                                                     \
    (single ? same_f32(strtof(text, NULL), (float)v) : same_f64(strtod(text, NULL), v))
    if (!READS_BACK(s))
        return 2;
    if (v == 0 || !isfinite(v))
        return 0;
    uint64_t d, d2;
    int e, e2;
    dec_parse(s, &d, &e);
    const char *sign = v < 0 ? "-" : "";
    snprintf(t, sizeof t, "%s%" PRIu64 "e%d", sign, d / 10, e + 1);
    if (READS_BACK(t))
        return 4;
    snprintf(t, sizeof t, "%s%" PRIu64 "e%d", sign, d / 10 + 1, e + 1);
    if (READS_BACK(t))
        return 4;
    if (closest) {
        snprintf(t, sizeof t, "%.*e", ndigits(d) - 1, v);
        if (READS_BACK(t)) {
            dec_parse(t, &d2, &e2);
            if (d2 != d || e2 != e)
                return 3;
        }
    }
#undef READS_BACK
    return 0;
}

static void expect_format(double v, bool single, bool closest)
{
    int rc = check_format(v, single, closest);
    if (rc) {
        char s[NUMFMT_MAX];
        if (single)
            numfmt_f32(s, (float)v);
        else
            numfmt_f64(s, v);
        print_error("%s %a (%.17g) formatted as \"%s\": check %d failed\n",
                    single ? "float" : "double", v, v, s, rc);
    }
    assert_int_equal(rc, 0);
}

static void test_format_cases(void **state)
{
    (void)state;
    static const struct {
        double v;
        bool single;
        const char *text;
    } cases[] = {
        {0.0, true, "0"},
        {-0.0, true, "-0"},
        {0.1, true, "0.1"},
        {1e-45, true, "1e-45"},
        {3.4028234663852886e38, true, "3.4028235e+38"},
        {100, true, "100"},
        {1e21, true, "1e+21"},
        {1e20, true, "100000000000000000000"},
        {1.5, true, "1.5"},
        {1e-7, true, "1e-7"},
        {0.000001, true, "0.000001"},
        {16777216, true, "16777216"},
        {NAN, true, "NaN"},
        {INFINITY, true, "Infinity"},
        {-INFINITY, true, "-Infinity"},
        {0.1, false, "0.1"},
        {-0.0, false, "-0"},
        {1e21, false, "1e+21"},
        {1e23, false, "1e+23"},
        {5e-324, false, "5e-324"},
        {1.7976931348623157e308, false, "1.7976931348623157e+308"},
        {2.2250738585072014e-308, false, "2.2250738585072014e-308"},
        {9007199254740992.0, false, "9007199254740992"},
        {123.456, false, "123.456"},
        {-1e-7, false, "-1e-7"},
        {1.0 / 3, false, "0.3333333333333333"},
        {0.30000000000000004, false, "0.30000000000000004"},
        {-1234567.0, false, "-1234567"},
        {NAN, false, "NaN"},
        {-INFINITY, false, "-Infinity"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char s[NUMFMT_MAX];
        size_t n = cases[i].single ? numfmt_f32(s, (float)cases[i].v) : numfmt_f64(s, cases[i].v);
        assert_string_equal(s, cases[i].text);
        assert_int_equal(n, strlen(cases[i].text));
    }
    /* Powers of two and ten, their neighbours, the extremes. */
    for (int e = -149; e <= 127; e++) {
        float f = ldexpf(1, e);
        expect_format(f, true, true);
        expect_format(nextafterf(f, 0), true, true);
        expect_format(nextafterf(f, INFINITY), true, true);
    }
    for (int e = -1074; e <= 1023; e++) {
        double d = ldexp(1, e);
        expect_format(d, false, true);
        expect_format(nextafter(d, 0), false, true);
        expect_format(nextafter(d, INFINITY), false, true);
    }
    for (int e = -45; e <= 38; e++) {
        char t[16];
        snprintf(t, sizeof t, "1e%d", e);
        expect_format(strtof(t, NULL), true, true);
    }
    for (int e = -323; e <= 308; e++) {
        char t[16];
        snprintf(t, sizeof t, "1e%d", e);
        expect_format(strtod(t, NULL), false, true);
    }
    expect_format(FLT_MAX, true, true);
    expect_format(DBL_MAX, false, true);
}

#define RANDOM_FORMATS (2000000 / ROUNDS_DIVISOR)

static void test_format_random(void **state)
{
    (void)state;
    rng_state = 3;
    for (int i = 0; i < RANDOM_FORMATS; i++) {
        uint64_t bits = rnd();
        double d;
        memcpy(&d, &bits, 8);
        bool closest = i % 16 == 0; /* the costly check, on a share */
        if (isfinite(d) && check_format(d, false, closest) != 0)
            expect_format(d, false, closest);
        uint32_t fb = (uint32_t)(bits >> 16);
        float f;
        memcpy(&f, &fb, 4);
        if (isfinite(f) && check_format(f, true, closest) != 0)
            expect_format(f, true, closest);
    }
}

/* Every float of two whole binades (the subnormals and [1,2)) and every
 * 7th of the top one: round trip through numparse; the shortest check on a
 * stride. */
static void test_format_binades(void **state)
{
    (void)state;
    static const struct {
        uint32_t exp, stride;
    } binades[] = {{0, ROUNDS_DIVISOR}, {127, ROUNDS_DIVISOR}, {254, 7 * ROUNDS_DIVISOR}};
    for (size_t b = 0; b < sizeof binades / sizeof binades[0]; b++) {
        uint32_t first = binades[b].exp << 23;
        for (uint32_t m = 0; m < (1u << 23); m += binades[b].stride) {
            uint32_t bits = first | m;
            float f;
            memcpy(&f, &bits, 4);
            char s[NUMFMT_MAX];
            size_t n = numfmt_f32(s, f);
            const char *next;
            float back;
            if (numparse_f32(s, s + n, 0, &back, &next) != 0 || !same_f32(back, f)) {
                print_error("float %a: \"%s\" reads back as %a\n", (double)f, s, (double)back);
                fail();
            }
            if (m % 251 == 0 && check_format(f, true, m % 4 == 0) != 0)
                expect_format(f, true, m % 4 == 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grammar),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_float_cases),
        cmocka_unit_test(test_float_near_midpoints),
        cmocka_unit_test(test_float_long),
        cmocka_unit_test(test_float_random_decimal),
        cmocka_unit_test(test_float_random_bits),
        cmocka_unit_test(test_format_cases),
        cmocka_unit_test(test_format_random),
        cmocka_unit_test(test_format_binades),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
