"""The Lease elector refuses timings under which two schedulers could both count
themselves leader (a renew deadline not shorter than the lease). The election itself runs
against a real API server in tests/integration/test_leader_election.py."""

from __future__ import annotations

import pytest

from services.scheduler import leader
from splitsched.runtime import kubeclient


def test_elector_rejects_timings_that_would_allow_two_leaders() -> None:
    endpoint = kubeclient.KubeEndpoint(host="http://127.0.0.1:1")
    for duration, deadline in ((10.0, 10.0), (10.0, 12.0)):
        with pytest.raises(leader.LeaderElectionError):
            leader.LeaderElector(
                client=kubeclient.KubeClient(endpoint), namespace="ns", name="l",
                identity="a", lease_duration=duration, renew_deadline=deadline,
            )  # fmt: skip
