#!/usr/bin/env bash
# Runs the chart's `helm test` Pod script (templates/helm-test.yaml) against a real noe on
# loopback, as the Pod would run it in a cluster:
#
#   bash charts/noe/tests/helm-test.sh NOE_BIN
#
# A test CA signs a serving certificate for the Service name <release>.<namespace>.svc; noe serves
# it (--cert-dir); the rendered script runs with the Pod's REVIEW, its curl reaching the Service
# name on loopback (--connect-to) and verifying against the CA. It must pass, and must fail when
# noe serves a certificate of another CA, or one that does not name the Service.
# Needs openssl, curl, helm and the venv of run.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
noe="${1:?usage: helm-test.sh NOE_BIN}"
HELM="$ROOT/.tools/bin/helm"
[ -x "$HELM" ] || HELM="$(command -v helm)"
PY="$ROOT/.tools/venv/bin/python"
RELEASE=noe
NAMESPACE=noe
SVC="$RELEASE.$NAMESPACE.svc"

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "not ok - $*"; }

work="$(mktemp -d)"
server=""
stop() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -INT "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  server=""
}
trap 'stop; rm -rf "$work"' EXIT

# The Pod's script and REVIEW, the CA path made local.
"$HELM" template "$RELEASE" charts/noe -n "$NAMESPACE" --show-only templates/helm-test.yaml >"$work/pod.yaml"
"$PY" - "$work/pod.yaml" "$work" <<'PY'
import sys, yaml
pod = yaml.safe_load(open(sys.argv[1]))
c = pod["spec"]["containers"][0]
assert c["command"] == ["/bin/sh", "-ec"], c["command"]
open(f"{sys.argv[2]}/script.sh", "w").write(c["args"][0].replace("/certs/ca.crt", f"{sys.argv[2]}/ca.crt"))
open(f"{sys.argv[2]}/review.json", "w").write(next(e["value"] for e in c["env"] if e["name"] == "REVIEW"))
PY

# CA name -> ca.crt, ca.key; then a serving certificate for a DNS name signed by it.
make_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$1" \
    -keyout "$work/$1.key" -out "$work/$1.crt" 2>/dev/null
}
make_cert() { # dir ca dns
  mkdir -p "$1"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$3" \
    -keyout "$1/tls.key" -out "$1/tls.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$3" >"$1/ext"
  openssl x509 -req -in "$1/tls.csr" -CA "$work/$2.crt" -CAkey "$work/$2.key" -CAcreateserial \
    -days 1 -extfile "$1/ext" -out "$1/tls.crt" 2>/dev/null
}
make_ca trusted
make_ca other
cp "$work/trusted.crt" "$work/ca.crt"
make_cert "$work/good" trusted "$SVC"
make_cert "$work/foreign" other "$SVC"
make_cert "$work/misnamed" trusted "other.$NAMESPACE.svc"

run_case() { # cert-dir want(pass|fail) description
  local port health
  read -r port health < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
  "$noe" --cert-dir "$1" --webhook-addr "127.0.0.1:$port" --metrics-addr 127.0.0.1:0 \
    --health-probe-addr "127.0.0.1:$health" --log-format text --log-level warn >"$work/noe.log" 2>&1 &
  server=$!
  local ready=false
  for _ in $(seq 300); do
    kill -0 "$server" 2>/dev/null || break
    if curl -fs --max-time 1 "http://127.0.0.1:$health/readyz" >/dev/null 2>&1; then ready=true; break; fi
    sleep 0.1
  done
  if [ "$ready" != true ]; then
    fail "$3: noe did not start"; cat "$work/noe.log"; stop; return
  fi
  # The Pod's shell script; its curl reaches the Service name on loopback.
  if out="$(REVIEW="$(cat "$work/review.json")" SVC="$SVC" PORT="$port" bash -ec '
      curl() { command curl --connect-to "$SVC:8443:127.0.0.1:$PORT" "$@"; }
      export -f curl
      . "$0"' "$work/script.sh" 2>&1)"; then
    got=pass
  else
    got=fail
  fi
  if [ "$got" = "$2" ]; then
    pass "$3"
    [ "$got" = pass ] && echo "$out" | sed 's/^/    /'

  else
    fail "$3 (the script did $got)"; echo "$out"
  fi
  stop
}

run_case "$work/good" pass "helm test passes through the Service name with the CA's certificate"
run_case "$work/foreign" fail "helm test fails when noe serves a certificate of another CA"
run_case "$work/misnamed" fail "helm test fails when the certificate does not name the Service"

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
