{{/* The load tester's NATS settings: URL (or its Secret), credentials and CA files. */}}
{{- define "buzz.loadNatsEnv" -}}
{{- if .Values.nats.existingSecret }}
{{ include "buzz.secretEnv" (list "NATS_URL" .Values.nats.existingSecret .Values.nats.urlKey) }}
{{- else }}
- name: NATS_URL
  value: {{ .Values.nats.url | quote }}
{{- end }}
{{- if .Values.nats.credsSecret }}
- name: NATS_CREDS_FILE
  value: /etc/buzz/nats-creds/{{ .Values.nats.credsKey }}
{{- end }}
{{- if .Values.nats.caSecret }}
- name: NATS_CA_FILE
  value: /etc/buzz/nats-ca/{{ .Values.nats.caKey }}
{{- end }}
{{- end -}}

{{/* volumeMounts of the NATS CA and credentials (nothing when neither is set). */}}
{{- define "buzz.loadNatsMounts" -}}
{{- $mounts := include "buzz.tlsFiles" (dict "kind" "mounts" "root" . "db" false "redis" false) }}
{{- if $mounts }}
volumeMounts:
  {{- $mounts | nindent 2 }}
{{- end }}
{{- end -}}

{{/* volumes of the NATS CA and credentials (nothing when neither is set). */}}
{{- define "buzz.loadNatsVolumes" -}}
{{- $volumes := include "buzz.tlsFiles" (dict "kind" "volumes" "root" . "db" false "redis" false) }}
{{- if $volumes }}
volumes:
  {{- $volumes | nindent 2 }}
{{- end }}
{{- end -}}
