{{/* The labels every object carries: the kustomize base's, plus Helm's. */}}
{{- define "fleetshard.labels" -}}
app.kubernetes.io/name: fleetshard
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/instance: {{ .context.Release.Name }}
app.kubernetes.io/managed-by: {{ .context.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .context.Chart.Name .context.Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The replicas' pods, as every selector names them (never Helm's labels: a selector
     is immutable, and the kustomize overlays select the same pods). */}}
{{- define "fleetshard.selectorLabels" -}}
app.kubernetes.io/name: fleetshard
app.kubernetes.io/component: controller
{{- end }}

{{- define "fleetshard.name" -}}
{{ .Values.controller.name }}
{{- end }}

{{/* Refuses values the replicas would refuse at start, at install time instead. */}}
{{- define "fleetshard.validate" -}}
{{- if not (has .Values.protocol (list "argocd" "fenced")) }}
{{- fail (printf "values: protocol: %q is not one of argocd, fenced" .Values.protocol) }}
{{- end }}
{{- if not (has .Values.controller.shardingAlgorithm (list "legacy" "round-robin" "consistent-hashing")) }}
{{- fail (printf "values: controller.shardingAlgorithm: %q is not one of legacy, round-robin, consistent-hashing" .Values.controller.shardingAlgorithm) }}
{{- end }}
{{- $h := int .Values.controller.heartbeatTime }}
{{- if or (lt $h 10) (gt $h 60) }}
{{- fail (printf "values: controller.heartbeatTime: %v is outside 10-60 (seconds), Argo CD's range" .Values.controller.heartbeatTime) }}
{{- end }}
{{- if and (eq .Values.protocol "fenced") (eq .Values.store.namespace .Release.Namespace) }}
{{- fail (printf "values: store.namespace: %q is the release's namespace (Argo CD's); the fenced store writes in a namespace of its own" .Values.store.namespace) }}
{{- end }}
{{- end }}
