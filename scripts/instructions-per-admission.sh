#!/usr/bin/env bash
# User-space instructions per warm admission, counted by valgrind (callgrind), for one or more
# `noe` binaries and the floor (`noe-bench floor`). Unlike requests per second, the count does
# not move with the load of a shared machine, so two builds can be compared at any time. Each
# server runs alone under callgrind on loopback, is sent the minimal pod review over TLS by wrk
# (4 keep-alive connections) and is counted from after its warm-up to the end of the run; the
# image's platforms come from a --platform-overrides entry (no registry involved).
#
# With CACHE_SIM=1, callgrind also simulates the first-level caches (this machine's sizes) and
# the misses per request are printed beside the instructions: where two servers run about as
# many instructions, these say how much more code and data one of them walks per request.
#
# With EVERY_POD_NEW=1, each request is a pod no earlier request had (a label of its own, set by
# wrk's Lua `request` function), so nothing can be answered from memory: the first-sight path.
# With POD=deployment, the pod is a Deployment's as the apiserver sends it (field-manager
# entries, env, probes, status; `noe-bench review --deployment-pod`) instead of the minimal one.
# FLOOR=read counts the floor that reads the body and parses nothing (`noe-bench floor --work`).
#
# usage: [CACHE_SIM=1] [EVERY_POD_NEW=1] [POD=minimal|deployment] [FLOOR=parse|read]
#        scripts/instructions-per-admission.sh NOE_BENCH_BIN NOE_BIN [NOE_BIN...]
# needs: valgrind (callgrind_control), wrk, openssl, curl
set -euo pipefail

bench=${1:?usage: $0 NOE_BENCH_BIN NOE_BIN [NOE_BIN...]}
shift
seconds=${SECONDS_PER_SERVER:-15}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$dir/tls.key" -out "$dir/tls.crt" -days 1 -subj /CN=localhost \
  -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
image=127.0.0.1:5000/fixtures/oci-index:v1
printf -- '- images: ["%s"]\n  platforms: [linux/amd64, linux/arm64]\n' "$image" >"$dir/overrides.yaml"
review=()
[[ ${POD:-minimal} == deployment ]] && review=(--deployment-pod)
"$bench" review "${review[@]}" --image "$image" >"$dir/review.json"
# The warm-up's script and the counted one's: with EVERY_POD_NEW=1 no label repeats across them.
for run in warm counted; do
  if [[ ${EVERY_POD_NEW:-0} == 1 ]]; then
    label="\"$run\" .. id .. \"-\" .. n"
  else
    label='"0-0"'
  fi
  python3 - "$dir/review.json" "$label" >"$dir/$run.lua" <<'LUA'
import sys
body = open(sys.argv[1]).read().strip()
parts = ", ".join("[==[%s]==]" % part for part in body.split("@POD@"))
print('wrk.method = "POST"')
print('wrk.headers["Content-Type"] = "application/json"')
print("local threads = 0")
print('function setup(thread) threads = threads + 1; thread:set("id", threads) end')
print("local parts = { %s }" % parts)
print("local n = 0")
print("request = function()")
print("  n = n + 1")
print("  return wrk.format(nil, nil, nil, table.concat(parts, %s))" % sys.argv[2])
print("end")
LUA
done

# Runs "$@" under callgrind, serving on 127.0.0.1:$port; prints instructions per request.
count() {
  local name=$1 port=$2 ready=$3
  shift 3
  local sim=()
  [[ ${CACHE_SIM:-0} == 1 ]] && sim=(--cache-sim=yes)
  valgrind --tool=callgrind "${sim[@]}" --callgrind-out-file="$dir/cg.$name" "$@" >"$dir/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 240); do
    eval "$ready" && break
    sleep 0.5
  done
  wrk -t1 -c1 -d3s -s "$dir/warm.lua" "https://127.0.0.1:$port/mutate" >/dev/null
  callgrind_control -z "$pid" >/dev/null
  local requests
  requests=$(wrk -t1 -c4 -d"${seconds}s" -s "$dir/counted.lua" "https://127.0.0.1:$port/mutate" |
    awk '/requests in/ {print $1}')
  callgrind_control -d "$pid" >/dev/null
  sleep 1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  # The events line names the columns of the summary line (Ir, then with the simulation
  # Dr Dw I1mr D1mr D1mw ...).
  awk -v name="$name" -v requests="$requests" '
    /^events:/ { for (i = 2; i <= NF; i++) column[$i] = i }
    /^(summary|totals):/ && !done {
      done = 1
      line = sprintf("%s: %d requests, %d instructions", name, requests, $column["Ir"] / requests)
      if ("I1mr" in column)
        line = line sprintf(", %d L1i misses, %d L1d misses", $column["I1mr"] / requests,
          ($column["D1mr"] + $column["D1mw"]) / requests)
      print line " per request"
    }' "$dir/cg.$name".*1
}

# The container image's allocator settings (noe_webhook::ALLOCATOR_ENV); the floor runs on
# glibc malloc and ignores them. No Kubernetes API.
export MIMALLOC_PURGE_DELAY=0 MIMALLOC_ARENA_EAGER_COMMIT=0 KUBECONFIG=/nonexistent
unset KUBERNETES_SERVICE_HOST

# The floor answers its constant AdmissionReview (without a patch).
count "floor-${FLOOR:-parse}" 18450 "curl -sk -o /dev/null https://127.0.0.1:18450/" \
  "$bench" floor --addr 127.0.0.1:18450 --cert-dir "$dir" --work "${FLOOR:-parse}"
n=0
for noe in "$@"; do
  n=$((n + 1))
  count "noe-$n-$(basename "$noe")" 18451 "curl -sf -o /dev/null http://127.0.0.1:18453/readyz" \
    "$noe" --cert-dir="$dir" --webhook-addr=127.0.0.1:18451 --metrics-addr=127.0.0.1:18452 \
    --health-probe-addr=127.0.0.1:18453 --platform-overrides="$dir/overrides.yaml"
done
