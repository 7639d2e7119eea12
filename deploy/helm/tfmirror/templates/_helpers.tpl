{{/* The chart's name, at most 63 characters. */}}
{{- define "tfmirror.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the prefix of every object's name. */}}
{{- define "tfmirror.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tfmirror.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tfmirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tfmirror.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tfmirror.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tfmirror
{{- end }}

{{- define "tfmirror.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tfmirror.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tfmirror.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* http or https: what the mirror's port speaks. */}}
{{- define "tfmirror.scheme" -}}
{{- if .Values.insecureHTTP }}http{{ else }}https{{ end }}
{{- end }}

{{/* Whether the cache is on a PersistentVolumeClaim. */}}
{{- define "tfmirror.pvc" -}}
{{- if and .Values.persistence.enabled (not .Values.sharedStore.enabled) }}true{{ end }}
{{- end }}

{{/* Settings the chart refuses, and why. */}}
{{- define "tfmirror.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.sharedStore.enabled) }}
{{- fail "replicaCount > 1 needs sharedStore.enabled: each replica would keep a cache of its own, and a ReadWriteOnce volume with Badger's lock serves one pod" }}
{{- end }}
{{- if and .Values.sharedStore.enabled (not .Values.sharedStore.url) }}
{{- fail "sharedStore.enabled needs sharedStore.url (s3://BUCKET/PREFIX?...)" }}
{{- end }}
{{- if and .Values.urlSigningKey.existingSecret (not .Values.auth.existingSecret) }}
{{- fail "urlSigningKey.existingSecret needs auth.existingSecret: archive URLs are signed only with client authentication" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) .Values.auth.existingSecret (not .Values.urlSigningKey.existingSecret) }}
{{- fail "with auth and more than one replica, set urlSigningKey.existingSecret: every replica must sign archive URLs with the same key" }}
{{- end }}
{{- if and .Values.trustedExportKeys.files (not .Values.trustedExportKeys.existingConfigMap) }}
{{- fail "trustedExportKeys.files needs trustedExportKeys.existingConfigMap" }}
{{- end }}
{{- if and .Values.trustedPublisherKeys.namespaces (not .Values.trustedPublisherKeys.existingConfigMap) }}
{{- fail "trustedPublisherKeys.namespaces needs trustedPublisherKeys.existingConfigMap" }}
{{- end }}
{{- if and .Values.retention.keepVersionsPerMajor (not .Values.retention.keepVersions) }}
{{- fail "retention.keepVersionsPerMajor needs retention.keepVersions" }}
{{- end }}
{{- if and .Values.modules.sourceCredentials.existingSecret (not .Values.modules.sourceCredentials.key) }}
{{- fail "modules.sourceCredentials.existingSecret needs modules.sourceCredentials.key, the Secret's key holding the file" }}
{{- end }}
{{- $origins := list }}
{{- range splitList "," (toString (index .Values.config "allowed-origins" | default "registry.terraform.io,registry.opentofu.org")) }}
{{- $origins = append $origins (trim . | lower) }}
{{- end }}
{{- range .Values.unsignedHosts }}
{{- if not (has (lower .) $origins) }}
{{- fail (printf "unsignedHosts: %s is not among config.allowed-origins" .) }}
{{- end }}
{{- end }}
{{- /* Flags the chart sets from values of their own. */}}
{{- $owned := dict "keep-versions" "retention.keepVersions" "keep-versions-per-major" "retention.keepVersionsPerMajor" "evict-unused-after" "retention.evictUnusedAfter" "retention-interval" "retention.interval" "pins-dir" "pins.existingConfigMap" "module-source-credentials" "modules.sourceCredentials" "allow-unsigned-hosts" "unsignedHosts" "archive-max-unpacked-bytes" "archiveLimits.maxUnpackedBytes" "archive-max-entries" "archiveLimits.maxEntries" }}
{{- range $flag, $value := $owned }}
{{- if hasKey $.Values.config $flag }}
{{- fail (printf "config.%s: set %s instead" $flag $value) }}
{{- end }}
{{- end }}
{{- end }}
