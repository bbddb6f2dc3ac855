"""Known differences: disagreements we understand, each with the seeds that show it.

A verdict that fails a check and matches one of these is counted under its id instead of
"unexplained"; the harness still reports it as a disagreement (agreement % counts it
against us). Entries say whose behaviour is wrong, or that kube-scheduler itself is
nondeterministic there, and are removed once fixed.
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
#: Up to v1.3x TaintToleration named the first untolerated taint; v1.36 does not.
_NAMED_TAINT = re.compile(r"^node\(s\) had untolerated taint \{.*\}$")
_TAINTS = "node(s) had untolerated taint(s)"
_HEAD = re.compile(r"^0/\d+ nodes are available: ")


#: kube-scheduler's reason for the nodes a PreFilter result left out (NodeAffinity's, for
#: a required ``matchFields: metadata.name`` term): they are never filtered.
PREFILTER_LEFT_OUT = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def histogram(message: str) -> tuple[str, Counter[str]] | None:
    """A FitError message as its "0/N nodes are available: " head and reason -> nodes, the
    named-taint reasons merged into kube v1.36's one; None if it is not one."""
    head = _HEAD.match(message)
    if head is None or not message.endswith("."):
        return None
    counts: Counter[str] = Counter()
    for part in re.split(r", (?=\d+ )", message[head.end() : -1]):
        number, _, reason = part.partition(" ")
        if not number.isdigit():
            return None
        counts[_TAINTS if _NAMED_TAINT.match(reason) else reason] += int(number)
    return head.group(0), counts


def in_kube_words(message: str) -> str:
    """The message with every named-taint reason merged into kube v1.36's one, re-sorted as
    kube sorts them ("N reason" strings); unchanged if it is not a FitError message."""
    parsed = histogram(message)
    if parsed is None:
        return message
    head, counts = parsed
    return head + ", ".join(sorted(f"{n} {r}" for r, n in counts.items())) + "."


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
    if _POSTFILTER.search(kube) and not _POSTFILTER.search(ours):
        found.append("postfilter-message")
        kube = _POSTFILTER.sub(".", kube)
    if in_kube_words(ours) != ours:
        found.append("taint-wording")
        ours = in_kube_words(ours)
    if kube == ours:
        return found
    return [*found, "prefilter-nodes"] if _left_out_by_prefilter(kube, ours) else []


KNOWN: tuple[Difference, ...] = (
    Difference(
        id="postfilter-message",
        what="splitsched's FailedScheduling message lacks what kube-scheduler v1.36 appends "
        "from its PostFilter plugins: ' no new claims to deallocate, preemption: 0/N nodes "
        "are available: K No preemption victims found for incoming pod, M Preemption is not "
        "helpful for scheduling.' (splitsched's side to fix: splitsched/core results/"
        "default_preemption). Every pending pod of seeds 1-100.",
        seeds=(1, 2, 3),
        matches=lambda v: "postfilter-message" in wording_differences(v),
    ),
    Difference(
        id="taint-wording",
        what="kube-scheduler v1.36 says 'node(s) had untolerated taint(s)'; splitsched still "
        "names the taint, 'node(s) had untolerated taint {key: value}' as kube did up to "
        "v1.3x (splitsched's side to fix: splitsched/core/plugins/taint_toleration.py). "
        "96 of seeds 1-100.",
        seeds=(1, 2, 3),
        matches=lambda v: "taint-wording" in wording_differences(v),
    ),
    Difference(
        id="prefilter-nodes",
        what="kube-scheduler filters only the nodes a PreFilter result names (NodeAffinity's, "
        "for a required matchFields metadata.name term, as DaemonSet pods have) and counts "
        f"the others as '{PREFILTER_LEFT_OUT}'; splitsched filters every node and gives each "
        "its own reasons. Same feasible set, different message (splitsched's side to fix: "
        "splitsched/core/algorithm + node_affinity's PreFilter).",
        seeds=(12, 15, 19, 26, 32, 39, 50, 55, 61, 68, 69, 72, 76, 78, 80, 82, 83),
        matches=lambda v: "prefilter-nodes" in wording_differences(v),
    ),
)


def classify(verdict: Verdict) -> Verdict:
    """The verdict, marked with the known difference it is, if any."""
    if verdict.agrees:
        return verdict
    ids = [d.id for d in KNOWN if d.matches(verdict)]
    return dataclasses.replace(verdict, known="+".join(ids)) if ids else verdict


def describe(known_id: str) -> list[str]:
    """What each difference of a (``+``-joined) id is."""
    ids = known_id.split("+")
    return [f"{d.id}: {d.what}" for d in KNOWN if d.id in ids]
