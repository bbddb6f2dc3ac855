"""`python -m splitsched.demo`: the live run is mutual TLS unless `--insecure` asks for
plaintext (what it then runs is the stack's: tests/unit/testing/test_stack_plan.py)."""

from __future__ import annotations

import pytest

from splitsched import demo
from splitsched.demo import live


def test_the_live_demo_is_mutual_tls_unless_insecure(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[tuple[bool, bool]] = []

    def run_live(*, keep: bool, tls: bool) -> int:
        runs.append((keep, tls))
        return 0

    monkeypatch.setattr(live, "run_live", run_live)
    assert demo.main([]) == 0
    assert demo.main(["--insecure", "--keep"]) == 0
    assert runs == [(False, True), (True, False)]
