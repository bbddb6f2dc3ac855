"""The real-node tier's node: the local control plane in real-node mode, plus containerd,
runc, the CNI plugins, a kubelet, kube-proxy and CoreDNS on this machine, so the Helm chart
runs our images under a real kubelet. Needs root; everything it changes on the host is
recorded first and put back by ``down`` (``host``, ``teardown``).

    python -m splitsched.testing.realnode up|down|status|check

One module per job: ``layout`` (names, addresses, paths), ``configs`` (each process's
configuration, pure), ``network`` (bridge and forward guard), ``node`` (the processes),
``host`` and ``teardown`` (record and undo), ``packages`` (Debian packages), ``lock``
(one real node per machine), ``images`` (our images into containerd), ``cluster``
(``RealCluster``, which puts them together) and ``cli``.
"""

from splitsched.testing.realnode.cluster import RealCluster
from splitsched.testing.realnode.layout import NodeLayout

__all__ = ["NodeLayout", "RealCluster"]
