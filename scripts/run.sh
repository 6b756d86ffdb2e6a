#!/usr/bin/env bash
# `make run`: serve the bundled models and print one ready line with a
# copy-paste curl example once the server answers. Ctrl-C stops it.
#   scripts/run.sh INFERD_BINARY PORT
set -euo pipefail
bin=${1:?usage: scripts/run.sh INFERD_BINARY PORT}
port=${2:-8000}
cd "$(dirname "$0")/.."

"$bin" serve --model-repository models --http-port "$port" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid' INT TERM

for _ in $(seq 1 300); do
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/v2/health/live" 2>/dev/null; then
        cat <<MSG
inferd is ready on http://localhost:$port — try (OUTPUT0 is the sum, OUTPUT1 the difference):
  curl -s -X POST localhost:$port/v2/models/simple/infer -H 'Content-Type: application/json' -d '{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}'
MSG
        break
    fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
done
wait $pid
