"""Assertions on what platform teams look for in the chart (called from check.py): NetworkPolicies,
the `helm test` Pod, the PrometheusRule and the dashboard ConfigMap, the ServiceAccount, host
networking and ports, extra volumes.

Each function takes (t, r, release, namespace): t carries check.py's `check`, `container` and
`flags` (one pass/fail count for the whole render).
"""
import json
import re

import yaml


def ports_of(t, r):
    return {p["name"]: p["containerPort"] for p in t.container(r)["ports"]}


def rule_ports(rule):
    return {(p.get("protocol", "TCP"), p["port"]) for p in rule.get("ports", [])}


def invariants(t, r, release, namespace):
    check = t.check
    spec = r.one("Deployment")["spec"]["template"]["spec"]
    ports = ports_of(t, r)
    pods = {"app": release}

    # The ServiceAccount the pod runs as is the one the chart created, if it created one.
    sas = r.all("ServiceAccount")
    check("a ServiceAccount object only for the pod's serviceAccountName",
          all(sa["metadata"]["name"] == spec["serviceAccountName"] for sa in sas) and len(sas) <= 1,
          f"{[sa['metadata']['name'] for sa in sas]} vs {spec['serviceAccountName']}")

    # Extra volumes: every extra mount names a volume of the pod.
    vols = {v["name"] for v in spec["volumes"]}
    mounts = [m["name"] for m in t.container(r)["volumeMounts"]]
    check("every volumeMount names a pod volume", set(mounts) <= vols, str(set(mounts) - vols))
    check("volume names are unique", len(vols) == len(spec["volumes"]))

    # NetworkPolicies.
    for np in r.all("NetworkPolicy"):
        s = np["spec"]
        check("NetworkPolicy selects noe's pods", s["podSelector"] == {"matchLabels": pods})
        check("NetworkPolicy covers ingress and egress", s["policyTypes"] == ["Ingress", "Egress"])
        ingress_ports = [rule_ports(i) for i in s["ingress"]]
        allowed = [{("TCP", ports["webhook"])}, {("TCP", ports["metrics"])}]
        if "lookup" in ports:
            allowed.append({("TCP", ports["lookup"])})
        check("NetworkPolicy lets in the webhook, metrics (and lookup) ports, nothing else",
              ingress_ports == allowed, str(ingress_ports))
        webhook_from = s["ingress"][0].get("from")
        if webhook_from is not None:
            check("a narrowed webhook ingress lets the helm test Pod in",
                  {"podSelector": {"matchLabels": {
                      "app.kubernetes.io/instance": release,
                      "app.kubernetes.io/component": "helm-test"}}} in webhook_from)
        egress_ports = [rule_ports(e) for e in s["egress"]]
        check("NetworkPolicy egress: DNS over UDP and TCP first",
              egress_ports and egress_ports[0] == {("UDP", 53), ("TCP", 53)}, str(egress_ports))
        check("NetworkPolicy egress: the registries' HTTPS port",
              any(("TCP", 443) in p for p in egress_ports[1:]), str(egress_ports))
    for np in [d for d in r.valkey if d["kind"] == "NetworkPolicy"]:
        s = np["spec"]
        check("Valkey NetworkPolicy: only noe's pods, on 6379, and no egress",
              s["podSelector"] == {"matchLabels": {"app": f"{release}-valkey"}}
              and s["ingress"] == [{"from": [{"podSelector": {"matchLabels": pods}}],
                                    "ports": [{"protocol": "TCP", "port": 6379}]}]
              and s["egress"] == [] and s["policyTypes"] == ["Ingress", "Egress"], str(s))
    if r.valkey and any(d["kind"] == "Deployment" for d in r.valkey) and r.all("NetworkPolicy"):
        check("with the in-chart Valkey, its NetworkPolicy is rendered too",
              any(d["kind"] == "NetworkPolicy" for d in r.valkey))
        egress = r.one("NetworkPolicy")["spec"]["egress"]
        check("noe's pods may reach the in-chart Valkey on 6379",
              {"ports": [{"protocol": "TCP", "port": 6379}],
               "to": [{"podSelector": {"matchLabels": {"app": f"{release}-valkey"}}}]} in egress)

    # The helm test Pod.
    tests = r.all("Pod")
    check("one helm test Pod", len(tests) == 1, str(len(tests)))
    for pod in tests:
        meta = pod["metadata"]
        check("helm test Pod: a test hook, deleted before the next run and on success",
              meta["annotations"].get("helm.sh/hook") == "test"
              and meta["annotations"].get("helm.sh/hook-delete-policy")
              == "before-hook-creation,hook-succeeded")
        check("helm test Pod: not selected by the noe Service or PDB",
              meta["labels"].get("app") != release)
        c = pod["spec"]["containers"][0]
        script = "\n".join(c["args"])
        check("helm test Pod: calls the Service's webhook port and route",
              f"https://{release}.{namespace}.svc:8443/mutate" in script, script)
        check("helm test Pod: verifies the certificate against ca.crt, never -k",
              "--cacert /certs/ca.crt" in script and " -k" not in script
              and "--insecure" not in script)
        vol = pod["spec"]["volumes"][0]["secret"]
        check("helm test Pod: ca.crt of the certificate Secret",
              vol["secretName"] == release and vol["items"] == [{"key": "ca.crt", "path": "ca.crt"}])
        env = {e["name"]: e["value"] for e in c["env"]}
        review = json.loads(env["REVIEW"])
        req = review["request"]
        check("helm test Pod: a dry-run review of a skip-labelled pod (no registry asked)",
              review["kind"] == "AdmissionReview" and req["dryRun"] is True
              and req["object"]["metadata"]["labels"] == {"arch.noe.adevinta.com/skip": "true"}
              and req["namespace"] == namespace)
        check("helm test Pod: the script checks the uid it sent",
              f'"uid":"{req["uid"]}"' in script)
        check("helm test Pod: non-root, no privilege escalation",
              pod["spec"]["securityContext"]["runAsNonRoot"] is True
              and c["securityContext"]["allowPrivilegeEscalation"] is False
              and pod["spec"]["automountServiceAccountToken"] is False)

    # PrometheusRule: each alert has a severity and a runbook_url to its own section.
    for pr in r.all("PrometheusRule"):
        check("PrometheusRule apiVersion monitoring.coreos.com/v1",
              pr["apiVersion"] == "monitoring.coreos.com/v1")
        rules = [x for g in pr["spec"]["groups"] for x in g["rules"]]
        names = [x["alert"] for x in rules]
        want = {"NoeAdmissionErrors", "NoeAdmissionLatencyNearDeadline", "NoeImageLookupsFailing",
                "NoeRegistryCircuitOpen", "NoeSharedCacheDown", "NoeGatedPodTooOld", "NoeGateQueueFull",
                "NoeNoLeaseHolder", "NoeEvictionsFailing", "NoePodsEvicted",
                "NoeExecFormatErrors", "NoeImageLiesAboutPlatforms"}
        check("PrometheusRule has the alerts of docs/configuration.md", set(names) == want,
              str(set(names) ^ want))
        for x in rules:
            url = x["annotations"].get("runbook_url", "")
            check(f"{x['alert']}: a severity and a runbook_url to its section",
                  x["labels"].get("severity") in ("warning", "info")
                  and url.endswith("#" + x["alert"].lower()), url)
    # The dashboard ConfigMap.
    for cm in [c for c in r.all("ConfigMap") if "grafana_dashboard" in c["metadata"]["labels"]]:
        check("dashboard ConfigMap labelled grafana_dashboard: \"1\"",
              cm["metadata"]["labels"]["grafana_dashboard"] == "1")
        dash = json.loads(cm["data"]["noe.json"])
        exprs = [tg["expr"] for p in dash["panels"] for tg in p.get("targets", [])]
        check("dashboard: JSON with panels, every query on noe's or process metrics",
              dash["uid"] == "noe-rs" and exprs
              and all(re.search(r"\b(noe|process)_[a-z_]+", e) for e in exprs))


def scenario_full(t, r, release, namespace):
    check = t.check
    spec = r.one("Deployment")["spec"]["template"]["spec"]
    f = t.flags(r)
    check("serviceAccount.name runs the pod, and the chart creates it",
          spec["serviceAccountName"] == "noe-webhook"
          and [sa["metadata"]["name"] for sa in r.all("ServiceAccount")] == ["noe-webhook"])
    check("the ClusterRoleBinding binds serviceAccount.name",
          r.one("ClusterRoleBinding")["subjects"][0]["name"] == "noe-webhook")
    check("hostNetwork with ClusterFirstWithHostNet DNS",
          spec.get("hostNetwork") is True and spec.get("dnsPolicy") == "ClusterFirstWithHostNet")
    check("ports.* reach the container ports",
          ports_of(t, r) == {"webhook": 9443, "metrics": 9080, "health": 9081}, str(ports_of(t, r)))
    check("ports.* reach the address flags",
          f.get("webhook-addr") == [":9443"] and f.get("metrics-addr") == [":9080"]
          and f.get("health-probe-addr") == [":9081"])
    svc = {p["name"]: (p["port"], p["targetPort"]) for p in r.one("Service")["spec"]["ports"]}
    check("the Service keeps 8443 and 8080, targeting the ports by name",
          svc == {"webhook": (8443, "webhook"), "metrics": (8080, "metrics")}, str(svc))
    ann = r.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    check("prometheus.io/port follows ports.metrics", ann.get("prometheus.io/port") == "9080")
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in t.container(r)["volumeMounts"]}
    check("extraVolumes and extraVolumeMounts appended",
          vols.get("corp-ca") == {"name": "corp-ca", "secret": {"secretName": "corp-ca"}}
          and mounts.get("corp-ca", {}).get("mountPath") == "/etc/noe/corp-ca")
    sm = r.one("ServiceMonitor")
    ep = sm["spec"]["endpoints"][0]
    check("ServiceMonitor namespace, relabelings and metricRelabelings",
          sm["metadata"]["namespace"] == "monitoring"
          and ep["relabelings"] == [{"sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                     "targetLabel": "node"}]
          and ep["metricRelabelings"][0]["action"] == "drop", str(ep))
    pr = r.one("PrometheusRule")
    rules = [x for g in pr["spec"]["groups"] for x in g["rules"]]
    check("PrometheusRule namespace and labels",
          pr["metadata"]["namespace"] == "monitoring"
          and pr["metadata"]["labels"].get("release") == "kube-prometheus-stack")
    check("ruleLabels on every alert", all(x["labels"].get("team") == "platform" for x in rules))
    check("runbookBaseURL on every alert", all(x["annotations"]["runbook_url"].startswith(
        "https://runbooks.example.com/noe/troubleshooting.md#") for x in rules))
    gated = next(x for x in rules if x["alert"] == "NoeGatedPodTooOld")
    check("gatedPodAgeSeconds is NoeGatedPodTooOld's threshold",
          gated["expr"].endswith("> 300"), gated["expr"])
    latency = next(x for x in rules if x["alert"] == "NoeAdmissionLatencyNearDeadline")
    timeout = r.one("MutatingWebhookConfiguration")["webhooks"][0]["timeoutSeconds"]
    want = 0.75 * max(1, timeout - 2)
    check("the latency alert's threshold is 75% of the admission deadline",
          float(latency["expr"].rsplit(">", 1)[1]) == want, f"{latency['expr']} want {want}")
    cm = next(c for c in r.all("ConfigMap") if "grafana_dashboard" in c["metadata"]["labels"])
    check("dashboard ConfigMap namespace, labels and annotations",
          cm["metadata"]["namespace"] == "grafana" and cm["metadata"]["labels"]["team"] == "platform"
          and cm["metadata"]["annotations"] == {"grafana_folder": "Kubernetes"})
    np = r.one("NetworkPolicy")["spec"]
    check("networkPolicy.webhook.from narrows the webhook port",
          np["ingress"][0]["from"][0] == {"ipBlock": {"cidr": "10.0.0.0/24"}})
    check("networkPolicy.metrics.from", np["ingress"][1]["from"] == [{"namespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": "observability"}}}])
    egress = np["egress"]
    check("networkPolicy.egress.apiServer", egress[1] == {
        "ports": [{"protocol": "TCP", "port": 443}], "to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]},
        str(egress[1]))
    check("registry egress: the configured ports plus each insecure registry's",
          rule_ports(egress[2]) == {("TCP", 443), ("TCP", 5000)}, str(egress[2]))
    check("shared cache egress: the port of sharedCache.url",
          {"ports": [{"protocol": "TCP", "port": 6380}]} in egress, str(egress))
    check("networkPolicy.egress.extra appended", egress[-1] == {
        "to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}],
        "ports": [{"protocol": "TCP", "port": 3128}]})
    pod = r.one("Pod")
    check("tests.image", pod["spec"]["containers"][0]["image"]
          == "registry.example.com:5000/tools/curl:8.11.1"
          and pod["spec"]["containers"][0]["imagePullPolicy"] == "Always")


def scenario_default(t, r, release, namespace):
    check = t.check
    spec = r.one("Deployment")["spec"]["template"]["spec"]
    check("default: no NetworkPolicy, PrometheusRule or dashboard",
          not r.all("NetworkPolicy") and not r.all("PrometheusRule")
          and not [c for c in r.all("ConfigMap") if "grafana_dashboard" in c["metadata"]["labels"]])
    check("default: the ServiceAccount is the release's, created by the chart",
          spec["serviceAccountName"] == release
          and [sa["metadata"]["name"] for sa in r.all("ServiceAccount")] == [release])
    check("default: no hostNetwork", "hostNetwork" not in spec and "dnsPolicy" not in spec)
    check("default: ports webhook 8443, metrics 8080, health 8081",
          ports_of(t, r) == {"webhook": 8443, "metrics": 8080, "health": 8081})
    check("default: the helm test Pod uses curl", r.one("Pod")["spec"]["containers"][0]["image"]
          == "docker.io/curlimages/curl:8.11.1")


def scenario_existing_sa(t, r, release, namespace):
    check = t.check
    spec = r.one("Deployment")["spec"]["template"]["spec"]
    check("serviceAccount.create false: no ServiceAccount object", not r.all("ServiceAccount"))
    check("serviceAccount.create false: the pod runs as serviceAccount.name",
          spec["serviceAccountName"] == "platform-noe")
    subjects = [s["name"] for b in r.all("ClusterRoleBinding") + r.all("RoleBinding")
                for s in b["subjects"]]
    check("every binding names serviceAccount.name", subjects and set(subjects) == {"platform-noe"},
          str(subjects))


SCENARIOS = {
    "full": scenario_full,
    "default": scenario_default,
    "existing-service-account": scenario_existing_sa,
}
