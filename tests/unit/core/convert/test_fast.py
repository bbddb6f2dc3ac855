"""Every fast constructor builds the object its model's own constructor builds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import models
from splitsched.core.convert import fast

CONSTRUCTORS: list[tuple[str, Callable[..., Any], type[Any]]] = [
    (name, value, getattr(models, name))
    for name, value in vars(fast).items()
    if callable(value)
    and not name.startswith("_")
    and dataclasses.is_dataclass(getattr(models, name, None))
]


def test_every_model_the_converters_build_has_one() -> None:
    names = {name for name, _, _ in CONSTRUCTORS}
    assert {"Pod", "Node", "Container", "Taint", "Toleration", "PodAffinityTerm"} <= names
    assert len(names) == 19  # ContainerImage: node status.images (issue 18)


@pytest.mark.parametrize(("name", "make", "model"), CONSTRUCTORS, ids=[c[0] for c in CONSTRUCTORS])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_fast_constructor_equals_model(
    name: str, make: Callable[..., Any], model: type[Any], data: st.DataObject
) -> None:
    expected = data.draw(st.builds(model))
    kwargs = {f.name: getattr(expected, f.name) for f in dataclasses.fields(model) if f.init}
    built = make(**kwargs)
    assert type(built) is model
    assert built == expected
    try:
        expected_hash = hash(expected)
    except TypeError:  # a Pod holds dicts: not hashable either way
        return
    assert hash(built) == expected_hash


@pytest.mark.parametrize(("name", "make", "model"), CONSTRUCTORS, ids=[c[0] for c in CONSTRUCTORS])
def test_defaults_match_the_model(name: str, make: Callable[..., Any], model: type[Any]) -> None:
    """Only required fields given: every default (and default_factory) is the model's."""
    required = [
        f
        for f in dataclasses.fields(model)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    sample = {f.name: _sample(f) for f in required}
    assert make(**sample) == model(**sample)


def _sample(f: dataclasses.Field[Any]) -> Any:
    """A value good enough for a required field of the converted models."""
    hint = str(f.type)
    if hint.startswith("int"):
        return 1
    if hint.startswith("tuple"):
        return ()
    if "|" in hint and "None" in hint:
        return None
    return "x"
