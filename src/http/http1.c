#include "http/http1.h"

#include <inttypes.h>
#include <stdio.h>
#include <endian.h>
#include <string.h>
#include <strings.h>

#include "base/hex.h"

/*
 * The parser is a state machine over offsets into the caller's buffer. The
 * head is handled a line at a time: the search for a line's LF resumes where
 * the previous call stopped (_scan), and a line is validated once, when its
 * LF has arrived. Every limit is checked against a window that ends at the
 * limit, so that an over-long line or head fails as soon as the limit is
 * reached and the outcome never depends on how the bytes were split.
 *
 * A chunked body is decoded in place: each chunk's data is moved down to
 * the end of the body decoded so far, right after the head, so that the
 * body ends up contiguous and the raw bytes behind it are free space.
 */

enum parser_state {
    PS_REQUEST_LINE,
    PS_HEADERS,
    PS_BODY,       /* Content-Length body */
    PS_CHUNK_SIZE, /* chunk-size [ chunk-ext ] CRLF */
    PS_CHUNK_DATA, /* the chunk's data */
    PS_CHUNK_CRLF, /* CRLF after the data */
    PS_TRAILERS,   /* trailer fields up to the final CRLF */
    PS_DONE,
    PS_ERROR,
};

/* A state function's result when it finished its state and the next one
 * should run on the same bytes (distinct from every enum status value). */
#define STEP_NEXT 2
_Static_assert(STEP_NEXT != ST_OK && STEP_NEXT != ST_DONE && STEP_NEXT != ST_AGAIN &&
                   STEP_NEXT != ST_ERROR,
               "STEP_NEXT is not a status");

/* A chunk-size line carries only a size and extensions nobody here gives a
 * meaning to; the longest real extensions (AWS chunk signatures) are under
 * 100 bytes. */
#define CHUNK_LINE_MAX 256
#define CHUNK_SIZE_MAX_DIGITS 16 /* 16 hex digits fit in 64 bits */

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* tchar of RFC 9110 §5.6.2: the characters of methods, field names and
 * chunk extension names. */
/* tchar (RFC 9110 §5.6.2): the characters of a token, such as a header
 * name; a table, since every byte of every header name is looked up. */
static const bool tchars[256] = {
    ['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true,
    ['!'] = true, ['#'] = true, ['$'] = true, ['%'] = true, ['&'] = true, ['\''] = true,
    ['*'] = true, ['+'] = true, ['-'] = true, ['.'] = true, ['^'] = true, ['_'] = true,
    ['`'] = true, ['|'] = true, ['~'] = true,
};

static bool is_tchar(unsigned char c)
{
    return tchars[c];
}

static bool is_vchar(unsigned char c)
{
    return c > 0x20 && c < 0x7f;
}

static bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* field-vchar, SP and HTAB (RFC 9110 §5.5): everything but controls and DEL.
 * A CR here would be a bare CR, which some peers treat as a line end. */
static bool is_field_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Every byte, with A-Z lowered: a table, since header names are compared
 * byte by byte for every lookup. */
#define L4(c) (c), (c) + 1, (c) + 2, (c) + 3
#define L16(c) L4(c), L4((c) + 4), L4((c) + 8), L4((c) + 12)
static const unsigned char lower_table[256] = {
    L16(0x00), L16(0x10), L16(0x20), L16(0x30),
    0x40, L4(0x61), L4(0x65), L4(0x69), L4(0x6d), L4(0x71), L4(0x75), 0x79, 0x7a,
    0x5b, 0x5c, 0x5d, 0x5e, 0x5f,
    L16(0x60), L16(0x70), L16(0x80), L16(0x90), L16(0xa0), L16(0xb0), L16(0xc0), L16(0xd0),
    L16(0xe0), L16(0xf0),
};

static unsigned char ascii_lower(unsigned char c)
{
    return lower_table[c];
}

/* Whether the 8 bytes of w (first byte lowest) are all field characters
 * (is_field_char) other than HTAB: none below 0x20, none 0x7F. */
static bool field_chars8(uint64_t w)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    uint64_t del = w ^ (ones * 0x7f);
    /* A byte below 0x20, or a zero byte of del, borrows into its high bit
     * (bytes of 0x80 and up are exempt: & ~w). */
    return ((((w & ~highs) - ones * 0x20) | ((del & ~highs) - ones)) & ~w & highs) == 0;
}

/* Locale-independent case-insensitive equality of s[0..len) and `lower`,
 * a lower-case literal. */
static bool ascii_ieq(const char *s, size_t len, const char *lower)
{
    size_t i = 0;
    for (; i < len && lower[i]; i++)
        if (ascii_lower((unsigned char)s[i]) != (unsigned char)lower[i])
            return false;
    return i == len && lower[i] == '\0';
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static struct http1_span span(size_t from, size_t to)
{
    return (struct http1_span){.off = (uint32_t)from, .len = (uint32_t)(to - from)};
}

static bool span_ieq(const char *buf, struct http1_span s, const char *lower)
{
    return ascii_ieq(buf + s.off, s.len, lower);
}

/* After an error the stream cannot be resynchronised: the connection must
 * close, and keep_alive says so too for callers that only look at it. */
static int fail(struct http1_parser *p, int status, const char *msg)
{
    p->_state = PS_ERROR;
    p->_keep_alive = false;
    p->err_status = status;
    p->err_msg = msg;
    return ST_ERROR;
}

const char *http_body_too_large(char *out, uint64_t len, bool at_least, uint64_t max_body)
{
    snprintf(out, HTTP_BODY_TOO_LARGE_MAX,
             "request body of %s%" PRIu64 " bytes exceeds the limit of %" PRIu64
             " bytes (--max-body-bytes)",
             at_least ? "at least " : "", len, max_body);
    return out;
}

static int body_too_large(struct http1_parser *p, uint64_t len, bool at_least)
{
    return fail(p, 413, http_body_too_large(p->err_buf, len, at_least, p->limits.max_body));
}

static int finish(struct http1_parser *p, size_t consumed)
{
    p->_state = PS_DONE;
    p->consumed = consumed;
    return ST_DONE;
}

void http1_parser_init(struct http1_parser *p, const struct http1_limits *limits)
{
    /* The header spans are written before they are read (_nheaders counts
     * them): clearing the fields before them is enough, and a third of the
     * size (this runs for every request). */
    memset(p, 0, offsetof(struct http1_parser, _names));
    p->limits = *limits;
    if (p->limits.max_headers > HTTP1_MAX_HEADERS_CAP)
        p->limits.max_headers = HTTP1_MAX_HEADERS_CAP;
    p->_state = PS_REQUEST_LINE;
}

/*
 * Lines. Finds the LF ending the line that starts at p->_in, looking only at
 * bytes not looked at before and never at or past `end`, and stores its
 * offset in *lf. The caller moves p->_in (and p->_scan) past the LF once it
 * has used the line (next_line).
 */
static bool find_line(struct http1_parser *p, const char *buf, size_t end, size_t *lf)
{
    if (p->_scan >= end)
        return false;
    const char *hit = memchr(buf + p->_scan, '\n', end - p->_scan);
    if (!hit) {
        p->_scan = end;
        return false;
    }
    *lf = (size_t)(hit - buf);
    return true;
}

/* Only CRLF ends a line: a bare LF is where lenient and strict parsers
 * disagree on message boundaries (request smuggling). */
static bool line_ends_with_crlf(const struct http1_parser *p, const char *buf, size_t lf)
{
    return lf > p->_in && buf[lf - 1] == '\r';
}

static void next_line(struct http1_parser *p, size_t lf)
{
    p->_in = p->_scan = lf + 1;
}

/*
 * Request line: method SP request-target SP HTTP-version (RFC 9112 §3).
 */
static int parse_version(struct http1_parser *p, const char *v, size_t len)
{
    bool well_formed = len == 8 && memcmp(v, "HTTP/", 5) == 0 && is_digit((unsigned char)v[5]) &&
                       v[6] == '.' && is_digit((unsigned char)v[7]);
    if (!well_formed)
        return fail(p, 400, "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return fail(p, 505, "HTTP version not supported");
    p->_version_minor = v[7] - '0';
    return ST_OK;
}

/* Length of an "http://" or "https://" scheme prefix (any case), or 0. */
static size_t scheme_len(const char *s, size_t n)
{
    if (n >= 7 && strncasecmp(s, "http://", 7) == 0)
        return 7;
    if (n >= 8 && strncasecmp(s, "https://", 8) == 0)
        return 8;
    return 0;
}

/* origin-form, "*", or absolute-form (RFC 9112 §3.2.2: servers must accept
 * it; the authority is skipped and the path used). Sets *path_from to where
 * the path starts. */
static int check_target(struct http1_parser *p, const char *buf, size_t from, size_t to,
                        size_t *path_from)
{
    *path_from = from;
    for (size_t i = from; i < to; i++)
        if (!is_vchar((unsigned char)buf[i]))
            return fail(p, 400, "invalid character in request-target");
    if (to - from == 1 && buf[from] == '*')
        return ST_OK;
    if (buf[from] == '/')
        return ST_OK;
    size_t scheme = scheme_len(buf + from, to - from);
    if (!scheme)
        return fail(p, 400, "request-target must be an absolute path or URI");
    size_t i = from + scheme;
    while (i < to && buf[i] != '/' && buf[i] != '?')
        i++;
    if (i == from + scheme)
        return fail(p, 400, "absolute-form request-target without an authority");
    *path_from = i;
    return ST_OK;
}

static int parse_request_line(struct http1_parser *p, const char *buf, size_t from, size_t cr)
{
    size_t i = from;
    while (i < cr && is_tchar((unsigned char)buf[i]))
        i++;
    if (i == from || i == cr || buf[i] != ' ')
        return fail(p, 400, "malformed method");
    size_t method_end = i;

    size_t target = ++i;
    while (i < cr && buf[i] != ' ')
        i++;
    if (i == target)
        return fail(p, 400, "empty request-target");
    if (i == cr)
        return fail(p, 400, "missing HTTP version");
    size_t path_from;
    int rc = check_target(p, buf, target, i, &path_from);
    if (rc)
        return rc;
    rc = parse_version(p, buf + i + 1, cr - (i + 1));
    if (rc)
        return rc;

    p->_method = span(from, method_end);
    p->_target = span(target, i);
    p->_path_off = path_from;
    const char *q = memchr(buf + target, '?', i - target);
    if (q) {
        p->_has_query = true;
        p->_query = span((size_t)(q - buf) + 1, i);
    }
    return ST_OK;
}

/*
 * Field lines: field-name ":" OWS field-value OWS (RFC 9112 §5), shared by
 * headers and trailers.
 */
static int parse_field_line(struct http1_parser *p, const char *buf, size_t from, size_t cr,
                            struct http1_span *name, struct http1_span *value)
{
    if (is_ows((unsigned char)buf[from]))
        return fail(p, 400, "obsolete line folding");
    size_t i = from;
    while (i < cr && is_tchar((unsigned char)buf[i]))
        i++;
    if (i < cr && is_ows((unsigned char)buf[i]))
        return fail(p, 400, "whitespace between header name and colon");
    if (i == cr || buf[i] != ':')
        return fail(p, 400, "malformed header name");
    if (i == from)
        return fail(p, 400, "empty header name");
    *name = span(from, i);

    size_t j = i + 1;
    for (; j + 8 <= cr; j += 8) {
        uint64_t w;
        memcpy(&w, buf + j, 8);
        if (!field_chars8(le64toh(w)))
            break; /* looked at byte by byte below */
    }
    for (; j < cr; j++)
        if (!is_field_char((unsigned char)buf[j]))
            return fail(p, 400, "invalid character in header value");
    size_t v = i + 1, v_end = cr;
    while (v < v_end && is_ows((unsigned char)buf[v]))
        v++;
    while (v_end > v && is_ows((unsigned char)buf[v_end - 1]))
        v_end--;
    *value = span(v, v_end);
    return ST_OK;
}

static int finish_head(struct http1_parser *p, const char *buf);

/*
 * The head: optional empty lines, the request line, header lines, an empty
 * line. Everything counts toward max_header_bytes, so the search for LFs
 * never looks past it.
 */
static int parse_head(struct http1_parser *p, const char *buf, size_t len)
{
    const struct http1_limits *lim = &p->limits;
    size_t end = min_size(len, lim->max_header_bytes);
    size_t lf;

    while (find_line(p, buf, end, &lf)) {
        bool request_line = p->_state == PS_REQUEST_LINE;
        if (request_line && lf + 1 - p->_in > lim->max_request_line)
            return fail(p, 414, "request line too long");
        if (!line_ends_with_crlf(p, buf, lf))
            return fail(p, 400, "line not terminated by CRLF");
        size_t cr = lf - 1;
        int rc = ST_OK;

        if (request_line) {
            /* RFC 9112 §2.2: a server SHOULD ignore empty lines received
             * before the request line (some clients send an extra CRLF
             * after a POST body). */
            if (cr > p->_in) {
                rc = parse_request_line(p, buf, p->_in, cr);
                if (rc == ST_OK)
                    p->_state = PS_HEADERS;
            }
        } else if (cr == p->_in) {
            next_line(p, lf);
            p->_head_len = p->_in;
            return finish_head(p, buf);
        } else if (p->_nheaders == lim->max_headers) {
            rc = fail(p, 431, "too many header fields");
        } else {
            rc = parse_field_line(p, buf, p->_in, cr, &p->_names[p->_nheaders],
                                  &p->_values[p->_nheaders]);
            if (rc == ST_OK)
                p->_nheaders++;
        }
        if (rc)
            return rc;
        next_line(p, lf);
    }

    if (p->_state == PS_REQUEST_LINE && end - p->_in >= lim->max_request_line)
        return fail(p, 414, "request line too long");
    if (len >= lim->max_header_bytes)
        return fail(p, 431, "request header section too large");
    return ST_AGAIN;
}

/*
 * Body framing (RFC 9112 §6). Every ambiguity is an error, not a guess: a
 * proxy in front of us may have guessed differently, and the bytes one of
 * us takes for a body the other takes for the next request.
 */

/* Content-Length may repeat, as fields or as a list, only with one value. */
static int add_content_length(struct http1_parser *p, const char *v, size_t len)
{
    size_t i = 0;
    for (;;) {
        size_t digits = i;
        uint64_t n = 0;
        for (; i < len && is_digit((unsigned char)v[i]); i++) {
            unsigned d = (unsigned)(v[i] - '0');
            if (n > (UINT64_MAX - d) / 10)
                return fail(p, 400, "Content-Length too large");
            n = n * 10 + d;
        }
        if (i == digits)
            return fail(p, 400, "malformed Content-Length");
        if (p->_has_content_length && n != p->_content_length)
            return fail(p, 400, "conflicting Content-Length values");
        p->_has_content_length = true;
        p->_content_length = n;

        while (i < len && is_ows((unsigned char)v[i]))
            i++;
        if (i == len)
            return ST_OK;
        if (v[i] != ',')
            return fail(p, 400, "malformed Content-Length");
        for (i++; i < len && is_ows((unsigned char)v[i]); i++)
            ;
    }
}

/* Connection is a list of options; only "close" and "keep-alive" matter. */
static void scan_connection(const char *v, size_t len, bool *close, bool *keep_alive)
{
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        while (i < len && v[i] != ',')
            i++;
        size_t end = i;
        while (start < end && is_ows((unsigned char)v[start]))
            start++;
        while (end > start && is_ows((unsigned char)v[end - 1]))
            end--;
        if (ascii_ieq(v + start, end - start, "close"))
            *close = true;
        else if (ascii_ieq(v + start, end - start, "keep-alive"))
            *keep_alive = true;
        i++;
    }
}

static int finish_head(struct http1_parser *p, const char *buf)
{
    unsigned hosts = 0, transfer_encodings = 0;
    bool te_chunked = false, unknown_expectation = false, expect_continue = false;
    bool close = false, keep_alive = false;

    for (uint32_t i = 0; i < p->_nheaders; i++) {
        struct http1_span name = p->_names[i];
        const char *v = buf + p->_values[i].off;
        size_t v_len = p->_values[i].len;
        /* The lengths tell the names apart: most fields compare nothing. */
        if (name.len == 4 && span_ieq(buf, name, "host")) {
            hosts++;
        } else if (name.len == 14 && span_ieq(buf, name, "content-length")) {
            int rc = add_content_length(p, v, v_len);
            if (rc)
                return rc;
        } else if (name.len == 17 && span_ieq(buf, name, "transfer-encoding")) {
            /* Only chunked alone: a second field is a coding list too. */
            transfer_encodings++;
            te_chunked = transfer_encodings == 1 && ascii_ieq(v, v_len, "chunked");
        } else if (name.len == 10 && span_ieq(buf, name, "connection")) {
            scan_connection(v, v_len, &close, &keep_alive);
        } else if (name.len == 6 && span_ieq(buf, name, "expect")) {
            if (ascii_ieq(v, v_len, "100-continue"))
                expect_continue = true;
            else
                unknown_expectation = true;
        }
    }

    /* RFC 9112 §3.2: the Host decides which origin is meant. */
    if (hosts > 1)
        return fail(p, 400, "more than one Host header");
    if (hosts == 0 && p->_version_minor == 1)
        return fail(p, 400, "missing Host header");
    if (transfer_encodings) {
        if (p->_has_content_length)
            return fail(p, 400, "both Content-Length and Transfer-Encoding");
        if (p->_version_minor == 0)
            return fail(p, 400, "Transfer-Encoding in an HTTP/1.0 request");
        if (!te_chunked)
            return fail(p, 501, "unsupported Transfer-Encoding");
        p->_chunked = true;
    }
    if (unknown_expectation)
        return fail(p, 417, "unsupported expectation");
    if (p->_content_length > p->limits.max_body)
        return body_too_large(p, p->_content_length, false);

    /* RFC 9110 §10.1.1: a server MUST ignore 100-continue from HTTP/1.0. */
    p->_expect_continue = expect_continue && p->_version_minor == 1;
    p->_keep_alive = !close && (p->_version_minor == 1 || keep_alive);
    p->head_done = true;

    if (p->_chunked)
        p->_state = PS_CHUNK_SIZE;
    else if (p->_content_length > 0)
        p->_state = PS_BODY;
    else
        return finish(p, p->_head_len);
    return STEP_NEXT;
}

static size_t available(const struct http1_parser *p, size_t len)
{
    return len > p->_in ? len - p->_in : 0;
}

static int parse_body(struct http1_parser *p, size_t len)
{
    if (available(p, len) < p->_content_length)
        return ST_AGAIN;
    p->_body_len = p->_content_length;
    return finish(p, p->_head_len + (size_t)p->_content_length);
}

/*
 * Chunked body (RFC 9112 §7.1).
 */

static bool skip_ows(const char **s, const char *end)
{
    while (*s < end && is_ows((unsigned char)**s))
        (*s)++;
    return *s < end;
}

static const char *skip_token(const char *s, const char *end)
{
    while (s < end && is_tchar((unsigned char)*s))
        s++;
    return s;
}

/* quoted-string (RFC 9110 §5.6.4) starting at the opening quote; returns
 * the byte after the closing quote or NULL. */
static const char *skip_quoted_string(const char *s, const char *end)
{
    for (s++; s < end; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"')
            return s + 1;
        if (c == '\\') {
            if (++s == end)
                return NULL;
            c = (unsigned char)*s;
            if (!(is_ows(c) || is_vchar(c) || c >= 0x80))
                return NULL;
        } else if (!(is_ows(c) || is_vchar(c) || c >= 0x80)) {
            return NULL;
        }
    }
    return NULL;
}

/* *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ): whitespace only where
 * the grammar has BWS, so nothing but a ';' may follow the size. */
static bool skip_chunk_extensions(const char *s, const char *end)
{
    while (s < end) {
        if (!skip_ows(&s, end) || *s != ';')
            return false;
        s++;
        skip_ows(&s, end);
        const char *name = s;
        s = skip_token(s, end);
        if (s == name)
            return false;
        const char *after_name = s;
        if (!skip_ows(&s, end) || *s != '=') {
            s = after_name;
            continue;
        }
        s++;
        if (!skip_ows(&s, end))
            return false;
        if (*s == '"') {
            s = skip_quoted_string(s, end);
            if (!s)
                return false;
        } else {
            const char *value = s;
            s = skip_token(s, end);
            if (s == value)
                return false;
        }
    }
    return true;
}

static int parse_chunk_size(struct http1_parser *p, const char *buf, size_t len)
{
    size_t end = min_size(len, p->_in + CHUNK_LINE_MAX);
    size_t lf;
    if (!find_line(p, buf, end, &lf)) {
        if (end - p->_in >= CHUNK_LINE_MAX)
            return fail(p, 400, "chunk size line too long");
        return ST_AGAIN;
    }
    if (!line_ends_with_crlf(p, buf, lf))
        return fail(p, 400, "line not terminated by CRLF");

    const char *s = buf + p->_in, *cr = buf + lf - 1;
    uint64_t size = 0;
    int digits = 0;
    for (int d; s < cr && (d = hex_value((unsigned char)*s)) >= 0; s++) {
        if (++digits > CHUNK_SIZE_MAX_DIGITS)
            return fail(p, 400, "chunk size too long");
        size = size << 4 | (uint64_t)d;
    }
    if (digits == 0)
        return fail(p, 400, "malformed chunk size");
    if (!skip_chunk_extensions(s, cr))
        return fail(p, 400, "malformed chunk extension");
    if (size > p->limits.max_body - p->_body_len)
        return body_too_large(
            p, size > UINT64_MAX - p->_body_len ? UINT64_MAX : p->_body_len + size, true);

    next_line(p, lf);
    if (size == 0) {
        p->_trailer_start = p->_in;
        p->_state = PS_TRAILERS;
    } else {
        p->_chunk_left = size;
        p->_state = PS_CHUNK_DATA;
    }
    return STEP_NEXT;
}

static int parse_chunk_data(struct http1_parser *p, char *buf, size_t len)
{
    size_t n = available(p, len);
    if (n > p->_chunk_left)
        n = (size_t)p->_chunk_left;
    char *out = buf + p->_head_len + p->_body_len;
    if (n && out != buf + p->_in)
        memmove(out, buf + p->_in, n);
    p->_in += n;
    p->_body_len += n;
    p->_chunk_left -= n;
    if (p->_chunk_left)
        return ST_AGAIN;
    p->_state = PS_CHUNK_CRLF;
    return STEP_NEXT;
}

static int parse_chunk_crlf(struct http1_parser *p, const char *buf, size_t len)
{
    size_t n = available(p, len);
    if (n >= 1 && buf[p->_in] != '\r')
        return fail(p, 400, "chunk data not followed by CRLF");
    if (n >= 2 && buf[p->_in + 1] != '\n')
        return fail(p, 400, "chunk data not followed by CRLF");
    if (n < 2)
        return ST_AGAIN;
    p->_in = p->_scan = p->_in + 2;
    p->_state = PS_CHUNK_SIZE;
    return STEP_NEXT;
}

/* Trailers are ignored, but count toward the header limits: together with
 * the head they are what the client may send us besides the body. */
static int parse_trailers(struct http1_parser *p, const char *buf, size_t len)
{
    const struct http1_limits *lim = &p->limits;
    size_t limit = p->_trailer_start + (lim->max_header_bytes - p->_head_len);
    size_t end = min_size(len, limit);
    size_t lf;

    while (find_line(p, buf, end, &lf)) {
        if (!line_ends_with_crlf(p, buf, lf))
            return fail(p, 400, "line not terminated by CRLF");
        size_t cr = lf - 1;
        if (cr == p->_in) {
            next_line(p, lf);
            return finish(p, p->_in);
        }
        if (p->_nheaders + p->_trailer_count == lim->max_headers)
            return fail(p, 431, "too many header fields");
        struct http1_span name, value;
        int rc = parse_field_line(p, buf, p->_in, cr, &name, &value);
        if (rc)
            return rc;
        p->_trailer_count++;
        next_line(p, lf);
    }
    if (len >= limit)
        return fail(p, 431, "request header section too large");
    return ST_AGAIN;
}

static int parse_step(struct http1_parser *p, char *buf, size_t len)
{
    switch (p->_state) {
    case PS_REQUEST_LINE:
    case PS_HEADERS:
        return parse_head(p, buf, len);
    case PS_BODY:
        return parse_body(p, len);
    case PS_CHUNK_SIZE:
        return parse_chunk_size(p, buf, len);
    case PS_CHUNK_DATA:
        return parse_chunk_data(p, buf, len);
    case PS_CHUNK_CRLF:
        return parse_chunk_crlf(p, buf, len);
    case PS_TRAILERS:
        return parse_trailers(p, buf, len);
    case PS_DONE:
        return ST_DONE;
    default:
        return ST_ERROR;
    }
}

/* The buffer may have moved since the last call: every pointer is made
 * afresh from the offsets. */
static void fill_request(const struct http1_parser *p, char *buf, struct http1_request *req)
{
    bool have_line = p->_method.len > 0;
    req->method = have_line ? buf + p->_method.off : NULL;
    req->method_len = p->_method.len;
    req->target = have_line ? buf + p->_target.off : NULL;
    req->target_len = p->_target.len;
    req->path = have_line ? buf + p->_path_off : NULL;
    req->path_len = (uint32_t)((p->_has_query ? p->_query.off - 1 : p->_target.off + p->_target.len) -
                               p->_path_off);
    req->query = p->_has_query ? buf + p->_query.off : NULL;
    req->query_len = p->_query.len;
    req->version_minor = p->_version_minor;

    req->nheaders = p->_nheaders;
    for (uint32_t i = 0; i < p->_nheaders; i++) {
        req->headers[i].name = buf + p->_names[i].off;
        req->headers[i].name_len = p->_names[i].len;
        req->headers[i].value = buf + p->_values[i].off;
        req->headers[i].value_len = p->_values[i].len;
    }
    http1_request_index(req);
    req->keep_alive = p->_keep_alive;
    req->expect_continue = p->_expect_continue;
    req->chunked = p->_chunked;
    req->has_content_length = p->_has_content_length;
    req->content_length = p->_content_length;

    bool body = p->_state == PS_DONE && p->_body_len > 0;
    req->body = body ? buf + p->_head_len : NULL;
    req->body_len = body ? p->_body_len : 0;
}

enum status http1_parse(struct http1_parser *p, char *buf, size_t len, struct http1_request *req)
{
    int rc;
    do
        rc = parse_step(p, buf, len);
    while (rc == STEP_NEXT);
    fill_request(p, buf, req);
    return rc;
}

void http1_request_index(struct http1_request *req)
{
    uint64_t lengths = 0;
    for (uint32_t i = 0; i < req->nheaders; i++)
        lengths |= UINT64_C(1) << (req->headers[i].name_len & 63);
    req->name_lengths = lengths;
    req->indexed = true;
}

const struct http_header *http1_header_scan(const struct http1_request *req, const char *name,
                                            size_t len)
{
    for (uint32_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];
        if (h->name_len != len ||
            ascii_lower((unsigned char)h->name[0]) != ascii_lower((unsigned char)name[0]))
            continue;
        size_t j = 0;
        while (j < len &&
               ascii_lower((unsigned char)h->name[j]) == ascii_lower((unsigned char)name[j]))
            j++;
        if (j == len)
            return &req->headers[i];
    }
    return NULL;
}
