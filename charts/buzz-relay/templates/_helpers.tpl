{{- define "buzz.fullname" -}}
{{- printf "%s" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "buzz.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "buzz.labels" -}}
app.kubernetes.io/name: buzz-relay
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Environment shared by every service: the bus, Redis and logging (the database URL only
     goes to the services that use PostgreSQL). */}}
{{- define "buzz.commonEnv" -}}
- name: NATS_URL
  value: {{ .Values.nats.url | quote }}
- name: BUZZ_NATS_PREFIX
  value: {{ .Values.nats.subjectPrefix | quote }}
- name: REDIS_URL
  value: {{ .Values.redis.url | quote }}
- name: BUZZ_REDIS_PREFIX
  value: {{ .Values.redis.keyPrefix | quote }}
- name: RUST_LOG
  value: {{ .Values.logLevel | quote }}
{{- end -}}

{{- define "buzz.relayKeyEnv" -}}
- name: BUZZ_RELAY_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.relay.secretKeySecret }}
      key: {{ .Values.relay.secretKeySecretKey }}
{{- end -}}
