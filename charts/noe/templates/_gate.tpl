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
