#!/usr/bin/env bash
# The one test command (README.md, "Test"): installs what the tests need, then runs the whole suite.
#   - the CNCF distribution registry (Debian package docker-registry) for the registry/webhook tests
#   - redis-server (Debian package redis-server, Redis 7) for the shared-cache tests
#   - helm v3 and kubernetes-validate for the chart tests (charts/noe/tests/run.sh installs them
#     into ./.tools on first use)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v docker-registry >/dev/null 2>&1 || need_apt+=(docker-registry)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v unzip >/dev/null 2>&1 || need_apt+=(unzip)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> installing ${need_apt[*]} (apt)"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

echo "==> cargo test (workspace)"
cargo test --workspace --all-targets --locked
cargo test --workspace --doc --locked

if [ -x charts/noe/tests/run.sh ]; then
  echo "==> chart tests"
  bash charts/noe/tests/run.sh
fi
