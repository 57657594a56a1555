#!/usr/bin/env bash
# The one test command (README.md, "Test"): installs what the tests need, then runs the whole suite.
#   - the CNCF distribution registry (Debian package docker-registry) for the registry/webhook tests
#   - redis-server (Debian package redis-server, Redis 7) for the shared-cache tests
#   - helm v3 and kubernetes-validate for the chart tests (charts/noe/tests/run.sh installs them
#     into ./.tools on first use)
#   - promtool (Debian package prometheus) for the chart's alerts (charts/noe/tests/monitoring.sh)
#   - chromium (Debian package chromium), headless, for `noe report -o html` in a real browser;
#     where none can be installed that test is skipped, saying so (NOE_TEST_NO_BROWSER)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v docker-registry >/dev/null 2>&1 || need_apt+=(docker-registry)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v unzip >/dev/null 2>&1 || need_apt+=(unzip)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> installing ${need_apt[*]} (apt)"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if [ -z "${NOE_TEST_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  echo "==> installing chromium (apt)"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  if ! { $sudo_cmd apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
    echo "!! chromium could not be installed: the HTML report's browser test is skipped"
    export NOE_TEST_NO_BROWSER=1
  fi
fi

echo "==> cargo test (workspace)"
cargo test --workspace --all-targets --locked
cargo test --workspace --doc --locked

# The local trial (README.md, "Try it locally") with the binary cargo test built, inside a network
# namespace without a route out when the machine allows one: it must need no network at all.
echo "==> scripts/try.sh --check"
noe_bin="${CARGO_TARGET_DIR:-target}/debug/noe"
cargo build --locked -p noe --quiet
if unshare -rn true 2>/dev/null && command -v ip >/dev/null 2>&1; then
  echo "(in a network namespace of its own: loopback only, no route out)"
  NOE_BIN="$noe_bin" NOE_TRY_METRICS="$PWD/target/try-metrics.txt" \
    unshare -rn sh -c 'ip link set lo up && exec ./scripts/try.sh --check'
else
  echo "(unshare -rn is not allowed here: try.sh runs in the machine's own network namespace)"
  NOE_BIN="$noe_bin" NOE_TRY_METRICS="$PWD/target/try-metrics.txt" ./scripts/try.sh --check
fi

if [ -x charts/noe/tests/run.sh ]; then
  echo "==> chart tests"
  NOE_BIN_PATH="$noe_bin" bash charts/noe/tests/run.sh
  echo "==> chart alerts and dashboard (promtool; metrics scraped from the local trial)"
  bash charts/noe/tests/monitoring.sh "$PWD/target/try-metrics.txt" "$noe_bin"
  echo "==> the chart's helm test script against noe on loopback (real certificates)"
  bash charts/noe/tests/helm-test.sh "$noe_bin"
fi
