"""Back-pressure bench (issue 22 part 4): every pod at once on a real control plane.

``python -m bench.backpressure --pods 50000 --nodes 500 --record`` starts etcd,
kube-apiserver and kwok (``splitsched.testing.controlplane``) and splitsched's services
(``splitsched.testing.stack``, binders at a fixed ``--qps``), creates every pod as fast as
the API server takes them, and samples every second each process's RSS and the services'
queue gauges until every pod is bound or carries its FailedScheduling reason. Then it
checks from the API objects: no node over allocatable, no pod bound twice, and that no
binder's request rate went above its limit. See docs/backpressure.md for what bounds
each buffer, and bench/README.md for the command and the results.
"""
