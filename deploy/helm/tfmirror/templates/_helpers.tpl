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

{{/* A value as the string it stands for: a whole number, which a value
     of digits is to Helm (a float64 from a values file, an int64 from
     --set), as its digits, where printf and toString write a float64
     as 4.294967296e+09. */}}
{{- define "tfmirror.string" -}}
{{- if and (kindIs "float64" .) (eq . (float64 (int64 .))) }}{{ int64 . }}{{ else }}{{ toString . }}{{ end }}
{{- end }}

{{- define "tfmirror.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "tfmirror.string" (default .Chart.AppVersion .Values.image.tag)) }}
{{- end }}
{{- end }}

{{/* The names clients in the cluster reach the Service by, as a JSON
     array: NAME, NAME.NAMESPACE, NAME.NAMESPACE.svc and
     NAME.NAMESPACE.svc.CLUSTER-DOMAIN. */}}
{{- define "tfmirror.serviceNames" -}}
{{- $name := include "tfmirror.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $name (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.%s" $name $ns .Values.clusterDomain) | toJson }}
{{- end }}

{{/* http or https: what the mirror's port speaks. */}}
{{- define "tfmirror.scheme" -}}
{{- if .Values.insecureHTTP }}http{{ else }}https{{ end }}
{{- end }}

{{/* Whether the cache is on a PersistentVolumeClaim. */}}
{{- define "tfmirror.pvc" -}}
{{- if and .Values.persistence.enabled (not .Values.sharedStore.enabled) }}true{{ end }}
{{- end }}

{{/* Whether the cache is on an emptyDir on the node's disk: without a
     claim, and without ephemeralVolume's volume of each pod. */}}
{{- define "tfmirror.emptyDir" -}}
{{- if not (or (include "tfmirror.pvc" .) .Values.ephemeralVolume.enabled) }}true{{ end }}
{{- end }}

{{/* The data directory: on a claim, the volume's root, where earlier
     releases kept the cache too (an upgrade keeps it); on an emptyDir, which
     the kubelet makes root's and open to all users (0777), a directory
     tfmirror makes in it, its user's alone (0700); so too on each pod's
     ephemeral volume, new with its pod, whose root is the fsGroup's and
     may hold a file system's lost+found. */}}
{{- define "tfmirror.dataDir" -}}
{{- if include "tfmirror.pvc" . }}/var/lib/tfmirror{{ else }}/var/lib/tfmirror/data{{ end }}
{{- end }}

{{/* The bytes of a size, as a number: a Kubernetes quantity (10Gi, 500M)
     or one of tfmirror's sizes (40GiB, 2GB, 1048576, also as a YAML
     number); "" for a size in
     another form, which is not checked here. */}}
{{- define "tfmirror.bytes" -}}
{{- $s := include "tfmirror.string" . | trim }}
{{- if regexMatch "^[0-9]+(\\.[0-9]+)?\\s*([kKmMgGtTpPeE]i?)?[bB]?$" $s }}
{{- $unit := regexReplaceAll "^[0-9.]+\\s*" $s "" | lower | trimSuffix "b" }}
{{- $units := dict "" 1 "k" 1e3 "ki" 1024 "m" 1e6 "mi" 1048576 "g" 1e9 "gi" 1073741824 "t" 1e12 "ti" 1099511627776 "p" 1e15 "pi" 1125899906842624 "e" 1e18 "ei" 1152921504606846976 }}
{{- mulf (regexReplaceAll "^([0-9.]+).*$" $s "${1}") (get $units $unit) }}
{{- end }}
{{- end }}

{{/* The seconds of a Go duration (5s, 1m30s, 500ms, 0), as a number; ""
     for a value in another form, which is not checked here. */}}
{{- define "tfmirror.seconds" -}}
{{- $s := include "tfmirror.string" . | trim }}
{{- if eq $s "0" }}0
{{- else if regexMatch "^([0-9]+(\\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$" $s }}
{{- $units := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "μs" 1e-6 "ms" 1e-3 "s" 1 "m" 60 "h" 3600 }}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9.]+[^0-9.]+" $s -1 }}
{{- $total = addf $total (mulf (regexReplaceAll "[^0-9.]" . "") (get $units (regexReplaceAll "[0-9.]" . ""))) }}
{{- end }}
{{- $total }}
{{- end }}
{{- end }}

{{/* config with every key the flag's name, as JSON: a setting named as
     the configuration file names it (cache_max_bytes, the spelling of
     docs/configuration.md) is the flag's (cache-max-bytes), so that the
     chart's checks read what the rendered file says. Of two spellings of
     one setting the file's wins (it comes after the flag's in Helm's
     sorted order), as it did in the rendered file. */}}
{{- define "tfmirror.config" -}}
{{- $c := dict }}
{{- range $k, $v := .Values.config }}{{ $_ := set $c ($k | replace "_" "-") $v }}{{ end }}
{{- toJson $c }}
{{- end }}

{{/* Settings the chart refuses, and why. */}}
{{- define "tfmirror.validate" -}}
{{- $config := include "tfmirror.config" . | fromJson }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.sharedStore.enabled) }}
{{- fail "replicaCount > 1 needs sharedStore.enabled: each replica would keep a cache of its own, and a ReadWriteOnce volume with Badger's lock serves one pod" }}
{{- end }}
{{- /* A budget of no pod unavailable lets no node be drained: the drain
     waits for ever, and so does the cluster's upgrade. */}}
{{- if and (gt (int .Values.replicaCount) 1) (has (toString .Values.podDisruptionBudget.maxUnavailable | trimSuffix "%" | trim) (list "0" "" "<nil>")) }}
{{- fail (printf "podDisruptionBudget.maxUnavailable %v lets no pod be evicted, so no node can be drained: set 1 or more (or a percentage above 0)" (include "tfmirror.string" .Values.podDisruptionBudget.maxUnavailable)) }}
{{- end }}
{{- if and .Values.ephemeralVolume.enabled (include "tfmirror.pvc" .) }}
{{- fail "ephemeralVolume.enabled: the cache is on the claim of persistence; each pod's ephemeral volume is the data volume only without one (sharedStore.enabled, or persistence.enabled false)" }}
{{- end }}
{{- if and .Values.sharedStore.enabled (not .Values.sharedStore.url) }}
{{- fail "sharedStore.enabled needs sharedStore.url (s3://BUCKET/PREFIX?...)" }}
{{- end }}
{{- if and .Values.sharedStore.enabled (not .Values.sharedStore.key.existingSecret) }}
{{- fail "sharedStore.enabled needs sharedStore.key.existingSecret: a Secret with the key (at least 32 bytes, the same for every replica) that authenticates what the replicas write to the bucket" }}
{{- end }}
{{- if and .Values.insecureHTTP .Values.tls.existingSecret }}
{{- fail "insecureHTTP and tls.existingSecret: plain HTTP serves no certificate, and tfmirror refuses --insecure-http with --tls-cert (the pods would stop at start); set one of them" }}
{{- end }}
{{- if and .Values.urlSigningKey.existingSecret (not .Values.auth.existingSecret) }}
{{- fail "urlSigningKey.existingSecret needs auth.existingSecret: archive URLs are signed only with client authentication" }}
{{- end }}
{{- if and (or (gt (int .Values.replicaCount) 1) (not (include "tfmirror.pvc" .))) .Values.auth.existingSecret (not .Values.urlSigningKey.existingSecret) }}
{{- fail "with auth and more than one replica, or pods without a claim (which roll: the new pod beside the old one), set urlSigningKey.existingSecret: every pod must sign archive URLs with the same key" }}
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
{{- if and .Values.originCredentials.existingSecret (not .Values.originCredentials.key) }}
{{- fail "originCredentials.existingSecret needs originCredentials.key, the Secret's key holding the credentials file" }}
{{- end }}
{{- if and .Values.modules.sourceCredentials.existingSecret (not .Values.modules.sourceCredentials.key) }}
{{- fail "modules.sourceCredentials.existingSecret needs modules.sourceCredentials.key, the Secret's key holding the file" }}
{{- end }}
{{- $origins := list }}
{{- $allowed := index $config "allowed-origins" | default "registry.terraform.io,registry.opentofu.org" }}
{{- if kindIs "slice" $allowed }}{{ $allowed = join "," $allowed }}{{ end }}
{{- range splitList "," (toString $allowed) }}
{{- $origins = append $origins (trim . | lower) }}
{{- end }}
{{- range .Values.unsignedHosts }}
{{- if not (has (lower .) $origins) }}
{{- fail (printf "unsignedHosts: %s is not among config.allowed-origins" .) }}
{{- end }}
{{- end }}
{{- /* The cache's limit and the data volume: the kubelet evicts a pod
     whose emptyDir outgrows its sizeLimit, and on a full claim the cache
     takes no more archives and /readyz fails. 0 (or none) is no limit. */}}
{{- $cacheMax := include "tfmirror.string" (index $config "cache-max-bytes" | default "0") }}
{{- with include "tfmirror.bytes" $cacheMax }}
{{- $cache := float64 . }}
{{- if include "tfmirror.emptyDir" $ }}
{{- with include "tfmirror.bytes" $.Values.emptyDir.sizeLimit }}
{{- if or (eq $cache 0.0) (gt $cache (mulf . 0.75)) }}
{{- fail (printf "config.cache-max-bytes %s does not fit the data volume, an emptyDir of emptyDir.sizeLimit %v, which the kubelet evicts the pod for outgrowing: set it to at most 3/4 of the sizeLimit (0 is no limit), leaving room for Badger's own files" $cacheMax (include "tfmirror.string" $.Values.emptyDir.sizeLimit)) }}
{{- end }}
{{- end }}
{{- else }}
{{- /* The data directory holds up to 1.25 times the limit (Badger's
     value log before its GC returns the space of evicted archives)
     plus the disk reserve, and the volume's file system keeps some of it
     (ext4 5% for root): a limit above 2/3 of the claim (or of each pod's
     ephemeral volume) may fill it. */}}
{{- $size := "" }}
{{- $volume := "" }}
{{- if not (include "tfmirror.pvc" $) }}
{{- $size = $.Values.ephemeralVolume.size }}
{{- $volume = printf "an ephemeral volume of ephemeralVolume.size %v" (include "tfmirror.string" $size) }}
{{- else if not $.Values.persistence.existingClaim }}
{{- $size = $.Values.persistence.size }}
{{- $volume = printf "a claim of persistence.size %v" (include "tfmirror.string" $size) }}
{{- end }}
{{- with include "tfmirror.bytes" $size }}
{{- if and (gt $cache 0.0) (gt (mulf $cache 3.0) (mulf . 2.0)) }}
{{- fail (printf "config.cache-max-bytes %s does not fit the data volume, %s: the data directory holds up to 1.25 times the limit (Badger's own files, the space of evicted archives not yet returned) plus the disk reserve, the file system keeps some of the volume, and the volume would fill, the cache stop taking archives and /readyz fail, taking the pod out of the Service; set it to at most 2/3 of the size" $cacheMax $volume) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- /* The kubelet kills the container (SIGKILL) at the grace period's
     end, cutting off what the shutdown lets finish. */}}
{{- $delay := index $config "shutdown-delay" | default "0s" }}
{{- $timeout := index $config "shutdown-timeout" | default "30s" }}
{{- $grace := .Values.terminationGracePeriodSeconds }}
{{- if kindIs "invalid" $grace }}{{ $grace = 30 }}{{ end }}
{{- $delaySeconds := include "tfmirror.seconds" $delay }}
{{- $timeoutSeconds := include "tfmirror.seconds" $timeout }}
{{- if and $delaySeconds $timeoutSeconds (le (float64 $grace) (addf $delaySeconds $timeoutSeconds)) }}
{{- fail (printf "terminationGracePeriodSeconds %v does not outlast config.shutdown-delay %s and config.shutdown-timeout %s: the kubelet kills the pod at its end, cutting off the downloads the shutdown lets finish; set it above their sum" (include "tfmirror.string" $grace) (include "tfmirror.string" $delay) (include "tfmirror.string" $timeout)) }}
{{- end }}
{{- /* Flags the chart sets from values of their own. */}}
{{- if and .Values.originCA.existingConfigMap .Values.originCA.existingSecret }}
{{- fail "originCA: set existingConfigMap or existingSecret, not both" }}
{{- end }}
{{- if and (or .Values.originCA.existingConfigMap .Values.originCA.existingSecret) (not .Values.originCA.keys) }}
{{- fail "originCA needs originCA.keys, the keys holding the CA certificates" }}
{{- end }}
{{- range list "listen" "data-dir" "metrics-listen" }}
{{- if hasKey $config . }}
{{- fail (printf "config.%s: the chart sets the mirror's address (:8443), data directory (on the data volume at /var/lib/tfmirror) and metrics address (:9090), which the Service and the probes name" .) }}
{{- end }}
{{- end }}
{{- /* Nor by extraArgs or extraEnv, which come after the chart's own
     (a flag is the last one given, an env var the last one named). */}}
{{- $chartFlags := list "listen" "metrics-listen" "data-dir" "config" "insecure-http" }}
{{- range .Values.extraArgs }}
{{- $arg := toString . }}
{{- range $chartFlags }}
{{- if or (eq $arg (printf "--%s" .)) (hasPrefix (printf "--%s=" .) $arg) (eq $arg (printf "-%s" .)) (hasPrefix (printf "-%s=" .) $arg) }}
{{- fail (printf "extraArgs: %s: the chart sets --%s (the address the Service and the probes name, the data volume, its configuration file, insecureHTTP)" $arg .) }}
{{- end }}
{{- end }}
{{- end }}
{{- range .Values.extraEnv }}
{{- $name := toString .name }}
{{- range $chartFlags }}
{{- if eq $name (printf "TFMIRROR_%s" (upper . | replace "-" "_")) }}
{{- fail (printf "extraEnv: %s: the chart sets --%s (the address the Service and the probes name, the data volume, its configuration file, insecureHTTP)" $name .) }}
{{- end }}
{{- end }}
{{- end }}
{{- if hasKey $config "upstream-proxy" }}
{{- fail "config.upstream-proxy may carry a password and config is a ConfigMap: put the URL in a Secret and set upstreamProxy.existingSecret instead" }}
{{- end }}
{{- $owned := dict "origin-ca-file" "originCA" "tls-san" "tls.extraSANs" "keep-versions" "retention.keepVersions" "keep-versions-per-major" "retention.keepVersionsPerMajor" "evict-unused-after" "retention.evictUnusedAfter" "retention-interval" "retention.interval" "pins-dir" "pins.existingConfigMap" "module-source-credentials" "modules.sourceCredentials" "allow-unsigned-hosts" "unsignedHosts" "archive-max-unpacked-bytes" "archiveLimits.maxUnpackedBytes" "archive-max-entries" "archiveLimits.maxEntries" "trusted-proxies" "trustedProxies" "credentials-file" "originCredentials" "insecure-http" "insecureHTTP" "tls-cert" "tls.existingSecret" "tls-key" "tls.existingSecret" "auth-tokens-file" "auth.existingSecret" "url-signing-key-file" "urlSigningKey.existingSecret" "export-key" "exportKey.existingSecret" "trusted-export-keys" "trustedExportKeys" "trusted-publisher-keys" "trustedPublisherKeys" "shared-store" "sharedStore" "shared-store-key-file" "sharedStore.key" "shared-store-previous-key-file" "sharedStore.key.previousKey" "shared-store-id" "sharedStore.id" }}
{{- range $flag, $value := $owned }}
{{- if hasKey $config $flag }}
{{- fail (printf "config.%s: set %s instead" $flag $value) }}
{{- end }}
{{- end }}
{{- /* Nor in extraArgs or extraEnv, where they would pass by the chart's
     checks of them: those of the values that own them, and those of
     config's settings the chart checks (the shutdown against the grace
     period, the cache against its volume, the origins against
     unsignedHosts). */}}
{{- $checked := dict "shutdown-delay" "config.shutdown-delay" "shutdown-timeout" "config.shutdown-timeout" "cache-max-bytes" "config.cache-max-bytes" "allowed-origins" "config.allowed-origins" }}
{{- range $flag, $value := merge (dict) $owned $checked }}
{{- range $.Values.extraArgs }}
{{- $arg := toString . }}
{{- if or (eq $arg (printf "--%s" $flag)) (hasPrefix (printf "--%s=" $flag) $arg) (eq $arg (printf "-%s" $flag)) (hasPrefix (printf "-%s=" $flag) $arg) }}
{{- fail (printf "extraArgs: %s: set %s instead, which the chart checks" $arg $value) }}
{{- end }}
{{- end }}
{{- range $.Values.extraEnv }}
{{- $name := toString .name }}
{{- if eq $name (printf "TFMIRROR_%s" (upper $flag | replace "-" "_")) }}
{{- fail (printf "extraEnv: %s: set %s instead, which the chart checks" $name $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* Without a certificate of its own tfmirror generates a CA in the
     data directory: on a volume that does not outlive its pod, each pod
     and each restart makes a new one, which clients that trusted the
     last refuse. An Ingress may speak TLS to the pods without checking
     their certificate (ingress-nginx's backend-protocol HTTPS), the
     clients checking the Ingress's: NOTES.txt says so. A Gateway reaches
     HTTPS backends only through a BackendTLSPolicy, which checks them. */}}
{{- if not (or (include "tfmirror.pvc" .) .Values.tls.existingSecret .Values.insecureHTTP .Values.ingress.enabled) }}
{{- fail "without tls.existingSecret tfmirror generates its CA in the data directory, which here does not outlive its pod (an emptyDir, or ephemeralVolume's volume): clients that trust one pod's CA refuse the next pod, and the same pod after a restart, as each makes a CA of its own: set tls.existingSecret (a certificate of a CA the clients trust, such as cert-manager's), or insecureHTTP behind an Ingress or Gateway that terminates TLS" }}
{{- end }}
{{- end }}

{{/* The configuration file: every setting the chart renders, by attribute
     (the flag in snake case), as JSON. config's values are strings in the
     flags' syntax, as the TFMIRROR_* variables were; tfmirror reads them so. */}}
{{- define "tfmirror.settings" -}}
{{- $s := dict }}
{{- range $flag, $value := include "tfmirror.config" . | fromJson }}
{{- if kindIs "slice" $value }}
{{- /* A list, as the file takes one for a list setting (and refuses
     for another, naming it); toString would make it one string, "[a b]". */}}
{{- $items := list }}
{{- range $value }}{{ $items = append $items (toString .) }}{{ end }}
{{- with $items }}{{ $_ := set $s ($flag | replace "-" "_") . }}{{ end }}
{{- else if and (kindIs "float64" $value) (eq $value (float64 (int64 $value))) }}
{{- /* A whole number YAML gave as a number (cache-max-bytes:
     6442450944): its digits, where toString writes 6.442450944e+09. */}}
{{- $_ := set $s ($flag | replace "-" "_") (toString (int64 $value)) }}
{{- else if and (not (kindIs "invalid" $value)) (ne (toString $value) "") }}
{{- $_ := set $s ($flag | replace "-" "_") (toString $value) }}
{{- end }}
{{- end }}
{{- with .Values.retention }}
{{- if .keepVersions }}{{ $_ := set $s "keep_versions" (.keepVersions | int64) }}{{ end }}
{{- if .keepVersionsPerMajor }}{{ $_ := set $s "keep_versions_per_major" true }}{{ end }}
{{- with .evictUnusedAfter }}{{ $_ := set $s "evict_unused_after" (toString .) }}{{ end }}
{{- with .interval }}{{ $_ := set $s "retention_interval" (toString .) }}{{ end }}
{{- end }}
{{- with .Values.unsignedHosts }}{{ $_ := set $s "allow_unsigned_hosts" . }}{{ end }}
{{- with .Values.trustedProxies }}{{ $_ := set $s "trusted_proxies" . }}{{ end }}
{{- with .Values.archiveLimits.maxUnpackedBytes }}{{ $_ := set $s "archive_max_unpacked_bytes" (include "tfmirror.string" .) }}{{ end }}
{{- with .Values.archiveLimits.maxEntries }}{{ $_ := set $s "archive_max_entries" (. | int64) }}{{ end }}
{{- if .Values.sharedStore.enabled }}
{{- $_ := set $s "shared_store" .Values.sharedStore.url }}
{{- $_ := set $s "shared_store_key_file" "/etc/tfmirror/shared-store-key/shared-store.key" }}
{{- if .Values.sharedStore.key.previousKey }}{{ $_ := set $s "shared_store_previous_key_file" "/etc/tfmirror/shared-store-key/shared-store-previous.key" }}{{ end }}
{{- with .Values.sharedStore.id }}{{ $_ := set $s "shared_store_id" . }}{{ end }}
{{- end }}
{{- with .Values.policy }}{{ $_ := set $s "policy" . }}{{ end }}
{{- /* listen (:8443) is the image's TFMIRROR_LISTEN and data_dir the
     container's TFMIRROR_DATA_DIR (tfmirror.dataDir), which win over the
     file. */}}
{{- $_ := set $s "metrics_listen" ":9090" }}
{{- if .Values.insecureHTTP }}{{ $_ := set $s "insecure_http" true }}{{ end }}
{{- if .Values.tls.existingSecret }}
{{- $_ := set $s "tls_cert" "/etc/tfmirror/tls/tls.crt" }}
{{- $_ := set $s "tls_key" "/etc/tfmirror/tls/tls.key" }}
{{- else if not .Values.insecureHTTP }}
{{- $_ := set $s "tls_san" (concat (include "tfmirror.serviceNames" . | fromJsonArray) .Values.tls.extraSANs) }}
{{- end }}
{{- if or .Values.originCA.existingConfigMap .Values.originCA.existingSecret }}
{{- $files := list }}
{{- range .Values.originCA.keys }}{{ $files = append $files (printf "/etc/tfmirror/origin-ca/%s" .) }}{{ end }}
{{- $_ := set $s "origin_ca_file" $files }}
{{- end }}
{{- if .Values.originCredentials.existingSecret }}{{ $_ := set $s "credentials_file" (printf "/etc/tfmirror/origin-credentials/%s" .Values.originCredentials.key) }}{{ end }}
{{- if .Values.auth.existingSecret }}{{ $_ := set $s "auth_tokens_file" "/etc/tfmirror/auth/tokens" }}{{ end }}
{{- if .Values.urlSigningKey.existingSecret }}{{ $_ := set $s "url_signing_key_file" "/etc/tfmirror/url-signing/url-signing.key" }}{{ end }}
{{- if .Values.exportKey.existingSecret }}{{ $_ := set $s "export_key" "/etc/tfmirror/export-key/export-key.asc" }}{{ end }}
{{- with .Values.trustedExportKeys.files }}
{{- $files := list }}
{{- range . }}{{ $files = append $files (printf "/etc/tfmirror/trusted-export-keys/%s" .) }}{{ end }}
{{- $_ := set $s "trusted_export_keys" $files }}
{{- end }}
{{- with .Values.trustedPublisherKeys.namespaces }}
{{- $entries := list }}
{{- range . }}{{ $entries = append $entries (printf "%s=/etc/tfmirror/trusted-publisher-keys/%s" .namespace .file) }}{{ end }}
{{- $_ := set $s "trusted_publisher_keys" $entries }}
{{- end }}
{{- if .Values.pins.existingConfigMap }}{{ $_ := set $s "pins_dir" "/etc/tfmirror/pins" }}{{ end }}
{{- if .Values.modules.sourceCredentials.existingSecret }}{{ $_ := set $s "module_source_credentials" (printf "/etc/tfmirror/module-source-credentials/%s" .Values.modules.sourceCredentials.key) }}{{ end }}
{{- toPrettyJson $s }}
{{- end }}
