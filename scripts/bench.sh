#!/usr/bin/env bash
# Runs every noe-rs benchmark (docs/benchmarks.md, "Running"): criterion micro-benchmarks, then
# `noe-bench all` (start-up time, registry requests per image, memory with 100k cached lookups,
# the cold path through a 50 ms delaying proxy, counted pulls over a simulated day, a fleet of 3
# replicas sharing a real redis-server, the gate and hybrid modes, noe report with and without
# upgrade paths and its HTML page, the policy endpoint, verification, and the warm path against
# the floor server with wrk, with and without the controllers over a simulated cluster), then
# noe-bench-controllers (reflector memory, wrong-arch pod to Event, NodeView reads, and the real
# noe process with its controllers). Results go to stdout and to target/bench/report.md.
#
#   scripts/bench.sh              # everything
#   scripts/bench.sh --quick      # shorter wrk runs, 10k entries, no criterion
#   NOE_BENCH_ARGS="--duration 20s --rounds 5" scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
[[ "${1:-}" == "--quick" ]] && quick=true

if ! command -v wrk >/dev/null; then
  echo "installing wrk (Debian package)" >&2
  sudo_cmd=""; [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq wrk
fi
if ! command -v docker-registry >/dev/null; then
  echo "docker-registry (Debian package docker-registry) is needed for the registry benchmarks" >&2
  exit 1
fi
if ! command -v redis-server >/dev/null; then
  echo "installing redis-server (Debian package, for noe-bench fleet)" >&2
  sudo_cmd=""; [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq --no-install-recommends redis-server
fi

target="${CARGO_TARGET_DIR:-target}"
out="$target/bench"
mkdir -p "$out"

cargo build --release -p noe --bin noe -p noe-bench --bin noe-bench --bin noe-bench-controllers

if ! $quick; then
  cargo bench -p noe-registry --bench reference -- --noplot 2>&1 | tee "$out/criterion-reference.txt"
  cargo bench -p noe-core --bench decide -- --noplot 2>&1 | tee "$out/criterion-decide.txt"
  cargo bench -p noe-webhook --bench admission -- --noplot 2>&1 | tee "$out/criterion-admission.txt"
fi

args=(--noe "$target/release/noe" --controllers)
controllers=(--nodes 1000 --pods 20000)
if $quick; then
  args+=(--duration 5s --rounds 1 --entries 10000 --starts 5 --cluster-pods 2000)
  controllers=(--nodes 100 --pods 2000)
fi
# shellcheck disable=SC2086
"$target/release/noe-bench" all "${args[@]}" ${NOE_BENCH_ARGS:-} | tee "$out/report.md"
bench_controllers="$target/release/noe-bench-controllers"
"$bench_controllers" memory "${controllers[@]}" | tee -a "$out/report.md"
"$bench_controllers" latency --nodes "${controllers[1]}" --pods 5000 | tee -a "$out/report.md"
"$bench_controllers" nodeview --nodes "${controllers[1]}" | tee -a "$out/report.md"
"$bench_controllers" process --noe "$target/release/noe" "${controllers[@]}" | tee -a "$out/report.md"
echo "report: $out/report.md" >&2
