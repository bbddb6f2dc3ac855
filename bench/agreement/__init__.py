"""kube-scheduler as the oracle: ``python -m bench.agreement --seed N [--seeds K]``.

Each seed makes a random cluster and workload (``cluster``, ``workload``, ``scenario``:
pure, switched by ``features``), runs it through kube-scheduler v1.36 and then through
splitsched on one real control plane (``runner``, ``sides``, ``kubeops``, ``extender``),
one pod at a time with the state held equal, and compares pod by pod whether it binds,
the feasible sets, the placements and the FailedScheduling messages (``compare``,
``known``, ``report``). See bench/README.md "Agreement with kube-scheduler".
"""
