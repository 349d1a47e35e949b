{{- define "ernie.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "ernie.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "worker") */}}
{{- define "ernie.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ernie.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "ernie.serviceAccount" -}}
{{ .Values.serviceAccount.name | default (include "ernie.fullname" .) }}
{{- end -}}

{{- define "ernie.modelDir" -}}
/models/{{ .Values.model.path }}
{{- end -}}

{{/* prometheus.io annotations: (dict "root" $ "port" 9090) */}}
{{- define "ernie.scrapeAnnotations" -}}
{{- if .root.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{- define "ernie.modelVolume" -}}
- name: models
{{- if eq .Values.model.source "pvc" }}
  persistentVolumeClaim:
    claimName: {{ required "model.pvc.claimName is required with model.source=pvc" .Values.model.pvc.claimName }}
    readOnly: true
{{- else if eq .Values.model.source "hostPath" }}
  hostPath:
    path: {{ required "model.hostPath.path is required with model.source=hostPath" .Values.model.hostPath.path }}
    type: Directory
{{- else if eq .Values.model.source "image" }}
  emptyDir:
    sizeLimit: {{ .Values.model.image.sizeLimit }}
{{- else }}
{{- fail (printf "model.source must be pvc, hostPath or image, not %q" .Values.model.source) }}
{{- end }}
{{- end -}}

{{/* The init container that copies the model out of an image (model.source=image). */}}
{{- define "ernie.modelInit" -}}
{{- if eq .Values.model.source "image" }}
initContainers:
  - name: copy-model
    image: {{ .Values.model.image.repository }}:{{ .Values.model.image.tag }}
    command: ["sh", "-c", "cp -a {{ .Values.model.image.sourcePath }}/. /models/ && test -d /models/{{ .Values.model.path }}"]
    securityContext: {{- toYaml .Values.securityContext | nindent 6 }}
    volumeMounts:
      - {name: models, mountPath: /models}
{{- end }}
{{- end -}}

{{/* The action of a probe on a gRPC port: (dict "root" $ "port" 50051). The
grpc.health.v1 check, or with internalTls a TCP connect: kubelet's gRPC probe
speaks plaintext only (the gateway still checks each worker's health itself). */}}
{{- define "ernie.grpcProbeAction" -}}
{{- if .root.Values.internalTls.enabled -}}
tcpSocket: {port: {{ .port }}}
{{- else -}}
grpc: {port: {{ .port }}}
{{- end -}}
{{- end -}}

{{/* Server flags for internalTls (tokenizer and worker). */}}
{{- define "ernie.serverTlsArgs" -}}
{{- if .Values.internalTls.enabled }}
- --tls-cert=/etc/ernie-tls/tls.crt
- --tls-key=/etc/ernie-tls/tls.key
- --tls-ca=/etc/ernie-tls/ca.crt
{{- end }}
{{- end -}}

{{- define "ernie.tlsVolumeMount" -}}
{{- if .Values.internalTls.enabled }}
- {name: internal-tls, mountPath: /etc/ernie-tls, readOnly: true}
{{- end }}
{{- end -}}

{{- define "ernie.tlsVolume" -}}
{{- if .Values.internalTls.enabled }}
- name: internal-tls
  secret:
    secretName: {{ required "internalTls.secretName is required with internalTls.enabled" .Values.internalTls.secretName }}
{{- end }}
{{- end -}}
