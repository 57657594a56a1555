{{/*
The container args: one --flag=value per value (docs/configuration.md). Returned as a map
{args: [...]} for fromYaml.
*/}}
{{- define "noe.args" -}}
{{- $mounts := (include "noe.hostMounts" . | fromYaml).mounts | default list -}}
{{- $ctl := include "noe.controllers" . | fromYaml -}}
{{- if and (has "auto" (.Values.schedulableArchitectures | default list)) (not $ctl.watchNodes) -}}
{{- fail "schedulableArchitectures: auto needs controller.watchNodes: true (the architectures are read from the nodes)" -}}
{{- end -}}
{{- $archTolerations := include "noe.archTolerations" . -}}
{{- $platformOverrides := include "noe.platformOverrides" . -}}
args:
- {{ printf "--webhook-addr=:%s" (include "noe.port" (dict "ctx" . "name" "webhook")) | quote }}
- {{ printf "--metrics-addr=:%s" (include "noe.port" (dict "ctx" . "name" "metrics")) | quote }}
- {{ printf "--health-probe-addr=:%s" (include "noe.port" (dict "ctx" . "name" "health")) | quote }}
- "--cert-dir=/certs"
- {{ printf "--preferred-arch=%s" .Values.preferredArch | quote }}
- {{ printf "--preference-mode=%s" .Values.preferenceMode | quote }}
- {{ printf "--preference-weight=%d" (int .Values.preferenceWeight) | quote }}
- {{ printf "--on-lookup-error=%s" .Values.onLookupError | quote }}
- {{ printf "--mode=%s" .Values.mode | quote }}
- {{ printf "--on-contradiction=%s" .Values.onContradiction | quote }}
- {{ printf "--system-os=%s" .Values.systemOS | quote }}
- {{ printf "--admission-deadline=%s" (include "noe.admissionDeadline" .) | quote }}
- {{ printf "--registry-timeout=%s" .Values.registryTimeout | quote }}
- {{ printf "--cache-ttl=%s" .Values.cache.ttl | quote }}
- {{ printf "--cache-max-entries=%d" (int64 .Values.cache.maxEntries) | quote }}
- {{ printf "--registry-qps=%v" .Values.registryRateLimit.qps | quote }}
- {{ printf "--registry-burst=%d" (int .Values.registryRateLimit.burst) | quote }}
{{- $shared := include "noe.sharedCacheURL" . }}
{{- if $shared }}
- {{ printf "--shared-cache=%s" $shared | quote }}
- "--shared-cache-key-file=/etc/noe/shared-cache/hmac-key"
{{- if .Values.sharedCache.passwordKey }}
- "--shared-cache-password-file=/etc/noe/shared-cache/password"
{{- end }}
- {{ printf "--shared-cache-timeout=%s" .Values.sharedCache.timeout | quote }}
{{- if .Values.sharedCache.tls.caBundle }}
- "--shared-cache-ca-file=/etc/noe/shared-cache-ca/ca.crt"
{{- end }}
{{- end }}
- {{ printf "--log-level=%s" .Values.logLevel | quote }}
- {{ printf "--log-format=%s" .Values.logFormat | quote }}
- {{ printf "--shutdown-delay=%s" .Values.shutdownDelay | quote }}
- {{ printf "--metrics-max-namespaces=%d" (int .Values.metrics.maxNamespaces) | quote }}
{{- with .Values.schedulableArchitectures }}
- {{ printf "--cluster-schedulable-archs=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.cloudCredentials }}
- {{ printf "--cloud-credentials=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.proxies }}
- {{ printf "--registry-proxies=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.matchNodeLabels }}
- {{ printf "--match-node-labels=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.privateRegistries }}
- {{ printf "--private-registries=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.insecureRegistries }}
- {{ printf "--insecure-registries=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.allowRegistryCIDRs }}
- {{ printf "--allow-registry-cidrs=%s" (join "," .) | quote }}
{{- end }}
{{- if .Values.registryCABundle }}
- "--registry-ca-file=/etc/noe/registry-ca/ca.crt"
{{- end }}
{{- if $archTolerations }}
- "--arch-tolerations-file=/etc/noe/arch-tolerations/tolerations.yaml"
{{- end }}
{{- with .Values.fallbackArch }}
- {{ printf "--fallback-arch=%s" . | quote }}
{{- end }}
{{- if $platformOverrides }}
- "--platform-overrides=/etc/noe/platform-overrides/overrides.yaml"
{{- end }}
{{- if .Values.namespacePreference.enabled }}
- "--namespace-preference=true"
{{- end }}
{{- if .Values.ephemeralContainers.enabled }}
- "--check-ephemeral-containers=true"
{{- end }}
{{- /* An empty list is passed as an empty flag: "no files", not the binary's defaults. */}}
{{- range $mounts }}
{{- if hasPrefix "docker-config-" .name }}
- {{ printf "--docker-config-path=%s" .mountPath | quote }}
{{- end }}
{{- end }}
{{- if not .Values.dockerConfigPathCandidates }}
- "--docker-config-path="
{{- end }}
{{- if not .Values.containerdConfigPathCandidates }}
- "--containerd-config-path="
{{- end }}
{{- range $i, $p := .Values.containerdConfigPathCandidates }}
{{- if hasSuffix ".toml" $p }}
- {{ printf "--containerd-config-path=%s" $p | quote }}
{{- else }}
- {{ printf "--containerd-config-path=%s" (trimSuffix "/" $p) | quote }}
{{- end }}
{{- end }}
{{- $k := include "noe.kubelet" . | fromYaml }}
{{- if $k.binDir }}
- {{ printf "--image-credential-provider-bin-dir=%s" $k.binDir | quote }}
{{- end }}
{{- if $k.config }}
- {{ printf "--image-credential-provider-config=%s" $k.config | quote }}
{{- end }}
{{- if $ctl.watchNodes }}
- "--watch-nodes=true"
{{- end }}
{{- if ne $ctl.remediate "off" }}
- {{ printf "--remediate=%s" $ctl.remediate | quote }}
{{- end }}
{{- if eq $ctl.remediate "evict" }}
- {{ printf "--remediate-rate=%d" (int .Values.controller.remediateRate) | quote }}
{{- end }}
{{- with .Values.controller.taintArches }}
- {{ printf "--taint-arches=%s" (join "," .) | quote }}
{{- end }}
{{- if $ctl.gate }}
- {{ printf "--lookup-mode=%s" .Values.lookupMode | quote }}
- {{ printf "--hybrid-budget=%s" .Values.gate.hybridBudget | quote }}
- {{ printf "--gate-max-attempts=%d" (int .Values.gate.maxAttempts) | quote }}
{{- with (include "noe.labelSelector" (.Values.gate.namespaceSelector | default dict)) }}
- {{ printf "--gate-namespace-selector=%s" . | quote }}
{{- end }}
{{- with (include "noe.labelSelector" (.Values.gate.objectSelector | default dict)) }}
- {{ printf "--gate-object-selector=%s" . | quote }}
{{- end }}
{{- end }}
{{- if $ctl.leaderElect }}
- "--leader-elect=true"
{{- end }}
{{- if $ctl.lease }}
- {{ printf "--leader-elect-resource-name=%s" (include "noe.name" .) | quote }}
{{- end }}
{{- end -}}
