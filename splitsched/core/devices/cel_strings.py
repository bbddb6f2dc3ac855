"""cel-go's string extension as Kubernetes' CEL environment has it (ext.Strings version 2,
which kube's base environment enables from 1.29), for DRA's selectors.

The Rust CEL of the `cel` package has no string extension, so these are Python functions
registered with it; CEL calls `s.f(x)` as `f(s, x)`. Positions count characters (code
points, as cel-go counts runes), and the errors are cel-go's words. A call with argument
types kube's type check would refuse fails here when it runs, with "no such overload".
`indexOf`/`lastIndexOf` on a list follow kube's list library, which shares the names.
`format` lives in cel_format.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from splitsched.core.devices import cel_format

#: What Go's strings.TrimSpace trims (unicode.IsSpace); Python's str.strip() trims more.
_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_QUOTED = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    "\v": "\\v", "\\": "\\\\", '"': '\\"',
}  # fmt: skip


def _check(name: str, args: tuple[Any, ...], *signatures: str) -> None:
    """Raise unless `args` fit one of `signatures`: s string, i int, l list, ? anything."""
    for signature in signatures:
        if len(signature) == len(args) and all(map(_fits, signature, args)):
            return
    kinds = ", ".join(cel_format.type_name(a) for a in args)
    raise TypeError(f"no such overload: {name}({kinds})")


def _fits(kind: str, value: Any) -> bool:
    if kind == "s":
        return isinstance(value, str)
    if kind == "i":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "l":
        return isinstance(value, list)
    return True


def _out_of_range(index: int) -> IndexError:
    return IndexError(f"index out of range: {index}")


def char_at(*args: Any) -> str:
    _check("charAt", args, "si")
    text, index = args
    if not 0 <= index <= len(text):
        raise _out_of_range(index)
    return str(text[index : index + 1])


def index_of(*args: Any) -> int:
    if args and isinstance(args[0], list):
        _check("indexOf", args, "l?")
        return next((i for i, item in enumerate(args[0]) if _same(item, args[1])), -1)
    _check("indexOf", args, "ss", "ssi")
    text, sub, offset = (*args, 0) if len(args) == 2 else args
    if sub == "":
        return int(offset)
    if not 0 <= offset < len(text):
        raise _out_of_range(offset)
    return int(text.find(sub, offset))


def last_index_of(*args: Any) -> int:
    if args and isinstance(args[0], list):
        _check("lastIndexOf", args, "l?")
        found = [i for i, item in enumerate(args[0]) if _same(item, args[1])]
        return found[-1] if found else -1
    _check("lastIndexOf", args, "ss", "ssi")
    text, sub = args[0], args[1]
    if len(args) == 2:
        if sub == "":
            return len(text)
        offset = len(text) - 1
    else:
        offset = args[2]
        if sub == "":
            return int(offset)
    if not 0 <= offset < len(text):
        raise _out_of_range(offset)
    last_start = min(offset, len(text) - len(sub))
    return -1 if last_start < 0 else int(text.rfind(sub, 0, last_start + len(sub)))


def _same(a: Any, b: Any) -> bool:
    """CEL equality for list search: a bool never equals a number."""
    return isinstance(a, bool) == isinstance(b, bool) and bool(a == b)


def lower_ascii(*args: Any) -> str:
    _check("lowerAscii", args, "s")
    return str(args[0].translate(_LOWER))


def upper_ascii(*args: Any) -> str:
    _check("upperAscii", args, "s")
    return str(args[0].translate(_UPPER))


def replace(*args: Any) -> str:
    _check("replace", args, "sss", "sssi")
    text, old, new = args[:3]
    limit = args[3] if len(args) == 4 else -1
    return str(text.replace(old, new, limit if limit >= 0 else -1))


def split(*args: Any) -> list[str]:
    _check("split", args, "ss", "ssi")
    text, separator = args[:2]
    limit = args[2] if len(args) == 3 else -1
    if limit == 0:
        return []
    if separator != "":
        return list(text.split(separator, limit - 1 if limit > 0 else -1))
    chars = list(text)  # Go's explode: one element per character, the rest in the last
    count = len(chars) if limit < 0 or limit > len(chars) else limit
    return [*chars[: count - 1], "".join(chars[count - 1 :])] if count else []


def substring(*args: Any) -> str:
    _check("substring", args, "si", "sii")
    text, start = args[:2]
    if len(args) == 2:
        if not 0 <= start <= len(text):
            raise _out_of_range(start)
        return str(text[start:])
    end = args[2]
    if start > end:
        raise ValueError(f"invalid substring range. start: {start}, end: {end}")
    for index in (start, end):
        if not 0 <= index <= len(text):
            raise _out_of_range(index)
    return str(text[start:end])


def trim(*args: Any) -> str:
    _check("trim", args, "s")
    return str(args[0].strip(_SPACE))


def join(*args: Any) -> str:
    _check("join", args, "l", "ls")
    items, separator = (args[0], "") if len(args) == 1 else args
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"join: invalid input: {item!r:.60}")
    return str(separator.join(items))


def quote(*args: Any) -> str:
    _check("strings.quote", args, "s")
    return '"' + "".join(_QUOTED.get(c, c) for c in args[0]) + '"'


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "join": join,
    "format": cel_format.format_string,
    "strings.quote": quote,
}
