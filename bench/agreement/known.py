"""Known differences: disagreements we understand, each with the seeds that show it.

A verdict that fails a check and matches one of these is counted under its id instead of
"unexplained". Each entry says whose behaviour is wrong: kube-scheduler's own (a bug we
do not copy: the report counts such pods apart, as "agree, or kube-scheduler's documented
bug") or ours (still counted against the agreement, until fixed). An entry is removed once
fixed: tests/e2e/test_agreement.py fails when a difference listed for its seeds no longer
shows.

Fixed on splitsched's side and so gone from here: ``taint-wording`` (splitsched named the
taint, "node(s) had untolerated taint {k: v}", where v1.36 says "untolerated taint(s)"; 96
of seeds 1-100), ``postfilter-message`` (splitsched stopped after the filters' reasons
where kube-scheduler appends its PostFilter plugins' words, "no new claims to deallocate,
preemption: 0/N nodes are available: ..."; every pending pod of seeds 1-100) and
``prefilter-nodes`` (splitsched filtered every node where kube-scheduler filters only those
a required ``matchFields: metadata.name`` term names, counting the others as "node(s)
didn't satisfy plugin(s) [NodeAffinity]"; 13 pods of seeds 12-83).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from bench.agreement.compare import Verdict

KUBE = "kube-scheduler"
OURS = "splitsched"


@dataclass(frozen=True)
class Difference:
    id: str
    #: Whose behaviour is wrong: KUBE (its own bug, not copied) or OURS (to fix).
    whose: str
    #: What differs, and why it is left.
    what: str
    #: Seeds (default sizes and features) where it shows.
    seeds: tuple[int, ...]
    matches: Callable[[Verdict], bool]
    #: Features beyond the default ones it needs to show (its ``seeds`` are then runs
    #: with those added, e.g. ``--features +devices``).
    features: tuple[str, ...] = ()


#: kube-scheduler's message after a PreFilter rejection: the rejection, then "not found".
_NOT_FOUND = re.compile(r"^(0/(\d+) nodes are available: .*\.) not found$")


def without_not_found(kube_message: str) -> str | None:
    """What kube-scheduler writes after a PreFilter rejection when DynamicResources'
    PostFilter does not fail (kube-not-found): the rejection, no claims to deallocate, and
    preemption trying no node (a PreFilter rejection is UnschedulableAndUnresolvable on
    all of them). None if the message does not show the bug."""
    bug = _NOT_FOUND.match(kube_message)
    if bug is None:
        return None
    head, total = bug.group(1), bug.group(2)
    return (
        f"{head} no new claims to deallocate, preemption: 0/{total} nodes are available: "
        f"{total} Preemption is not helpful for scheduling."
    )


def not_found_instead_of_post_filter(v: Verdict) -> bool:
    """Only the message differs, and only by kube-not-found: splitsched's message is
    kube-scheduler's with the bug undone (`without_not_found`)."""
    if v.failed != ["message"]:
        return False
    fixed = without_not_found(v.kube.message or "")
    return fixed is not None and v.ours.message == fixed


KNOWN: tuple[Difference, ...] = (
    Difference(
        id="kube-not-found",
        whose=KUBE,
        what="kube-scheduler v1.36.3's own bug: when a PreFilter plugin rejects a pod "
        "outright (VolumeBinding: 'pod has unbound immediate PersistentVolumeClaims', "
        "VolumeRestrictions: 'persistentvolumeclaim \"c-missing\" not found'), the plugins "
        "after it never run their PreFilter, so DynamicResources' PostFilter fails to read "
        "its state and its error, 'not found', replaces the whole PostFilter part (and "
        "preemption never runs). splitsched writes what the PostFilter plugins say when "
        "that read does not fail: 'no new claims to deallocate, preemption: 0/N nodes are "
        "available: N Preemption is not helpful for scheduling.' 448 pods, every one of "
        "seeds 1-100 (bench/results/agreement-2026-11-25T1456.json).",
        seeds=(1, 2, 3),
        matches=not_found_instead_of_post_filter,
    ),
)


def classify(verdict: Verdict) -> Verdict:
    """The verdict, marked with the known differences it shows, if any."""
    if verdict.agrees:
        return verdict
    ids = [d.id for d in KNOWN if d.matches(verdict)]
    return dataclasses.replace(verdict, known="+".join(ids)) if ids else verdict


def kube_bug(known_id: str | None) -> bool:
    """Whether a (``+``-joined) known id is kube-scheduler's own bugs only."""
    whose = {d.id: d.whose for d in KNOWN}
    return bool(known_id) and all(whose.get(i) == KUBE for i in (known_id or "").split("+"))


def describe(known_id: str) -> list[str]:
    """What each difference of a (``+``-joined) id is, and whose it is."""
    ids = known_id.split("+")
    return [f"{d.id}: ({d.whose}'s) {d.what}" for d in KNOWN if d.id in ids]
