{{- define "strom.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "strom.labels" -}}
app.kubernetes.io/name: strom
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "strom.selector" -}}
app.kubernetes.io/name: strom
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* 0@strom-0.strom-headless.ns.svc:9093,1@... : every pod of the StatefulSet. */}}
{{- define "strom.quorumVoters" -}}
{{- $name := include "strom.fullname" . -}}
{{- $voters := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $voters = append $voters (printf "%d@%s-%d.%s-headless.%s.svc:%d" $i $name $i $name $.Release.Namespace (int $.Values.cluster.controllerPort)) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}
