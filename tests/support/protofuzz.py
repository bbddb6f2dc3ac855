"""Hypothesis strategies that build any protobuf message from its descriptor.

Used by ``tests/service/v1/test_grpc_fuzz.py`` to throw every request type of the contract at
the servicers. `messages(cls)` walks the message's DESCRIPTOR and draws a value for any
subset of its fields: strings from empty to tens of KiB (unicode, NUL, path tricks),
integers at their type's extremes, floats including NaN and infinities, enums including
numbers the contract does not define, nested messages, repeated fields and maps. The wire
encoding stays valid (proto3 strings are UTF-8); `wire_bytes()` gives the malformed kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf import message_factory
from hypothesis import strategies as st

FD = _descriptor.FieldDescriptor
M = TypeVar("M", bound=_message.Message)

#: Strings that have broken parsers and URL builders before.
NASTY_STRINGS = (
    "",
    " ",
    "\x00",
    "../../..",
    "a/b",
    "%2F",
    "?x=1#y",
    "é☃𝄞",
    "\u202e",
    "-1",
    "1e400",
    "NaN",
    "x" * 253,
    "x" * 70_000,
)

_INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}


def strings() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(NASTY_STRINGS), st.text(max_size=40))


def integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Mostly the edges (0, ±1, the type's bounds), sometimes anything in range."""
    edges = sorted({v for v in (lo, lo + 1, -1, 0, 1, 2, hi - 1, hi) if lo <= v <= hi})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


def _scalar(field: _descriptor.FieldDescriptor) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind in _INT_RANGES:
        return integers(*_INT_RANGES[kind])
    if kind == FD.TYPE_STRING:
        return strings()
    if kind == FD.TYPE_BYTES:
        return st.binary(max_size=64)
    if kind == FD.TYPE_BOOL:
        return st.booleans()
    if kind == FD.TYPE_DOUBLE:
        return st.floats()
    if kind == FD.TYPE_FLOAT:
        return st.floats(width=32)
    if kind == FD.TYPE_ENUM:
        enum = field.enum_type
        assert enum is not None
        known = [v.number for v in enum.values]
        # proto3 enums are open: a newer client may send numbers this server never saw.
        return st.one_of(st.sampled_from(known), integers(-(2**31), 2**31 - 1))
    raise TypeError(f"{field.full_name}: unsupported field type {kind}")


class _Builder:
    """Strategies per message type, built once and shared (depth-limited recursion)."""

    def __init__(
        self, *, max_depth: int, max_items: int, overrides: Mapping[str, st.SearchStrategy[Any]]
    ) -> None:
        self.max_depth = max_depth
        self.max_items = max_items
        self.overrides = overrides
        self.cache: dict[tuple[str, int], st.SearchStrategy[Any]] = {}

    def message(self, desc: Any, depth: int) -> st.SearchStrategy[Any]:
        key = (desc.full_name, depth)
        if key not in self.cache:
            cls = message_factory.GetMessageClass(desc)
            if depth >= self.max_depth:
                self.cache[key] = st.builds(cls)
            else:
                fields = {f.name: self.field(f, depth) for f in desc.fields}
                self.cache[key] = st.fixed_dictionaries({}, optional=fields).map(_setter(cls, desc))
        return self.cache[key]

    def field(self, field: Any, depth: int) -> st.SearchStrategy[Any]:
        if field.full_name in self.overrides:
            return self.overrides[field.full_name]
        if _is_map(field):
            entry = field.message_type
            key = self.field(entry.fields_by_name["key"], depth)
            value = self.field(entry.fields_by_name["value"], depth)
            return st.dictionaries(key, value, max_size=self.max_items)
        if field.type == FD.TYPE_MESSAGE:
            one = self.message(field.message_type, depth + 1)
        else:
            one = _scalar(field)
        if field.is_repeated:
            return st.lists(one, max_size=self.max_items)
        return one


def _is_map(field: Any) -> bool:
    return bool(field.type == FD.TYPE_MESSAGE and field.message_type.GetOptions().map_entry)


def _setter(cls: type[_message.Message], desc: Any) -> Callable[[dict[str, Any]], _message.Message]:
    def build(values: dict[str, Any]) -> _message.Message:
        msg = cls()
        for name, value in values.items():
            field = desc.fields_by_name[name]
            target: Any = getattr(msg, name)
            if _is_map(field):
                for k, v in value.items():
                    if isinstance(v, _message.Message):
                        target[k].CopyFrom(v)
                    else:
                        target[k] = v
            elif field.is_repeated:
                if field.type == FD.TYPE_MESSAGE:
                    for item in value:
                        target.add().CopyFrom(item)
                else:
                    target.extend(value)
            elif field.type == FD.TYPE_MESSAGE:
                target.CopyFrom(value)
            else:
                setattr(msg, name, value)
        return msg

    return build


def messages(
    cls: type[M],
    *,
    max_depth: int = 6,
    max_items: int = 3,
    overrides: Mapping[str, st.SearchStrategy[Any]] | None = None,
) -> st.SearchStrategy[M]:
    """Any `cls` message: every subset of its fields, each drawn as described above.
    `overrides` maps a field's full name (e.g. "splitsched.v1.BindRequest.deadline") to
    the strategy to use for it instead."""
    builder = _Builder(max_depth=max_depth, max_items=max_items, overrides=overrides or {})
    strategy: st.SearchStrategy[M] = builder.message(cls.DESCRIPTOR, 0)
    return strategy


def around(
    base: M,
    *,
    max_items: int = 3,
    overrides: Mapping[str, st.SearchStrategy[Any]] | None = None,
) -> st.SearchStrategy[M]:
    """`base` (a valid request) with a drawn message merged over it: the fields drawn
    replace the base's (repeated ones are appended to), the rest keep their valid values, so
    the examples get past the first check and reach deeper code."""

    def merge(drawn: M) -> M:
        out = type(base)()
        out.CopyFrom(base)
        out.MergeFrom(drawn)
        return out

    drawn = messages(type(base), max_items=max_items, overrides=overrides)
    return st.one_of(st.just(base), drawn.map(merge))


def wire_bytes(cls: type[_message.Message]) -> st.SearchStrategy[bytes]:
    """Bytes as they could arrive on the wire for `cls`: random bytes, a valid encoding cut
    short or with a byte flipped, and a valid encoding with garbage appended."""
    valid = messages(cls, max_depth=3, max_items=2).map(lambda m: m.SerializeToString())

    def damage(data: bytes, how: int, at: int, byte: int) -> bytes:
        if not data:
            return bytes([byte])
        at %= len(data)
        if how == 0:
            return data[:at]
        if how == 1:
            return data[:at] + bytes([data[at] ^ (byte or 1)]) + data[at + 1 :]
        return data + bytes([byte]) * (at + 1)

    damaged = st.builds(
        damage, valid, st.integers(0, 2), st.integers(0, 2**16), st.integers(0, 255)
    )
    return st.one_of(st.binary(max_size=256), damaged)
