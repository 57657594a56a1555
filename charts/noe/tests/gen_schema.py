#!/usr/bin/env python3
"""Writes charts/noe/values.schema.json (draft-07).

The schema is generated so its repeated parts (label maps, per-object metadata, paths, durations)
stay consistent; run this after changing it and commit both files. run.sh checks the committed
schema is up to date.
"""
import json
import pathlib
import sys

GOARCH = ["386", "amd64", "arm", "arm64", "loong64", "mips", "mipsle", "mips64", "mips64le",
          "ppc64", "ppc64le", "riscv64", "s390x", "wasm"]
DURATION = {"type": "string", "pattern": r"^([0-9]*\.?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$",
            "description": "a Go duration such as 500ms, 5s, 1m30s or 1.5h"}
ABS_PATH = {"type": "string", "pattern": r"^/[^,\s]*[^/,\s]$",
            "description": "an absolute path on the node, without a trailing slash"}
STRING_MAP = {"type": ["object", "null"], "additionalProperties": {"type": "string"}}
NO_COMMA = r"^[^,\s]+$"


def meta_object(what):
    return {
        "type": ["object", "null"],
        "description": f"extra labels and annotations of the {what} (noe's key)",
        "additionalProperties": False,
        "properties": {"labels": STRING_MAP, "annotations": STRING_MAP},
    }


def string_list(item, description):
    return {"type": ["array", "null"], "description": description, "uniqueItems": True,
            "items": item}


LABEL_SELECTOR = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "properties": {
        "matchLabels": STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string", "minLength": 1},
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}

TOLERATION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "key": {"type": "string"},
        "operator": {"enum": ["Exists", "Equal"]},
        "value": {"type": "string"},
        "effect": {"enum": ["", "NoSchedule", "PreferNoSchedule", "NoExecute"]},
        "tolerationSeconds": {"type": "integer"},
    },
}

PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
# A NetworkPolicyPeer or an egress rule: Kubernetes' own schema checks them in the render.
PEERS = {"type": ["array", "null"], "items": {"type": "object"}}
PORTS = {"type": "array", "items": PORT}
RUNBOOK_BASE = {"type": "string", "pattern": r"^https?://\S+$",
                "description": "URL of docs/troubleshooting.md; each alert adds its #section"}


def monitoring_object(what, extra):
    props = {"enabled": {"type": "boolean"},
             "namespace": {"type": "string", "pattern": r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                           "description": f"namespace of the {what} (empty: the release's)"},
             "labels": STRING_MAP}
    props.update(extra)
    return {"type": "object", "additionalProperties": False, "properties": props}


PER_OBJECT = ["pod", "deployment", "service", "serviceaccount", "clusterrole",
              "clusterrolebinding", "rolebinding", "role", "issuer", "certificate",
              "mutatingwebhookconfiguration"]

schema = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "noe-rs chart values",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "global": {"type": "object", "description": "Helm parent-chart globals (unused)"},
        "image": {
            "type": "object",
            "additionalProperties": False,
            "required": ["repository"],
            "properties": {
                "registry": {"type": "string", "pattern": r"^[^/\s]*$",
                             "description": "registry host[:port], e.g. ghcr.io"},
                "repository": {"type": "string", "minLength": 1, "pattern": r"^[^:@\s]+$"},
                "tag": {"type": "string", "pattern": r"^[\w][\w.-]{0,127}$|^$",
                        "description": "a tag (quote numeric tags: \"1.2\")"},
                "digest": {"type": "string", "pattern": r"^$|^sha256:[0-9a-f]{64}$"},
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            },
        },
        "imagePullSecrets": {
            "type": "array",
            "items": {"oneOf": [
                {"type": "string", "minLength": 1},
                {"type": "object", "required": ["name"], "additionalProperties": False,
                 "properties": {"name": {"type": "string", "minLength": 1}}},
            ]},
        },
        "preferredArch": {"enum": [""] + GOARCH,
                          "description": "--preferred-arch (empty disables the preference)"},
        "preferenceMode": {"enum": ["required", "preferred"]},
        "preferenceWeight": {"type": "integer", "minimum": 1, "maximum": 100},
        "onLookupError": {"enum": ["ignore-image", "allow-pod", "deny", "fallback"]},
        "fallbackArch": {"enum": [""] + GOARCH,
                         "description": "--fallback-arch (needed with onLookupError: fallback)"},
        "mode": {"enum": ["enforce", "audit"], "description": "--mode"},
        "onContradiction": {"enum": ["warn", "deny"], "description": "--on-contradiction"},
        "namespacePreference": {
            "type": "object",
            "additionalProperties": False,
            "description": "--namespace-preference (grants get namespaces)",
            "properties": {"enabled": {"type": "boolean"}},
        },
        "imageSelection": {
            "type": "object",
            "additionalProperties": False,
            "description": "--image-selection (needs controller.watchNodes; grants get namespaces "
                           "unless allNamespaces; watchNodeFeatures: --watch-node-features, "
                           "grants list/watch nodefeatures.nfd.k8s-sigs.io)",
            "properties": {"enabled": {"type": "boolean"},
                           "allNamespaces": {"type": "boolean"},
                           "watchNodeFeatures": {"type": "boolean"},
                           "negativeTtl": dict(DURATION, description=(
                               "--image-compatibility-negative-ttl (at most 1h)"))},
        },
        "ephemeralContainers": {
            "type": "object",
            "additionalProperties": False,
            "description": "--check-ephemeral-containers (registers pods/ephemeralcontainers, "
                           "grants get nodes)",
            "properties": {"enabled": {"type": "boolean"}},
        },
        "platformOverrides": {
            "type": ["array", "null"],
            "description": "--platform-overrides: images whose platforms are stated here",
            "maxItems": 1024,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["images", "platforms"],
                "properties": {
                    "images": {"type": "array", "minItems": 1, "maxItems": 64,
                               "items": {"type": "string", "minLength": 1, "maxLength": 255,
                                         "pattern": r"^\S+$",
                                         "description": "a kubelet matchImages pattern"}},
                    "platforms": {"type": "array", "minItems": 1, "maxItems": 64,
                                  "items": {"type": "string",
                                            "pattern": r"^(\*|[A-Za-z0-9._-]{1,32}/[A-Za-z0-9._-]{1,32}(/[A-Za-z0-9._-]{1,32})?)$",
                                            "description": "os/arch[/variant], or * alone"}},
                },
            },
        },
        "systemOS": {"type": "string", "pattern": r"^[a-z0-9]+$"},
        "schedulableArchitectures": string_list(
            {"enum": GOARCH + ["auto"]},
            "--cluster-schedulable-archs (empty: all; auto: the nodes' archs, needs "
            "controller.watchNodes)"),
        "controller": {
            "type": "object",
            "description": "controllers beside the webhook (docs/configuration.md, Controllers)",
            "additionalProperties": False,
            "properties": {
                "watchNodes": {"type": "boolean", "description": "--watch-nodes"},
                "remediate": {"enum": ["off", "report", "evict", False],
                              "description": "--remediate (false: a bare YAML off)"},
                "remediateRate": {"type": "integer", "minimum": 1, "maximum": 10000,
                                  "description": "--remediate-rate (evictions per minute)"},
                "taintArches": string_list({"enum": GOARCH}, "--taint-arches"),
                "remediateExemptNamespaces": string_list(
                    {"type": "string", "maxLength": 63,
                     "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                    "--remediate-exempt-namespaces (null: kube-system and noe's namespace;"
                    " a list replaces that default)"),
                "detectExecFormatErrors": {"type": "boolean",
                                           "description": "--detect-exec-format-errors"},
                "logReadsPerSecond": {"type": "integer", "minimum": 1, "maximum": 100,
                                      "description": "--log-reads-per-second"},
                "learnedMaxEntries": {"type": "integer", "minimum": 1, "maximum": 5000,
                                      "description": "--learned-max-entries"},
            },
        },
        "lookupMode": {"enum": ["inline", "gate", "hybrid"],
                       "description": "--lookup-mode (docs/configuration.md, Lookup modes)"},
        "gate": {
            "type": "object",
            "description": "the gate and hybrid lookup modes",
            "additionalProperties": False,
            "properties": {
                "hybridBudget": dict(DURATION, description="--hybrid-budget"),
                "maxAttempts": {"type": "integer", "minimum": 1, "maximum": 100,
                                "description": "--gate-max-attempts"},
                "ungateDeadline": dict(DURATION, description="the hook Job's noe ungate --deadline"),
                "namespaceSelector": dict(LABEL_SELECTOR,
                                          description="--gate-namespace-selector"),
                "objectSelector": dict(LABEL_SELECTOR, description="--gate-object-selector"),
            },
        },
        "matchNodeLabels": string_list(
            {"type": "string",
             "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"},
            "pod label keys copied into the node selector (--match-node-labels)"),
        "architectures": {
            "type": ["object", "null"],
            "description": "per-architecture tolerations and node labels (--arch-tolerations-file)",
            "propertyNames": {"enum": GOARCH},
            "additionalProperties": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {
                    "tolerations": {"type": ["array", "null"], "items": TOLERATION},
                    "nodeLabels": {
                        "type": ["object", "null"],
                        "propertyNames": {"minLength": 1, "maxLength": 317,
                                          "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?"
                                                     r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"},
                        "additionalProperties": {"type": "string", "maxLength": 63,
                                                 "pattern": r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$"},
                    },
                },
            },
        },
        "proxies": string_list(
            {"type": "string", "pattern": r"^[^=,\s]+=[^=,\s]+$",
             "description": "registry=proxy, e.g. docker.io=docker-proxy.company.corp"},
            "--registry-proxies"),
        "privateRegistries": string_list({"type": "string", "pattern": NO_COMMA},
                                         "--private-registries (kubelet matchImages patterns)"),
        "insecureRegistries": string_list({"type": "string", "pattern": r"^[^/,\s]+$"},
                                          "--insecure-registries (host:port)"),
        "registryCABundle": {"type": "string",
                             "pattern": r"^$|-----BEGIN CERTIFICATE-----",
                             "description": "PEM certificates (--registry-ca-file)"},
        "allowRegistryCIDRs": string_list(
            {"type": "string", "pattern": r"^[0-9a-fA-F:.]+/[0-9]{1,3}$"},
            "--allow-registry-cidrs"),
        "registryTimeout": DURATION,
        "cache": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"ttl": DURATION,
                           "maxEntries": {"type": "integer", "minimum": 1}},
        },
        "verification": {
            "type": "object",
            "description": "platforms proven by the images' own programs "
                           "(docs/architecture.md, Verification)",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean",
                            "description": "--verify-binaries=background"},
                "maxBytes": {"type": ["string", "integer"],
                             "pattern": r"^[0-9]+(Ki|Mi|Gi|KiB|MiB|GiB|K|k|KB|M|MB|G|GB)?$",
                             "description": "--verify-max-bytes (bytes, or 64Mi, 1Gi, 64M)"},
                "concurrency": {"type": "integer", "minimum": 1, "maximum": 256,
                                "description": "--verify-concurrency"},
                "gate": {"type": "boolean",
                         "description": "--gate-verify (with lookupMode gate or hybrid)"},
            },
        },
        "registryRateLimit": {
            "type": "object",
            "additionalProperties": False,
            "description": "client-side rate limit per registry host",
            "properties": {
                "qps": {"type": "number", "minimum": 0,
                        "description": "--registry-qps (requests per second; 0: unlimited)"},
                "burst": {"type": "integer", "minimum": 1, "maximum": 100000,
                          "description": "--registry-burst"},
            },
        },
        "sharedCache": {
            "type": "object",
            "additionalProperties": False,
            "description": "the shared cache (Valkey/Redis) replicas share what they learned in",
            "properties": {
                "url": {"type": "string",
                        "pattern": r"^$|^rediss?://([^:@/\s]+@)?[^:@/\s]+(:[0-9]+)?(/[0-9]+)?$",
                        "description": "--shared-cache: redis://host:6379/0 or rediss://...; "
                                       "no password in it (sharedCache.existingSecret)"},
                "existingSecret": {"type": "string",
                                   "pattern": r"^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                                   "description": "Secret with keys hmac-key and the password"},
                "passwordKey": {"type": "string", "pattern": r"^$|^[-._a-zA-Z0-9]+$",
                                "description": "the Secret key holding the password; empty: none"},
                "timeout": DURATION,
                "tls": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "caBundle": {"type": "string",
                                     "pattern": r"^$|-----BEGIN CERTIFICATE-----",
                                     "description": "PEM certificates (--shared-cache-ca-file)"},
                    },
                },
                "valkey": {
                    "type": "object",
                    "additionalProperties": False,
                    "description": "an in-chart Valkey (Deployment + Service)",
                    "properties": {
                        "enabled": {"type": "boolean"},
                        "image": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "repository": {"type": "string", "minLength": 1,
                                               "pattern": r"^[^:@\s]+$"},
                                "tag": {"type": "string", "pattern": r"^[\w][\w.-]{0,127}$"},
                                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                            },
                        },
                        "maxMemory": {"type": "string", "pattern": r"^[0-9]+(kb|mb|gb)$",
                                      "description": "valkey maxmemory, e.g. 64mb"},
                        "resources": {"type": "object"},
                    },
                },
            },
        },
        "dockerConfigPathCandidates": string_list(ABS_PATH, "--docker-config-path (files)"),
        "containerdConfigPathCandidates": string_list(
            ABS_PATH, "--containerd-config-path (a .toml file or a containerd config dir)"),
        "credentialProviderServiceAccountTokens": {
            "type": "boolean", "description": "--credential-provider-sa-tokens"},
        "cloudCredentials": string_list({"enum": ["ecr", "gcp", "acr"]}, "--cloud-credentials"),
        "cloudIdentity": {
            "type": ["object", "null"],
            "description": "the workload identity of --cloud-credentials (ServiceAccount annotations)",
            "additionalProperties": False,
            "properties": {
                "awsRoleArn": {"type": "string", "pattern": r"^$|^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$",
                               "description": "eks.amazonaws.com/role-arn"},
                "gcpServiceAccount": {"type": "string", "pattern": r"^$|^[a-z0-9-]+@[a-z0-9.-]+\.iam\.gserviceaccount\.com$",
                                      "description": "iam.gke.io/gcp-service-account"},
                "azureClientId": {"type": "string", "pattern": r"^$|^[0-9a-fA-F-]{36}$",
                                  "description": "azure.workload.identity/client-id"},
            },
        },
        "kubeletConfig": {
            "type": ["object", "null"],
            "description": "kubelet credential provider plugins",
            "additionalProperties": False,
            "properties": {
                "binDir": ABS_PATH,
                "configDir": ABS_PATH,
                "config": {"type": "string", "pattern": r"^[^,\s]+$",
                           "description": "file name in configDir, or an absolute path"},
            },
            "dependencies": {"binDir": ["config"], "config": ["binDir"]},
        },
        "webhook": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "failurePolicy": {"enum": ["Ignore", "Fail"]},
                "timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 30},
                "namespaceSelector": LABEL_SELECTOR,
                "objectSelector": LABEL_SELECTOR,
                "reinvocationPolicy": {"enum": ["Never", "IfNeeded"]},
                "matchConditions": {
                    "type": "object",
                    "additionalProperties": False,
                    "description": "CEL matchConditions (Kubernetes 1.28+)",
                    "properties": {"enabled": {"type": "boolean"},
                                   "skipArchPinned": {"type": "boolean"}},
                },
            },
        },
        "certManager": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                "generatedCertValidityDays": {"type": "integer", "minimum": 1},
            },
        },
        "replicaCount": {"type": "integer", "minimum": 1},
        "serviceAccount": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "create": {"type": "boolean"},
                "name": {"type": "string", "pattern": r"^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                         "description": "empty: the release name (create) or default"},
            },
        },
        "hostNetwork": {"type": "boolean",
                        "description": "the node's network namespace (EKS with a custom CNI)"},
        "ports": {
            "type": "object",
            "additionalProperties": False,
            "description": "container ports (--webhook-addr, --metrics-addr, --health-probe-addr)",
            "properties": {"webhook": PORT, "metrics": PORT, "health": PORT},
        },
        "networkPolicy": {
            "type": "object",
            "additionalProperties": False,
            "description": "NetworkPolicies of noe's pods and the in-chart Valkey",
            "properties": {
                "enabled": {"type": "boolean"},
                "webhook": {"type": "object", "additionalProperties": False,
                            "properties": {"from": PEERS}},
                "metrics": {"type": "object", "additionalProperties": False,
                            "properties": {"from": PEERS}},
                "egress": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "dns": {"type": "object", "additionalProperties": False,
                                "properties": {"to": PEERS}},
                        "apiServer": {"type": "object", "additionalProperties": False,
                                      "properties": {"to": PEERS, "ports": PORTS}},
                        "registries": {"type": "object", "additionalProperties": False,
                                       "properties": {"to": PEERS, "ports": PORTS}},
                        "extra": {"type": ["array", "null"], "items": {"type": "object"},
                                  "description": "NetworkPolicyEgressRules added verbatim"},
                    },
                },
            },
        },
        "lookupEndpoint": {
            "type": "object",
            "additionalProperties": False,
            "description": "the policy engines' lookup endpoint (--lookup-addr): Gatekeeper, Kyverno",
            "properties": {
                "enabled": {"type": "boolean"},
                "port": dict(PORT, description="container port (--lookup-addr)"),
                "deadline": dict(DURATION, description="--lookup-deadline (at most 2s)"),
                "clientCA": {
                    "type": "object",
                    "additionalProperties": False,
                    "description": "--lookup-client-ca from a Secret of the release namespace",
                    "properties": {
                        "secretName": {"type": "string",
                                       "pattern": r"^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
                        "key": {"type": "string", "minLength": 1},
                    },
                },
                "tokenAudience": {"type": "string",
                                  "description": "--lookup-token-audience (TokenReview)"},
                "tokenReviewQPS": {"type": "integer", "minimum": 1, "maximum": 10000,
                                   "description": "--lookup-token-review-qps: TokenReviews of new tokens per second"},
                "service": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "port": PORT,
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "annotations": {"type": "object",
                                        "additionalProperties": {"type": "string"}},
                    },
                },
                "from": dict(PEERS, description="NetworkPolicy peers allowed to the lookup port"),
            },
        },
        "tests": {
            "type": "object",
            "additionalProperties": False,
            "description": "the `helm test` Pod (curl) that sends a dry-run AdmissionReview",
            "properties": {
                "image": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "repository": {"type": "string", "minLength": 1,
                                       "pattern": r"^[^@\s]*[^:@\s]$",
                                       "description": "[registry[:port]/]repository, no tag"},
                        "tag": {"type": "string", "pattern": r"^[\w][\w.-]{0,127}$"},
                        "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                    },
                },
            },
        },
        "ha": {"type": "object", "additionalProperties": False,
               "properties": {"enabled": {"type": "boolean"}}},
        "resources": {"type": "object"},
        "podSecurityContext": {"type": "object"},
        "securityContext": {"type": "object"},
        "nodeSelector": STRING_MAP,
        "tolerations": {"type": ["array", "null"], "items": TOLERATION},
        "affinity": {"type": ["object", "null"]},
        "topologySpreadConstraints": {"type": ["array", "null"], "items": {"type": "object"}},
        "priorityClassName": {"type": ["string", "null"]},
        "extraEnv": {"type": ["array", "null"],
                     "items": {"type": "object", "required": ["name"]}},
        "extraVolumes": {"type": ["array", "null"],
                         "items": {"type": "object", "required": ["name"]}},
        "extraVolumeMounts": {"type": ["array", "null"],
                              "items": {"type": "object", "required": ["name", "mountPath"]}},
        "extraArgs": {"type": ["array", "null"],
                      "items": {"type": "string", "pattern": "^-",
                                "description": "a flag such as --preference-weight=80"}},
        "logLevel": {"type": "string", "pattern": r"^[A-Za-z0-9_:=,.\[\]{}-]+$",
                     "description": "error, warn, info, debug, trace, or a tracing filter "
                                    "such as noe_registry=debug,info"},
        "logFormat": {"enum": ["json", "text"]},
        "shutdownDelay": DURATION,
        "terminationGracePeriodSeconds": {"type": "integer", "minimum": 1, "maximum": 3600},
        "metrics": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "scrapeAnnotations": {"type": "boolean"},
                "maxNamespaces": {"type": "integer", "minimum": 1, "maximum": 100000},
                "serviceMonitor": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "enabled": {"type": "boolean"},
                        "interval": DURATION,
                        "scrapeTimeout": DURATION,
                        "labels": STRING_MAP,
                        "namespace": {"type": "string",
                                      "pattern": r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                        "relabelings": {"type": ["array", "null"], "items": {"type": "object"}},
                        "metricRelabelings": {"type": ["array", "null"],
                                              "items": {"type": "object"}},
                    },
                },
                "prometheusRule": monitoring_object("PrometheusRule", {
                    "runbookBaseURL": RUNBOOK_BASE,
                    "ruleLabels": STRING_MAP,
                    "gatedPodAgeSeconds": {"type": "integer", "minimum": 1,
                                           "description": "NoeGatedPodTooOld's threshold"},
                }),
                "grafanaDashboard": monitoring_object("dashboard ConfigMap", {
                    "annotations": STRING_MAP,
                }),
            },
        },
        "podSecurityPolicyClusterRole": {"type": ["string", "null"],
                                         "description": "noe: ClusterRole bound with a RoleBinding"},
    },
}
for key in PER_OBJECT:
    schema["properties"][key] = meta_object(key)
schema["properties"]["role"]["description"] = \
    "extra labels and annotations of the leader election Role"
# --on-lookup-error=fallback needs --fallback-arch (the binary would refuse to start).
schema["allOf"] = [{
    "if": {"properties": {"onLookupError": {"const": "fallback"}}, "required": ["onLookupError"]},
    "then": {"required": ["fallbackArch"], "properties": {"fallbackArch": {"enum": GOARCH}}},
}]

out = pathlib.Path(__file__).resolve().parent.parent / "values.schema.json"
text = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
if len(sys.argv) > 1 and sys.argv[1] == "--check":
    sys.exit(0 if out.read_text() == text else 1)
out.write_text(text)
