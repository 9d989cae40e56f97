{{/* Names are fixed so the RBAC, the webhook configuration and `ocifit run`'s defaults agree. */}}
{{- define "ocifit.serviceAccount" -}}ocifit-controller{{- end }}
{{- define "ocifit.webhookService" -}}ocifit-webhook{{- end }}
{{- define "ocifit.webhookConfiguration" -}}ocifit{{- end }}

{{- define "ocifit.selectorLabels" -}}
app.kubernetes.io/name: ocifit
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "ocifit.labels" -}}
{{ include "ocifit.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ocifit
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The uninstall hook's objects: the chart's labels but their own component, so that nothing
selecting the operator's pods selects them. */}}
{{- define "ocifit.hookLabels" -}}
app.kubernetes.io/name: ocifit
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: release-gates
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ocifit
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "ocifit.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}:{{ $tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end }}

{{/* The Secret holding the serving certificate mounted into the pods (certManager and secret modes). */}}
{{- define "ocifit.tlsSecret" -}}
{{- if eq .Values.tls.mode "certManager" -}}ocifit-webhook-tls
{{- else -}}{{ required "tls.secret.name is required when tls.mode is secret" .Values.tls.secret.name }}
{{- end -}}
{{- end }}
{{- /* The pods of the chart tolerate the taint node tainting puts on the architectures a policy
names (placement.ocifit.io/arch), so a policy tainting the cluster's only architecture still leaves
ocifit somewhere to run (and to remove the taint again); then the user's own tolerations. */}}
{{- define "ocifit.ownTaintTolerations" -}}
- key: placement.ocifit.io/arch
  operator: Exists
  effect: NoSchedule
{{- with .Values.tolerations }}
{{ toYaml . }}
{{- end }}
{{- end }}
