"""DRA's CEL selectors: the device variable, Kubernetes' quantity and semver functions,
and errors that say what went wrong instead of crashing."""

from __future__ import annotations

import re

import pytest

from splitsched.core.devices import model, selectors, semver
from tests.support.devices import device

GPU_ATTRS = 'device.attributes["gpu.example.com"]'
GPU = device(
    "gpu-0", "gpu.example.com", model="A100", index=0, hot=True, memory=80, version="1.2.3"
)


def judge(source: str, dev: model.Device = GPU, driver: str = "gpu.example.com") -> bool:
    return selectors.CelDevice(driver, dev).matches(selectors.compile_selector(source))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "A100"', True),
        (f"{GPU_ATTRS}.index == 0 && {GPU_ATTRS}.hot", True),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("100Gi"))', False),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("81920Mi"))', False),
        ('device.capacity["gpu.example.com"].memory.asInteger() == 85899345920', True),
        ('quantity("1.5").isInteger()', False),
        ('quantity("1Gi").add(quantity("1Gi")).compareTo(quantity("2Gi")) == 0', True),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.2"))', True),
        ('device.attributes["gpu.example.com"].driverVersion == semver("1.2.3")', True),
        ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
        ('semver("1.2.3-rc.1").isLessThan(semver("1.2.3"))', True),
        ('isSemver("1.2") || isSemver("v1.2.3")', False),
        # kube's semver library version 1: `normalize` drops a "v" and leading zeros and
        # fills a missing minor or patch.
        ('isSemver("v1.2", true) && isSemver("01.02.03", true)', True),
        ('semver("v1.2", true) == semver("1.2.0")', True),
        ('semver("v01.2.3-rc.1", true).isLessThan(semver("1.2.3"))', True),
        ('isSemver("1.2-rc", true) || isSemver("1.2.3.4", true)', False),
        # A domain the device does not have reads as an empty map, as in kube, whether it
        # is written as a literal or computed.
        ('has(device.attributes["other.example.com"].model)', False),
        ("has(device.attributes[device.driver].model)", True),
        ('has(device.attributes[device.driver + ".other"].model)', False),
        ('has(device.capacity["other.example.com"].memory)', False),
        # ... but is still not in the map.
        ('"other.example.com" in device.attributes', False),
        ('"gpu.example.com" in device.attributes && size(device.attributes) == 1', True),
        ('"A1".matches("^A[0-9]+$")', True),
        # cel-go's string extension, which kube's CEL environment has (more in
        # test_cel_strings).
        ('device.attributes["gpu.example.com"].model.lowerAscii() == "a100"', True),
        ('device.driver.split(".")[0].upperAscii() == "GPU"', True),
    ],
)
def test_selectors_read_the_device_as_kube_does(source: str, expected: bool) -> None:
    assert judge(source) is expected


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (
            'device.attributes["gpu.example.com"].missing == 1',
            "CEL runtime error: no such key: missing",
        ),
        (
            'device.attributes["other.example.com"].model == "x"',
            "CEL runtime error: no such key: model",
        ),
        (
            'device.attributes["gpu.example.com"].model',
            "CEL result of type str could not be converted to bool",
        ),
        ("device.attributes[", "compilation failed"),
        ('quantity("lots") == quantity("1")', "CEL runtime error"),
        ('device.attributes[device.driver + ".other"].model == "x"', "no such key: model"),
        ('device.driver.lowerAscii(1) == "x"', "no such overload: lowerAscii(string, int)"),
        ('semver("1.2-rc", true) == semver("1.2.0")', "short version cannot contain"),
        ('isSemver("1.2.3", "yes")', "no such overload: isSemver"),
        ("cel.bind(x, 1, x == 1)", "CEL runtime error"),
    ],
)
def test_a_selector_that_cannot_judge_says_why(source: str, error: str) -> None:
    with pytest.raises(selectors.SelectorError, match=re.escape(error)):
        judge(source)


def count_judgements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources of the selectors CelDevice runs from now on, one entry per run."""
    runs: list[str] = []
    judge = selectors.CelDevice._judge

    def counted(self: selectors.CelDevice, selector: selectors.Selector) -> object:
        runs.append(selector.source)
        return judge(self, selector)

    monkeypatch.setattr(selectors.CelDevice, "_judge", counted)
    return runs


def test_a_verdict_is_kept_per_device_and_compiled_once_per_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = count_judgements(monkeypatch)
    view = selectors.CelDevice("gpu.example.com", GPU)
    first = selectors.compile_selector('device.driver == "gpu.example.com"')
    assert selectors.compile_selector('device.driver == "gpu.example.com"') is first
    assert view.matches(first) and view.matches(first)
    assert runs == [first.source]
    broken = selectors.compile_selector("device.attributes[")
    for _ in range(2):
        with pytest.raises(selectors.SelectorError, match="compilation failed"):
            view.matches(broken)
    assert runs == [first.source, broken.source]
    other = selectors.CelDevice("other.example.com", GPU)
    assert not other.matches(first)
    assert runs == [first.source, broken.source, first.source]


def test_each_device_keeps_a_bounded_number_of_verdicts_the_least_recently_used_go_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = count_judgements(monkeypatch)
    view = selectors.CelDevice("gpu.example.com", GPU)
    cap = selectors.VERDICTS_PER_DEVICE
    texts = [f'device.attributes["gpu.example.com"].index != {i}' for i in range(1, 3 * cap)]
    kept = selectors.compile_selector(texts[0])
    for text in texts[:cap]:
        assert view.matches(selectors.compile_selector(text))
    assert len(runs) == cap  # full now
    assert view.matches(kept)  # used while full: now the most recent
    assert view.matches(selectors.compile_selector(texts[cap]))  # texts[1] goes
    assert len(runs) == cap + 1
    assert view.matches(kept)
    assert len(runs) == cap + 1, "kept was used recently, so its verdict stayed"
    assert view.matches(selectors.compile_selector(texts[1]))
    assert runs[-1] == texts[1] and len(runs) == cap + 2, "texts[1] was dropped, so it ran again"
    for text in texts:
        view.matches(selectors.compile_selector(text))
    assert len(view._verdicts) == cap


ORDER_PROBES = [
    'has(device.attributes["b.example.com"].x)',
    'device.attributes["b.example.com"].x == 1',
    'has(device.attributes[device.driver.replace("gpu", "b")].x)',
    'device.attributes["gpu.example.com"].model.upperAscii() == "A100"',
    '"b.example.com" in device.attributes',
    '"b.example.com" in device.capacity',
    "size(device.attributes) == 1 && size(device.capacity) == 1",
    'device.attributes.exists(d, d == "b.example.com")',
]


def verdict(view: selectors.CelDevice, source: str) -> bool | str:
    try:
        return view.matches(selectors.compile_selector(source))
    except selectors.SelectorError as exc:
        return str(exc)


@pytest.mark.parametrize("source", ORDER_PROBES)
def test_a_verdict_does_not_depend_on_which_selectors_ran_before_on_the_device(
    source: str,
) -> None:
    """kube looks a missing domain up without adding it, so reading it first must not
    make it appear (`in`, size(), exists()) to the selectors that run after."""
    fresh = verdict(selectors.CelDevice("gpu.example.com", GPU), source)
    after_the_others = selectors.CelDevice("gpu.example.com", GPU)
    for other in ORDER_PROBES:
        if other != source:
            verdict(after_the_others, other)
    assert verdict(after_the_others, source) == fresh
    backwards = selectors.CelDevice("gpu.example.com", GPU)
    for other in reversed(ORDER_PROBES):
        verdict(backwards, other)
    assert verdict(backwards, source) == fresh


def test_kubes_two_probes_of_missing_domains() -> None:
    """The review's probes: `in` stays false after a selector read the missing domain,
    and a domain computed from the device (not a literal) reads as an empty map."""
    bare = device("bare-0", "a.example.com")
    view = selectors.CelDevice("a.example.com", bare)
    assert verdict(view, '"b.example.com" in device.attributes') is False
    assert verdict(view, 'has(device.attributes["b.example.com"].x)') is False
    assert verdict(view, '"b.example.com" in device.attributes == false') is True
    computed = selectors.CelDevice("a.example.com", bare)
    assert verdict(computed, "has(device.attributes[device.driver].x)") is False
    assert verdict(computed, "device.attributes[device.driver].x == 1") == (
        "CEL runtime error: no such key: x"
    )


def test_semver_precedence() -> None:
    order = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.10.0", "2.0.0"]  # fmt: skip
    parsed = [semver.parse(v) for v in order]
    assert parsed == sorted(parsed)
    assert semver.parse("1.0.0+build.5") == semver.parse("1.0.0")
    for bad in ("1.0", "v1.0.0", "01.0.0", "1.0.0-01", ""):
        with pytest.raises(ValueError, match="invalid semantic version"):
            semver.parse(bad)
