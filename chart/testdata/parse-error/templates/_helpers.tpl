{{- define "x" -}}
x
{{- end -}}
