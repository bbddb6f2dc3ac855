"""Side-by-side benchmark: splitsched against kube-scheduler on one local control plane.

``make bench`` / ``python -m bench.sidebyside`` (see ``bench/README.md``). Modules:
``workloads`` (scheduler_perf shapes), ``contenders`` (kube-scheduler, splitsched stacks),
``kubeio`` (pod creation and the bind watch), ``measure`` (throughput, latency, CPU),
``runner`` (the orchestration), ``report`` (table, JSON, PNG), ``profiling`` (py-spy).
"""
