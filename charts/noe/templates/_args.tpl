{{/*
The flags of the lookups and the decision, which `noe ungate` (the hook Job) takes as the
server does: the same registries, credentials, caches and policy, so both look images up and
decide alike. List items (`- "--flag=value"`), included by "noe.args" and the hook Job.
*/}}
{{- define "noe.lookupArgs" -}}
{{- $mounts := (include "noe.hostMounts" . | fromYaml).mounts | default list -}}
{{- $archTolerations := include "noe.archTolerations" . -}}
{{- $platformOverrides := include "noe.platformOverrides" . }}
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
{{- with .Values.schedulableArchitectures }}
- {{ printf "--cluster-schedulable-archs=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.cloudCredentials }}
- {{ printf "--cloud-credentials=%s" (join "," .) | quote }}
{{- end }}
{{- if .Values.credentialProviderServiceAccountTokens }}
- "--credential-provider-sa-tokens=true"
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
{{- with .Values.controller.taintArches }}
- {{ printf "--taint-arches=%s" (join "," .) | quote }}
{{- end }}
{{- if ne (toString (.Values.lookupMode | default "inline")) "inline" }}
- {{ printf "--gate-max-attempts=%d" (int .Values.gate.maxAttempts) | quote }}
{{- end }}
{{- if .Values.verification.enabled }}
- {{ printf "--verify-max-bytes=%v" .Values.verification.maxBytes | quote }}
- {{ printf "--verify-concurrency=%d" (int .Values.verification.concurrency) | quote }}
{{- end }}
{{- end -}}

{{/*
The container args: one --flag=value per value (docs/configuration.md). Returned as a map
{args: [...]} for fromYaml.
*/}}
{{- define "noe.args" -}}
{{- $ctl := include "noe.controllers" . | fromYaml -}}
{{- if and (has "auto" (.Values.schedulableArchitectures | default list)) (not $ctl.watchNodes) -}}
{{- fail "schedulableArchitectures: auto needs controller.watchNodes: true (the architectures are read from the nodes)" -}}
{{- end -}}
{{- if and .Values.imageSelection.enabled (not $ctl.watchNodes) -}}
{{- fail "imageSelection.enabled needs controller.watchNodes: true (the nodes' labels decide the choice)" -}}
{{- end -}}
args:
- {{ printf "--webhook-addr=:%s" (include "noe.port" (dict "ctx" . "name" "webhook")) | quote }}
- {{ printf "--metrics-addr=:%s" (include "noe.port" (dict "ctx" . "name" "metrics")) | quote }}
- {{ printf "--health-probe-addr=:%s" (include "noe.port" (dict "ctx" . "name" "health")) | quote }}
- "--cert-dir=/certs"
{{- include "noe.lookupArgs" . }}
- {{ printf "--shutdown-delay=%s" .Values.shutdownDelay | quote }}
- {{ printf "--metrics-max-namespaces=%d" (int .Values.metrics.maxNamespaces) | quote }}
{{- with .Values.lookupEndpoint }}
{{- if .enabled }}
{{- if not (or .clientCA.secretName .tokenAudience) }}
{{- fail "lookupEndpoint.enabled needs lookupEndpoint.clientCA.secretName and/or lookupEndpoint.tokenAudience: a caller with neither gets nothing" }}
{{- end }}
- {{ printf "--lookup-addr=:%d" (int .port) | quote }}
- {{ printf "--lookup-deadline=%s" .deadline | quote }}
{{- if .clientCA.secretName }}
- "--lookup-client-ca=/etc/noe/lookup-client-ca/ca.crt"
{{- end }}
{{- with .tokenAudience }}
- {{ printf "--lookup-token-audience=%s" . | quote }}
{{- end }}
{{- if .tokenAudience }}
- {{ printf "--lookup-token-review-qps=%d" (int .tokenReviewQPS) | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.namespacePreference.enabled }}
- "--namespace-preference=true"
{{- end }}
{{- if .Values.ephemeralContainers.enabled }}
- "--check-ephemeral-containers=true"
{{- end }}
{{- if $ctl.watchNodes }}
- "--watch-nodes=true"
{{- end }}
{{- if .Values.imageSelection.enabled }}
- "--image-selection=true"
{{- if .Values.imageSelection.allNamespaces }}
- "--image-compatibility-all-namespaces=true"
{{- end }}
{{- if .Values.imageSelection.watchNodeFeatures }}
- "--watch-node-features=true"
{{- end }}
- {{ printf "--image-compatibility-negative-ttl=%s" .Values.imageSelection.negativeTtl | quote }}
{{- end }}
{{- if ne $ctl.remediate "off" }}
- {{ printf "--remediate=%s" $ctl.remediate | quote }}
{{- end }}
{{- if eq $ctl.remediate "evict" }}
- {{ printf "--remediate-rate=%d" (int .Values.controller.remediateRate) | quote }}
{{- if kindIs "slice" .Values.controller.remediateExemptNamespaces }}
- {{ printf "--remediate-exempt-namespaces=%s" (join "," .Values.controller.remediateExemptNamespaces) | quote }}
{{- end }}
{{- end }}
{{- if $ctl.detect }}
- "--detect-exec-format-errors=true"
- {{ printf "--log-reads-per-second=%d" (int .Values.controller.logReadsPerSecond) | quote }}
- {{ printf "--learned-store=%s" (include "noe.learnedStore" .) | quote }}
- {{ printf "--learned-max-entries=%d" (int .Values.controller.learnedMaxEntries) | quote }}
{{- end }}
{{- if $ctl.gate }}
- {{ printf "--lookup-mode=%s" .Values.lookupMode | quote }}
- {{ printf "--hybrid-budget=%s" .Values.gate.hybridBudget | quote }}
{{- with (include "noe.labelSelector" (.Values.gate.namespaceSelector | default dict)) }}
- {{ printf "--gate-namespace-selector=%s" . | quote }}
{{- end }}
{{- with (include "noe.labelSelector" (.Values.gate.objectSelector | default dict)) }}
- {{ printf "--gate-object-selector=%s" . | quote }}
{{- end }}
{{- end }}
{{- if .Values.verification.enabled }}
- "--verify-binaries=background"
{{- if .Values.verification.gate }}
{{- if not $ctl.gate }}
{{- fail "verification.gate needs lookupMode: gate or hybrid (it holds gated pods)" }}
{{- end }}
- "--gate-verify=true"
{{- end }}
{{- else if .Values.verification.gate }}
{{- fail "verification.gate needs verification.enabled: true (it waits for the background verification)" }}
{{- end }}
{{- if $ctl.leaderElect }}
- "--leader-elect=true"
{{- end }}
{{- if $ctl.lease }}
- {{ printf "--leader-elect-resource-name=%s" (include "noe.name" .) | quote }}
{{- end }}
{{- end -}}

{{/*
The volumes the lookups and the decision read (registry CA, arch tolerations, platform
overrides, the shared cache's key and CA, the node's credential files, extraVolumes), mounted
alike by the Deployment and the hook Job (noe.lookupVolumeMounts, noe.lookupVolumes).
*/}}
{{- define "noe.lookupVolumeMounts" -}}
{{- $mounts := (include "noe.hostMounts" . | fromYaml).mounts | default list -}}
{{- $archTolerations := include "noe.archTolerations" . -}}
{{- $platformOverrides := include "noe.platformOverrides" . -}}
{{- $sharedCache := include "noe.sharedCacheURL" . -}}
{{- $sharedCA := and $sharedCache .Values.sharedCache.tls.caBundle -}}
- name: tmp
  mountPath: /tmp
{{- if $archTolerations }}
- name: arch-tolerations
  mountPath: /etc/noe/arch-tolerations
  readOnly: true
{{- end }}
{{- if .Values.registryCABundle }}
- name: registry-ca
  mountPath: /etc/noe/registry-ca
  readOnly: true
{{- end }}
{{- if $platformOverrides }}
- name: platform-overrides
  mountPath: /etc/noe/platform-overrides
  readOnly: true
{{- end }}
{{- if $sharedCache }}
- name: shared-cache-secret
  mountPath: /etc/noe/shared-cache
  readOnly: true
{{- end }}
{{- if $sharedCA }}
- name: shared-cache-ca
  mountPath: /etc/noe/shared-cache-ca
  readOnly: true
{{- end }}
{{- range $mounts }}
- name: {{ .name }}
  mountPath: {{ .mountPath }}
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end -}}

{{- define "noe.lookupVolumes" -}}
{{- $mounts := (include "noe.hostMounts" . | fromYaml).mounts | default list -}}
{{- $archTolerations := include "noe.archTolerations" . -}}
{{- $platformOverrides := include "noe.platformOverrides" . -}}
{{- $sharedCache := include "noe.sharedCacheURL" . -}}
{{- $sharedCA := and $sharedCache .Values.sharedCache.tls.caBundle -}}
- name: tmp
  emptyDir:
    sizeLimit: 16Mi
{{- if $archTolerations }}
- name: arch-tolerations
  configMap:
    name: {{ printf "%s-arch-tolerations" (include "noe.name" .) }}
{{- end }}
{{- if .Values.registryCABundle }}
- name: registry-ca
  configMap:
    name: {{ printf "%s-registry-ca" (include "noe.name" .) }}
{{- end }}
{{- if $platformOverrides }}
- name: platform-overrides
  configMap:
    name: {{ printf "%s-platform-overrides" (include "noe.name" .) }}
{{- end }}
{{- if $sharedCache }}
# The install's HMAC key and the shared cache's password, as files (never flags). With
# fsGroup the kubelet makes them root-owned in that group, 0440: noe reads them through
# the group and no other user can; without it only 0444 lets the non-root user read them.
- name: shared-cache-secret
  secret:
    secretName: {{ .Values.sharedCache.existingSecret | quote }}
    defaultMode: {{ if (.Values.podSecurityContext | default dict).fsGroup }}0440{{ else }}0444{{ end }}
    items:
      - key: hmac-key
        path: hmac-key
      {{- with .Values.sharedCache.passwordKey }}
      - key: {{ . | quote }}
        path: password
      {{- end }}
{{- end }}
{{- if $sharedCA }}
- name: shared-cache-ca
  configMap:
    name: {{ printf "%s-shared-cache-ca" (include "noe.name" .) }}
{{- end }}
{{- range $mounts }}
# Read-only; {{ .type }}: {{ if eq .type "FileOrCreate" }}a missing file becomes an empty one (no credentials); its directory must exist.{{ else if eq .type "DirectoryOrCreate" }}a missing directory becomes an empty one.{{ else }}must exist on the node.{{ end }}
- name: {{ .name }}
  hostPath:
    path: {{ .hostPath }}
    type: {{ .type }}
{{- end }}
{{- with .Values.extraVolumes }}
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end -}}
