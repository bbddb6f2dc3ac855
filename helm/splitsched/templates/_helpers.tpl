{{/*
Helpers shared by every template. Component templates call them with a dict:
  (dict "ctx" $ "component" "binder")
*/}}

{{/* The chart name ("splitsched"): app.kubernetes.io/name on every object. */}}
{{- define "splitsched.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object name: the release name, with the chart name appended unless
the release name already contains it ("splitsched" -> "splitsched", "prod" ->
"prod-splitsched").
*/}}
{{- define "splitsched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* One component's object name: <fullname>-<component>. */}}
{{- define "splitsched.componentName" -}}
{{- printf "%s-%s" (include "splitsched.fullname" .ctx) .component -}}
{{- end -}}

{{/*
Selector labels: the immutable subset of the labels, for Deployment/Service/PDB selectors.
*/}}
{{- define "splitsched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "splitsched.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
THE labels helper: every object the chart renders carries these (the standard
app.kubernetes.io/* set plus global.commonLabels).
*/}}
{{- define "splitsched.labels" -}}
{{ include "splitsched.selectorLabels" . }}
app.kubernetes.io/part-of: splitsched
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- with .ctx.Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The image reference of a component: [registry/]repository(:tag|@digest). */}}
{{- define "splitsched.image" -}}
{{- $values := index .ctx.Values .component -}}
{{- $global := .ctx.Values.global.image -}}
{{- $repo := $values.image.repository -}}
{{- if $global.registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" $global.registry) $repo -}}
{{- end -}}
{{- if $values.image.digest -}}
{{- printf "%s@%s" $repo $values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default (default .ctx.Chart.AppVersion $global.tag) $values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* In-cluster DNS name of one of the chart's Services: <name>.<ns>.svc.<domain>. */}}
{{- define "splitsched.serviceHost" -}}
{{- printf "%s.%s.svc.%s" .name .ctx.Release.Namespace .ctx.Values.global.clusterDomain -}}
{{- end -}}

{{/*
Environment every component gets: logging, OTEL_* (standard OpenTelemetry variables) and
the component's extraEnv. `.prefix` is the component's SPLITSCHED_<COMPONENT> prefix.
*/}}
{{- define "splitsched.commonEnv" -}}
{{- $g := .ctx.Values.global -}}
- name: {{ .prefix }}_LOG_LEVEL
  value: {{ $g.logLevel | quote }}
- name: {{ .prefix }}_LOG_JSON
  value: {{ $g.logJson | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "splitsched-%s" .component | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "service.namespace=%s,k8s.namespace.name=%s" .ctx.Release.Name .ctx.Release.Namespace | quote }}
{{- if $g.otel.enabled }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ required "global.otel.endpoint is required when global.otel.enabled" $g.otel.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $g.otel.protocol | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $g.otel.sampler | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $g.otel.samplerArg | quote }}
- name: SPLITSCHED_TRACES_TAIL
  value: {{ ternary "on" "off" $g.otel.tailKeeping | quote }}
- name: SPLITSCHED_TRACES_KEEP_SLOWER_THAN
  value: {{ $g.otel.keepSlowerThan | quote }}
{{- else }}
- name: OTEL_SDK_DISABLED
  value: "true"
{{- end }}
{{- with (index .ctx.Values .component).extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The pod-level fields every component shares: pull secrets, security context, scheduling
constraints, priority.
*/}}
{{- define "splitsched.podCommon" -}}
{{- $values := index .ctx.Values .component -}}
{{- with .ctx.Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .ctx.Values.global.podSecurityContext | nindent 2 }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Probes: readiness is the native gRPC health check (the service reports SERVING only once
it can do its work: synced, API server reachable); liveness is HTTP /healthz, because a
live process that is merely not ready (a binder whose API server is unreachable, a
scheduler waiting for its watcher) must not be restarted. With `.readyPath` readiness
is HTTP GET on it instead (the HA scheduler's /readyz, see scheduler/deployment.yaml), and
with `.tls` (tls.enabled) HTTP GET /readyz: the kubelet's gRPC probe cannot speak TLS.
A startup probe on /healthz holds both back until the process serves HTTP: a Python
service needs a few seconds to start, and without it every install logged "Readiness
probe failed: connection refused" for each pod (seen on a real kubelet, tests/realnode).
*/}}
{{- define "splitsched.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  initialDelaySeconds: 2
  periodSeconds: 1
  timeoutSeconds: 3
  failureThreshold: 120
readinessProbe:
  {{- if or .readyPath .tls }}
  httpGet:
    path: {{ .readyPath | default "/readyz" }}
    port: http
  {{- else }}
  grpc:
    port: {{ .grpcPort }}
  {{- end }}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 6
{{- end -}}

{{/* A PodDisruptionBudget for one component (when <component>.podDisruptionBudget.enabled). */}}
{{- define "splitsched.pdb" -}}
{{- $pdb := (index .ctx.Values .component).podDisruptionBudget -}}
{{- if $pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "splitsched.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "splitsched.labels" . | nindent 4 }}
spec:
  {{- if hasKey $pdb "minAvailable" }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "splitsched.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* A ServiceMonitor scraping a component's Service port "http" (prometheus-operator). */}}
{{- define "splitsched.serviceMonitor" -}}
{{- $sm := (index .ctx.Values .component).serviceMonitor -}}
{{- if $sm.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "splitsched.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "splitsched.labels" . | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "splitsched.selectorLabels" . | nindent 6 }}
  namespaceSelector:
    matchNames:
      - {{ .ctx.Release.Namespace }}
  endpoints:
    - port: http
      path: /metrics
      interval: {{ $sm.interval }}
{{- end }}
{{- end -}}

{{/*
The scheduler's KubeSchedulerConfiguration as written to its ConfigMap: scheduler.config
(a mapping, or a file's text kept as it is), its profiles replaced by the older
scheduler.profiles shorthand when that is set.
*/}}
{{- define "splitsched.schedulerConfig" -}}
{{- $cfg := .Values.scheduler.config -}}
{{- if and (kindIs "string" $cfg) (not .Values.scheduler.profiles) -}}
{{- $cfg -}}
{{- else -}}
{{- $doc := dict -}}
{{- if kindIs "string" $cfg -}}
{{- $doc = fromYaml $cfg -}}
{{- else -}}
{{- $doc = deepCopy $cfg -}}
{{- end -}}
{{- with .Values.scheduler.profiles -}}
{{- $_ := set $doc "profiles" . -}}
{{- end -}}
{{- toYaml $doc -}}
{{- end -}}
{{- end -}}

{{/*
The schedulerNames of the scheduler's profiles, comma-separated (a profile without one,
or a configuration without profiles, is splitsched's).
*/}}
{{- define "splitsched.schedulerNames" -}}
{{- $doc := include "splitsched.schedulerConfig" . | fromYaml -}}
{{- $names := list -}}
{{- range $doc.profiles -}}
{{- $names = append $names (default "splitsched" .schedulerName) -}}
{{- end -}}
{{- join "," (default (list "splitsched") $names) -}}
{{- end -}}

{{/*
"true" when the scheduler runs under leader election (scheduler.leaderElection.enabled),
else "". It also checks the timings the scheduler would refuse at start
(lease duration > renew deadline > retry period), so a bad combination fails the
install instead of crash-looping pods.
*/}}
{{- define "splitsched.schedulerHA" -}}
{{- $le := .Values.scheduler.leaderElection -}}
{{- if $le.enabled -}}
{{- if not (and (gt (float64 $le.leaseDuration) (float64 $le.renewDeadline)) (gt (float64 $le.renewDeadline) (float64 $le.retryPeriod))) -}}
{{- fail (printf "scheduler.leaderElection: need leaseDuration > renewDeadline > retryPeriod, got %v > %v > %v" $le.leaseDuration $le.renewDeadline $le.retryPeriod) -}}
{{- end -}}
true
{{- else if gt (int .Values.scheduler.replicas) 1 -}}
{{- fail "scheduler.replicas > 1 needs scheduler.leaderElection.enabled (one active scheduler otherwise)" -}}
{{- end -}}
{{- end -}}

{{/* The scheduler's Lease (leader election): <fullname>-scheduler in the release namespace. */}}
{{- define "splitsched.schedulerLeaseName" -}}
{{- include "splitsched.componentName" (dict "ctx" . "component" "scheduler") -}}
{{- end -}}

{{/*
TLS identities. `mode` is "shared" (tls.secretName: one Secret for every component),
"cert-manager" (tls.certManager.issuerRef.name: Certificates) or "generated" (the chart's
own CA, templates/tls/secrets.yaml).
*/}}
{{- define "splitsched.tlsMode" -}}
{{- if .Values.tls.secretName -}}shared
{{- else if .Values.tls.certManager.issuerRef.name -}}cert-manager
{{- else -}}generated
{{- end -}}
{{- end -}}

{{/* The Secret a component (or "ops") reads its certificate from. */}}
{{- define "splitsched.tlsSecretName" -}}
{{- if .ctx.Values.tls.secretName -}}
{{- .ctx.Values.tls.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "splitsched.componentName" .) -}}
{{- end -}}
{{- end -}}

{{/*
A component's (or "ops"') identity: its certificate's common name,
<fullname>-<component>.<namespace>, unique across releases and namespaces that share an
issuer.
*/}}
{{- define "splitsched.identity" -}}
{{- printf "%s.%s" (include "splitsched.componentName" .) .ctx.Release.Namespace -}}
{{- end -}}

{{/*
The DNS names a component's server certificate carries: each of its Services, short and
qualified, plus localhost (so `kubectl port-forward` clients verify it too); none for
"ops" (a client only).
*/}}
{{- define "splitsched.tlsDnsNames" -}}
{{- $ctx := .ctx -}}
{{- $services := dict "watcher" (list "watcher") "scheduler" (list "scheduler" "scheduler-headless") "binder" (list "binder-headless") "ops" (list) -}}
{{- $names := list -}}
{{- range (index $services .component) -}}
{{- $svc := printf "%s-%s" (include "splitsched.fullname" $ctx) . -}}
{{- $names = concat $names (list $svc (printf "%s.%s" $svc $ctx.Release.Namespace) (printf "%s.%s.svc" $svc $ctx.Release.Namespace) (include "splitsched.serviceHost" (dict "ctx" $ctx "name" $svc))) -}}
{{- end -}}
{{- if $names -}}
{{- $names = append $names "localhost" -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/*
Who may call a component's restricted RPCs (--trusted-clients), comma-separated:
tls.trustedClients when set; else with the chart's per-component certificates the
binders and the watcher trust the scheduler, the scheduler the binders (every restricted
RPC) and the ops identity and tls.opsClients (Simulate only: `Simulate=<name>`, so a tool
cannot forge a binding outcome); with one shared Secret, no one is singled out ("").
*/}}
{{- define "splitsched.trustedClients" -}}
{{- $t := .ctx.Values.tls -}}
{{- $id := dict -}}
{{- range list "scheduler" "binder" "ops" -}}
{{- $_ := set $id . (include "splitsched.identity" (dict "ctx" $.ctx "component" .)) -}}
{{- end -}}
{{- if $t.trustedClients -}}
{{- join "," $t.trustedClients -}}
{{- else if not $t.secretName -}}
{{- if eq .component "scheduler" -}}
{{- $entries := list $id.binder -}}
{{- range (concat (list $id.ops) $t.opsClients) -}}
{{- $entries = append $entries (printf "Simulate=%s" .) -}}
{{- end -}}
{{- join "," $entries -}}
{{- else -}}
{{- $id.scheduler -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
TLS (values `tls`, when enabled): the flags for a component's server and, with `.peers`,
for its outgoing channels, reading the Secret `splitsched.tlsVolume` mounts.
*/}}
{{- define "splitsched.tlsArgs" -}}
{{- $t := .ctx.Values.tls -}}
- --tls-cert=/etc/splitsched-tls/tls.crt
- --tls-key=/etc/splitsched-tls/tls.key
- --tls-ca=/etc/splitsched-tls/ca.crt
- --tls-client-auth
{{- with include "splitsched.trustedClients" . }}
- --trusted-clients={{ . }}
{{- end }}
{{- if .peers }}
- --peer-tls-ca=/etc/splitsched-tls/ca.crt
- --peer-tls-cert=/etc/splitsched-tls/tls.crt
- --peer-tls-key=/etc/splitsched-tls/tls.key
{{- with $t.serverName }}
- --peer-server-name={{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "splitsched.tlsVolumeMount" -}}
- name: tls
  mountPath: /etc/splitsched-tls
  readOnly: true
{{- end -}}

{{/* The component's own certificate Secret (only its own: a binder pod cannot act as the scheduler). */}}
{{- define "splitsched.tlsVolume" -}}
- name: tls
  secret:
    secretName: {{ include "splitsched.tlsSecretName" . }}
{{- end -}}

{{/*
A component's NetworkPolicy: ingress to its gRPC port only from `.grpcFrom` (a list of
NetworkPolicyPeers) and to its metrics port only from networkPolicy.monitoring; nothing
else reaches its pods.
*/}}
{{- define "splitsched.networkPolicy" -}}
{{- $np := .ctx.Values.networkPolicy -}}
{{- if $np.enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "splitsched.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "splitsched.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "splitsched.selectorLabels" . | nindent 6 }}
  policyTypes: [Ingress]
  ingress:
    - from:
        {{- toYaml .grpcFrom | nindent 8 }}
      ports:
        - port: {{ .grpcPort }}
          protocol: TCP
    {{- with $np.monitoring }}
    - from:
        {{- toYaml . | nindent 8 }}
      ports:
        - port: {{ $.httpPort }}
          protocol: TCP
    {{- end }}
{{- end }}
{{- end -}}

{{/* A NetworkPolicyPeer selecting one component's pods of this release. */}}
{{- define "splitsched.podPeer" -}}
{{- toJson (list (dict "podSelector" (dict "matchLabels" (include "splitsched.selectorLabels" . | fromYaml)))) -}}
{{- end -}}

{{/*
API Priority and Fairness for one component (when <component>.flowControl.enabled): a
PriorityLevelConfiguration of its own and a FlowSchema sending every request of its
ServiceAccount there, so its bursts queue among themselves and neither starve the
cluster's other clients nor each other (docs/deploy.md, "API Priority and Fairness").
`distinguisher` is the FlowSchema's distinguisherMethod type. Left out where the API
server does not serve flowcontrol v1 (before Kubernetes 1.29).
*/}}
{{- define "splitsched.flowControl" -}}
{{- $fc := (index .ctx.Values .component).flowControl -}}
{{- if and $fc.enabled (.ctx.Capabilities.APIVersions.Has "flowcontrol.apiserver.k8s.io/v1") }}
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: {{ include "splitsched.componentName" . }}
  labels:
    {{- include "splitsched.labels" . | nindent 4 }}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: {{ $fc.nominalConcurrencyShares }}
    lendablePercent: {{ $fc.lendablePercent }}
    borrowingLimitPercent: {{ $fc.borrowingLimitPercent }}
    limitResponse:
      type: Queue
      queuing:
        queues: {{ $fc.queues }}
        handSize: {{ $fc.handSize }}
        queueLengthLimit: {{ $fc.queueLengthLimit }}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: {{ include "splitsched.componentName" . }}
  labels:
    {{- include "splitsched.labels" . | nindent 4 }}
spec:
  priorityLevelConfiguration:
    name: {{ include "splitsched.componentName" . }}
  matchingPrecedence: {{ $fc.matchingPrecedence }}
  distinguisherMethod:
    type: {{ .distinguisher }}
  rules:
    - subjects:
        - kind: ServiceAccount
          serviceAccount:
            name: {{ include "splitsched.componentName" . }}
            namespace: {{ .ctx.Release.Namespace }}
      resourceRules:
        - verbs: ["*"]
          apiGroups: ["*"]
          resources: ["*"]
          clusterScope: true
          namespaces: ["*"]
{{- end }}
{{- end -}}
