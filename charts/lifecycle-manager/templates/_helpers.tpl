{{/* Labels of every object of the chart. */}}
{{- define "lifecycle-manager.labels" -}}
app.kubernetes.io/name: lifecycle-manager
{{- end }}

{{/* The operator's pods. */}}
{{- define "lifecycle-manager.selector" -}}
app.kubernetes.io/name: lifecycle-manager
app.kubernetes.io/component: operator
{{- end }}

{{/* The console's pods. */}}
{{- define "lifecycle-manager.consoleSelector" -}}
app.kubernetes.io/name: lifecycle-manager
app.kubernetes.io/component: console
{{- end }}

{{- define "lifecycle-manager.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}
