"""Known differences: disagreements we understand, each with the seeds that show it.

A verdict that fails a check and matches one of these is counted under its id instead of
"unexplained"; the harness still reports it as a disagreement (agreement % counts it
against us). Each entry says whose behaviour is wrong (ours, or kube-scheduler's own), and
is removed once fixed: tests/e2e/test_agreement.py fails when a difference listed for its
seeds no longer shows.

All three are about the FailedScheduling message only: a difference is recognised only
when undoing it (and the others) makes the two messages agree, and nothing but the
message differs. Fixed on main and so gone from here: ``taint-wording`` (splitsched named
the taint, "node(s) had untolerated taint {k: v}", where v1.36 says "untolerated
taint(s)"; 96 of seeds 1-100).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from bench.agreement.compare import Verdict


@dataclass(frozen=True)
class Difference:
    id: str
    #: What differs, whose side is wrong, and why it is left.
    what: str
    #: Seeds (default sizes and features) where it shows.
    seeds: tuple[int, ...]
    matches: Callable[[Verdict], bool]


#: kube-scheduler v1.36 ends a FailedScheduling message with what its PostFilter plugins
#: said: DynamicResources ("no new claims to deallocate") and DefaultPreemption
#: ("preemption: 0/N nodes are available: ..."), joined by ", ".
_POSTFILTER = re.compile(r"\. (?:no new claims to deallocate, )?preemption: 0/\d+ nodes are .*$")
#: ... unless a PreFilter plugin ordered before DynamicResources rejected the pod: then
#: DynamicResources' PostFilter fails to read the state its PreFilter never wrote, its
#: error ("not found") is the whole PostFilter part, and preemption never runs.
_NOT_FOUND = re.compile(r"\. not found$")
_HEAD = re.compile(r"^0/\d+ nodes are available: ")
#: kube-scheduler's reason for the nodes a PreFilter result left out (NodeAffinity's, for
#: a required ``matchFields: metadata.name`` term): they are never filtered.
PREFILTER_LEFT_OUT = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def histogram(message: str) -> tuple[str, Counter[str]] | None:
    """A FitError message as its "0/N nodes are available: " head and reason -> nodes;
    None if it is not one."""
    head = _HEAD.match(message)
    if head is None or not message.endswith("."):
        return None
    counts: Counter[str] = Counter()
    for part in re.split(r", (?=\d+ )", message[head.end() : -1]):
        number, _, reason = part.partition(" ")
        if not number.isdigit():
            return None
        counts[reason] += int(number)
    return head.group(0), counts


def _left_out_by_prefilter(kube: str, ours: str) -> bool:
    """kube-scheduler counted the nodes NodeAffinity's PreFilter left out under one reason,
    and every other reason it gives, ours gives on at least as many nodes."""
    k, o = histogram(kube), histogram(ours)
    if k is None or o is None or k[0] != o[0] or PREFILTER_LEFT_OUT in o[1]:
        return False
    rest = {r: n for r, n in k[1].items() if r != PREFILTER_LEFT_OUT}
    return PREFILTER_LEFT_OUT in k[1] and all(o[1][r] >= n for r, n in rest.items())


def wording_differences(v: Verdict) -> list[str]:
    """The known differences that, undone, make the messages agree (and nothing else
    differs); empty if they do not account for the whole difference."""
    if v.failed != ["message"]:
        return []
    kube, ours = v.kube.message or "", v.ours.message or ""
    found = []
    for difference_id, tail in (
        ("postfilter-message", _POSTFILTER),
        ("kube-not-found", _NOT_FOUND),
    ):
        if tail.search(kube) and not tail.search(ours):
            found.append(difference_id)
            kube = tail.sub(".", kube)
    if kube == ours:
        return found
    return [*found, "prefilter-nodes"] if _left_out_by_prefilter(kube, ours) else []


KNOWN: tuple[Difference, ...] = (
    Difference(
        id="postfilter-message",
        what="splitsched's FailedScheduling message lacks what kube-scheduler v1.36 appends "
        "from its PostFilter plugins: ' no new claims to deallocate, preemption: 0/N nodes "
        "are available: K No preemption victims found for incoming pod, M Preemption is not "
        "helpful for scheduling.' (splitsched's side to fix: the core's FitError summary and "
        "DefaultPreemption). Every pending pod of seeds 1-100 that no PreFilter rejected.",
        seeds=(1, 2, 3),
        matches=lambda v: "postfilter-message" in wording_differences(v),
    ),
    Difference(
        id="kube-not-found",
        what="kube-scheduler's own bug: when a PreFilter plugin ordered before "
        "DynamicResources rejects a pod (VolumeBinding: 'pod has unbound immediate "
        "PersistentVolumeClaims', 'persistentvolumeclaim \"c-missing\" not found'), "
        "DynamicResources' PostFilter fails on the state its PreFilter never wrote and "
        "kube ends the message with '. not found' (and runs no preemption). splitsched "
        "stops after the reason; copying the artefact is the lead's call.",
        seeds=(1, 2, 3),
        matches=lambda v: "kube-not-found" in wording_differences(v),
    ),
    Difference(
        id="prefilter-nodes",
        what="kube-scheduler filters only the nodes a PreFilter result names (NodeAffinity's, "
        "for a required matchFields metadata.name term, as DaemonSet pods have) and counts "
        f"the others as '{PREFILTER_LEFT_OUT}'; splitsched filters every node and gives each "
        "its own reasons. Same feasible set, different message (splitsched's side to fix: "
        "the core's PreFilter result and node_affinity's PreFilter).",
        seeds=(12, 15, 19, 26, 32, 39, 50, 55, 61, 68, 69, 72, 76, 78, 80, 82, 83),
        matches=lambda v: "prefilter-nodes" in wording_differences(v),
    ),
)


def classify(verdict: Verdict) -> Verdict:
    """The verdict, marked with the known differences it shows, if any."""
    if verdict.agrees:
        return verdict
    ids = [d.id for d in KNOWN if d.matches(verdict)]
    return dataclasses.replace(verdict, known="+".join(ids)) if ids else verdict


def describe(known_id: str) -> list[str]:
    """What each difference of a (``+``-joined) id is."""
    ids = known_id.split("+")
    return [f"{d.id}: {d.what}" for d in KNOWN if d.id in ids]
