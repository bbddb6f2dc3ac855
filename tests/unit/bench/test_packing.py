"""bench.packing runs end to end on a tiny cluster (no timing asserted): both runs see
the same stream, and what each placed is a part of what was offered."""

from __future__ import annotations

from bench import packing


def test_a_tiny_run_schedules_the_same_stream_twice() -> None:
    arrivals = packing.stream(seed=7, nodes=3, arrivals=60, load=0.9)
    assert len(arrivals) == 60 and {a.gpus for a in arrivals} <= {1, 2, 4, 8}
    kube = packing.run(arrivals, 3, None, 7, same_root=True)
    packed = packing.run(arrivals, 3, packing.PACKING_PROFILE, 7, same_root=True)
    assert kube.offered == packed.offered and sum(kube.offered.values()) == 60
    for tally in (kube, packed):
        assert all(tally.placed.get(k, 0) <= n for k, n in tally.offered.items())
        assert 0 < tally.fraction() <= 1


def test_the_command_prints_one_row_per_seed() -> None:
    text = packing.main(["--seed", "1", "--seed", "2", "--nodes", "2", "--arrivals", "30"])
    rows = [
        line for line in text.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")
    ]
    assert len(rows) == 2
