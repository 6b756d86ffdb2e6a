/*
 * day: UTC calendar days, numbered as seconds since the Unix epoch / 86400
 * (day 0 = 1970-01-01), to and from their "YYYY-MM-DD" spelling (the
 * proleptic Gregorian calendar). For the days people read and type: the
 * usage file and GET /v2/usage (obs/usage.h).
 *
 * day_format() writes exactly DAY_TEXT_LEN characters and a NUL for any
 * day from 0 to DAY_MAX (9999-12-31). day_parse() accepts exactly that
 * spelling (four-digit year from 1970, two-digit month and day, a date
 * that exists) and nothing around it: 0 with *day, or -1. Thread: any.
 */
#ifndef INFERD_BASE_DAY_H
#define INFERD_BASE_DAY_H

#include <stddef.h>
#include <stdint.h>

#define DAY_TEXT_LEN 10    /* "YYYY-MM-DD" */
#define DAY_MAX 2932896ull /* 9999-12-31 */

void day_format(uint64_t day, char out[DAY_TEXT_LEN + 1]);
int day_parse(const char *s, size_t len, uint64_t *day);

#endif
