#!/usr/bin/env python3
"""Assertions on rendered manifests of charts/noe (called by run.sh).

usage: check.py SCENARIO RENDERED.yaml [RELEASE NAMESPACE]

Every render gets the invariant checks (security, ports, probes, RBAC, host mounts, webhook
configuration, cert-manager objects, ServiceMonitor); the named scenarios add what their values
file sets. Prints one line per check ("ok - ..." / "not ok - ...") and a last line
"CHECKS <passed> <failed>".
"""
import base64
import os
import subprocess
import sys
import tempfile

import yaml

import check_platform

# Every flag of the `noe` binary (docs/configuration.md). An arg the chart passes must be one of them.
KNOWN_FLAGS = {
    "image-selection", "image-compatibility-all-namespaces", "watch-node-features",
    "image-compatibility-negative-ttl",
    "preferred-arch", "cluster-schedulable-archs", "system-os", "registry-proxies",
    "match-node-labels", "private-registries", "image-credential-provider-bin-dir",
    "image-credential-provider-config", "docker-config-path", "containerd-config-path",
    "insecure-registries", "registry-ca-file", "cert-dir", "dev-self-signed-cert", "webhook-addr",
    "metrics-addr", "health-probe-addr", "preference-mode", "on-lookup-error", "registry-timeout",
    "admission-deadline", "preference-weight", "arch-tolerations-file", "allow-registry-cidrs",
    "kubeconfig", "cache-ttl", "cache-max-entries", "log-format", "log-level", "leader-elect",
    "shutdown-delay", "metrics-max-namespaces", "watch-nodes", "remediate", "remediate-rate",
    "taint-arches", "remediate-exempt-namespaces", "leader-elect-resource-name", "leader-elect-resource-namespace",
    "leader-elect-identity", "leader-elect-lease-duration", "leader-elect-renew-deadline",
    "leader-elect-retry-period",
    # The lookup modes (gate, hybrid).
    "lookup-mode", "hybrid-budget", "gate-max-attempts", "gate-namespace-selector",
    "gate-object-selector",
    # The decision's features.
    "mode", "on-contradiction", "fallback-arch", "platform-overrides", "namespace-preference",
    "check-ephemeral-containers",
    # Registry economy.
    "registry-qps", "registry-burst", "shared-cache", "shared-cache-password-file",
    "shared-cache-key-file", "shared-cache-ca-file", "shared-cache-timeout",
    # Cloud registries on noe's own workload identity.
    "cloud-credentials",
    # Per-pod identity for credential provider plugins (KEP-4412).
    "credential-provider-sa-tokens",
    # The policy engines' lookup endpoint.
    "lookup-addr", "lookup-client-ca", "lookup-token-audience", "lookup-token-review-qps",
    "lookup-deadline",
    # Exec format errors seen on nodes, learned.
    "detect-exec-format-errors", "log-reads-per-second", "learned-store", "learned-max-entries",
    # Image selection rewrites a pod at admission, before any gate: ungate never selects.
    "image-selection", "image-compatibility-all-namespaces", "watch-node-features",
    "image-compatibility-negative-ttl",
    # Verification (platforms proven by the images' own programs).
    "verify-binaries", "verify-max-bytes", "verify-concurrency", "gate-verify",
}
REPEATABLE = {"docker-config-path", "containerd-config-path"}
PER_OBJECT_KIND = {
    "pod": "Pod", "deployment": "Deployment", "service": "Service",
    "serviceaccount": "ServiceAccount", "clusterrole": "ClusterRole",
    "clusterrolebinding": "ClusterRoleBinding", "rolebinding": "RoleBinding", "role": "Role",
    "issuer": "Issuer",
    "certificate": "Certificate", "mutatingwebhookconfiguration": "MutatingWebhookConfiguration",
}
SKIP_LABEL = "arch.noe.adevinta.com/skip"
LOOKUP_COMPONENT = "lookup-endpoint"
PLATFORMS_ANNOTATION = "arch.noe.adevinta.com/platforms"

# The CEL matchConditions the chart writes, by name (their expressions are also evaluated below,
# with cel-python when it is installed, against the requests the API server would send).
MATCH_CONDITIONS = {
    "not-skip-labelled":
        "!has(object.metadata.labels) || "
        "!('arch.noe.adevinta.com/skip' in object.metadata.labels) || "
        "object.metadata.labels['arch.noe.adevinta.com/skip'] != 'true'",
    "not-bound-or-debug-containers":
        "request.subResource == 'ephemeralcontainers' || "
        "!has(object.spec.nodeName) || object.spec.nodeName == ''",
    "arch-not-pinned-by-the-pod":
        "request.subResource == 'ephemeralcontainers' || "
        "(has(object.metadata.annotations) && "
        "'arch.noe.adevinta.com/platforms' in object.metadata.annotations) || "
        "!has(object.spec.nodeSelector) || "
        "!('kubernetes.io/arch' in object.spec.nodeSelector || "
        "'beta.kubernetes.io/arch' in object.spec.nodeSelector)",
}


def condition_cases():
    """(description, request, object, {condition name: whether the webhook must be called})."""
    create = {"operation": "CREATE", "subResource": ""}
    debug = {"operation": "UPDATE", "subResource": "ephemeralcontainers"}
    pod = lambda meta=None, spec=None: {"metadata": meta or {}, "spec": spec or {"containers": []}}
    bound = {"nodeName": "n1", "containers": []}
    pinned = {"nodeSelector": {"kubernetes.io/arch": "arm64"}, "containers": []}
    return [
        ("a plain pod", create, pod(), {n: True for n in MATCH_CONDITIONS}),
        ("a skip-labelled pod", create, pod({"labels": {SKIP_LABEL: "true"}}),
         {"not-skip-labelled": False}),
        ("skip label not true", create, pod({"labels": {SKIP_LABEL: "false"}}),
         {"not-skip-labelled": True}),
        ("a pod created bound", create, pod(spec=bound), {"not-bound-or-debug-containers": False}),
        ("a debug container on a bound pod", debug, pod(spec=bound),
         {n: True for n in MATCH_CONDITIONS}),
        ("a pod pinned by nodeSelector", create, pod(spec=pinned),
         {"arch-not-pinned-by-the-pod": False}),
        ("beta arch key", create,
         pod(spec={"nodeSelector": {"beta.kubernetes.io/arch": "arm64"}, "containers": []}),
         {"arch-not-pinned-by-the-pod": False}),
        ("reinvocation: our nodeSelector and annotation", create,
         pod({"annotations": {PLATFORMS_ANNOTATION: "amd64,arm64"}}, pinned),
         {"arch-not-pinned-by-the-pod": True}),
        ("another nodeSelector key", create,
         pod(spec={"nodeSelector": {"disk": "ssd"}, "containers": []}),
         {"arch-not-pinned-by-the-pod": True}),
    ]


def evaluate_conditions(conditions):
    """Evaluates the rendered expressions with cel-python; None when it is not installed."""
    try:
        import celpy
    except ImportError:
        return None
    env = celpy.Environment()
    results = []
    for desc, request, obj, want in condition_cases():
        for c in conditions:
            if c["name"] not in want:
                continue
            program = env.program(env.compile(c["expression"]))
            got = program.evaluate({"object": celpy.json_to_cel(obj),
                                    "request": celpy.json_to_cel(request)})
            results.append((f"{desc}: {c['name']}", bool(got) == want[c["name"]], str(got)))
    return results


def check_match_conditions(w, expected_names):
    conditions = w.get("matchConditions") or []
    names = [c["name"] for c in conditions]
    check(f"matchConditions {expected_names}", names == expected_names, str(names))
    for c in conditions:
        got = " ".join(c["expression"].split())
        check(f"matchCondition {c['name']} expression", got == MATCH_CONDITIONS.get(c["name"]), got)
    evaluated = evaluate_conditions(conditions)
    if evaluated is None:
        print("# cel-python not installed: matchConditions not evaluated")
        return
    for name, ok, detail in evaluated:
        check(f"CEL {name}", ok, detail)

passed = 0
failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok - {name}")
    else:
        failed += 1
        print(f"not ok - {name}" + (f": {detail}" if detail else ""))


SHARED_CACHE_COMPONENT = "shared-cache"


class Render:
    def __init__(self, path):
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        # The in-chart Valkey's objects, apart: the invariants are about noe's own.
        def valkey(d):
            labels = d.get("metadata", {}).get("labels") or {}
            return labels.get("app.kubernetes.io/component") == SHARED_CACHE_COMPONENT
        # The ungate hook's objects (pre-delete, post-upgrade), apart too: they exist only while
        # the hook runs.
        def hook(d):
            annotations = d.get("metadata", {}).get("annotations") or {}
            return annotations.get("helm.sh/hook") in ("pre-delete", "post-upgrade")
        # The lookup endpoint's Service (lookupEndpoint.enabled), apart: "the" Service is the
        # webhook's.
        def lookup(d):
            labels = d.get("metadata", {}).get("labels") or {}
            return labels.get("app.kubernetes.io/component") == LOOKUP_COMPONENT
        self.valkey = [d for d in docs if valkey(d)]
        self.hooks = [d for d in docs if hook(d) and not valkey(d)]
        self.lookup = [d for d in docs if lookup(d)]
        self.docs = [d for d in docs if not valkey(d) and not hook(d) and not lookup(d)]

    def all(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def one(self, kind):
        found = self.all(kind)
        if len(found) != 1:
            raise AssertionError(f"expected one {kind}, found {len(found)}")
        return found[0]

    def meta(self, key):
        """metadata of the object a per-object values key applies to."""
        if key == "pod":
            return self.one("Deployment")["spec"]["template"]["metadata"]
        return self.one(PER_OBJECT_KIND[key])["metadata"]


def parse_args(args):
    """--flag=value list -> {flag: [values]} (values in order)."""
    out = {}
    for a in args:
        if not a.startswith("--") or "=" not in a:
            out.setdefault("<malformed>", []).append(a)
            continue
        k, v = a[2:].split("=", 1)
        out.setdefault(k, []).append(v)
    return out


def container(r):
    return r.one("Deployment")["spec"]["template"]["spec"]["containers"][0]


def flags(r):
    return parse_args(container(r)["args"])


def invariants(r, release, namespace):
    dep = r.one("Deployment")
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    c = container(r)
    f = flags(r)

    # Args: Go-style --flag=value, known flags only, not repeated unless repeatable.
    check("args are --flag=value", "<malformed>" not in f, str(f.get("<malformed>")))
    unknown = sorted(set(f) - KNOWN_FLAGS - {"<malformed>"})
    check("args are flags of the noe binary", not unknown, str(unknown))
    repeated = sorted(k for k, v in f.items() if len(v) > 1 and k not in REPEATABLE)
    check("no flag passed twice", not repeated, str(repeated))
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for k, name in [("webhook-addr", "webhook"), ("metrics-addr", "metrics"),
                    ("health-probe-addr", "health")]:
        v = f":{ports.get(name)}"
        check(f"--{k}={v} (the {name} container port)", f.get(k) == [v], str(f.get(k)))

    # Security.
    psc = spec.get("securityContext", {})
    sc = c.get("securityContext", {})
    check("pod runs as non-root", psc.get("runAsNonRoot") is True and sc.get("runAsNonRoot") is True)
    check("seccomp RuntimeDefault", psc.get("seccompProfile", {}).get("type") == "RuntimeDefault")
    check("read-only root filesystem", sc.get("readOnlyRootFilesystem") is True)
    check("no privilege escalation",
          sc.get("allowPrivilegeEscalation") is False and sc.get("privileged") is not True)
    check("all capabilities dropped", sc.get("capabilities", {}).get("drop") == ["ALL"]
          and not sc.get("capabilities", {}).get("add"))
    check("no host PID or IPC namespace", not any(spec.get(k) for k in ("hostPID", "hostIPC")))
    check("the host network only with ClusterFirstWithHostNet DNS",
          not spec.get("hostNetwork") or spec.get("dnsPolicy") == "ClusterFirstWithHostNet")

    # Ports and probes.
    want_ports = {"webhook", "metrics", "health"} | ({"lookup"} if f.get("lookup-addr") else set())
    check("ports webhook, metrics, health (and lookup)", set(ports) == want_ports,
          str(ports))
    check("liveness /healthz on health",
          c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"})
    check("readiness /readyz on health",
          c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"})
    ann = pod["metadata"].get("annotations") or {}
    if ann.get("prometheus.io/scrape") == "true":
        check("scrape annotations name the metrics port only",
              ann.get("prometheus.io/port") == str(ports["metrics"])
              and ann.get("prometheus.io/path") == "/metrics")
    check("no scrape annotation on the Deployment object",
          not any(k.startswith("prometheus.io/") for k in (dep["metadata"].get("annotations") or {})))

    # Service and selector.
    svc = r.one("Service")
    sports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
    check("service port webhook 8443 -> webhook", sports.get("webhook") == (8443, "webhook"))
    check("service port metrics 8080 -> metrics", sports.get("metrics") == (8080, "metrics"))
    check("selector is noe's app: <release>",
          dep["spec"]["selector"]["matchLabels"] == {"app": release}
          and svc["spec"]["selector"] == {"app": release}
          and pod["metadata"]["labels"].get("app") == release)

    # RBAC: get on secrets, and exactly what the enabled controllers and features use.
    cr = r.one("ClusterRole")
    mwc = [m["metadata"]["name"] for m in r.all("MutatingWebhookConfiguration")]
    check("ClusterRole: secrets get, plus what the controllers' and features' flags need, nothing else",
          cr["rules"] == expected_cluster_rules(f, mwc[0] if mwc else None),
          f"{cr['rules']} for {controller_flags(f)}")
    crb = r.one("ClusterRoleBinding")
    sa = [{"kind": "ServiceAccount", "name": spec["serviceAccountName"], "namespace": namespace}]
    check("ClusterRoleBinding binds the ClusterRole to the pod's ServiceAccount",
          crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": cr["metadata"]["name"]}
          and crb["subjects"] == sa)
    lease = f.get("leader-elect") == ["true"] and writes(f)
    store = f.get("learned-store", [None])[0]
    store_roles = [x for x in r.all("Role")
                   if any("configmaps" in rule["resources"] for rule in x["rules"])]
    check("a Role for the learned store exactly when detection is on",
          len(store_roles) == (1 if detecting(f) else 0), f"{len(store_roles)}")
    if detecting(f) and len(store_roles) == 1:
        role = store_roles[0]
        check("learned store Role: get/list/watch/update/patch of that one ConfigMap, in the "
              "release namespace", role["metadata"]["namespace"] == namespace and role["rules"] == [
                  {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [store],
                   "verbs": ["get", "list", "watch", "update", "patch"]}], str(role["rules"]))
        cms = [x for x in r.all("ConfigMap") if x["metadata"]["name"] == store]
        check("the chart creates the learned store's ConfigMap, without data",
              len(cms) == 1 and cms[0]["metadata"]["namespace"] == namespace
              and not cms[0].get("data"))
        bound = [rb for rb in r.all("RoleBinding") if rb["roleRef"]["kind"] == "Role"
                 and rb["roleRef"]["name"] == role["metadata"]["name"]]
        check("the learned store Role is bound to our ServiceAccount",
              len(bound) == 1 and bound[0]["subjects"] == sa)
    roles = [x for x in r.all("Role") if x not in store_roles]
    check("a Role exactly when leader election has something to elect",
          len(roles) == (1 if lease else 0), f"{len(roles)} Roles, flags {controller_flags(f)}")
    if lease and len(roles) == 1:
        role = roles[0]
        check("Role: leases create, and get/update of our Lease only, in the release namespace",
              role["metadata"]["namespace"] == namespace and role["rules"] == [
                  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "verbs": ["create"]},
                  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "resourceNames": [release], "verbs": ["get", "update"]}], str(role["rules"]))
        check("--leader-elect-resource-name is the Lease the Role names",
              f.get("leader-elect-resource-name") == [release])
        bound = [rb for rb in r.all("RoleBinding") if rb["roleRef"]["kind"] == "Role"
                 and rb["roleRef"]["name"] == role["metadata"]["name"]]
        check("the Role is bound to our ServiceAccount",
              len(bound) == 1 and bound[0]["roleRef"]["name"] == role["metadata"]["name"]
              and bound[0]["subjects"] == sa)
    else:
        check("no Lease flag without a Role", "leader-elect-resource-name" not in f)
    for rb in r.all("RoleBinding"):
        check("RoleBinding for podSecurityPolicyClusterRole or the leader election Role, to our "
              "ServiceAccount", rb["roleRef"]["kind"] in ("ClusterRole", "Role")
              and rb["subjects"] == sa)
    replicas = dep["spec"]["replicas"]
    check("leader election whenever more than one replica runs a writing controller",
          not (writes(f) and replicas > 1) or f.get("leader-elect") == ["true"],
          f"{replicas} replicas, {controller_flags(f)}")
    env = {e["name"]: e for e in c.get("env", [])}
    check("POD_NAME and POD_NAMESPACE from the downward API",
          env.get("POD_NAME", {}).get("valueFrom") == {"fieldRef": {"fieldPath": "metadata.name"}}
          and env.get("POD_NAMESPACE", {}).get("valueFrom") == {
              "fieldRef": {"fieldPath": "metadata.namespace"}})

    # Host files: typed, read-only, never a broad parent directory.
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    forbidden = {"/", "/etc", "/var", "/var/lib", "/var/lib/kubelet", "/var/lib/kubelet/pods",
                 "/root", "/home", "/run", "/var/run", "/var/lib/containerd", "/proc", "/sys"}
    for v in spec["volumes"]:
        hp = v.get("hostPath")
        if not hp:
            continue
        name = v["name"]
        check(f"hostPath {hp['path']} typed", hp.get("type") in
              ("FileOrCreate", "DirectoryOrCreate", "Directory"), str(hp.get("type")))
        if name.startswith("docker-config-") or name == "kubelet-credential-provider-config" \
                or name.startswith("containerd-config-"):
            check(f"hostPath {hp['path']} is a file (FileOrCreate)", hp["type"] == "FileOrCreate")
        check(f"hostPath {hp['path']} mounted read-only", mounts.get(name, {}).get("readOnly") is True)
        check(f"hostPath {hp['path']} is not a broad directory",
              hp["path"].rstrip("/") not in forbidden and hp["path"].startswith("/"))
    for m in c["volumeMounts"]:
        if m["name"] != "tmp":
            check(f"mount {m['mountPath']} read-only", m.get("readOnly") is True)

    # Every host file flag points at a mounted path.
    mpaths = {m["mountPath"] for m in c["volumeMounts"]}
    for p in [p for p in f.get("docker-config-path", []) if p]:
        check(f"--docker-config-path={p} is mounted", p in mpaths)
    for p in [p for p in f.get("containerd-config-path", []) if p]:
        ok = p in mpaths if p.endswith(".toml") else (
            f"{p}/config.toml" in mpaths and f"{p}/certs.d" in mpaths)
        check(f"--containerd-config-path={p} is mounted (file, or config.toml + certs.d)", ok)
    for k in ("image-credential-provider-bin-dir", "image-credential-provider-config"):
        for p in f.get(k, []):
            check(f"--{k}={p} is mounted",
                  p in mpaths or any(p.startswith(m + "/") for m in mpaths))
    check("kubelet credential provider flags come together",
          ("image-credential-provider-bin-dir" in f) == ("image-credential-provider-config" in f))
    certs = next(v for v in spec["volumes"] if v["name"] == "certs")
    check("--cert-dir is the mounted certificate Secret",
          f.get("cert-dir") == [mounts["certs"]["mountPath"]]
          and certs["secret"]["secretName"] == release)

    # MutatingWebhookConfiguration.
    mwc = r.one("MutatingWebhookConfiguration")
    check("one webhook", len(mwc["webhooks"]) == 1)
    w = mwc["webhooks"][0]
    check("admissionReviewVersions [v1, v1beta1]", w["admissionReviewVersions"] == ["v1", "v1beta1"])
    check("sideEffects None", w["sideEffects"] == "None")
    want_rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["pods"], "scope": "Namespaced"}]
    if f.get("check-ephemeral-containers") == ["true"]:
        want_rules.append({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                           "resources": ["pods/ephemeralcontainers"], "scope": "Namespaced"})
    check("rules: pods CREATE, pods/ephemeralcontainers UPDATE only with its feature",
          w["rules"] == want_rules, str(w["rules"]))
    cc = w["clientConfig"]["service"]
    check("clientConfig: our Service, /mutate, 8443",
          cc == {"name": svc["metadata"]["name"], "namespace": namespace, "path": "/mutate",
                 "port": 8443})
    t = w["timeoutSeconds"]
    check("timeoutSeconds within 1..30", 1 <= t <= 30)
    check("--admission-deadline = timeoutSeconds - 2s, at least 1s",
          f.get("admission-deadline") == [f"{max(1, t - 2)}s"], f"{t} {f.get('admission-deadline')}")
    check("failurePolicy set", w["failurePolicy"] in ("Ignore", "Fail"))
    check("reinvocationPolicy set", w["reinvocationPolicy"] in ("Never", "IfNeeded"))
    mwc_ann = mwc["metadata"].get("annotations") or {}

    # Serving certificate: cert-manager or Helm-generated.
    issuers, certs_cm = r.all("Issuer"), r.all("Certificate")
    if issuers or certs_cm:
        iss, crt = r.one("Issuer"), r.one("Certificate")
        check("Issuer apiVersion cert-manager.io/v1 and selfSigned",
              iss["apiVersion"] == "cert-manager.io/v1" and iss["spec"] == {"selfSigned": {}})
        cs = crt["spec"]
        check("Certificate apiVersion cert-manager.io/v1", crt["apiVersion"] == "cert-manager.io/v1")
        check("Certificate writes the Secret the pod mounts", cs["secretName"] == release)
        check("Certificate issuerRef is the Issuer",
              cs["issuerRef"].get("name") == iss["metadata"]["name"]
              and cs["issuerRef"].get("kind", "Issuer") == "Issuer"
              and cs["issuerRef"].get("group", "cert-manager.io") == "cert-manager.io")
        svc_dns = f"{svc['metadata']['name']}.{namespace}.svc"
        check("Certificate dnsNames cover the Service", svc_dns in cs["dnsNames"]
              and f"{svc_dns}.cluster.local" in cs["dnsNames"])
        check("Certificate for server auth", "server auth" in cs.get("usages", ["server auth"]))
        check("Issuer and Certificate in the release namespace",
              iss["metadata"]["namespace"] == namespace and crt["metadata"]["namespace"] == namespace)
        check("CA injected from the Certificate",
              mwc_ann.get("cert-manager.io/inject-ca-from") == f"{namespace}/{crt['metadata']['name']}")
        check("no static caBundle with cert-manager", "caBundle" not in w["clientConfig"])
    else:
        check_generated_cert(r, release, namespace, w, mwc_ann, svc)

    # ServiceMonitor (not checkable by kubernetes-validate).
    for sm in r.all("ServiceMonitor"):
        s = sm["spec"]
        check("ServiceMonitor apiVersion monitoring.coreos.com/v1",
              sm["apiVersion"] == "monitoring.coreos.com/v1")
        sel = s["selector"]["matchLabels"]
        check("ServiceMonitor selects our Service",
              all(svc["metadata"]["labels"].get(k) == v for k, v in sel.items()) and sel)
        check("ServiceMonitor scrapes the metrics port",
              [e["port"] for e in s["endpoints"]] == ["metrics"]
              and all(e.get("path", "/metrics") == "/metrics" for e in s["endpoints"]))
        check("ServiceMonitor namespaceSelector is the release namespace",
              s["namespaceSelector"] == {"matchNames": [namespace]})


def gating(f):
    """The gate controller runs: --lookup-mode gate or hybrid."""
    return f.get("lookup-mode", ["inline"]) != ["inline"]


def detecting(f):
    """Exec-format-error detection runs (and the learned store is used)."""
    return f.get("detect-exec-format-errors") == ["true"]


def writes(f):
    """A writing controller runs: remediation, taints, detection or the gate controller."""
    return (f.get("remediate", ["off"]) != ["off"] or bool(f.get("taint-arches"))
            or detecting(f) or gating(f))


def controller_flags(f):
    return {k: v for k, v in f.items()
            if k in ("watch-nodes", "remediate", "taint-arches", "leader-elect", "lookup-mode",
                     "detect-exec-format-errors")}


def expected_cluster_rules(f, webhook_configuration=None):
    """The ClusterRole the controller and feature flags need (docs/configuration.md)."""
    rules = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    if f.get("credential-provider-sa-tokens") == ["true"]:
        rules.append({"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"]})
        rules.append({"apiGroups": [""], "resources": ["serviceaccounts/token"],
                      "verbs": ["create"]})
    selection_namespaces = (f.get("image-selection") == ["true"]
                            and f.get("image-compatibility-all-namespaces") != ["true"])
    if (f.get("namespace-preference") == ["true"] or selection_namespaces
            or (gating(f) and f.get("gate-namespace-selector"))):
        rules.append({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]})
    remediate = f.get("remediate", ["off"])[0]
    taints = bool(f.get("taint-arches"))
    pods = remediate != "off" or detecting(f)
    reflector = f.get("watch-nodes") == ["true"] or pods or taints
    verbs = []
    if taints or f.get("check-ephemeral-containers") == ["true"]:
        verbs.append("get")
    if reflector:
        verbs += ["list", "watch"]
    if taints:
        verbs.append("patch")
    if verbs:
        rules.append({"apiGroups": [""], "resources": ["nodes"], "verbs": verbs})
    if f.get("image-selection") == ["true"] and f.get("watch-node-features") == ["true"]:
        rules.append({"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures"],
                      "verbs": ["list", "watch"]})
    if pods:
        rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]})
        rules.append({"apiGroups": ["events.k8s.io"], "resources": ["events"],
                      "verbs": ["create", "patch"]})
    if detecting(f):
        rules.append({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})
    if remediate == "evict":
        rules.append({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]})
    if f.get("lookup-token-audience"):
        rules.append({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
                      "verbs": ["create"]})
    if gating(f):
        rules.append({"apiGroups": [""], "resources": ["pods"],
                      "verbs": ["get", "list", "watch", "patch"]})
        rules.append({"apiGroups": ["events.k8s.io"], "resources": ["events"],
                      "verbs": ["create", "patch"]})
        rules.append({"apiGroups": ["admissionregistration.k8s.io"],
                      "resources": ["mutatingwebhookconfigurations",
                                    "validatingwebhookconfigurations"],
                      "verbs": ["list"]})
        rules.append({"apiGroups": ["admissionregistration.k8s.io"],
                      "resources": ["mutatingwebhookconfigurations"],
                      "resourceNames": [webhook_configuration], "verbs": ["delete"]})
    return rules


def check_generated_cert(r, release, namespace, w, mwc_ann, svc):
    secrets = [s for s in r.all("Secret") if s["metadata"]["name"] == release]
    check("Helm-generated TLS Secret", len(secrets) == 1
          and secrets[0]["type"] == "kubernetes.io/tls")
    if len(secrets) != 1:
        return
    data = {k: base64.b64decode(v) for k, v in secrets[0]["data"].items()}
    check("Secret holds tls.crt, tls.key, ca.crt", set(data) == {"tls.crt", "tls.key", "ca.crt"})
    check("caBundle is the generated CA",
          base64.b64decode(w["clientConfig"].get("caBundle", "")) == data.get("ca.crt"))
    check("no inject-ca-from without cert-manager", "cert-manager.io/inject-ca-from" not in mwc_ann)
    with tempfile.TemporaryDirectory() as d:
        for k, v in data.items():
            with open(os.path.join(d, k), "wb") as fh:
                fh.write(v)
        v = subprocess.run(["openssl", "verify", "-CAfile", os.path.join(d, "ca.crt"),
                            os.path.join(d, "tls.crt")], capture_output=True, text=True)
        check("serving certificate verifies against the CA bundle", v.returncode == 0,
              v.stdout + v.stderr)
        t = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in",
                            os.path.join(d, "tls.crt")], capture_output=True, text=True)
        want = f"DNS:{svc['metadata']['name']}.{namespace}.svc"
        check("serving certificate names the Service", want in t.stdout, t.stdout + t.stderr)
        k = subprocess.run(["openssl", "pkey", "-noout", "-in", os.path.join(d, "tls.key")],
                           capture_output=True, text=True)
        check("tls.key is a private key", k.returncode == 0, k.stderr)


def scenario_default(r, release, namespace):
    scenario_default_lookup_off(r)
    psc = r.one("Deployment")["spec"]["template"]["spec"]["securityContext"]
    check("default: fsGroup is noe's group (Secret volumes readable by it alone)",
          psc.get("fsGroup") == psc.get("runAsGroup") == 65532, str(psc))
    check("inline (install): no hook", not r.hooks)
    f = flags(r)
    want = {"preferred-arch": ["amd64"], "preference-mode": ["required"],
            "preference-weight": ["50"], "on-lookup-error": ["ignore-image"],
            "system-os": ["linux"], "admission-deadline": ["8s"], "registry-timeout": ["5s"],
            "cache-ttl": ["1h"], "cache-max-entries": ["100000"], "log-level": ["info"],
            "log-format": ["json"], "docker-config-path": ["/var/lib/kubelet/config.json"],
            "containerd-config-path": ["/etc/containerd"], "shutdown-delay": ["5s"],
            "metrics-max-namespaces": ["1000"], "mode": ["enforce"], "on-contradiction": ["warn"],
            "registry-qps": ["50"], "registry-burst": ["100"]}
    for k, v in want.items():
        check(f"default --{k}={','.join(v)}", f.get(k) == v, str(f.get(k)))
    for k in ("cluster-schedulable-archs", "registry-proxies", "match-node-labels",
              "private-registries", "leader-elect", "image-credential-provider-config",
              "arch-tolerations-file", "insecure-registries", "registry-ca-file", "watch-nodes",
              "remediate", "remediate-rate", "taint-arches", "remediate-exempt-namespaces", "leader-elect-resource-name",
              "fallback-arch", "platform-overrides", "namespace-preference",
              "check-ephemeral-containers", "shared-cache", "shared-cache-key-file",
              "shared-cache-password-file", "shared-cache-ca-file"):
        check(f"default has no --{k}", k not in f)
    check("default: the ClusterRole grants get on secrets only",
          r.one("ClusterRole")["rules"] == [
              {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])
    check("default: no in-chart Valkey", not r.valkey)
    dep = r.one("Deployment")
    check("default: 1 replica, no PDB", dep["spec"]["replicas"] == 1 and not r.all("PodDisruptionBudget"))
    w = r.one("MutatingWebhookConfiguration")["webhooks"][0]
    check("default failurePolicy Ignore", w["failurePolicy"] == "Ignore")
    check("default timeoutSeconds 10", w["timeoutSeconds"] == 10)
    check("default reinvocationPolicy IfNeeded", w["reinvocationPolicy"] == "IfNeeded")
    check_match_conditions(w, ["not-skip-labelled", "not-bound-or-debug-containers"])
    check("default namespaceSelector excludes kube-system and the release namespace",
          w["namespaceSelector"] == {"matchExpressions": [{
              "key": "kubernetes.io/metadata.name", "operator": "NotIn",
              "values": ["kube-system", namespace]}]}, str(w["namespaceSelector"]))
    check("default objectSelector excludes the skip label",
          w["objectSelector"] == {"matchExpressions": [{
              "key": SKIP_LABEL, "operator": "NotIn", "values": ["true"]}]})
    check("default uses cert-manager", len(r.all("Certificate")) == 1 and len(r.all("Issuer")) == 1)
    check("default has no ServiceMonitor", not r.all("ServiceMonitor"))
    ann = dep["spec"]["template"]["metadata"].get("annotations") or {}
    check("default scrape annotations on the pod", ann.get("prometheus.io/scrape") == "true")
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    check("default docker config mounted FileOrCreate",
          vols["docker-config-0"]["hostPath"] == {"path": "/var/lib/kubelet/config.json",
                                                  "type": "FileOrCreate"})
    check("default image", container(r)["image"].startswith("ghcr.io/noe-rs/noe-rs:"))


def scenario_full(r, release, namespace):
    f = flags(r)
    want = {
        "preferred-arch": ["arm64"], "preference-mode": ["preferred"], "preference-weight": ["80"],
        "on-lookup-error": ["fallback"], "fallback-arch": ["amd64"], "mode": ["audit"],
        "on-contradiction": ["deny"], "namespace-preference": ["true"],
        "check-ephemeral-containers": ["true"],
        "platform-overrides": ["/etc/noe/platform-overrides/overrides.yaml"],
        "system-os": ["linux"],
        "cluster-schedulable-archs": ["amd64,arm64"],
        "match-node-labels": ["accelerator.node.kubernetes.io/gpu,team"],
        "registry-proxies": ["docker.io=docker-proxy.company.corp,*.gcr.io=gcr-proxy.company.corp"],
        "private-registries": ["*.registry.company.corp,ghcr.io/company"],
        "insecure-registries": ["registry.dev.svc:5000"],
        "allow-registry-cidrs": ["169.254.10.0/24"], "registry-timeout": ["3s"],
        "cache-ttl": ["30m"], "cache-max-entries": ["5000"],
        "docker-config-path": ["/var/lib/kubelet/config.json", "/root/.docker/config.json"],
        "containerd-config-path": ["/etc/containerd", "/etc/k3s/containerd/config.toml"],
        "image-credential-provider-bin-dir": ["/etc/eks/image-credential-provider"],
        "image-credential-provider-config": ["/etc/eks/credential-provider-config/config.yaml"],
        "admission-deadline": ["13s"], "leader-elect": ["true"], "log-level": ["debug"],
        "log-format": ["text"], "dev-self-signed-cert": ["false"], "shutdown-delay": ["7s"],
        "metrics-max-namespaces": ["500"], "watch-nodes": ["true"], "remediate": ["evict"],
        "watch-node-features": ["true"], "image-compatibility-negative-ttl": ["30s"],
        "remediate-rate": ["20"], "remediate-exempt-namespaces": ["kube-system,ops"],
        "taint-arches": ["arm64"],
        "leader-elect-resource-name": [release],
        "detect-exec-format-errors": ["true"], "log-reads-per-second": ["3"],
        "learned-store": [f"{release}-learned-platforms"], "learned-max-entries": ["500"],
        "registry-qps": ["7.5"], "registry-burst": ["30"],
        "shared-cache": ["rediss://noe@valkey.cache.svc:6380/2"],
        "shared-cache-key-file": ["/etc/noe/shared-cache/hmac-key"],
        "shared-cache-password-file": ["/etc/noe/shared-cache/password"],
        "shared-cache-timeout": ["15ms"],
        "shared-cache-ca-file": ["/etc/noe/shared-cache-ca/ca.crt"],
        "cloud-credentials": ["ecr,gcp,acr"],
        "credential-provider-sa-tokens": ["true"],
        "verify-binaries": ["background"], "verify-max-bytes": ["128Mi"],
        "verify-concurrency": ["4"],
    }
    for k, v in want.items():
        check(f"full --{k}", f.get(k) == v, str(f.get(k)))
    check("full: verification without gate-verify", "gate-verify" not in f)
    sa = r.one("ServiceAccount")["metadata"].get("annotations") or {}
    check("full: cloud identity ServiceAccount annotations", {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/noe-ecr-read",
        "iam.gke.io/gcp-service-account": "noe-reader@my-project.iam.gserviceaccount.com",
        "azure.workload.identity/client-id": "11111111-2222-3333-4444-555555555555",
    }.items() <= sa.items(), str(sa))
    pod_labels = r.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    check("full: acr marks the pod for Azure workload identity",
          pod_labels.get("azure.workload.identity/use") == "true", str(pod_labels))
    rules = {(tuple(x["apiGroups"]), tuple(x["resources"])): x["verbs"]
             for x in r.one("ClusterRole")["rules"]}
    check("full: every controller's and feature's RBAC", rules == {
        (("",), ("secrets",)): ["get"],
        (("",), ("serviceaccounts",)): ["get"],
        (("",), ("serviceaccounts/token",)): ["create"],
        (("",), ("namespaces",)): ["get"],
        (("",), ("nodes",)): ["get", "list", "watch", "patch"],
        (("nfd.k8s-sigs.io",), ("nodefeatures",)): ["list", "watch"],
        (("",), ("pods",)): ["list", "watch"],
        (("events.k8s.io",), ("events",)): ["create", "patch"],
        (("",), ("pods/log",)): ["get"],
        (("",), ("pods/eviction",)): ["create"]}, str(rules))
    check("full: a leader election Role and the learned store's", len(r.all("Role")) == 2)
    check_shared_cache_mounts(r, release, "noe-shared-cache", "redis-password")
    check("full: no in-chart Valkey (an external server)", not r.valkey)
    c = container(r)
    check("full: extraArgs appended last", c["args"][-1] == "--dev-self-signed-cert=false")
    check("full: image with registry and tag",
          c["image"] == "registry.example.com:5000/platform/noe-rs:1.2.3")
    check("full: pullPolicy", c["imagePullPolicy"] == "Always")
    check("full: extraEnv after the downward API entries",
          [e["name"] for e in c.get("env", [])] == ["POD_NAME", "POD_NAMESPACE", "RUST_LOG"]
          and c["env"][-1] == {"name": "RUST_LOG", "value": "noe=debug"})
    check("full: resources", c["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"})
    dep = r.one("Deployment")
    spec = dep["spec"]["template"]["spec"]
    check("full: replicaCount 3 with ha", dep["spec"]["replicas"] == 3)
    check("full: terminationGracePeriodSeconds", spec.get("terminationGracePeriodSeconds") == 45)
    check("full: imagePullSecrets (both forms)",
          spec.get("imagePullSecrets") == [{"name": "regcred"}, {"name": "other-regcred"}])
    check("full: priorityClassName", spec.get("priorityClassName") == "system-cluster-critical")
    check("full: nodeSelector", spec.get("nodeSelector", {}).get("node-role.kubernetes.io/system") == "true")
    check("full: tolerations", spec.get("tolerations", [{}])[0].get("key") == "dedicated")
    check("full: affinity", "nodeAffinity" in spec.get("affinity", {}))
    check("full: topologySpreadConstraints from values",
          spec.get("topologySpreadConstraints", [{}])[0].get("topologyKey") == "topology.kubernetes.io/zone"
          and len(spec["topologySpreadConstraints"]) == 1)
    check("full: podSecurityContext", spec["securityContext"].get("fsGroup") == 10001)
    pdb = r.one("PodDisruptionBudget")
    check("full: PDB minAvailable 1 on our pods",
          pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {"app": release}}})
    # Per-architecture tolerations: a ConfigMap, mounted, named by the flag.
    cms = {cm["metadata"]["name"]: cm for cm in r.all("ConfigMap")}
    tol = cms.get(f"{release}-arch-tolerations")
    check("full: arch tolerations ConfigMap", tol is not None)
    if tol:
        data = yaml.safe_load(tol["data"]["tolerations.yaml"])
        check("full: arch settings content (empty ones dropped)", data == {"arm64": {
            "tolerations": [{"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64",
                             "effect": "NoSchedule"}],
            "nodeLabels": {"node.example.com/pool": "graviton"}}}, str(data))
    overrides = cms.get(f"{release}-platform-overrides")
    check("full: platform overrides ConfigMap", overrides is not None)
    if overrides:
        data = yaml.safe_load(overrides["data"]["overrides.yaml"])
        check("full: platform overrides content", data == [
            {"images": ["registry.internal.corp/legacy", "docker.io/library/busybox:1.36"],
             "platforms": ["linux/amd64", "linux/arm/v7"]},
            {"images": ["ghcr.io/company/wasm-modules"], "platforms": ["*"]}], str(data))
    check("full: --platform-overrides is in the mounted ConfigMap (read-only, no checksum: reloaded)",
          f["platform-overrides"][0].rsplit("/", 1)[0]
          in {m["mountPath"] for m in c["volumeMounts"] if m.get("readOnly")}
          and "checksum/platform-overrides" not in (
              r.one("Deployment")["spec"]["template"]["metadata"].get("annotations") or {}))
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    check("full: --arch-tolerations-file is in the mounted ConfigMap",
          f["arch-tolerations-file"][0].rsplit("/", 1)[0] in mounts
          and f["arch-tolerations-file"][0].endswith("/tolerations.yaml"))
    ca = cms.get(f"{release}-registry-ca")
    check("full: registry CA ConfigMap", ca is not None and "BEGIN CERTIFICATE" in ca["data"]["ca.crt"])
    check("full: --registry-ca-file is in the mounted ConfigMap",
          f["registry-ca-file"][0].rsplit("/", 1)[0] in mounts)
    vols = {v["name"]: v for v in spec["volumes"]}
    check("full: kubelet plugin dir mounted as a Directory",
          vols["kubelet-credential-provider-bin"]["hostPath"] == {
              "path": "/etc/eks/image-credential-provider", "type": "Directory"})
    check("full: kubelet provider config mounted as a file",
          vols["kubelet-credential-provider-config"]["hostPath"] == {
              "path": "/etc/eks/credential-provider-config/config.yaml", "type": "FileOrCreate"})
    check("full: containerd dir -> config.toml file + certs.d",
          vols["containerd-config-0"]["hostPath"]["path"] == "/etc/containerd/config.toml"
          and vols["containerd-certs-d-0"]["hostPath"] == {"path": "/etc/containerd/certs.d",
                                                         "type": "DirectoryOrCreate"})
    check("full: containerd .toml path mounted as that file",
          vols["containerd-config-1"]["hostPath"] == {"path": "/etc/k3s/containerd/config.toml",
                                                    "type": "FileOrCreate"})
    w = r.one("MutatingWebhookConfiguration")["webhooks"][0]
    check("full: failurePolicy Fail", w["failurePolicy"] == "Fail")
    check("full: timeoutSeconds 15", w["timeoutSeconds"] == 15)
    check("full: reinvocationPolicy Never", w["reinvocationPolicy"] == "Never")
    check_match_conditions(w, ["not-skip-labelled", "not-bound-or-debug-containers"])
    check("full: pods/ephemeralcontainers UPDATE registered", any(
        rule["resources"] == ["pods/ephemeralcontainers"] and rule["operations"] == ["UPDATE"]
        for rule in w["rules"]))
    check("full: namespaceSelector from values", w["namespaceSelector"] == {
        "matchLabels": {"noe.example.com/enabled": "true"},
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                              "values": ["kube-system"]}]})
    check("full: objectSelector from values", w["objectSelector"] == {
        "matchLabels": {"noe.example.com/managed": "true"},
        "matchExpressions": [{"key": SKIP_LABEL, "operator": "DoesNotExist"}]})
    sm = r.one("ServiceMonitor")
    check("full: ServiceMonitor interval/timeout/labels",
          sm["spec"]["endpoints"][0]["interval"] == "15s"
          and sm["spec"]["endpoints"][0]["scrapeTimeout"] == "5s"
          and sm["metadata"]["labels"].get("release") == "kube-prometheus-stack")
    rb = [x for x in r.all("RoleBinding") if x["roleRef"]["kind"] == "ClusterRole"]
    check("full: podSecurityPolicyClusterRole bound",
          len(rb) == 1 and rb[0]["roleRef"]["name"] == "psp-restricted"
          and rb[0]["metadata"]["namespace"] == namespace)
    for key in PER_OBJECT_KIND:
        if key in ("rolebinding", "role"):
            for x in r.all(PER_OBJECT_KIND[key]):
                check(f"full: {key} labels on {x['metadata']['name']}",
                      x["metadata"]["labels"].get(f"l-{key}") == "v"
                      and x["metadata"]["annotations"].get(f"a-{key}") == "v")
            continue
        m = r.meta(key)
        check(f"full: {key}.labels", m.get("labels", {}).get(f"l-{key}") == "v")
        check(f"full: {key}.annotations", (m.get("annotations") or {}).get(f"a-{key}") == "v")


def check_shared_cache_mounts(r, release, secret, password_key):
    """The key and password files come from the Secret, read-only; the CA from its ConfigMap."""
    f = flags(r)
    c = container(r)
    spec = r.one("Deployment")["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    sec = vols.get("shared-cache-secret", {}).get("secret", {})
    items = {i["path"]: i["key"] for i in sec.get("items", [])}
    check("shared cache: the Secret mounted read-only at /etc/noe/shared-cache",
          sec.get("secretName") == secret
          and mounts.get("shared-cache-secret", {}).get("mountPath") == "/etc/noe/shared-cache"
          and mounts["shared-cache-secret"].get("readOnly") is True, str(sec))
    want = {"hmac-key": "hmac-key"}
    if password_key:
        want["password"] = password_key
    check("shared cache: the Secret's key and password items", items == want, str(items))
    # With fsGroup, 0440 in that group (the kubelet adds group read to Secret files anyway);
    # without, 0444 is the only mode the non-root user can read.
    fs_group = (spec.get("securityContext") or {}).get("fsGroup")
    want_mode = 0o440 if fs_group else 0o444
    check(f"shared cache: files readable by the non-root user only (mode {want_mode:o})",
          sec.get("defaultMode") == want_mode, f"{sec.get('defaultMode')!r} fsGroup {fs_group!r}")
    check("shared cache: no secret in the args or the environment",
          not any("password=" in a.lower() and "file" not in a for a in c["args"])
          and not any("PASSWORD" in e.get("name", "") for e in c.get("env") or []))
    if "shared-cache-ca-file" in f:
        cms = {cm["metadata"]["name"]: cm for cm in r.all("ConfigMap")}
        ca = cms.get(f"{release}-shared-cache-ca")
        check("shared cache: CA ConfigMap mounted",
              ca is not None and "BEGIN CERTIFICATE" in ca["data"]["ca.crt"]
              and mounts.get("shared-cache-ca", {}).get("mountPath") == "/etc/noe/shared-cache-ca")


def scenario_shared_cache_valkey(r, release, namespace):
    f = flags(r)
    check("valkey: --shared-cache is the in-chart Service",
          f.get("shared-cache") == [f"redis://{release}-valkey.{namespace}.svc:6379/0"],
          str(f.get("shared-cache")))
    check_shared_cache_mounts(r, release, "noe-shared-cache", "password")
    deps = [d for d in r.valkey if d["kind"] == "Deployment"]
    svcs = [d for d in r.valkey if d["kind"] == "Service"]
    check("valkey: one Deployment and one Service", len(deps) == 1 and len(svcs) == 1)
    if len(deps) != 1 or len(svcs) != 1:
        return
    dep, svc = deps[0], svcs[0]
    pod = dep["spec"]["template"]
    vc = pod["spec"]["containers"][0]
    check("valkey: the official image", vc["image"].startswith("valkey/valkey:"))
    check("valkey: non-root, read-only root, no privileges",
          pod["spec"]["securityContext"].get("runAsNonRoot") is True
          and vc["securityContext"].get("readOnlyRootFilesystem") is True
          and vc["securityContext"].get("allowPrivilegeEscalation") is False
          and vc["securityContext"]["capabilities"]["drop"] == ["ALL"])
    check("valkey: nothing persisted, bounded memory",
          "--save ''" in vc["args"][0] and "--appendonly no" in vc["args"][0]
          and "--maxmemory " in vc["args"][0] and "allkeys-lru" in vc["args"][0])
    env = {e["name"]: e for e in vc.get("env", [])}
    check("valkey: the password from the same Secret",
          env.get("VALKEY_PASSWORD", {}).get("valueFrom", {}).get("secretKeyRef")
          == {"name": "noe-shared-cache", "key": "password"})
    check("valkey: its Service selects only its pods",
          svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
          and svc["spec"]["selector"] != {"app": release}
          and [p["port"] for p in svc["spec"]["ports"]] == [6379])
    check("valkey: no service account token",
          pod["spec"].get("automountServiceAccountToken") is False)
    noe_svc = r.one("Service")
    check("noe's Service does not select Valkey",
          noe_svc["spec"]["selector"] != dep["spec"]["selector"]["matchLabels"])


def scenario_shared_cache_no_fsgroup(r, release, namespace):
    spec = r.one("Deployment")["spec"]["template"]["spec"]
    check("no fsGroup: none rendered", "fsGroup" not in (spec.get("securityContext") or {}))
    check_shared_cache_mounts(r, release, "noe-shared-cache", "password")


def scenario_certmanager_off(r, release, namespace):
    check("cert-manager off: no Issuer/Certificate", not r.all("Issuer") and not r.all("Certificate"))
    check("cert-manager off: timeoutSeconds 1 -> deadline 1s",
          flags(r).get("admission-deadline") == ["1s"])


def scenario_noe_values(r, release, namespace):
    f = flags(r)
    check("noe values: noe's image reference", container(r)["image"] == "ghcr.io/adevinta/noe:latest")
    check("noe values: docker config path", f.get("docker-config-path") == ["/var/lib/kubelet/config.json"])
    check("noe values: containerd path", f.get("containerd-config-path") == ["/etc/containerd"])
    for k in ("match-node-labels", "registry-proxies", "cluster-schedulable-archs",
              "image-credential-provider-config", "private-registries", "leader-elect",
              "watch-nodes", "remediate", "taint-arches"):
        check(f"noe values: empty value gives no --{k}", k not in f)
    check("noe values: no RoleBinding", not r.all("RoleBinding"))


def scenario_noe_values_test_full(r, release, namespace):
    f = flags(r)
    want = {
        "cluster-schedulable-archs": ["amd64,arm64"],
        "registry-proxies": ["docker.io=docker-proxy.company.corp,quay.io=quay-proxy.company.corp"],
        "match-node-labels": ["accelerator.node.kubernetes.io/inference,accelerator.node.kubernetes.io/gpu"],
        "image-credential-provider-bin-dir": ["/etc/eks/image-credential-provider"],
        "image-credential-provider-config": ["/etc/eks/image-credential-provider/config.json"],
        "docker-config-path": ["/var/lib/kubelet/config.json", "/.docker/config.json",
                               "/var/lib/kubelet/.dockercfg"],
        "containerd-config-path": ["/etc/containerd"],
    }
    for k, v in want.items():
        check(f"noe full values --{k}", f.get(k) == v, str(f.get(k)))
    vols = {v["name"] for v in r.one("Deployment")["spec"]["template"]["spec"]["volumes"]}
    check("noe full values: config inside the plugin dir is not mounted twice",
          "kubelet-credential-provider-config" not in vols and "kubelet-credential-provider-bin" in vols)
    for key in PER_OBJECT_KIND:
        if key in ("rolebinding", "role", "service"):
            continue  # no RoleBinding or Role without them enabled; service not in the file
        m = r.meta(key)
        check(f"noe full values: {key} labels and annotations",
              m.get("labels", {}).get("some") == "label"
              and (m.get("annotations") or {}).get("sonme") == "annotations")


def scenario_ha(r, release, namespace):
    dep = r.one("Deployment")
    spec = dep["spec"]["template"]["spec"]
    check("ha: replicaCount 1 raised to 2", dep["spec"]["replicas"] == 2)
    check("ha: --leader-elect=true", flags(r).get("leader-elect") == ["true"])
    check("ha alone: nothing to elect, no Lease flag and no Role",
          "leader-elect-resource-name" not in flags(r) and not r.all("Role"))
    check("ha: PodDisruptionBudget minAvailable 1", r.one("PodDisruptionBudget")["spec"]["minAvailable"] == 1)
    spread = {c["topologyKey"]: c for c in spec.get("topologySpreadConstraints", [])}
    host = spread.get("kubernetes.io/hostname", {})
    check("ha: hard spread over nodes",
          host.get("whenUnsatisfiable") == "DoNotSchedule" and host.get("maxSkew") == 1
          and host.get("labelSelector") == {"matchLabels": {"app": release}})
    check("ha: soft spread over zones",
          spread.get("topology.kubernetes.io/zone", {}).get("whenUnsatisfiable") == "ScheduleAnyway")
    w = r.one("MutatingWebhookConfiguration")["webhooks"][0]
    check("namespaceSelector {} selects every namespace", w["namespaceSelector"] == {})


def scenario_no_host_files(r, release, namespace):
    f = flags(r)
    check("no candidates: --docker-config-path= (none, not the defaults)",
          f.get("docker-config-path") == [""])
    check("no candidates: --containerd-config-path= (none, not the defaults)",
          f.get("containerd-config-path") == [""])
    spec = r.one("Deployment")["spec"]["template"]["spec"]
    check("no candidates: no hostPath volume", not any("hostPath" in v for v in spec["volumes"]))


def scenario_controllers_report(r, release, namespace):
    f = flags(r)
    for k, v in {"watch-nodes": ["true"], "remediate": ["report"],
                 "cluster-schedulable-archs": ["auto,arm64"]}.items():
        check(f"controllers report: --{k}={v[0]}", f.get(k) == v, str(f.get(k)))
    for k in ("remediate-rate", "taint-arches", "leader-elect", "leader-elect-resource-name"):
        check(f"controllers report: no --{k} (one replica, no eviction, no taint)", k not in f)
    check("controllers report: no Role", not r.all("Role"))
    for k in ("detect-exec-format-errors", "learned-store"):
        check(f"controllers report: no --{k} (detection off by default)", k not in f)
    check("controllers report: no pods/log", not any(
        "pods/log" in x["resources"] for x in r.one("ClusterRole")["rules"]))
    check("controllers report: no eviction, no node writes",
          not any("pods/eviction" in x["resources"] or "patch" in x["verbs"] and "nodes" in
                  x["resources"] for x in r.one("ClusterRole")["rules"]))


def scenario_controllers_detect(r, release, namespace):
    f = flags(r)
    want = {"detect-exec-format-errors": ["true"], "log-reads-per-second": ["2"],
            "learned-store": [f"{release}-learned-platforms"], "learned-max-entries": ["300"],
            "remediate": ["evict"], "leader-elect": ["true"]}
    for k, v in want.items():
        check(f"controllers detect: --{k}={v[0]}", f.get(k) == v, str(f.get(k)))
    check("controllers detect: two Roles (the Lease, the learned store)", len(r.all("Role")) == 2)
    check("controllers detect: pods/log get",
          {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}
          in r.one("ClusterRole")["rules"])


def scenario_controllers_taints(r, release, namespace):
    f = flags(r)
    want = {"taint-arches": ["arm64,s390x"], "leader-elect": ["true"],
            "leader-elect-resource-name": [release]}
    for k, v in want.items():
        check(f"controllers taints: --{k}={v[0]}", f.get(k) == v, str(f.get(k)))
    check("controllers taints: a bare YAML off is remediation off", "remediate" not in f)
    check("controllers taints: 2 replicas, leader election on without ha",
          r.one("Deployment")["spec"]["replicas"] == 2 and not r.all("PodDisruptionBudget"))
    check("controllers taints: one Role for the Lease", len(r.all("Role")) == 1)


def scenario_gate(r, release, namespace):
    f = flags(r)
    want = {"lookup-mode": ["hybrid"], "hybrid-budget": ["20ms"], "gate-max-attempts": ["3"],
            "leader-elect": ["true"], "leader-elect-resource-name": [release],
            "gate-namespace-selector": ["team=shop,tier in (web,batch)"],
            "gate-object-selector": ["!example.com/no-gate"],
            "verify-binaries": ["background"], "gate-verify": ["true"],
            "verify-max-bytes": ["64Mi"], "verify-concurrency": ["2"]}
    for k, v in want.items():
        check(f"gate: --{k}={v[0]}", f.get(k) == v, str(f.get(k)))
    rules = r.one("ClusterRole")["rules"]
    check("gate: the namespace selector reads namespaces",
          any(rule["resources"] == ["namespaces"] and rule["verbs"] == ["get"] for rule in rules),
          str(rules))
    check("gate: only the pre-delete hook Job (noe's own ServiceAccount and ClusterRole)",
          [(d["kind"], d["metadata"]["annotations"]["helm.sh/hook"]) for d in r.hooks]
          == [("Job", "pre-delete")], str(r.hooks))
    mwc = r.one("MutatingWebhookConfiguration")["metadata"]["name"]
    check_ungate_job(r, "pre-delete", ["ungate", "--all-namespaces", "--deadline=5m",
                                       f"--delete-webhook-configuration={mwc}"])


# The Deployment's flags `noe ungate` does not take (the server's, the controllers'); it takes
# the facts the decision reads (--namespace-preference, --watch-nodes).
NOT_UNGATE_FLAGS = {
    "webhook-addr", "metrics-addr", "health-probe-addr", "cert-dir", "shutdown-delay",
    "metrics-max-namespaces", "check-ephemeral-containers",
    "remediate", "remediate-rate", "remediate-exempt-namespaces", "lookup-mode", "hybrid-budget", "gate-namespace-selector",
    "detect-exec-format-errors", "log-reads-per-second", "learned-store", "learned-max-entries",
    "gate-object-selector", "leader-elect", "leader-elect-resource-name", "dev-self-signed-cert",
    "lookup-addr", "lookup-client-ca", "lookup-token-audience", "lookup-token-review-qps",
    "lookup-deadline",
    # Image selection rewrites a pod at admission, before any gate: ungate never selects.
    "image-selection", "image-compatibility-all-namespaces", "watch-node-features",
    "image-compatibility-negative-ttl",
    # The background verification is the server's; ungate releases with what is known.
    "verify-binaries", "gate-verify",
}


def check_ungate_job(r, hook, head):
    """The hook Job looks images up and decides as the Deployment does."""
    jobs = [d for d in r.hooks if d["kind"] == "Job"]
    check(f"{hook}: one hook Job", len(jobs) == 1
          and jobs[0]["metadata"]["annotations"]["helm.sh/hook"] == hook, str(jobs))
    job = jobs[0]["spec"]["template"]["spec"]
    c = job["containers"][0]
    dep = r.one("Deployment")["spec"]["template"]["spec"]
    check(f"{hook}: `noe ungate` first", c["args"][:len(head)] == head, str(c["args"]))
    want = [a for a in container(r)["args"]
            if a.split("=", 1)[0].lstrip("-") not in NOT_UNGATE_FLAGS]
    check(f"{hook}: the Deployment's lookup and decision flags, in its order",
          c["args"][len(head):] == want, str(c["args"][len(head):]) + " != " + str(want))
    mounts = [m for m in container(r)["volumeMounts"] if m["name"] != "certs"]
    check(f"{hook}: the Deployment's volume mounts but its certificate",
          c["volumeMounts"] == mounts, str(c["volumeMounts"]))
    volumes = [v for v in dep["volumes"] if v["name"] != "certs"]
    check(f"{hook}: the Deployment's volumes but its certificate", job["volumes"] == volumes,
          str(job["volumes"]))
    check(f"{hook}: the Deployment's extra environment", c.get("env") == (
        [e for e in container(r).get("env", []) if e["name"] not in ("POD_NAME", "POD_NAMESPACE")]
        or None), str(c.get("env")))
    check(f"{hook}: runs as noe's ServiceAccount (its cloud identity)",
          job["serviceAccountName"] == dep["serviceAccountName"])
    azure = "azure.workload.identity/use"
    pod_labels = r.one("Deployment")["spec"]["template"]["metadata"].get("labels") or {}
    job_labels = jobs[0]["spec"]["template"].get("metadata", {}).get("labels") or {}
    check(f"{hook}: Azure workload identity as the Deployment's pods",
          job_labels.get(azure) == pod_labels.get(azure), str(job_labels))
    check(f"{hook}: the hook container is locked down",
          c["securityContext"]["readOnlyRootFilesystem"] is True
          and c["securityContext"]["capabilities"]["drop"] == ["ALL"])


def scenario_upgrade_inline(r, release, namespace):
    """An upgrade to lookupMode inline where the previous Deployment cannot be looked up
    (helm template): the post-upgrade hook runs."""
    kinds = sorted(d["kind"] for d in r.hooks)
    check("upgrade to inline: the post-upgrade hook's ClusterRole, binding and Job",
          kinds == ["ClusterRole", "ClusterRoleBinding", "Job"], str(kinds))
    crb = [d for d in r.hooks if d["kind"] == "ClusterRoleBinding"][0]
    check("upgrade to inline: the hook's ClusterRole is bound to noe's ServiceAccount",
          crb["subjects"][0]["name"]
          == r.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"])
    check_ungate_job(r, "post-upgrade", ["ungate", "--all-namespaces", "--deadline=2m"])
    # The values set namespacePreference and controller.watchNodes: the hook's own ClusterRole
    # lets `noe ungate` read what its flags ask for (the release's no longer lets it patch pods).
    role = [d for d in r.hooks if d["kind"] == "ClusterRole"][0]
    grants = {(tuple(rule["resources"]), tuple(rule["verbs"])) for rule in role["rules"]}
    for resources, verbs in [(("pods",), ("list", "patch")), (("namespaces",), ("get",)),
                             (("nodes",), ("list", "watch"))]:
        check(f"upgrade to inline: the hook may {'/'.join(verbs)} {resources[0]}",
              (resources, verbs) in grants, str(role["rules"]))


def scenario_skip_arch_pinned(r, release, namespace):
    w = r.one("MutatingWebhookConfiguration")["webhooks"][0]
    check_match_conditions(w, ["not-skip-labelled", "not-bound-or-debug-containers",
                               "arch-not-pinned-by-the-pod"])


def scenario_no_match_conditions(r, release, namespace):
    w = r.one("MutatingWebhookConfiguration")["webhooks"][0]
    check("matchConditions off: none rendered", "matchConditions" not in w)


def scenario_lookup(r, release, namespace):
    """lookupEndpoint with a client CA and a token audience, behind cert-manager."""
    f = flags(r)
    want = {"lookup-addr": [":9443"], "lookup-deadline": ["1500ms"],
            "lookup-client-ca": ["/etc/noe/lookup-client-ca/ca.crt"],
            "lookup-token-audience": ["kyverno-svc.kyverno.io"]}
    for k, v in want.items():
        check(f"lookup: --{k}={v[0]}", f.get(k) == v, str(f.get(k)))
    c = container(r)
    check("lookup: the container port `lookup`",
          {"name": "lookup", "containerPort": 9443, "protocol": "TCP"} in c["ports"], str(c["ports"]))
    spec = r.one("Deployment")["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    check("lookup: the client CA Secret's key mounted as ca.crt",
          vols.get("lookup-client-ca", {}).get("secret") == {
              "secretName": "gatekeeper-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]},
          str(vols.get("lookup-client-ca")))
    check("lookup: mounted read-only where --lookup-client-ca reads it",
          {"name": "lookup-client-ca", "mountPath": "/etc/noe/lookup-client-ca", "readOnly": True}
          in c["volumeMounts"])
    check("lookup: one Service of its own", len(r.lookup) == 1, str(len(r.lookup)))
    svc = r.lookup[0] if r.lookup else {"metadata": {}, "spec": {}}
    check("lookup: the Service <release>-lookup, 443 -> lookup, selecting noe's pods",
          svc["metadata"].get("name") == f"{release}-lookup"
          and svc["spec"].get("ports") == [{"name": "lookup", "port": 443, "targetPort": "lookup",
                                             "protocol": "TCP"}]
          and svc["spec"].get("selector") == {"app": release}, str(svc))
    check("lookup: the Service's own annotations",
          svc["metadata"].get("annotations") == {"example.com/team": "platform"})
    cert = r.one("Certificate")["spec"]["dnsNames"]
    check("lookup: the serving certificate names the lookup Service",
          f"{release}-lookup.{namespace}.svc" in cert
          and f"{release}-lookup.{namespace}.svc.cluster.local" in cert, str(cert))
    rules = r.one("ClusterRole")["rules"]
    check("lookup: create tokenreviews (token audience set)",
          {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
           "verbs": ["create"]} in rules, str(rules))
    np = r.one("NetworkPolicy")["spec"]["ingress"]
    check("lookup: the NetworkPolicy lets lookupEndpoint.from reach the lookup port",
          {"ports": [{"protocol": "TCP", "port": 9443}],
           "from": [{"namespaceSelector": {"matchLabels": {
               "kubernetes.io/metadata.name": "gatekeeper-system"}}}]} in np, str(np))


def scenario_lookup_tokens_only(r, release, namespace):
    """lookupEndpoint with tokens only and a Helm-generated certificate."""
    f = flags(r)
    check("lookup tokens only: no --lookup-client-ca and no CA volume",
          "lookup-client-ca" not in f
          and all(v["name"] != "lookup-client-ca"
                  for v in r.one("Deployment")["spec"]["template"]["spec"]["volumes"]))
    check("lookup tokens only: --lookup-token-audience",
          f.get("lookup-token-audience") == ["kyverno-svc.kyverno.io"])
    secret = [s for s in r.all("Secret") if s["metadata"]["name"] == release]
    if len(secret) != 1:
        check("lookup tokens only: the generated Secret", False)
        return
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tls.crt")
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(secret[0]["data"]["tls.crt"]))
        t = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", path],
                           capture_output=True, text=True)
        check("lookup tokens only: the generated certificate names the lookup Service",
              f"DNS:{release}-lookup.{namespace}.svc" in t.stdout, t.stdout + t.stderr)


def scenario_default_lookup_off(r):
    check("default: no lookup endpoint (no Service, no port, no flag)",
          not r.lookup and "lookup-addr" not in flags(r)
          and all(p["name"] != "lookup" for p in container(r)["ports"]))


SCENARIOS = {
    "lookup": scenario_lookup,
    "lookup-tokens-only": scenario_lookup_tokens_only,
    "controllers-report": scenario_controllers_report,
    "controllers-detect": scenario_controllers_detect,
    "controllers-taints": scenario_controllers_taints,
    "gate": scenario_gate,
    "upgrade-inline": scenario_upgrade_inline,
    "skip-arch-pinned": scenario_skip_arch_pinned,
    "no-match-conditions": scenario_no_match_conditions,
    "no-host-files": scenario_no_host_files,
    "ha": scenario_ha,
    "default": scenario_default,
    "full": scenario_full,
    "certmanager-off": scenario_certmanager_off,
    "noe-values": scenario_noe_values,
    "noe-values-test-full": scenario_noe_values_test_full,
    "example-shared-cache": scenario_shared_cache_valkey,
    "shared-cache-no-fsgroup": scenario_shared_cache_no_fsgroup,
}


class Helpers:
    """What check_platform.py uses of this module (one pass/fail count)."""
    check = staticmethod(check)
    container = staticmethod(container)
    flags = staticmethod(flags)


def main():
    scenario, path = sys.argv[1], sys.argv[2]
    release = sys.argv[3] if len(sys.argv) > 3 else "noe"
    namespace = sys.argv[4] if len(sys.argv) > 4 else "noe"
    r = Render(path)
    t = Helpers()

    def platform_invariants(*a):
        check_platform.invariants(t, *a)

    def platform_scenario(*a):
        check_platform.SCENARIOS[scenario](t, *a)

    platform = [platform_invariants]
    if scenario in check_platform.SCENARIOS:
        platform.append(platform_scenario)
    for fn in (invariants, SCENARIOS.get(scenario), *platform):
        if fn is None:
            continue
        try:
            fn(r, release, namespace)
        except (AssertionError, KeyError, IndexError, TypeError, ValueError, StopIteration) as e:
            check(f"{scenario}: {fn.__name__} ran to the end", False, f"{type(e).__name__}: {e}")
    print(f"CHECKS {passed} {failed}")


if __name__ == "__main__":
    main()
