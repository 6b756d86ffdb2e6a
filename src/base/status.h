/*
 * status: the one status vocabulary of inferd's functions (STYLE.md,
 * practice 2; nginx's NGX_OK/AGAIN/DONE/ERROR).
 *
 *   ST_OK     succeeded. Functions with nothing more to report return it.
 *   ST_DONE   succeeded and finished a unit of work that takes several
 *             calls: a whole request parsed, a handshake completed, a
 *             document's end reached.
 *   ST_AGAIN  not finished, nothing wrong: call again when more bytes have
 *             arrived or the socket has room. Equal to -EAGAIN, so code
 *             that passes a system call's -errno through speaks it too.
 *   ST_ERROR  failed; the detail is where the function says: the caller's
 *             struct error (error_set() returns ST_ERROR), or the failing
 *             object's own error fields (a parser's err_status/err_msg).
 *
 * Other negative values are negated errno codes from system calls and
 * allocation (-ENOMEM, -EINVAL, ...), documented per function. Functions
 * that return a count (bytes read, bytes written) return it as a value
 * >= 0 and use only the negative statuses besides; a count of 0 from a
 * read means the peer closed, as with read(2).
 *
 * NOT_FOUND is not a status: it is what a lookup returns when nothing
 * matches, where its result is otherwise an index or a value that is never
 * negative (model_input_index, hex_value). Such a function has no error to
 * report, only an absence.
 *
 * `make layers` (scripts/check_status.py) keeps this the one spelling: no
 * function in src/ returns a bare -1.
 */
#ifndef INFERD_BASE_STATUS_H
#define INFERD_BASE_STATUS_H

#include <errno.h>

enum status {
    ST_OK = 0,
    ST_DONE = 1,
    ST_ERROR = -1,
    ST_AGAIN = -EAGAIN,
};

#define NOT_FOUND (-1)

#endif
