{{/* Per-service facts the values do not carry: binary, the variables naming its public listener
     (gateway and policy only) and its admin listener (every service: /metrics and probes), and
     which dependencies it uses. */}}
{{- define "buzz.binary" -}}
{{- get (dict "gateway" "buzz-gateway" "write" "buzz-write" "query" "buzz-query" "snapshot" "buzz-snapshot" "policy" "buzz-policy") . -}}
{{- end -}}
{{- define "buzz.listenEnv" -}}
{{- get (dict "gateway" "BUZZ_GATEWAY_ADDR" "policy" "BUZZ_POLICY_ADDR") . -}}
{{- end -}}
{{- define "buzz.adminEnv" -}}
{{- get (dict "gateway" "BUZZ_GATEWAY_ADMIN_ADDR" "write" "BUZZ_WRITE_ADMIN_ADDR" "query" "BUZZ_QUERY_ADMIN_ADDR" "snapshot" "BUZZ_SNAPSHOT_ADMIN_ADDR" "policy" "BUZZ_POLICY_ADMIN_ADDR") . -}}
{{- end -}}
{{- define "buzz.usesDatabase" -}}
{{- if has . (list "write" "query" "snapshot" "policy") }}true{{ end -}}
{{- end -}}
{{- define "buzz.usesRedis" -}}
{{- if has . (list "gateway" "snapshot" "policy") }}true{{ end -}}
{{- end -}}
{{/* Connections per replica: the pool from values (write adds two per group-commit lane: one for
kind-9 posts, one for NIP-AR revisions), policy fixed in code (10). */}}
{{- define "buzz.dbConnections" -}}
{{- if eq .name "policy" }}10{{ else if eq .name "write" }}{{ add (.svc.dbConnections | default 0) (mul 2 (.svc.batchLanes | default 1)) }}{{ else }}{{ .svc.dbConnections | default 0 }}{{ end -}}
{{- end -}}
{{/* Replicas that can run at once: the HPA maximum, else replicas. */}}
{{- define "buzz.maxReplicas" -}}
{{- if .autoscaling.enabled }}{{ .autoscaling.maxReplicas }}{{ else }}{{ .replicas }}{{ end -}}
{{- end -}}
{{/* Replicas guaranteed: the HPA minimum, else replicas. */}}
{{- define "buzz.minReplicas" -}}
{{- if .autoscaling.enabled }}{{ .autoscaling.minReplicas }}{{ else }}{{ .replicas }}{{ end -}}
{{- end -}}
