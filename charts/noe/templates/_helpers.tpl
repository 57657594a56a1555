{{/*
Names follow adevinta/noe's chart so that an existing release upgrades in place: namespaced objects
are named after the release, cluster-scoped ones "<namespace>-<release>", and the pod selector is
`app: <release>` (a Deployment selector cannot change).
*/}}
{{- define "noe.name" -}}
{{- .Release.Name -}}
{{- end -}}

{{- define "noe.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The ServiceAccount the pod runs as and the RBAC binds: serviceAccount.name, else the release name
when the chart creates it, else the namespace's "default".
*/}}
{{- define "noe.serviceAccountName" -}}
{{- $sa := .Values.serviceAccount | default dict -}}
{{- if $sa.name -}}
{{- $sa.name -}}
{{- else if (hasKey $sa "create" | ternary $sa.create true) -}}
{{- .Release.Name -}}
{{- else -}}
default
{{- end -}}
{{- end -}}

{{/* The container ports (ports.*; 8443, 8080, 8081 unless hostNetwork needs others). */}}
{{- define "noe.port" -}}
{{- $ports := .ctx.Values.ports | default dict -}}
{{- $defaults := dict "webhook" 8443 "metrics" 8080 "health" 8081 -}}
{{- int (get $ports .name | default (get $defaults .name)) -}}
{{- end -}}

{{/* Labels of the `helm test` Pod (never the noe pod selector). */}}
{{- define "noe.testLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: helm-test
{{- end -}}

{{- define "noe.selectorLabels" -}}
app: {{ .Release.Name }}
{{- end -}}

{{- define "noe.labels" -}}
{{ include "noe.selectorLabels" . }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
metadata labels and annotations of one object.
Call with (dict "ctx" $ "key" "deployment" "extraAnnotations" (dict ...)).
The per-object values (`<key>.labels`, `<key>.annotations`) may be absent or null (noe's values
file leaves them null).
*/}}
{{- define "noe.metadata" -}}
{{- $ctx := .ctx -}}
{{- $obj := get $ctx.Values .key | default dict -}}
{{- $labels := merge (dict) (include "noe.labels" $ctx | fromYaml) (.extraLabels | default dict) ($obj.labels | default dict) -}}
{{- $annotations := merge (dict) (.extraAnnotations | default dict) ($obj.annotations | default dict) -}}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- if $annotations }}
annotations:
  {{- toYaml $annotations | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "noe.image" -}}
{{- $img := .Values.image -}}
{{- $ref := printf "%s/%s" $img.registry $img.repository -}}
{{- if not $img.registry }}{{ $ref = $img.repository }}{{ end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $ref $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $ref (toString ($img.tag | default .Chart.AppVersion)) -}}
{{- end -}}
{{- end -}}

{{- define "noe.replicas" -}}
{{- $r := int .Values.replicaCount -}}
{{- if and .Values.ha .Values.ha.enabled (lt $r 2) }}{{ $r = 2 }}{{ end -}}
{{- $r -}}
{{- end -}}

{{/* --admission-deadline: timeoutSeconds - 2s, at least 1s. */}}
{{- define "noe.admissionDeadline" -}}
{{- $t := int .Values.webhook.timeoutSeconds -}}
{{- printf "%ds" (max 1 (sub $t 2)) -}}
{{- end -}}

{{/*
Host files. Each entry: name (volume), hostPath, mountPath (the same path: files that name other host files keep working), type.
Returns a YAML list under key "mounts" (fromYaml needs a map).
*/}}
{{- define "noe.hostMounts" -}}
mounts:
{{- range $i, $p := .Values.dockerConfigPathCandidates }}
- name: docker-config-{{ $i }}
  hostPath: {{ $p | quote }}
  mountPath: {{ $p | quote }}
  type: FileOrCreate
{{- end }}
{{- range $i, $p := .Values.containerdConfigPathCandidates }}
{{- if hasSuffix ".toml" $p }}
- name: containerd-config-{{ $i }}
  hostPath: {{ $p | quote }}
  mountPath: {{ $p | quote }}
  type: FileOrCreate
{{- else }}
{{- $d := trimSuffix "/" $p }}
- name: containerd-config-{{ $i }}
  hostPath: {{ printf "%s/config.toml" $d | quote }}
  mountPath: {{ printf "%s/config.toml" $d | quote }}
  type: FileOrCreate
- name: containerd-certs-d-{{ $i }}
  hostPath: {{ printf "%s/certs.d" $d | quote }}
  mountPath: {{ printf "%s/certs.d" $d | quote }}
  type: DirectoryOrCreate
{{- end }}
{{- end }}
{{- $k := include "noe.kubelet" . | fromYaml }}
{{- if $k.binDir }}
- name: kubelet-credential-provider-bin
  hostPath: {{ $k.binDir | quote }}
  mountPath: {{ $k.binDir | quote }}
  type: Directory
{{- end }}
{{- if and $k.config (not $k.configInBinDir) }}
- name: kubelet-credential-provider-config
  hostPath: {{ $k.config | quote }}
  mountPath: {{ $k.config | quote }}
  type: FileOrCreate
{{- end }}
{{- end -}}

{{/*
The per-architecture settings file (--arch-tolerations-file): arch -> {tolerations, nodeLabels},
archs with neither left out; empty when no arch has any.
*/}}
{{- define "noe.archTolerations" -}}
{{- $out := dict -}}
{{- range $arch, $cfg := .Values.architectures }}
{{- if $cfg }}
{{- $one := dict -}}
{{- if $cfg.tolerations }}{{ $_ := set $one "tolerations" $cfg.tolerations }}{{ end }}
{{- if $cfg.nodeLabels }}{{ $_ := set $one "nodeLabels" $cfg.nodeLabels }}{{ end }}
{{- if $one }}{{ $_ := set $out $arch $one }}{{ end }}
{{- end }}
{{- end }}
{{- if $out }}{{ toYaml $out }}{{ end -}}
{{- end -}}

{{/* The platform overrides file (--platform-overrides); empty without overrides. */}}
{{- define "noe.platformOverrides" -}}
{{- with .Values.platformOverrides }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/*
kubeletConfig resolved: binDir, config (configDir/config unless config is absolute), and whether
the config file lies inside binDir (then the directory mount already holds it).
*/}}
{{- define "noe.kubelet" -}}
{{- with .Values.kubeletConfig }}
{{- $bin := trimSuffix "/" (.binDir | default "") }}
{{- $cfg := .config | default "" }}
{{- if and $cfg .configDir (not (hasPrefix "/" $cfg)) }}{{ $cfg = printf "%s/%s" (trimSuffix "/" .configDir) $cfg }}{{ end }}
binDir: {{ $bin | quote }}
config: {{ $cfg | quote }}
configInBinDir: {{ if and $bin $cfg (hasPrefix (printf "%s/" $bin) $cfg) }}true{{ else }}false{{ end }}
{{- end }}
{{- end -}}

{{/*
What the controller values turn on (docs/configuration.md, "Controllers"), as a map for fromYaml:
remediate (off | report | evict), detect (exec-format-error detection and the learned store),
pods (a pod reflector runs: remediation or detection), nodes (a node reflector runs), writes
(remediation, taints, detection or the gate controller), gate (lookupMode gate or hybrid),
leaderElect (--leader-elect: ha.enabled, or more than one replica running a writing controller),
lease (leader election with something to elect: the Lease flags and RBAC).
*/}}
{{- define "noe.controllers" -}}
{{- $c := .Values.controller | default dict -}}
{{- $remediate := toString ($c.remediate | default "off") -}}
{{- if eq $remediate "false" }}{{ $remediate = "off" }}{{ end -}}
{{- $taints := $c.taintArches | default list -}}
{{- $gate := ne (toString (.Values.lookupMode | default "inline")) "inline" -}}
{{- $detect := $c.detectExecFormatErrors | default false -}}
{{- $pods := or (ne $remediate "off") $detect -}}
{{- $reflect := or $pods (gt (len $taints) 0) -}}
{{- $writes := or $reflect $gate -}}
{{- $ha := and .Values.ha .Values.ha.enabled -}}
{{- $elect := or $ha (and $writes (gt (int (include "noe.replicas" .)) 1)) -}}
watchNodes: {{ $c.watchNodes | default false }}
remediate: {{ $remediate | quote }}
taints: {{ gt (len $taints) 0 }}
detect: {{ $detect }}
pods: {{ $pods }}
nodes: {{ or ($c.watchNodes | default false) $reflect }}
writes: {{ $writes }}
gate: {{ $gate }}
leaderElect: {{ $elect }}
lease: {{ and $elect $writes }}
{{- end -}}

{{/*
The shared cache URL: sharedCache.url, or the in-chart Valkey's Service; empty when off. Fails on
a contradiction (both, or no Secret for the key).
*/}}
{{- define "noe.sharedCacheURL" -}}
{{- $c := .Values.sharedCache -}}
{{- if and $c.url $c.valkey.enabled -}}
{{- fail "sharedCache: set either sharedCache.url or sharedCache.valkey.enabled, not both" -}}
{{- end -}}
{{- if or $c.url $c.valkey.enabled -}}
{{- if not $c.existingSecret -}}
{{- fail "sharedCache: the shared cache needs sharedCache.existingSecret, a Secret with the install's hmac-key (and the password) (see docs/configuration.md, Shared cache)" -}}
{{- end -}}
{{- if $c.url -}}
{{- $c.url -}}
{{- else -}}
{{- printf "redis://%s-valkey.%s.svc:6379/0" (include "noe.name" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of the in-chart Valkey's objects (its own `app`, so noe's selectors never match it). */}}
{{- define "noe.valkeyLabels" -}}
app: {{ printf "%s-valkey" (include "noe.name" .) }}
app.kubernetes.io/name: valkey
app.kubernetes.io/component: shared-cache
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: {{ .Chart.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The learned store's ConfigMap (--learned-store): exec-format-error detection's corrections.
*/}}
{{- define "noe.learnedStore" -}}
{{- printf "%s-learned-platforms" (include "noe.name" .) -}}
{{- end -}}
