#!/usr/bin/python3
"""Check the layering of src/: includes point down, and no include cycles.

Each folder of src/ is one layer (docs/architecture.md, "Layers"). A file may
include headers of its own folder or of a lower one; never of a higher one.
A folder's subfolders belong to its layer; where SUBLAYERS orders them, a
file includes only from a lower sub-layer or its own entry (the front ends
of api/ do not include one another).

    /usr/bin/python3 scripts/check_layers.py [SRC_DIR]

What is checked, over every `#include "..."` in src/ (system and third-party
headers use <...> and are not part of the graph):

1. Upward includes: the including file's layer is below the included
   header's layer. Reported as `file:line: upward include: a -> b`. A
   layer listed in ONLY_FROM may include only the layers listed there.
2. Include cycles between units. A unit is a header together with the .c
   files that implement it: `x.c` implements `x.h` of its folder, and a .c
   file without a header of its own implements the own-folder header it
   includes first (registry.c implements model.h). Using a header depends
   on the unit's .c files too, so `a.c -> b.h` and `b.c -> a.h` is a cycle
   even though no header includes itself. Cycles inside one folder count.
   Each cycle is reported with the include (file:line) behind every edge.

Exit status 0 and a one-line summary when clean, 1 otherwise.
"""

import os
import re
import sys

# The layer order, bottom to top. A file in LAYERS[i] may include headers
# from LAYERS[0..i]. bench is the load-generator client: it sits just below
# cli, which runs it, and ONLY_FROM limits what it uses. cluster is
# registration, discovery and the gateway's upstream pools.
# docs/architecture.md lists the same order (a test compares them).
LAYERS = [
    "base",
    "core",
    "net",
    "http",
    "backend",
    "sched",
    "model",
    "obs",
    "serve",
    "policy",
    "preprocess",
    "gen",
    "cluster",
    "api",
    "bench",
    "cli",
]

# Layers that may include only some of the layers below them. bench (the
# load generator) is a client: it must not pull in the server's layers,
# except the two its generation floor runs in process (bench/gen_floor.c):
# the ONNX Runtime backend and the BPE tokenizer (preprocess/tokenizer.h).
ONLY_FROM = {
    "bench": {"base", "core", "net", "http", "backend", "preprocess", "bench"},
}

# Layers whose folders are sub-layers, bottom to top. Each entry of a level
# is a folder ("api/rest") or a unit ("api/http_api": the header and the .c
# implementing it); a file belongs to the first entry naming its unit, else
# to the one naming its folder. A file may include from a lower level, and
# from its own entry; never from another entry of its own level (the front
# ends do not know one another) or from a higher one. api: what the front
# ends share (api/*.c) < the front ends < the HTTP entry, which hands each
# request to its front end.
SUBLAYERS = {
    "api": [
        {"api"},
        {"api/rest", "api/grpc", "api/openai", "api/pages"},
        {"api/http_api"},
    ],
}

# Headers generated into the build directory, and the layer they belong to.
# *.pb-c.h are protoc-c's output for proto/*.proto (the gRPC messages):
# the server's front ends (api) and the gateway's client (cluster) use them.
GENERATED = [
    (re.compile(r"^[A-Za-z0-9_]+\.pb-c\.h$"), "cluster"),
    (re.compile(r"^dashboard_html\.h$"), "api"),  # src/api/pages/dashboard.html
    (re.compile(r"^playground_html\.h$"), "api"),  # src/api/pages/playground.html
]

# Known cycles that are being removed elsewhere, as sets of units
# ("folder/stem"). A cycle is tolerated only if all its units are in one
# entry. Keep this list empty; delete an entry as soon as its fix lands.
ALLOWED_CYCLES = []

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_rank(layer):
    return LAYERS.index(layer) if layer in LAYERS else None


def scan(src):
    """Returns {relpath: [(line, target_relpath_or_None, spelled, layer)]}.
    relpath is relative to src/ and may have subfolders (api/rest/rest.c);
    a file's layer is its first folder."""
    files = {}
    for folder in sorted(os.listdir(src)):
        d = os.path.join(src, folder)
        if not os.path.isdir(d):
            continue
        for root, _, names in sorted(os.walk(d)):
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    rel = os.path.relpath(os.path.join(root, name), src)
                    files[rel.replace(os.sep, "/")] = []
    for rel in files:
        own_dir = rel.rsplit("/", 1)[0]
        with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as f:
            for lineno, text in enumerate(f, 1):
                m = INCLUDE_RE.match(text)
                if not m:
                    continue
                spelled = m.group(1)
                target = None
                layer = None
                if "/" in spelled and spelled in files:
                    target = spelled
                elif "/" not in spelled and f"{own_dir}/{spelled}" in files:
                    target = f"{own_dir}/{spelled}"
                if target:
                    layer = target.split("/")[0]
                else:
                    for pat, gen_layer in GENERATED:
                        if pat.match(os.path.basename(spelled)):
                            layer = gen_layer
                            break
                files[rel].append((lineno, target, spelled, layer))
    return files


def sublevel(rel):
    """(level, group) of a file inside a layer with SUBLAYERS, or None."""
    levels = SUBLAYERS.get(rel.split("/")[0])
    if not levels:
        return None
    stem = rel[:-2]
    own_dir = rel.rsplit("/", 1)[0]
    for i, groups in enumerate(levels):
        if stem in groups:
            return i, stem
    for i, groups in enumerate(levels):
        if own_dir in groups:
            return i, own_dir
    return None


def units_of(files):
    """Maps every file to its unit name ("folder/stem")."""
    unit = {}
    for rel in files:
        if rel.endswith(".h"):
            unit[rel] = rel[:-2]
    for rel, incs in files.items():
        if not rel.endswith(".c"):
            continue
        own = rel[:-2] + ".h"
        if own in files:
            unit[rel] = own[:-2]
            continue
        unit[rel] = rel[:-2]
        own_dir = rel.rsplit("/", 1)[0]
        for _, target, _, _ in incs:
            if target is None:
                continue
            if target.rsplit("/", 1)[0] == own_dir:
                unit[rel] = target[:-2]
            break
    return unit


def find_cycles(nodes, edges):
    """Tarjan's strongly connected components; returns those with a cycle."""
    index, low, on_stack, stack, sccs = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # iterative DFS, so deep graphs do not hit Python's recursion limit
        work = [(v, iter(sorted(edges.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in edges.get(node, ()):
                    sccs.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sccs


def cycle_path(comp, edges):
    """One cycle through the first unit of a strongly connected component."""
    members = set(comp)
    start = comp[0]
    # breadth-first search from start back to start, inside the component
    prev = {}
    frontier = [start]
    seen = set()
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    path.reverse()
                    return path + [start]
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp + [start]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "src")
    files = scan(src)
    problems = []
    n_includes = 0

    for rel in sorted(files):
        folder = rel.split("/")[0]
        if layer_rank(folder) is None:
            problems.append(f"src/{rel}: folder '{folder}' is not in LAYERS "
                            "(scripts/check_layers.py): add it in its place")
            continue
        if folder in SUBLAYERS and sublevel(rel) is None:
            problems.append(f"src/{rel}: in none of SUBLAYERS['{folder}'] "
                            "(scripts/check_layers.py): add its folder in its place")
        for lineno, target, spelled, layer in files[rel]:
            n_includes += 1
            if layer is None:
                problems.append(f"src/{rel}:{lineno}: include \"{spelled}\" "
                                "is neither in src/ nor a known generated header")
                continue
            if layer_rank(layer) is None:
                continue  # reported once for the folder itself
            if layer_rank(layer) > layer_rank(folder):
                problems.append(f"src/{rel}:{lineno}: upward include: "
                                f"{folder} -> {layer} (\"{spelled}\")")
            elif folder in ONLY_FROM and layer not in ONLY_FROM[folder]:
                problems.append(f"src/{rel}:{lineno}: {folder} may include only "
                                f"{', '.join(sorted(ONLY_FROM[folder]))}: "
                                f"{folder} -> {layer} (\"{spelled}\")")
            elif layer == folder and target and sublevel(rel) and sublevel(target):
                (li, gi), (lt, gt) = sublevel(rel), sublevel(target)
                if lt > li or (lt == li and gi != gt):
                    kind = "upward" if lt > li else "sideways"
                    problems.append(f"src/{rel}:{lineno}: {kind} include inside {folder}: "
                                    f"{gi} -> {gt} (\"{spelled}\")")

    unit = units_of(files)
    edges = {}  # unit -> {unit: (file, line)}
    for rel, incs in files.items():
        for lineno, target, _, _ in incs:
            if target is None:
                continue
            a, b = unit[rel], unit[target]
            if a != b:
                edges.setdefault(a, {}).setdefault(b, (rel, lineno))
    n_cycles_allowed = 0
    for comp in find_cycles(set(unit.values()), edges):
        if any(set(comp) <= allowed for allowed in ALLOWED_CYCLES):
            n_cycles_allowed += 1
            continue
        path = cycle_path(comp, edges)
        hops = []
        for a, b in zip(path, path[1:]):
            f, line = edges[a][b]
            hops.append(f"  {a} -> {b}  (src/{f}:{line})")
        problems.append(f"include cycle among {len(comp)} units ("
                        + ", ".join(comp) + "):\n" + "\n".join(hops))

    if problems:
        for p in problems:
            print(p)
        print(f"check_layers: FAILED, {len(problems)} problem(s)")
        return 1
    allowed = (f", {n_cycles_allowed} allow-listed cycle(s)"
               if n_cycles_allowed else "")
    print(f"check_layers: OK: {len(files)} files, {n_includes} includes, "
          f"{len(set(unit.values()))} units; no upward include, no cycle"
          f"{allowed} (order: {' < '.join(LAYERS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
