/* Civil dates from day numbers and back: the algorithms of Howard
 * Hinnant's "chrono-Compatible Low-Level Date Algorithms", for days from
 * the epoch on (so every quantity here is non-negative). */
#include "base/day.h"

#include <stdbool.h>

#include "base/status.h"

/* Days from 1970-01-01 to y-m-d (m 1..12, d 1..31; y >= 1970). */
static uint64_t days_from_civil(uint32_t y, uint32_t m, uint32_t d)
{
    y -= m <= 2;
    uint32_t era = y / 400;
    uint32_t yoe = y - era * 400;                                   /* [0, 399] */
    uint32_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    uint32_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return (uint64_t)era * 146097 + doe - 719468;
}

void day_format(uint64_t day, char out[DAY_TEXT_LEN + 1])
{
    if (day > DAY_MAX)
        day = DAY_MAX;
    uint64_t z = day + 719468;
    uint64_t era = z / 146097;
    uint32_t doe = (uint32_t)(z - era * 146097);
    uint32_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    uint32_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    uint32_t mp = (5 * doy + 2) / 153;
    uint32_t d = doy - (153 * mp + 2) / 5 + 1;
    uint32_t m = mp < 10 ? mp + 3 : mp - 9;
    uint32_t y = (uint32_t)(yoe + era * 400) + (m <= 2);
    uint32_t fields[] = {y, m, d};
    const int widths[] = {4, 2, 2};
    char *p = out;
    for (int f = 0; f < 3; f++) {
        if (f)
            *p++ = '-';
        for (int i = widths[f] - 1; i >= 0; i--) {
            p[i] = (char)('0' + fields[f] % 10);
            fields[f] /= 10;
        }
        p += widths[f];
    }
    *p = '\0';
}

static bool digits(const char *s, size_t n, uint32_t *out)
{
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

static uint32_t days_in_month(uint32_t y, uint32_t m)
{
    static const uint8_t days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

int day_parse(const char *s, size_t len, uint64_t *day)
{
    uint32_t y, m, d;
    if (len != DAY_TEXT_LEN || s[4] != '-' || s[7] != '-' || !digits(s, 4, &y) ||
        !digits(s + 5, 2, &m) || !digits(s + 8, 2, &d))
        return ST_ERROR;
    if (y < 1970 || m < 1 || m > 12 || d < 1 || d > days_in_month(y, m))
        return ST_ERROR;
    *day = days_from_civil(y, m, d);
    return 0;
}
