"""The soak (``python -m bench.soak --minutes N``, ``make soak``): the three services (a
watcher, 2 binders, 2 schedulers under leader election) on 200 kwok nodes under the churn
a production cluster sees, for N minutes, checked every 30 s from the API server's
objects and sampled every 10 s for leaks.

One module per job: ``cluster`` (the control plane, nodes, proxies and services),
``churn`` (Deployments, Jobs, pods deleted mid-bind, gangs, node churn), ``rounds``
(preemption against PDB-guarded pods, with ``splitsched.testing.mixedload``'s checks),
``disruptions`` (the binders' rolling restart, the leader hand-over, the cut watches),
``checks`` (the 30-second promises), ``sampling`` (RSS, fds, threads, asyncio tasks),
``report`` (slopes, the table, the plot, the JSON) and ``run`` (the timeline).
"""
