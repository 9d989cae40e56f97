{{/* Names follow Helm's conventions: `ocifit.name` (nameOverride) in the labels, `ocifit.fullname`
(fullnameOverride, else the release name, with the chart's name appended unless the release name
contains it) in every object's name. With the release `ocifit` every name is what it was before
these values existed (ocifit-controller, ocifit-webhook, ...), and the Deployment passes each name
`ocifit run` needs as a flag, so the RBAC, the webhook configuration and the binary agree. */}}
{{- define "ocifit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ocifit.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* A name derived from the fullname: `ocifit.child` with (list $ "suffix"), kept within 63 characters. */}}
{{- define "ocifit.child" -}}
{{- $root := index . 0 }}
{{- printf "%s-%s" (include "ocifit.fullname" $root | trunc (int (sub 62 (len (index . 1)))) | trimSuffix "-") (index . 1) }}
{{- end }}

{{- define "ocifit.controller" -}}{{ include "ocifit.child" (list . "controller") }}{{- end }}
{{- define "ocifit.serviceAccount" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ocifit.controller" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: the ServiceAccount ocifit runs as, which the chart's RBAC is bound to" .Values.serviceAccount.name }}
{{- end }}
{{- end }}
{{- define "ocifit.webhookService" -}}{{ include "ocifit.child" (list . "webhook") }}{{- end }}
{{- define "ocifit.metricsService" -}}{{ include "ocifit.child" (list . "metrics") }}{{- end }}
{{- define "ocifit.webhookConfiguration" -}}{{ include "ocifit.fullname" . }}{{- end }}
{{- define "ocifit.leaseName" -}}{{ .Values.leaderElection.leaseName | default (include "ocifit.controller" .) }}{{- end }}
{{- define "ocifit.managedTlsSecret" -}}{{ .Values.tls.managed.secretName | default (include "ocifit.child" (list . "webhook-tls")) }}{{- end }}
{{- define "ocifit.scrapeJob" -}}{{ .Values.monitoring.rules.job | default (include "ocifit.metricsService" .) }}{{- end }}

{{/* The ServiceMonitor's settings: `monitoring.serviceMonitor`, under which the deprecated
`metrics.serviceMonitor` (0.1) is still read for one release, its keys winning over the new
defaults (values.yaml no longer has it, so whatever is there a user set). */}}
{{- define "ocifit.serviceMonitor" -}}
{{- $old := dict }}
{{- if .Values.metrics }}{{ $old = .Values.metrics.serviceMonitor | default dict }}{{ end }}
{{- toYaml (mergeOverwrite (deepCopy .Values.monitoring.serviceMonitor) (deepCopy $old)) }}
{{- end }}

{{- define "ocifit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ocifit.name" . }}
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
app.kubernetes.io/name: {{ include "ocifit.name" . }}
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
{{- if eq .Values.tls.mode "certManager" -}}{{ include "ocifit.child" (list . "webhook-tls") }}
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

{{/* Values this chart no longer reads: a clear failure naming their replacement rather than a
silent default (docs/migrating.md). */}}
{{- define "ocifit.removedValues" -}}
{{- if hasKey .Values "runAsUser" }}
{{- fail "runAsUser was replaced by podSecurityContext.runAsUser/runAsGroup and securityContext.runAsUser (docs/migrating.md)" }}
{{- end }}
{{- end }}
