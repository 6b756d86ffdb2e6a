#include "bench/sse_reader.h"

#include <errno.h>
#include <string.h>

#include "base/mem.h"
#include "base/status.h"

enum { S_FIELD, S_VALUE_START, S_VALUE, S_FAILED };
enum { T_IGNORE, T_DATA, T_ID, T_EVENT };

static const unsigned char utf8_bom[3] = {0xEF, 0xBB, 0xBF};

int sse_reader_init(struct sse_reader *r)
{
    memset(r, 0, sizeof *r);
    r->_data = mem_alloc(SSE_MAX_DATA + 1);
    if (!r->_data)
        return -ENOMEM;
    sse_reader_reset(r);
    return 0;
}

void sse_reader_reset(struct sse_reader *r)
{
    r->err = NULL;
    r->_state = S_FIELD;
    r->_bom_checked = false;
    r->_after_cr = false;
    r->_bom_seen = 0;
    r->_field_len = 0;
    r->_target = T_IGNORE;
    r->_data_len = 0;
    r->_event_len = 0;
    r->_event[0] = '\0';
    r->_value_len = 0;
    r->_value_nul = false;
    r->_id[0] = '\0';
}

void sse_reader_free(struct sse_reader *r)
{
    mem_free(r->_data);
    r->_data = NULL;
}

static int fail(struct sse_reader *r, const char *msg)
{
    r->err = msg;
    r->_state = S_FAILED;
    return ST_ERROR;
}

/* The field name just read (the colon seen, or the line ended) picks where
 * the value goes. */
static int field_target(const struct sse_reader *r)
{
    uint32_t n = r->_field_len;
    if (n > SSE_MAX_FIELD)
        return T_IGNORE;
    if (n == 4 && memcmp(r->_field, "data", 4) == 0)
        return T_DATA;
    if (n == 2 && memcmp(r->_field, "id", 2) == 0)
        return T_ID;
    if (n == 5 && memcmp(r->_field, "event", 5) == 0)
        return T_EVENT;
    return T_IGNORE;
}

static int append_value(struct sse_reader *r, const char *p, size_t n)
{
    switch (r->_target) {
    case T_DATA:
        if (n > SSE_MAX_DATA - r->_data_len)
            return fail(r, "event data over 64 KiB");
        memcpy(r->_data + r->_data_len, p, n);
        r->_data_len += n;
        return 0;
    case T_ID:
    case T_EVENT: {
        size_t max = r->_target == T_ID ? SSE_MAX_ID : SSE_MAX_EVENT;
        if (n > max - r->_value_len)
            return fail(r, r->_target == T_ID ? "event id over 256 bytes"
                                              : "event name over 64 bytes");
        if (memchr(p, '\0', n))
            r->_value_nul = true;
        memcpy(r->_value + r->_value_len, p, n);
        r->_value_len += n;
        return 0;
    }
    default:
        return 0;
    }
}

static int dispatch(struct sse_reader *r, sse_event_fn on_event, void *arg)
{
    size_t len = r->_data_len;
    r->_data_len = 0;
    if (len == 0) {
        r->_event_len = 0;
        r->_event[0] = '\0';
        return 0;
    }
    len--; /* the LF after the last data line */
    r->_data[len] = '\0';
    struct sse_event ev = {.data = r->_data, .data_len = len, .event = r->_event, .id = r->_id};
    int rc = on_event(arg, &ev);
    r->_event_len = 0;
    r->_event[0] = '\0';
    return rc ? fail(r, "stopped by the caller") : 0;
}

/* CR or LF ended the line. */
static int end_line(struct sse_reader *r, sse_event_fn on_event, void *arg)
{
    int state = r->_state;
    r->_state = S_FIELD;
    if (state == S_FIELD && r->_field_len == 0)
        return dispatch(r, on_event, arg);
    int target = state == S_FIELD ? field_target(r) : r->_target;
    r->_field_len = 0;
    switch (target) {
    case T_DATA:
        if (r->_data_len == SSE_MAX_DATA)
            return fail(r, "event data over 64 KiB");
        r->_data[r->_data_len++] = '\n';
        break;
    case T_ID:
        if (!r->_value_nul) {
            memcpy(r->_id, r->_value, r->_value_len);
            r->_id[r->_value_len] = '\0';
        }
        break;
    case T_EVENT:
        memcpy(r->_event, r->_value, r->_value_len);
        r->_event_len = r->_value_len;
        r->_event[r->_event_len] = '\0';
        break;
    default:
        break;
    }
    r->_value_len = 0;
    r->_value_nul = false;
    r->_target = T_IGNORE;
    return 0;
}

static int feed_byte(struct sse_reader *r, char c, sse_event_fn on_event, void *arg)
{
    if (r->_after_cr) {
        r->_after_cr = false;
        if (c == '\n')
            return 0; /* CRLF: the CR ended the line */
    }
    if (c == '\r' || c == '\n') {
        r->_after_cr = c == '\r';
        return end_line(r, on_event, arg);
    }
    switch (r->_state) {
    case S_FIELD:
        if (c == ':') {
            r->_target = r->_field_len == 0 ? T_IGNORE : field_target(r); /* "" = comment */
            r->_state = S_VALUE_START;
            r->_value_len = 0;
            r->_value_nul = false;
            return 0;
        }
        if (r->_field_len < SSE_MAX_FIELD)
            r->_field[r->_field_len] = c;
        if (r->_field_len <= SSE_MAX_FIELD)
            r->_field_len++;
        return 0;
    case S_VALUE_START:
        r->_state = S_VALUE;
        return c == ' ' ? 0 : append_value(r, &c, 1);
    default:
        return append_value(r, &c, 1);
    }
}

int sse_reader_feed(struct sse_reader *r, const char *p, size_t n, sse_event_fn on_event, void *arg)
{
    if (r->_state == S_FAILED)
        return ST_ERROR;
    size_t i = 0;
    while (i < n && !r->_bom_checked) {
        unsigned char c = (unsigned char)p[i];
        if (c == utf8_bom[r->_bom_seen]) {
            i++;
            if (++r->_bom_seen == sizeof utf8_bom)
                r->_bom_checked = true;
            continue;
        }
        /* Not a BOM after all: the bytes taken for one are content. */
        r->_bom_checked = true;
        for (uint8_t k = 0; k < r->_bom_seen; k++)
            if (feed_byte(r, (char)utf8_bom[k], on_event, arg))
                return ST_ERROR;
    }
    while (i < n) {
        if (r->_state == S_VALUE && !r->_after_cr) {
            /* The rest of a value up to the line's end, in one piece. */
            size_t j = i;
            while (j < n && p[j] != '\r' && p[j] != '\n')
                j++;
            if (j > i && append_value(r, p + i, j - i))
                return ST_ERROR;
            i = j;
            if (i == n)
                break;
        }
        if (feed_byte(r, p[i++], on_event, arg))
            return ST_ERROR;
    }
    return 0;
}
