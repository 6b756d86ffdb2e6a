/*
 * onnxruntime: the built-in backend that runs ONNX models in-process through
 * the ONNX Runtime C API (the API version of the bundled headers).
 *
 * One OrtEnv and one CPU OrtMemoryInfo are created on the first load() (or
 * onnxruntime_start()) and live until the process exits; they are the only
 * shared state and are read-only afterwards. Everything else belongs to an
 * instance. ORT's own process-wide state, built on its first session, is
 * built then too, with a one-node session made and dropped.
 *
 * ORT's own log lines go to inferd's log (base/log.h), never straight to
 * stderr: "onnxruntime <log id>: <message> [<code location>]", where the log
 * id is the load args' log_id ("<model>:<version>") for a session's lines
 * and "env" for the others; ORT VERBOSE and INFO are debug lines, WARNING
 * warn, ERROR and FATAL error. ORT's threshold is set from inferd's log
 * level at each load(): a session keeps the threshold it was created with,
 * and lines of levels disabled since are dropped when they arrive.
 *
 * load()     creates one OrtSession (intra/inter-op thread counts from the
 *            args, all graph optimizations, sequential execution). Every
 *            input and output must be a tensor of a type in enum dtype
 *            (ONNX STRING is BYTES); otherwise, and when ORT rejects the
 *            file, it fails with status 400 and "failed to load model
 *            '<path>': <reason>". 500 for out of memory or an ORT that does
 *            not serve our API version.
 * execute()  wraps numeric inputs zero-copy (the input data must stay valid
 *            and unmodified for the call) and copies BYTES inputs into ORT
 *            strings. Numeric outputs point into ORT-owned buffers kept
 *            alive by *state; BYTES outputs are copied into `arena`.
 *            400: an input missing, unknown, given twice, of the wrong
 *            dtype or with a data size that does not match its shape; an
 *            output name that is not a model output or is asked for twice;
 *            anything ORT reports as an invalid argument (wrong rank or
 *            dims), with ORT's message. 500: "model execution failed: ...",
 *            and out of memory (including the arena's ceiling).
 *            Each call has its own state and ORT's Run() is thread-safe, so
 *            calls may come from any thread, even overlapping on one
 *            instance (backend.h only promises one caller at a time).
 * release()  frees the output buffers of one execute().
 * unload()   frees the session; all states must have been released.
 */
#ifndef INFERD_BACKEND_ONNXRUNTIME_H
#define INFERD_BACKEND_ONNXRUNTIME_H

#include "backend/backend.h"

extern const struct backend_ops backend_onnxruntime;

/* Initializes what load() would on its first call (above), so that the
 * first model's load time and measured memory are its own. Any thread,
 * any number of times; a failure is reported by every load(). */
void onnxruntime_start(void);

#endif
