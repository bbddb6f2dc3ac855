"""Semantic versions (semver.org 2.0.0) as DRA's version attributes and CEL's `semver()`
read them: "MAJOR.MINOR.PATCH", an optional "-pre.release" and "+build" (ignored when
comparing), no leading "v" and no leading zeros in numbers, as blang/semver parses.
"""

from __future__ import annotations

import re

from splitsched.core.devices.model import Version

_NUMBER = r"(0|[1-9][0-9]*)"
_IDENT = r"[0-9A-Za-z-]+"
_GRAMMAR = re.compile(
    rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(?:-({_IDENT}(?:\.{_IDENT})*))?(?:\+({_IDENT}(?:\.{_IDENT})*))?"
)


def parse(text: str) -> Version:
    """The version `text` spells; ValueError when it is not one. A release sorts after
    every pre-release of the same numbers; pre-release identifiers compare numerically
    when numeric, and numeric ones before alphanumeric ones."""
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid semantic version {text!r:.80}")
    major, minor, patch, pre, _build = match.groups()
    idents: list[tuple[int, int | str]] = []
    for ident in pre.split(".") if pre else ():
        if ident.isdigit():
            if len(ident) > 1 and ident.startswith("0"):
                raise ValueError(f"invalid semantic version {text!r:.80}: leading zero in {ident}")
            idents.append((0, int(ident)))
        else:
            idents.append((1, ident))
    release = 0 if pre else 1
    key = (int(major), int(minor), int(patch), release, tuple(idents))
    return Version(key, text.split("+", 1)[0])
