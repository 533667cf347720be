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
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "buzz.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "buzz.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Pod-level security shared by every pod: non-root, RuntimeDefault seccomp, no API token
     (nothing here talks to the Kubernetes API), so Pod Security "restricted" admits them. */}}
{{- define "buzz.podSecurity" -}}
serviceAccountName: {{ include "buzz.serviceAccountName" . }}
automountServiceAccountToken: false
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "buzz.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities: {drop: ["ALL"]}
  seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* An env var from a Secret key. Args: list name secret key. */}}
{{- define "buzz.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 }}
      key: {{ index . 2 }}
{{- end -}}

{{/* Environment shared by every service: bus, logging, tracing. */}}
{{- define "buzz.commonEnv" -}}
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
- name: BUZZ_NATS_PREFIX
  value: {{ .Values.nats.subjectPrefix | quote }}
- name: RUST_LOG
  value: {{ .Values.logLevel | quote }}
- name: BUZZ_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
{{- if .Values.otlp.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.otlp.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .Values.otlp.protocol | quote }}
{{- end }}
{{- end -}}

{{/* Redis, for the services that use it (buzz.usesRedis): the URL, key prefix and CA. */}}
{{- define "buzz.redisEnv" -}}
{{- if .Values.redis.existingSecret }}
{{ include "buzz.secretEnv" (list "REDIS_URL" .Values.redis.existingSecret .Values.redis.urlKey) }}
{{- else }}
- name: REDIS_URL
  value: {{ .Values.redis.url | quote }}
{{- end }}
- name: BUZZ_REDIS_PREFIX
  value: {{ .Values.redis.keyPrefix | quote }}
{{- if .Values.redis.caSecret }}
- name: REDIS_CA_FILE
  value: /etc/buzz/redis-ca/{{ .Values.redis.caKey }}
{{- end }}
{{- end -}}

{{/* PostgreSQL: the URL from its Secret, TLS mode and CA. */}}
{{- define "buzz.databaseEnv" -}}
{{ include "buzz.secretEnv" (list "DATABASE_URL" .Values.database.existingSecret .Values.database.urlKey) }}
{{- if .Values.database.sslMode }}
- name: PGSSLMODE
  value: {{ .Values.database.sslMode | quote }}
{{- end }}
{{- if .Values.database.caSecret }}
- name: PGSSLROOTCERT
  value: /etc/buzz/postgres-ca/{{ .Values.database.caKey }}
{{- end }}
{{- end -}}

{{/* The CA and credentials Secrets as read-only volumes; "volumes" or "mounts" as .kind; .db,
     .redis and .nats (default true) say which of them the pod uses. */}}
{{- define "buzz.tlsFiles" -}}
{{- $v := .root.Values -}}
{{- $nats := true -}}
{{- if hasKey . "nats" }}{{ $nats = .nats }}{{ end -}}
{{- $files := list (list "postgres-ca" $v.database.caSecret .db) (list "nats-ca" $v.nats.caSecret $nats) (list "nats-creds" $v.nats.credsSecret $nats) (list "redis-ca" $v.redis.caSecret .redis) -}}
{{- range $files }}
{{- if and (index . 1) (index . 2) }}
{{- if eq $.kind "volumes" }}
- name: {{ index . 0 }}
  secret: {secretName: {{ index . 1 }}, defaultMode: 0440}
{{- else }}
- name: {{ index . 0 }}
  mountPath: /etc/buzz/{{ index . 0 }}
  readOnly: true
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "buzz.extraEnv" -}}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
