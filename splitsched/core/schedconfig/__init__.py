"""Reading a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) as kube-scheduler
v1.36 reads it: strictly, field by field, and with its rules for which plugins run where.

`document` checks a document (YAML or parsed) and returns its profiles' mappings and what
to report; `schema` is the strict walker and its types; `v1` and `pluginargs` are the
fields (and what splitsched does with those that do not apply); `kubeplugins` is kube's
table of in-tree plugins; `resolve` decides a profile's plugins per extension point.
`splitsched.core.profiles` builds the profiles from these. Pure: no I/O.
"""
