#!/usr/bin/python3
"""Check that no two files of src/ call each other, directly or around a loop.

    /usr/bin/python3 scripts/check_calls.py OBJECT...

The objects are the compiled files of src/ (ctest passes every object of
the inferd_core library: $<TARGET_OBJECTS:inferd_core>). For each object,
`nm` lists the global symbols it defines and the ones it uses; a use of a
symbol another file defines is an edge "this file calls (or reads) that
one". A strongly connected set of two or more files is a call cycle, and
fails the check, naming for each edge one symbol behind it.

Why objects and not the sources: the compiler has already resolved macros,
inline functions and which header declares what, so an edge is a real
link-time dependency. static functions stay inside their file and are not
edges; calls through function pointers (callbacks, method tables) are not
edges either, which is how a lower file lets a higher one act on it
(docs/architecture.md, "Dependencies point down").

Exit status 0 and a one-line summary when no cycle, 1 otherwise.
"""

import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import find_cycles  # noqa: E402  (Tarjan's algorithm, shared)


def source_name(obj):
    """src/api/grpc/admin.c for .../src/api/grpc/admin.c.o; generated
    files (protobuf-c's) keep their base name."""
    path = obj[:-2] if obj.endswith(".o") else obj
    marker = os.sep + "src" + os.sep
    if marker in path:
        return "src/" + path.rsplit(marker, 1)[1].replace(os.sep, "/")
    return os.path.basename(path)


def symbols(obj):
    """(defined, used): the global symbols obj defines and those it needs."""
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind.isupper():  # global: T text, D/B/R data, C common, W weak...
            defined.add(name)
    return defined, used


def main(objects):
    if not objects:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    owner, uses = {}, {}
    for obj in objects:
        name = source_name(obj)
        defined, used = symbols(obj)
        uses[name] = used
        for sym in defined:
            owner[sym] = name
    edges = collections.defaultdict(dict)  # file -> {file: a symbol behind the edge}
    for name, used in uses.items():
        for sym in sorted(used):
            other = owner.get(sym)
            if other and other != name:
                edges[name].setdefault(other, sym)
    cycles = find_cycles(set(uses.keys()), edges)
    for comp in cycles:
        members = set(comp)
        print(f"call cycle among {len(comp)} files:")
        for a in comp:
            for b, sym in sorted(edges[a].items()):
                if b in members:
                    print(f"  {a} -> {b}  ({sym})")
    if cycles:
        print(f"check_calls: FAILED, {len(cycles)} call cycle(s)")
        return 1
    n_edges = sum(len(v) for v in edges.values())
    print(f"check_calls: OK: {len(uses)} files, {n_edges} file-to-file calls, no cycle")
    return 0


if __name__ == "__main__":
    # ctest passes $<TARGET_OBJECTS:...> as one argument, ';'-separated.
    sys.exit(main([o for arg in sys.argv[1:] for o in arg.split(";") if o]))
