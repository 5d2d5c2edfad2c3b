{{/* web.image is the image reference: the artifact's when the controller resolved one, else the values'. */}}
{{- define "web.image" -}}
{{- with (index .Artifacts "web").Image -}}
{{ . }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "web.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
skep.example/release: {{ .Release.Name | quote }}
{{- end -}}

{{- define "web.host" -}}
{{- if .Preview.Hash -}}
{{ .Preview.Hash }}.{{ .Values.domain }}
{{- else -}}
{{ .Values.domain }}
{{- end -}}
{{- end -}}
