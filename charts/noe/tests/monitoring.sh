#!/usr/bin/env bash
# The chart's alerts and dashboard (metrics.prometheusRule, metrics.grafanaDashboard):
#
#   bash charts/noe/tests/monitoring.sh SCRAPE NOE_BIN
#
# SCRAPE is /metrics of a started noe after the local trial (scripts/try.sh with NOE_TRY_METRICS),
# NOE_BIN that binary. Needs promtool (Debian package prometheus: scripts/test.sh installs it) and
# helm + the venv of charts/noe/tests/run.sh. Runs `promtool check rules`, `promtool test rules`
# (alerts.test.yaml: synthetic series for every alert), checks the dashboard's JSON, and that
# every metric an alert or panel uses is exposed and documented (check_monitoring.py).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
CHART=charts/noe
TESTS=$CHART/tests
TOOLS="$ROOT/.tools"
scrape="${1:?usage: monitoring.sh SCRAPE NOE_BIN}"
noe="${2:?usage: monitoring.sh SCRAPE NOE_BIN}"
HELM="$TOOLS/bin/helm"
command -v helm >/dev/null 2>&1 && [ ! -x "$HELM" ] && HELM="$(command -v helm)"
PY="$TOOLS/venv/bin/python"
command -v promtool >/dev/null 2>&1 || { echo "monitoring.sh: promtool is needed (apt-get install prometheus)" >&2; exit 1; }

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "not ok - $*"; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$HELM" template noe "$CHART" -n noe \
  --set metrics.prometheusRule.enabled=true --set metrics.grafanaDashboard.enabled=true >"$work/render.yaml"
"$PY" - "$work/render.yaml" "$work" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
rule = next(d for d in docs if d["kind"] == "PrometheusRule")
yaml.safe_dump({"groups": rule["spec"]["groups"]}, open(f"{sys.argv[2]}/rules.yaml", "w"))
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "noe-dashboard")
json.dump(json.loads(cm["data"]["noe.json"]), open(f"{sys.argv[2]}/dashboard.json", "w"))
PY

if out="$(promtool check rules "$work/rules.yaml" 2>&1)"; then
  pass "promtool check rules: $(echo "$out" | grep -o 'SUCCESS.*')"
else
  fail "promtool check rules"; echo "$out"
fi
cp "$TESTS/alerts.test.yaml" "$work/"
if out="$(cd "$work" && promtool test rules alerts.test.yaml 2>&1)"; then
  pass "promtool test rules (alerts.test.yaml)"
else
  fail "promtool test rules (alerts.test.yaml)"; echo "$out"
fi
# Each alert has a test that makes it fire, and a runbook section in docs/troubleshooting.md.
missing="$("$PY" - "$work/rules.yaml" "$TESTS/alerts.test.yaml" docs/troubleshooting.md <<'PY'
import re, sys, yaml
rules = [r for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"]]
tests = yaml.safe_load(open(sys.argv[2]))["tests"]
fired = {t["alertname"] for case in tests for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
anchors = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
           for h in re.findall(r"^#{2,4} (.+)$", open(sys.argv[3]).read(), re.M)}
for r in rules:
    url = r["annotations"].get("runbook_url", "")
    if r["alert"] not in fired:
        print(f"{r['alert']}: no test makes it fire")
    if "#" not in url or url.split("#", 1)[1] not in anchors:
        print(f"{r['alert']}: runbook_url {url} names no section of docs/troubleshooting.md")
PY
)"
if [ -z "$missing" ]; then
  pass "every alert fires in a test and its runbook_url names a section of docs/troubleshooting.md"
else
  fail "alerts without a firing test or a runbook section:"; echo "$missing"
fi

"$noe" --help >"$work/help.txt" 2>&1 || true
out="$("$PY" "$TESTS/check_monitoring.py" "$work/rules.yaml" "$work/dashboard.json" "$scrape" "$work/help.txt")" || true
echo "$out" | grep -v '^CHECKS'
counts="$(echo "$out" | tail -1)"
if [[ "$counts" =~ ^CHECKS\ ([0-9]+)\ ([0-9]+)$ ]]; then
  passed=$((passed + BASH_REMATCH[1]))
  failed=$((failed + BASH_REMATCH[2]))
else
  fail "check_monitoring.py did not finish"; echo "$out" | tail -20
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
