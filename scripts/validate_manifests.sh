#!/usr/bin/env bash
# Offline validation of inferd's Kubernetes manifests (docs/kubernetes.md).
#
#   scripts/validate_manifests.sh            deploy/kubernetes/**.yaml, and the
#                                            Helm chart deploy/helm/inferd rendered
#                                            with its default values and with every
#                                            optional object on
#   scripts/validate_manifests.sh FILE...    only these files
#
# The chart is rendered by scripts/helm_render (Helm's template engine: Go's
# text/template + sprig; built here with Debian's Go toolchain into
# $INFERD_THIRD_PARTY/helm_render); the documents are checked by
# scripts/validate_manifests.mjs with the npm packages scripts/deps.sh
# installed into $INFERD_THIRD_PARTY/manifest-validation. Exit 0 when every
# document is valid, 1 otherwise.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
third_party="${INFERD_THIRD_PARTY:-$root/third_party}"
modules="$third_party/manifest-validation/node_modules"
render_dir="$third_party/helm_render"
render="$render_dir/helm_render"

[ -d "$modules/kubernetes-models" ] ||
    { echo "validate_manifests: $modules missing: run scripts/deps.sh" >&2; exit 1; }

if [ "$#" -gt 0 ]; then
    exec node "$here/validate_manifests.mjs" "$modules" "$@"
fi

if [ ! -x "$render" ] || [ "$here/helm_render/main.go" -nt "$render" ]; then
    mkdir -p "$render_dir"
    (cd "$here/helm_render" && GO111MODULE=off GOPATH=/usr/share/gocode \
        GOCACHE="$render_dir/cache" go build -o "$render" .)
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/inferd-manifests.XXXXXX")"
trap 'rm -rf -- "$tmp"' EXIT
chart="$root/deploy/helm/inferd"
"$render" "$chart" inferd >"$tmp/chart-defaults.yaml"
cat >"$tmp/all-on.yaml" <<'VALUES'
autoscaling: {enabled: false}
kserve: {servingRuntime: {enabled: true}}
extraArgs: ["--queue-limit=256"]
VALUES
"$render" "$chart" demo serving -f "$tmp/all-on.yaml" >"$tmp/chart-all-on.yaml"
mapfile -t manifests < <(find "$root/deploy/kubernetes" -name '*.yaml' | sort)
node "$here/validate_manifests.mjs" "$modules" "${manifests[@]}" \
    "$tmp/chart-defaults.yaml" "$tmp/chart-all-on.yaml"
