"""A domain a device does not have reads as an empty map, as kube's selectors read it.

kube hands CEL `device.attributes` and `device.capacity` as maps whose lookup of a missing
key answers an empty map (dynamic-resource-allocation/cel/compile.go, `mapper.Find`), while
`"d" in device.attributes` still says false. The Rust CEL of the `cel` package converts a
map into its own values when the context is built (a Mapping or a dict with __missing__
included), its variable resolver answers for top-level names only, and it offers no hook
on the index operator, so nothing can answer for a missing key. So the selector's text is
rewritten before it is compiled: each `device.attributes[D]` (and `device.capacity[D]`)
becomes `((D) in device.attributes ? device.attributes[D] : {})`. That is exact for any
domain expression D, literal or not, leaves the device's maps as they are (so `in`,
`size()` and the macros see only the domains the device has) and costs about 1 µs.

Not rewritten, so a missing domain there is a "no such key" error where kube reads an
empty map: a domain written as a field (`device.attributes.gpu`, possible only for a
domain without a dot; `has(device.attributes.gpu)` is then false, where kube's mapper
says true for any domain), and the maps reached through anything but the `device`
variable itself (`[device][0].attributes[D]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The maps whose missing domains read as empty maps.
DOMAIN_MAPS = frozenset({"attributes", "capacity"})
#: A rewrite that grows past this (nested domain lookups double each level) is dropped.
MAX_REWRITTEN_CHARS = 64 * 1024

_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>//[^\n]*)
    | (?P<quote>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"|'''|"|'))
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<number>0[xX][0-9a-fA-F]+[uU]?|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?[uU]?)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_OPENING = "([{"
_CLOSING = ")]}"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    start: int
    end: int
    text: str


def with_empty_domains(source: str) -> str:
    """`source` with every `device.attributes[D]`/`device.capacity[D]` reading as an
    empty map when the device lacks domain D; `source` itself when there is none, or
    when the text cannot be read (the caller compiled it, so that does not happen)."""
    try:
        tokens = _tokens(source)
        rewritten = _rewrite(source, tokens, 0, len(tokens), 0, len(source))
    except ValueError:
        return source
    return rewritten if len(rewritten) <= MAX_REWRITTEN_CHARS else source


def _tokens(source: str) -> list[_Token]:
    """The significant tokens of `source` (no spaces or comments); strings are one token."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:  # pragma: no cover - `other` matches any character
            raise ValueError(f"unreadable at {pos}")
        kind = match.lastgroup or "other"
        end = _string_end(source, match) if kind == "quote" else match.end()
        if kind not in ("space", "comment"):
            tokens.append(_Token(kind, pos, end, source[pos:end]))
        pos = end
    return tokens


def _string_end(source: str, opening: re.Match[str]) -> int:
    """Where the string literal that `opening` starts ends (just past its closing quote)."""
    text = opening.group()
    quote = text.lstrip("rRbB")
    raw = "r" in text[: len(text) - len(quote)].lower()
    pos = opening.end()
    while pos < len(source):
        if source.startswith(quote, pos):
            return pos + len(quote)
        pos += 2 if source[pos] == "\\" and not raw else 1
    raise ValueError("unterminated string literal")


def _rewrite(source: str, tokens: list[_Token], lo: int, hi: int, begin: int, end: int) -> str:
    """The text of `source[begin:end]` (tokens `lo`..`hi`) with its domain lookups rewritten,
    the domain expressions' own lookups included."""
    parts: list[str] = []
    cursor = begin
    i = lo
    while i < hi:
        lookup = _domain_lookup_at(tokens, i, hi)
        if lookup is None:
            i += 1
            continue
        field, opening, closing = lookup
        inner = _rewrite(
            source, tokens, opening + 1, closing, tokens[opening].end, tokens[closing].start
        )
        target = f"device.{field}"
        parts.append(source[cursor : tokens[i].start])
        parts.append(f"(({inner}) in {target} ? {target}[{inner}] : {{}})")
        cursor = tokens[closing].end
        i = closing + 1
    parts.append(source[cursor:end])
    return "".join(parts)


def _domain_lookup_at(tokens: list[_Token], i: int, hi: int) -> tuple[str, int, int] | None:
    """(`attributes` or `capacity`, index of `[`, index of its `]`) when tokens[i] starts
    `device.attributes[` with `device` the variable (not a field of something else)."""
    if i + 3 >= hi or tokens[i].text != "device" or (i > 0 and tokens[i - 1].text == "."):
        return None
    dot, field, bracket = tokens[i + 1], tokens[i + 2], tokens[i + 3]
    if dot.text != "." or field.kind != "ident" or field.text not in DOMAIN_MAPS:
        return None
    if bracket.text != "[":
        return None
    closing = _matching(tokens, i + 3, hi)
    return None if closing is None else (field.text, i + 3, closing)


def _matching(tokens: list[_Token], opening: int, hi: int) -> int | None:
    depth = 0
    for j in range(opening, hi):
        text = tokens[j].text
        if tokens[j].kind != "other":
            continue
        if text in _OPENING:
            depth += 1
        elif text in _CLOSING:
            depth -= 1
            if depth == 0:
                return j
    return None
