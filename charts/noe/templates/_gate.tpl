{{/*
A LabelSelector value (matchLabels, matchExpressions) in the string form the binary's
--gate-namespace-selector and --gate-object-selector read (Kubernetes' selector syntax, as
`kubectl -l`): every requirement ANDed. Empty for {} (everything). Fails on an operator a
LabelSelector does not have, or In/NotIn without values.
*/}}
{{- define "noe.labelSelector" -}}
{{- $parts := list -}}
{{- range $key, $value := (.matchLabels | default dict) -}}
{{- $parts = append $parts (printf "%s=%s" $key (toString $value)) -}}
{{- end -}}
{{- range (.matchExpressions | default list) -}}
{{- $values := .values | default list -}}
{{- if and (has .operator (list "In" "NotIn")) (not $values) -}}
{{- fail (printf "gate selectors: %s %s needs values" .key .operator) -}}
{{- end -}}
{{- if eq .operator "In" -}}
{{- $parts = append $parts (printf "%s in (%s)" .key (join "," $values)) -}}
{{- else if eq .operator "NotIn" -}}
{{- $parts = append $parts (printf "%s notin (%s)" .key (join "," $values)) -}}
{{- else if eq .operator "Exists" -}}
{{- $parts = append $parts .key -}}
{{- else if eq .operator "DoesNotExist" -}}
{{- $parts = append $parts (printf "!%s" .key) -}}
{{- else -}}
{{- fail (printf "gate selectors: operator %q is not In, NotIn, Exists or DoesNotExist" .operator) -}}
{{- end -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/*
Whether the Deployment an upgrade replaces gated pods: "true" when one of its containers runs
with --lookup-mode=gate or hybrid (an arg, or NOE_LOOKUP_MODE), or when there is no Deployment to
read (`lookup` finds nothing under `helm template`, Argo CD, --dry-run: the ungate hook then runs
anyway); "false" otherwise. Takes what `lookup` returned. A named template of its own so that
charts/noe/tests/run.sh renders it with Deployments `lookup` cannot return there.
*/}}
{{- define "noe.gatedBefore" -}}
{{- if not . -}}
true
{{- else -}}
{{- $gated := false -}}
{{- $spec := ((.spec | default dict).template | default dict).spec | default dict -}}
{{- range ($spec.containers | default list) -}}
{{- range (.args | default list) -}}
{{- if regexMatch "^--lookup-mode=(gate|hybrid)$" (toString .) }}{{ $gated = true }}{{ end -}}
{{- end -}}
{{- range (.env | default list) -}}
{{- if and (eq .name "NOE_LOOKUP_MODE") (has (toString .value) (list "gate" "hybrid")) }}{{ $gated = true }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $gated -}}
{{- end -}}
{{- end -}}
