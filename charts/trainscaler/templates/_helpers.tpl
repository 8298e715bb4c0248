{{/* Labels on every object the chart renders (the kustomization's part-of, and Helm's own). */}}
{{- define "trainscaler.labels" -}}
app.kubernetes.io/part-of: trainscaler
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The runner's selector: the Service, the PDB, the NetworkPolicy and the anti-affinity select these. */}}
{{- define "trainscaler.runnerSelector" -}}
app.kubernetes.io/name: trainscaler
app.kubernetes.io/component: controller
{{- end }}

{{- define "trainscaler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The runner's ServiceAccount as the API server names it in request.userInfo.username. */}}
{{- define "trainscaler.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:trainscaler
{{- end }}

{{/* The runner's settings, the data of ConfigMap trainscaler-config (infra/k8s/config.env). */}}
{{- define "trainscaler.config" -}}
PROMETHEUS_URL: {{ .Values.runner.config.prometheusUrl | quote }}
TRAINSCALER_DRY_RUN: {{ .Values.runner.config.dryRun | toString | quote }}
TRAINSCALER_NAMESPACES: {{ join "," .Values.runner.config.namespaces | quote }}
TRAINSCALER_SCHEDULE: {{ .Values.runner.config.schedule | quote }}
TRAINSCALER_PROFILES_NAMESPACE: {{ .Release.Namespace | quote }}
TRAINSCALER_PROFILES_CONFIGMAP: trainscaler-profiles
LOG_LEVEL: {{ .Values.runner.config.logLevel | quote }}
TRAINSCALER_ADDRESS: 0.0.0.0
{{- range $name, $value := .Values.runner.extraEnv }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/* Fails the render when the prometheus-operator API is asked for but absent. */}}
{{- define "trainscaler.requireOperatorApi" -}}
{{- if not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}
{{- fail "prometheusOperator.enabled needs the monitoring.coreos.com/v1 API (install prometheus-operator's CRDs first; for helm template pass --api-versions monitoring.coreos.com/v1)" -}}
{{- end -}}
{{- end }}
