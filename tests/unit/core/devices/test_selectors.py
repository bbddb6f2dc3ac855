"""DRA's CEL selectors: the device variable, Kubernetes' quantity and semver functions,
and errors that say what went wrong instead of crashing."""

from __future__ import annotations

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
        # A domain the device does not have reads as an empty map, as in kube.
        ('has(device.attributes["other.example.com"].model)', False),
        ('"A1".matches("^A[0-9]+$")', True),
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
        ('device.driver.lowerAscii() == "x"', "CEL runtime error"),
    ],
)
def test_a_selector_that_cannot_judge_says_why(source: str, error: str) -> None:
    with pytest.raises(selectors.SelectorError, match=error.replace("(", r"\(")):
        judge(source)


def test_a_verdict_is_kept_per_device_and_compiled_once_per_text() -> None:
    view = selectors.CelDevice("gpu.example.com", GPU)
    first = selectors.compile_selector('device.driver == "gpu.example.com"')
    assert selectors.compile_selector('device.driver == "gpu.example.com"') is first
    assert view.matches(first) and view.matches(first)
    other = selectors.CelDevice("other.example.com", GPU)
    assert not other.matches(first)


def test_semver_precedence() -> None:
    order = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.10.0", "2.0.0"]  # fmt: skip
    parsed = [semver.parse(v) for v in order]
    assert parsed == sorted(parsed)
    assert semver.parse("1.0.0+build.5") == semver.parse("1.0.0")
    for bad in ("1.0", "v1.0.0", "01.0.0", "1.0.0-01", ""):
        with pytest.raises(ValueError, match="invalid semantic version"):
            semver.parse(bad)
