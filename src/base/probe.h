/*
 * probe: USDT probes (statically defined tracing points) of the provider
 * "inferd", for eBPF tools (bpftrace, bcc) and SystemTap attaching to a
 * running server (docs/probes.md lists every probe and its
 * arguments; tools/bpf/ has scripts that use them).
 *
 * A probe is one NOP instruction in the code and a note in the binary's
 * .note.stapsdt section; nothing runs while no tool is attached. Its
 * arguments must be values already at hand (a pointer, a length, a time
 * taken anyway): they are computed whether or not anyone listens, so a
 * probe never calls a function to make one.
 *
 *   INFERD_PROBE(name, args...)   0 to 6 arguments; strings are passed as
 *                                 NUL-terminated char pointers
 *
 * Built on <sys/sdt.h> (Debian's systemtap-sdt-dev, installed by
 * scripts/deps.sh). Without it (INFERD_NO_PROBES) the probes compile to
 * nothing.
 */
#ifndef INFERD_BASE_PROBE_H
#define INFERD_BASE_PROBE_H

#ifndef INFERD_NO_PROBES
#include <sys/sdt.h>

#define INFERD_PROBE_0(name) DTRACE_PROBE(inferd, name)
#define INFERD_PROBE_1(name, a) DTRACE_PROBE1(inferd, name, a)
#define INFERD_PROBE_2(name, a, b) DTRACE_PROBE2(inferd, name, a, b)
#define INFERD_PROBE_3(name, a, b, c) DTRACE_PROBE3(inferd, name, a, b, c)
#define INFERD_PROBE_4(name, a, b, c, d) DTRACE_PROBE4(inferd, name, a, b, c, d)
#define INFERD_PROBE_5(name, a, b, c, d, e) DTRACE_PROBE5(inferd, name, a, b, c, d, e)
#define INFERD_PROBE_6(name, a, b, c, d, e, f) DTRACE_PROBE6(inferd, name, a, b, c, d, e, f)
#else
#define INFERD_PROBE_0(name) ((void)0)
#define INFERD_PROBE_1(name, a) ((void)(a))
#define INFERD_PROBE_2(name, a, b) ((void)(a), (void)(b))
#define INFERD_PROBE_3(name, a, b, c) ((void)(a), (void)(b), (void)(c))
#define INFERD_PROBE_4(name, a, b, c, d) ((void)(a), (void)(b), (void)(c), (void)(d))
#define INFERD_PROBE_5(name, a, b, c, d, e) ((void)(a), (void)(b), (void)(c), (void)(d), (void)(e))
#define INFERD_PROBE_6(name, a, b, c, d, e, f)                                                  \
    ((void)(a), (void)(b), (void)(c), (void)(d), (void)(e), (void)(f))
#endif

#endif
