#!/usr/bin/env bash
# Install everything inferd's build and tests need. Idempotent: a second run
# checks, prints three lines and does nothing.
#
#   scripts/deps.sh            1, 2 and 4 below (what `make` runs)
#   scripts/deps.sh --bench    only 3 below (what `make bench` runs first)
#
# 1. Debian packages: installed with apt-get only when missing (apt-get update
#    runs only if something has to be installed). Uses sudo when not root.
#    Debian's nodejs and npm are among them only when no node / npm is on PATH
#    (a machine may have a newer Node.js from elsewhere, with its own npm).
# 2. ONNX Runtime into $INFERD_THIRD_PARTY/onnxruntime/{include,lib}
#    (default: <repo>/third_party), pinned and sha256-verified:
#      lib:     libonnxruntime.so.1 (1.30.0) from the npm package
#               onnxruntime-node@1.30.0, fetched with `npm pack` (never
#               `npm install`: its install script reaches other hosts);
#      headers: Debian trixie's libonnxruntime-dev 1.21.0+dfsg-1 (C API
#               version 21), fetched with `apt-get download` against a private
#               APT state, from the Debian mirror this machine already uses.
#    Everything is staged in a temp dir and moved into place only after
#    verification; the stamp file .stamp records what was installed.
# 3. make bench's Node.js server (bench/node/server.js, experiment 9): Debian's
#    nodejs and npm when no node/npm is on PATH, then the npm package
#    onnxruntime-node into $INFERD_THIRD_PARTY/onnxruntime-node with
#    `npm ci --ignore-scripts` from bench/node/package-lock.json (version and
#    every transitive package pinned with its integrity hash). Its install
#    script stays off (it reaches other hosts); the prebuilt Linux x64
#    binding and the libonnxruntime.so.1 it ships are used as shipped: that
#    library must be the one inferd links (same sha256 as in 2), and the
#    binding must load. Skipped in a second when already installed. A failure
#    here is a warning, never an error: it is written to
#    $INFERD_THIRD_PARTY/.onnxruntime-node.failed and make bench reports the
#    experiment as skipped with that reason.
# 4. The Node.js clients of the integration tests (tests/node: the official
#    `openai` SDK, onnxruntime-node for an independent generation loop, and
#    Connect's gRPC-Web transport with protoc-gen-es for gRPC-Web)
#    into $INFERD_THIRD_PARTY/node-tests with `npm ci --ignore-scripts` from
#    tests/node/package-lock.json (every package pinned with its integrity
#    hash; no install script ever runs). The binding's libonnxruntime.so.1
#    must be inferd's (same sha256 as in 2), the binding must load and the SDK
#    must import. Skipped in a second when already installed (a stamp holds
#    the lock file's sha256). Unlike 3, a failure here is an error.
# 5. The manifest validation of make test (scripts/validate_manifests.sh,
#    docs/kubernetes.md): the npm packages kubernetes-models (Kubernetes
#    v1.36 OpenAPI schemas) and @kubernetes-models/prometheus-operator, with
#    ajv and yaml, into $INFERD_THIRD_PARTY/manifest-validation with
#    `npm ci --ignore-scripts` from scripts/manifests/package-lock.json; the
#    Helm chart renderer is built from source with Debian's Go and sprig
#    (1 above). Skipped in a second when installed (a stamp holds the lock
#    file's sha256). A failure is an error.
set -euo pipefail

# --- Debian packages, by purpose ---------------------------------------------
PACKAGES=(
    # compilers and build tools
    build-essential cmake pkg-config git
    # clang + compiler-rt for the sanitizer and libFuzzer builds, llvm tools
    # (llvm-symbolizer, llvm-profdata, llvm-cov)
    clang libclang-rt-14-dev llvm
    # C libraries: unit-test framework, JSON (tests and tools)
    libcmocka-dev libcjson-dev
    # fetching: curl for tests and downloads, CA certificates for TLS,
    # debian-archive-keyring to verify the trixie index used for the headers
    curl ca-certificates debian-archive-keyring
    # dpkg-dev: Debian packaging tools (dpkg-deb itself ships with dpkg)
    dpkg-dev
    # integration tests and model generation (models/build/*.py)
    python3 python3-pytest python3-pytest-xdist python3-requests python3-numpy python3-onnx
    python3-sklearn
    # docs/quickstart.md and its test: exporting a model from PyTorch
    python3-torch
    # make bench: the HTTP floor (nginx returning a fixed body); instructions
    # per request counted with callgrind (experiment 16)
    nginx-light valgrind
    # HTTP/2, gRPC messages and TLS
    libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev openssl
    # HTTP/3 (--http3): QUIC (ngtcp2 with its GnuTLS crypto binding, GnuTLS),
    # HTTP/3 framing and QPACK (nghttp3); TCP TLS stays on OpenSSL
    libngtcp2-dev libngtcp2-crypto-gnutls-dev libnghttp3-dev libgnutls28-dev
    # the --config file (YAML)
    libyaml-dev
    # USDT probes (src/base/probe.h) and the tools that attach to them
    # (tools/bpf/, tests/integration/test_probes.py)
    systemtap-sdt-dev bpftrace
    # preprocessing (src/preprocess/): JPEG and PNG decoding, resampling,
    # FFT for log-mel features
    libjpeg62-turbo-dev libpng-dev libsamplerate0-dev libfftw3-dev
    # compressed request bodies and gRPC messages (src/base/inflate.c)
    zlib1g-dev
    # preprocessing references and models: Pillow (tests and make bench),
    # espeak-ng (the spoken-digit model's speech), word lists in four
    # languages (the language identifier)
    python3-pil espeak-ng wamerican wngerman wfrench wspanish
    # gRPC tests: protoc --python_out, Debian's grpcio as an independent
    # client; h2load/nghttp for HTTP/2 tests and make bench; HPACK to read
    # the response headers of the raw HTTP/2 client (test_head_refusal.py)
    protobuf-compiler python3-protobuf python3-grpcio nghttp2-client python3-hpack
    # Triton's client library, for its examples (scripts/triton_examples.py,
    # given the library's sources): gRPC stubs, its HTTP clients
    python3-grpc-tools python3-geventhttpclient python3-rapidjson python3-aiohttp
    # observability tests: promtool and a real Prometheus server; headless
    # Chromium for the dashboard
    prometheus chromium
    # cluster tests: a real etcd (v3 API through its HTTP/JSON gateway) and
    # etcdctl as the independent client
    etcd-server etcd-client
    # manifest validation: Go and sprig for the Helm chart renderer
    # (scripts/helm_render), systemd-analyze for the unit file's test
    golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev systemd
)
# Node.js (the test clients of 4) and npm (to fetch the ONNX Runtime library
# and those clients) only if none is on PATH already.
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

# 3 (--bench): Debian's Node.js and npm, only if none is on PATH already (a
# machine may have a newer Node.js from elsewhere, with its own npm).
BENCH_PACKAGES=()
command -v node >/dev/null 2>&1 || BENCH_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || BENCH_PACKAGES+=(npm)

# --- ONNX Runtime pins ---------------------------------------------------------
ORT_VERSION=1.30.0
ORT_NPM_SPEC="onnxruntime-node@${ORT_VERSION}"
ORT_NPM_SHA256=6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75
ORT_NPM_MEMBER=package/bin/napi-v6/linux/x64/libonnxruntime.so.1
ORT_LIB_SHA256=ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23
ORT_HDR_PKG=libonnxruntime-dev
ORT_HDR_VERSION=1.21.0+dfsg-1
ORT_HDR_SUITE=trixie
ORT_HDR_SHA256=14f7d959d5deacbcf1504830d4189f91fc67382b399ed9ae9d3aa9c4050ced08
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# The Node.js binding's files (inside the package, as shipped for Linux x64).
NODE_ORT_BIN=node_modules/onnxruntime-node/bin/napi-v6/linux/x64

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
third_party="${INFERD_THIRD_PARTY:-$root/third_party}"
ort_dir="$third_party/onnxruntime"
node_ort_dir="$third_party/onnxruntime-node"
node_ort_failed="$third_party/.onnxruntime-node.failed"
node_ort_pins="$root/bench/node"  # package.json + package-lock.json
node_tests_dir="$third_party/node-tests"
node_tests_pins="$root/tests/node" # package.json + package-lock.json
manifests_dir="$third_party/manifest-validation"
manifests_pins="$root/scripts/manifests" # package.json + package-lock.json

SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo)

log() { printf 'deps: %s\n' "$*"; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

tmp_dirs=()
cleanup() { local d; for d in "${tmp_dirs[@]}"; do rm -rf -- "$d"; done; }
trap cleanup EXIT

# --- 1. Debian packages --------------------------------------------------------
install_packages() {
    local missing=() p status
    for p in "${PACKAGES[@]}"; do
        status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
        [ "$status" = "install ok installed" ] || missing+=("$p")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        log "all ${#PACKAGES[@]} Debian packages present"
        return
    fi
    log "installing ${#missing[@]} packages: ${missing[*]}"
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# --- 2. ONNX Runtime -------------------------------------------------------------
stamp_text() {
    printf 'onnxruntime %s\n' "$ORT_VERSION"
    printf 'npm %s sha256 %s\n' "$ORT_NPM_SPEC" "$ORT_NPM_SHA256"
    printf 'lib libonnxruntime.so.1 sha256 %s\n' "$ORT_LIB_SHA256"
    printf 'deb %s=%s (%s) sha256 %s\n' "$ORT_HDR_PKG" "$ORT_HDR_VERSION" \
        "$ORT_HDR_SUITE" "$ORT_HDR_SHA256"
}

ort_is_current() {
    [ -f "$ort_dir/.stamp" ] && [ -f "$ort_dir/lib/libonnxruntime.so.1" ] &&
        [ -f "$ort_dir/include/onnxruntime_c_api.h" ] &&
        [ "$(cat "$ort_dir/.stamp")" = "$(stamp_text)" ]
}

# verify_sha256 FILE EXPECTED WHAT
verify_sha256() {
    local actual
    actual="$(sha256sum "$1" | cut -d' ' -f1)"
    [ "$actual" = "$2" ] ||
        die "sha256 mismatch for $3: expected $2, got $actual"
}

# The Debian mirror URI this machine already uses (never hard-coded): the first
# URIs: of a deb822 paragraph for Debian's main suites (not -security) in
# /etc/apt/sources.list.d/*.sources, else the first `deb` line of
# /etc/apt/sources.list.
debian_mirror() {
    local f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri="$(awk '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && enabled != "no" && uri != "" &&
                    suites != "" && suites !~ /-security/ &&
                    uri ~ /^https?:\/\// && uri !~ /security/) { print uri; found = 1; exit }
                types = suites = uri = enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types") types = val
                else if (key == "suites") suites = val
                else if (key == "enabled") enabled = tolower(val)
                else if (key == "uris") { split(val, u, /[ \t]+/); uri = u[1] }
            }
            END { if (!found) flush() }' "$f")"
        if [ -n "$uri" ]; then printf '%s\n' "$uri"; return; fi
    done
    if [ -f /etc/apt/sources.list ]; then
        uri="$(awk '$1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) !~ /-security/) { print $i; exit }
            }' /etc/apt/sources.list)"
        if [ -n "$uri" ]; then printf '%s\n' "$uri"; return; fi
    fi
    die "no Debian mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"
}

fetch_ort_lib() { # $1: work dir, $2: stage dir
    local work="$1/npm" stage="$2" tgz
    mkdir -p "$work/x"
    (cd "$work" && npm pack "$ORT_NPM_SPEC" --ignore-scripts --silent >/dev/null) ||
        die "npm pack $ORT_NPM_SPEC failed"
    tgz="$work/onnxruntime-node-${ORT_VERSION}.tgz"
    [ -f "$tgz" ] || die "npm pack did not produce $(basename "$tgz")"
    verify_sha256 "$tgz" "$ORT_NPM_SHA256" "$ORT_NPM_SPEC tarball"
    tar -xzf "$tgz" -C "$work/x" "$ORT_NPM_MEMBER"
    verify_sha256 "$work/x/$ORT_NPM_MEMBER" "$ORT_LIB_SHA256" \
        "libonnxruntime.so.1 (from $ORT_NPM_SPEC)"
    mkdir -p "$stage/lib"
    install -m 0644 "$work/x/$ORT_NPM_MEMBER" "$stage/lib/libonnxruntime.so.1"
}

fetch_ort_headers() { # $1: work dir, $2: stage dir
    local work="$1/apt" stage="$2" mirror deb
    mirror="$(debian_mirror)"
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/dl" "$work/x"
    printf 'deb [signed-by=%s] %s %s main\n' "$DEBIAN_KEYRING" "$mirror" \
        "$ORT_HDR_SUITE" >"$work/sources.list"
    # As root, apt drops privileges to _apt for downloads: let it reach and
    # write the private state so it does not fall back to an unsandboxed
    # download (and warn about it).
    if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then
        chmod 0755 "$1" "$work"
        chown -R _apt:root "$work/lists/partial" "$work/cache/archives/partial" "$work/dl"
    fi
    local apt_opts=(
        -o "Dir::Etc::SourceList=$work/sources.list"
        -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$work/lists"
        -o "Dir::Cache=$work/cache"
        -o Acquire::Languages=none
    )
    log "fetching $ORT_HDR_PKG=$ORT_HDR_VERSION from $mirror $ORT_HDR_SUITE"
    apt-get "${apt_opts[@]}" -qq update ||
        die "apt-get update of the private $ORT_HDR_SUITE index failed"
    (cd "$work/dl" && apt-get "${apt_opts[@]}" -qq download \
        "$ORT_HDR_PKG=$ORT_HDR_VERSION") ||
        die "apt-get download $ORT_HDR_PKG=$ORT_HDR_VERSION failed"
    deb="$(find "$work/dl" -maxdepth 1 -name "${ORT_HDR_PKG}_*.deb" | head -n1)"
    [ -n "$deb" ] || die "apt-get download produced no ${ORT_HDR_PKG} .deb"
    verify_sha256 "$deb" "$ORT_HDR_SHA256" "$(basename "$deb")"
    dpkg-deb -x "$deb" "$work/x"
    [ -f "$work/x/usr/include/onnxruntime/onnxruntime_c_api.h" ] ||
        die "$(basename "$deb") has no usr/include/onnxruntime/onnxruntime_c_api.h"
    mkdir -p "$stage/include"
    cp -R "$work/x/usr/include/onnxruntime/." "$stage/include/"
}

install_ort() {
    if ort_is_current; then
        log "onnxruntime $ORT_VERSION ready (cached)"
        return
    fi
    log "fetching onnxruntime $ORT_VERSION into $ort_dir"
    mkdir -p "$third_party"
    local work stage old
    work="$(mktemp -d "${TMPDIR:-/tmp}/inferd-deps.XXXXXX")"
    tmp_dirs+=("$work")
    # Stage next to the target so the final rename stays on one filesystem.
    stage="$(mktemp -d "$third_party/.onnxruntime.new.XXXXXX")"
    tmp_dirs+=("$stage")
    fetch_ort_lib "$work" "$stage"
    fetch_ort_headers "$work" "$stage"
    chmod 0755 "$stage"
    stamp_text >"$stage/.stamp"
    # Swap: only a fully verified tree (stamp included) ever lands at $ort_dir.
    if [ -e "$ort_dir" ]; then
        old="$third_party/.onnxruntime.old.$$"
        tmp_dirs+=("$old")
        mv -- "$ort_dir" "$old"
    fi
    mv -- "$stage" "$ort_dir"
    log "onnxruntime $ORT_VERSION ready ($ort_dir)"
}

# --- 3. make bench: onnxruntime-node for bench/node/server.js --------------------
node_ort_stamp_text() {
    printf 'onnxruntime-node %s lock sha256 %s\n' "$ORT_VERSION" \
        "$(sha256sum "$node_ort_pins/package-lock.json" | cut -d' ' -f1)"
    printf 'lib libonnxruntime.so.1 sha256 %s\n' "$ORT_LIB_SHA256"
}

node_ort_is_current() {
    [ -f "$node_ort_dir/.stamp" ] && [ -f "$node_ort_dir/$NODE_ORT_BIN/onnxruntime_binding.node" ] &&
        [ "$(cat "$node_ort_dir/.stamp")" = "$(node_ort_stamp_text)" ]
}

# node_ort_fail REASON: warn, record the reason for make bench, return 1.
node_ort_fail() {
    printf 'deps: warning: onnxruntime-node not installed: %s\n' "$1" >&2
    mkdir -p "$third_party"
    printf '%s\n' "$1" >"$node_ort_failed"
    return 1
}

install_bench_packages() {
    [ "${#BENCH_PACKAGES[@]}" -gt 0 ] || return 0
    log "installing ${#BENCH_PACKAGES[@]} packages: ${BENCH_PACKAGES[*]}"
    { "${SUDO[@]}" apt-get update -qq &&
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${BENCH_PACKAGES[@]}"; } ||
        node_ort_fail "apt-get install ${BENCH_PACKAGES[*]} failed"
}

install_node_ort() {
    if node_ort_is_current; then
        rm -f "$node_ort_failed"
        log "onnxruntime-node $ORT_VERSION ready (cached)"
        return 0
    fi
    command -v node >/dev/null 2>&1 || { node_ort_fail "no node on PATH"; return 1; }
    command -v npm >/dev/null 2>&1 || { node_ort_fail "no npm on PATH"; return 1; }
    log "installing onnxruntime-node $ORT_VERSION into $node_ort_dir (npm ci --ignore-scripts)"
    mkdir -p "$third_party"
    local stage old lib_sha why
    stage="$(mktemp -d "$third_party/.onnxruntime-node.new.XXXXXX")"
    tmp_dirs+=("$stage")
    cp "$node_ort_pins/package.json" "$node_ort_pins/package-lock.json" "$stage/"
    (cd "$stage" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
        >"$stage/npm.log" 2>&1) || {
        # npm's first error lines (code, errno, message), without the stack
        why="$(grep -v '^npm error  *at ' "$stage/npm.log" | head -n 4 |
            sed 's/^npm error //' | tr '\n' ' ')"
        node_ort_fail "npm ci onnxruntime-node@$ORT_VERSION failed (npm registry unreachable?): $why"
        return 1
    }
    [ -f "$stage/$NODE_ORT_BIN/onnxruntime_binding.node" ] || {
        node_ort_fail "the package has no $NODE_ORT_BIN/onnxruntime_binding.node"
        return 1
    }
    lib_sha="$(sha256sum "$stage/$NODE_ORT_BIN/libonnxruntime.so.1" | cut -d' ' -f1)"
    [ "$lib_sha" = "$ORT_LIB_SHA256" ] || {
        node_ort_fail "its libonnxruntime.so.1 is not inferd's (sha256 $lib_sha)"
        return 1
    }
    (cd "$stage" && node -e '
        const ort = require("onnxruntime-node");
        if (ort.env.versions.node !== process.argv[1]) {
            console.error("loaded onnxruntime-node " + ort.env.versions.node);
            process.exit(1);
        }' "$ORT_VERSION" >"$stage/load.log" 2>&1) || {
        why="$(tail -n 3 "$stage/load.log" | tr '\n' ' ')"
        node_ort_fail "the prebuilt binding does not load in node $(node --version): $why"
        return 1
    }
    rm -f "$stage/npm.log" "$stage/load.log"
    node_ort_stamp_text >"$stage/.stamp"
    chmod 0755 "$stage"
    if [ -e "$node_ort_dir" ]; then
        old="$third_party/.onnxruntime-node.old.$$"
        tmp_dirs+=("$old")
        mv -- "$node_ort_dir" "$old"
    fi
    mv -- "$stage" "$node_ort_dir"
    rm -f "$node_ort_failed"
    log "onnxruntime-node $ORT_VERSION ready ($node_ort_dir, node $(node --version))"
}

# --- 4. the Node.js test clients (tests/node) -------------------------------------
node_tests_stamp_text() {
    printf 'node-tests lock sha256 %s\n' \
        "$(sha256sum "$node_tests_pins/package-lock.json" | cut -d' ' -f1)"
    printf 'lib libonnxruntime.so.1 sha256 %s\n' "$ORT_LIB_SHA256"
}

node_tests_is_current() {
    [ -f "$node_tests_dir/.stamp" ] && [ -d "$node_tests_dir/node_modules/openai" ] &&
        [ -x "$node_tests_dir/node_modules/.bin/protoc-gen-es" ] &&
        [ -f "$node_tests_dir/$NODE_ORT_BIN/onnxruntime_binding.node" ] &&
        [ "$(cat "$node_tests_dir/.stamp")" = "$(node_tests_stamp_text)" ]
}

install_node_tests() {
    if node_tests_is_current; then
        log "node test clients ready (cached)"
        return
    fi
    command -v node >/dev/null 2>&1 || die "no node on PATH (Debian package nodejs)"
    command -v npm >/dev/null 2>&1 || die "no npm on PATH (Debian package npm)"
    log "installing the node test clients into $node_tests_dir (npm ci --ignore-scripts)"
    mkdir -p "$third_party"
    local stage old lib_sha why
    stage="$(mktemp -d "$third_party/.node-tests.new.XXXXXX")"
    tmp_dirs+=("$stage")
    cp "$node_tests_pins/package.json" "$node_tests_pins/package-lock.json" "$stage/"
    (cd "$stage" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
        >"$stage/npm.log" 2>&1) || {
        why="$(grep -v '^npm error  *at ' "$stage/npm.log" | head -n 4 |
            sed 's/^npm error //' | tr '\n' ' ')"
        die "npm ci in tests/node failed (npm registry unreachable?): $why"
    }
    [ -f "$stage/$NODE_ORT_BIN/onnxruntime_binding.node" ] ||
        die "onnxruntime-node has no $NODE_ORT_BIN/onnxruntime_binding.node"
    lib_sha="$(sha256sum "$stage/$NODE_ORT_BIN/libonnxruntime.so.1" | cut -d' ' -f1)"
    [ "$lib_sha" = "$ORT_LIB_SHA256" ] ||
        die "onnxruntime-node's libonnxruntime.so.1 is not inferd's (sha256 $lib_sha)"
    (cd "$stage" && node --input-type=module -e '
        import OpenAI from "openai";
        import ort from "onnxruntime-node";
        import { createClient } from "@connectrpc/connect";
        import { createGrpcWebTransport } from "@connectrpc/connect-node";
        import { create } from "@bufbuild/protobuf";
        if (ort.env.versions.node !== process.argv[1]) {
            console.error("loaded onnxruntime-node " + ort.env.versions.node);
            process.exit(1);
        }
        new OpenAI({ apiKey: "x", baseURL: "http://127.0.0.1:1/v1" });' "$ORT_VERSION" \
        >"$stage/load.log" 2>&1) || {
        why="$(tail -n 3 "$stage/load.log" | tr '\n' ' ')"
        die "the node test clients do not load in node $(node --version): $why"
    }
    rm -f "$stage/npm.log" "$stage/load.log"
    node_tests_stamp_text >"$stage/.stamp"
    chmod 0755 "$stage"
    if [ -e "$node_tests_dir" ]; then
        old="$third_party/.node-tests.old.$$"
        tmp_dirs+=("$old")
        mv -- "$node_tests_dir" "$old"
    fi
    mv -- "$stage" "$node_tests_dir"
    log "node test clients ready ($node_tests_dir, node $(node --version))"
}

# --- 5. the manifest validation (scripts/manifests) --------------------------------
install_manifest_validation() {
    local want
    want="manifests lock sha256 $(sha256sum "$manifests_pins/package-lock.json" | cut -d' ' -f1)"
    if [ -f "$manifests_dir/.stamp" ] && [ "$(cat "$manifests_dir/.stamp")" = "$want" ] &&
        [ -d "$manifests_dir/node_modules/kubernetes-models" ]; then
        log "manifest validation ready (cached)"
        return
    fi
    log "installing the manifest validation into $manifests_dir (npm ci --ignore-scripts)"
    mkdir -p "$third_party"
    local stage old why
    stage="$(mktemp -d "$third_party/.manifest-validation.new.XXXXXX")"
    tmp_dirs+=("$stage")
    cp "$manifests_pins/package.json" "$manifests_pins/package-lock.json" "$stage/"
    (cd "$stage" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
        >"$stage/npm.log" 2>&1) || {
        why="$(grep -v '^npm error  *at ' "$stage/npm.log" | head -n 4 |
            sed 's/^npm error //' | tr '\n' ' ')"
        die "npm ci in scripts/manifests failed (npm registry unreachable?): $why"
    }
    rm -f "$stage/npm.log"
    printf '%s\n' "$want" >"$stage/.stamp"
    chmod 0755 "$stage"
    if [ -e "$manifests_dir" ]; then
        old="$third_party/.manifest-validation.old.$$"
        tmp_dirs+=("$old")
        mv -- "$manifests_dir" "$old"
    fi
    mv -- "$stage" "$manifests_dir"
    log "manifest validation ready ($manifests_dir)"
}

case "${1:-}" in
"")
    install_packages
    install_ort
    install_node_tests
    install_manifest_validation
    ;;
--bench)
    # Never fails: make bench reports the experiment as skipped instead.
    install_bench_packages && install_node_ort || true
    ;;
*)
    die "usage: scripts/deps.sh [--bench]"
    ;;
esac
