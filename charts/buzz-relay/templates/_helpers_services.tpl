{{/* Per-service facts the values do not carry: binary and the variable naming its listener. */}}
{{- define "buzz.binary" -}}
{{- get (dict "gateway" "buzz-gateway" "write" "buzz-write" "query" "buzz-query" "snapshot" "buzz-snapshot" "policy" "buzz-policy") . -}}
{{- end -}}
{{- define "buzz.listenEnv" -}}
{{- get (dict "gateway" "BUZZ_GATEWAY_ADDR" "write" "BUZZ_WRITE_ADMIN_ADDR" "query" "BUZZ_QUERY_ADMIN_ADDR" "snapshot" "BUZZ_SNAPSHOT_ADMIN_ADDR" "policy" "BUZZ_POLICY_ADDR") . -}}
{{- end -}}
