#!/usr/bin/env bash
# The local trial (README.md, "Try it locally"): one command, no cluster, no registry, no internet.
#
#   ./scripts/try.sh            build noe if needed, start it, send the example AdmissionReviews
#   ./scripts/try.sh --check    the same, and fail unless each decision is the expected one
#                               (scripts/test.sh runs it so)
#
# It starts `noe` on loopback (free ports) with a throw-away self-signed certificate and
# examples/platform-overrides.yaml, which states the platforms of every image the examples name:
# no registry is asked. It sends each examples/admissionreview-*.json to /mutate, prints the
# decision, its warnings and its JSON patch, and stops the server when it ends (also on Ctrl-C).
#
# One example names an image of a registry that does not answer (127.0.0.1:9, refused at once):
# with the default --on-lookup-error=ignore-image the pod is admitted unchanged, with a warning.
# noe refuses loopback registries unless --allow-registry-cidrs lists them: this trial does (an
# image on loopback is a registry here, not noe's own ports or a sidecar).
#
# Then `noe report` over examples/workloads.yaml with the same overrides: a table, and the same
# report as one HTML page (-o html).
#
# NOE_BIN=path uses that binary instead of building target/release/noe; NOE_TRY_METRICS=file keeps
# the server's last /metrics scrape there, NOE_TRY_REPORT=file the HTML page. Needs curl and
# python3.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

for tool in curl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "try.sh: $tool is needed" >&2; exit 1; }
done

noe="${NOE_BIN:-}"
if [ -z "$noe" ]; then
  echo "==> cargo build --release -p noe (a no-op when it is up to date)"
  cargo build --release --locked -p noe --quiet
  noe="${CARGO_TARGET_DIR:-$ROOT/target}/release/noe"
fi
[ -x "$noe" ] || { echo "try.sh: $noe is not an executable" >&2; exit 1; }

# Three free loopback ports (webhook, metrics, probes).
read -r webhook_port metrics_port health_port < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)

work="$(mktemp -d)"
server=""
stop() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -INT "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop EXIT
trap 'exit 130' INT TERM

echo "==> starting $noe on 127.0.0.1:$webhook_port (platforms from examples/platform-overrides.yaml)"
"$noe" \
  --dev-self-signed-cert \
  --webhook-addr "127.0.0.1:$webhook_port" \
  --metrics-addr "127.0.0.1:$metrics_port" \
  --health-probe-addr "127.0.0.1:$health_port" \
  --platform-overrides examples/platform-overrides.yaml \
  --allow-registry-cidrs 127.0.0.0/8 \
  --preferred-arch amd64 \
  --cluster-schedulable-archs amd64,arm64 \
  --log-format text --log-level warn \
  >"$work/noe.log" 2>&1 &
server=$!

# Ready within 30 s (300 polls of 0.1 s), or its log is shown.
ready=false
for _ in $(seq 300); do
  if ! kill -0 "$server" 2>/dev/null; then break; fi
  if curl -fs --max-time 1 "http://127.0.0.1:$health_port/readyz" >/dev/null 2>&1; then
    ready=true
    break
  fi
  sleep 0.1
done
if [ "$ready" != true ]; then
  echo "try.sh: noe did not become ready; its log:" >&2
  cat "$work/noe.log" >&2
  exit 1
fi

# What each example must get (--check): decision, then the architectures the patch names.
expected() {
  case "$1" in
    admissionreview-pod.json) echo "patched amd64" ;;
    admissionreview-skip.json) echo "allowed -" ;;
    admissionreview-amd64-only.json) echo "patched amd64" ;;
    admissionreview-no-common-arch.json) echo "denied -" ;;
    admissionreview-prefer-arm64.json) echo "patched arm64" ;;
    admissionreview-registry-down.json) echo "allowed -" ;;
    *) echo "unknown" ;;
  esac
}

failures=0
for review in examples/admissionreview-*.json; do
  name="$(basename "$review")"
  echo
  echo "==> $name"
  if ! curl -sS --fail --max-time 10 -k "https://127.0.0.1:$webhook_port/mutate" \
      -H 'Content-Type: application/json' --data-binary "@$review" -o "$work/answer.json"; then
    echo "try.sh: no answer for $name" >&2
    failures=$((failures + 1))
    continue
  fi
  summary="$(python3 - "$review" "$work/answer.json" <<'PY'
import base64, json, sys

review = json.load(open(sys.argv[1]))
answer = json.load(open(sys.argv[2]))
pod = review["request"]["object"]
images = ", ".join(c["image"] for c in pod["spec"]["containers"])
labels = pod["metadata"].get("labels", {})
print(f"   pod:      {images}")
if "arch.noe.adevinta.com/preferred" in labels or "arch.noe.adevinta.com/skip" in labels:
    print("   labels:   " + ", ".join(f"{k}={v}" for k, v in labels.items() if k.startswith("arch.")))
response = answer["response"]
patch = []
if response.get("patch"):
    patch = json.loads(base64.b64decode(response["patch"]))
if not response["allowed"]:
    decision = "denied"
elif patch:
    decision = "patched"
else:
    decision = "allowed"
print(f"   decision: {decision}")
message = response.get("status", {}).get("message")
if message:
    print(f"   message:  {message}")
for warning in response.get("warnings", []):
    print(f"   warning:  {warning}")
archs = set()
for op in patch:
    value = json.dumps(op.get("value"), sort_keys=True)
    print(f"   patch:    {op['op']} {op['path']} {value}")
    if "annotations" not in op["path"]:
        archs.update(a for a in ("amd64", "arm64") if f'"{a}"' in value)
# The line the --check mode reads: the decision and the arches the patch constrains the pod to
# (the annotation aside).
print(f"RESULT {decision} {','.join(sorted(archs)) or '-'}")
PY
)"
  echo "$summary" | grep -v '^RESULT '
  got="$(echo "$summary" | sed -n 's/^RESULT //p')"
  want="$(expected "$name")"
  if [ "$check" = true ]; then
    if [ "$got" = "$want" ]; then
      echo "   ok: $got"
    else
      echo "   not ok: got '$got', want '$want'" >&2
      failures=$((failures + 1))
    fi
  fi
done

echo
echo "==> noe's own account (http://127.0.0.1:$metrics_port/metrics)"
curl -fs --max-time 5 "http://127.0.0.1:$metrics_port/metrics" -o "$work/metrics.txt" || true
grep -E '^noe_webhook_request_duration_seconds_count|^noe_hook_update_skip_total|^noe_hook_registry_errors_total' \
  "$work/metrics.txt" || true
if [ -n "${NOE_TRY_METRICS:-}" ]; then
  cp "$work/metrics.txt" "$NOE_TRY_METRICS"
fi

# The readiness report of examples/workloads.yaml, offline: the same overrides state the images'
# platforms; the one image of a registry that does not answer leaves its workload unknown.
report_args=(report -f examples/workloads.yaml --platform-overrides examples/platform-overrides.yaml
  --upgrades=false --docker-config-path "$work/absent" --containerd-config-path "$work/absent")
echo
echo "==> noe report -f examples/workloads.yaml (a table, then the same as one HTML page)"
if "$noe" "${report_args[@]}" 2>"$work/report.log" \
    && "$noe" "${report_args[@]}" -o html >"$work/report.html" 2>>"$work/report.log" \
    && "$noe" "${report_args[@]}" -o json >"$work/report.json" 2>>"$work/report.log"; then
  if [ -n "${NOE_TRY_REPORT:-}" ]; then
    cp "$work/report.html" "$NOE_TRY_REPORT"
    echo "   the page: $NOE_TRY_REPORT (open it in a browser; nothing is fetched)"
  else
    echo "   NOE_TRY_REPORT=readiness.html ./scripts/try.sh keeps the page"
  fi
  if [ "$check" = true ]; then
    # The page's headline figures are the JSON report's: 3 ready, 2 blocked, 1 unknown on arm64.
    if python3 - "$work/report.json" "$work/report.html" <<'PY'
import json, re, sys
report = json.load(open(sys.argv[1]))
page = open(sys.argv[2]).read()
workloads = report["summary"]["arm64"]["workloads"]
assert workloads == {"ready": 3, "blocked": 2, "unknown": 1}, workloads
for verdict, n in workloads.items():
    figure = f'data-figure="arm64.workloads.{verdict}" value="{n}"'
    assert figure in page, figure
assert page.lstrip().lower().startswith("<!doctype html>"), "not an HTML page"
assert not re.search(r'<(script|link|img)[^>]+(src|href)=', page), "the page fetches something"
PY
    then
      echo "   ok: 3 ready, 2 blocked, 1 unknown on arm64, in the JSON and the page"
    else
      echo "   not ok: the report of examples/workloads.yaml" >&2
      failures=$((failures + 1))
    fi
  fi
else
  echo "try.sh: noe report failed:" >&2
  cat "$work/report.log" >&2
  failures=$((failures + 1))
fi

if [ "$failures" -gt 0 ]; then
  echo "try.sh: $failures example(s) failed" >&2
  exit 1
fi
