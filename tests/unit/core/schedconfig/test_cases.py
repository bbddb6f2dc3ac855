"""splitsched's verdict on each document of tests/support/schedconfig_cases.py (kube-scheduler's
on the same text is checked by tests/integration/test_kube_scheduler_config.py)."""

from __future__ import annotations

import pytest

from splitsched.core import profiles
from tests.support import schedconfig_cases as cases


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.id)
def test_splitsched_gives_the_verdict_the_case_records(case: cases.Case) -> None:
    if case.refused is None:
        profiles.load_yaml(case.text)
        return
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load_yaml(case.text)
    assert str(info.value).startswith(case.refused)


def test_every_difference_from_kube_scheduler_is_explained() -> None:
    for case in cases.CASES:
        agrees = (case.refused is None) == case.kube_accepts
        assert agrees or case.differs, case.id
        assert not (agrees and case.differs), f"{case.id}: agrees, yet explains a difference"
