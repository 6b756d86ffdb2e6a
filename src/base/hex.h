/*
 * hex: the value of a hexadecimal digit (0-9, a-f, A-F), or -1 for any
 * other character, a negative char included. Thread: any.
 */
#ifndef INFERD_BASE_HEX_H
#define INFERD_BASE_HEX_H

#include "base/status.h"

static inline int hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return NOT_FOUND;
}

#endif
