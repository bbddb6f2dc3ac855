"""Node selector requirements as the API's label-selector parser reads them.

kube-scheduler parses a pod's node affinity terms with labels.NewRequirement
(component-helpers' nodeaffinity, apimachinery's labels and validation), which refuses
more than the API server does when it stores a pod: a Gt/Lt value that is not an integer
("abc" is a valid label value), a value that is not a label value in a preferred term (the
API always allows those, "as they can succeed when cluster has only one node"), or in a
required term of a pod stored before that check existed. Such a term matches no node
(required terms: kube's LazyErrorNodeSelector), and a preferred one fails PreScore with
the parser's message (NodeAffinity's PreScore returns the error). This module says whether
a term parses and, if not, words the errors as Go prints them.

Pure; read by `splitsched.core.plugins.node_affinity` (and by anything else that matches
node selector terms, such as a PersistentVolume's node affinity).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence

from splitsched.core import models

MAX_LABEL_LENGTH = 63
MAX_DNS_SUBDOMAIN_LENGTH = 253
_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME = re.compile(_NAME_FMT)
_VALUE_FMT = f"({_NAME_FMT})?"
_VALUE = re.compile(_VALUE_FMT)
_DNS_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_FMT = rf"{_DNS_LABEL_FMT}(\.{_DNS_LABEL_FMT})*"
_DNS_SUBDOMAIN = re.compile(_DNS_SUBDOMAIN_FMT)
_INT64 = re.compile(r"[+-]?[0-9]+")
_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPERATORS = ("In", "NotIn")
_NEED_VALUES = "for 'in', 'notin' operators, values set can't be empty"
_NO_VALUES = "values set must be empty for exists and does not exist"
_ONE_VALUE = "for 'Gt', 'Lt' operators, exactly one value is required"
_INTEGER = "for 'Gt', 'Lt' operators, the value must be an integer"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    shown = "".join(f"{' or ' if i else ''}'{e}', " for i, e in enumerate(examples))
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): None when it is not a base-10 int64."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue."""
    errs = []
    if len(value.encode()) > MAX_LABEL_LENGTH:
        errs.append(f"must be no more than {MAX_LABEL_LENGTH} bytes")
    if not _VALUE.fullmatch(value):
        errs.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def label_key_errors(key: str) -> list[str]:
    """content.IsLabelKey: an optional DNS subdomain prefix and '/', then a name."""
    parts = key.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_KEY_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errs = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > MAX_DNS_SUBDOMAIN_LENGTH:
                errs.append(f"prefix part must be no more than {MAX_DNS_SUBDOMAIN_LENGTH} bytes")
            if not _DNS_SUBDOMAIN.fullmatch(prefix):
                msg = _regex_error(_SUBDOMAIN_MSG, _DNS_SUBDOMAIN_FMT, "example.com")
                errs.append("prefix part " + msg)
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > MAX_LABEL_LENGTH:
        errs.append(f"name part must be no more than {MAX_LABEL_LENGTH} bytes")
    if not _NAME.fullmatch(name):
        errs.append(
            "name part " + _regex_error(_KEY_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def _invalid(path: str, value: str | Sequence[str], detail: str) -> str:
    """field.Invalid(path, value, detail).Error(): a string quoted, a list as JSON."""
    bad = value if isinstance(value, str) else (list(value) or None)
    shown = json.dumps(bad, ensure_ascii=False, separators=(",", ":"))
    return f"{path}: Invalid value: {shown}: {detail}"


def _unsupported(path: str, operator: str, supported: Sequence[str]) -> str:
    """field.NotSupported(path, operator, supported).Error()."""
    listed = ", ".join(f'"{op}"' for op in supported)
    return f'{path}: Unsupported value: "{operator}": supported values: {listed}'


def _values_errors(req: models.NodeSelectorRequirement, path: str) -> list[str]:
    """What NewRequirement says of the number (and, for Gt/Lt, the form) of the values."""
    values, op = req.values, req.operator
    if op in ("In", "NotIn") and not values:
        return [_invalid(path, values, _NEED_VALUES)]
    if op in ("Exists", "DoesNotExist") and values:
        return [_invalid(path, values, _NO_VALUES)]
    if op not in ("Gt", "Lt"):
        return []
    errs = [] if len(values) == 1 else [_invalid(path, values, _ONE_VALUE)]
    for i, value in enumerate(values):
        if parse_int64(value) is None:
            errs.append(_invalid(f"{path}[{i}]", value, _INTEGER))
    return errs


def _requirement_errors(req: models.NodeSelectorRequirement, path: str) -> list[str]:
    """labels.NewRequirement's errors for one matchExpressions entry at `path`, in its
    order: the key, the values' number and form, then each value as a label value."""
    if req.operator not in _OPERATORS:
        return [_unsupported(f"{path}.operator", req.operator, _OPERATORS)]
    errs = []
    if key_errors := label_key_errors(req.key):
        errs.append(_invalid(f"{path}.key", req.key, "; ".join(key_errors)))
    errs += _values_errors(req, f"{path}.values")
    for i, value in enumerate(req.values):
        if value_errors := label_value_errors(value):
            where = f"{path}.values[{i}][{req.key}]"
            errs.append(_invalid(where, value, "; ".join(value_errors)))
    return errs


def _field_errors(req: models.NodeSelectorRequirement, path: str) -> list[str]:
    """nodeSelectorRequirementsAsFieldSelector's errors for one matchFields entry."""
    if req.operator not in _FIELD_OPERATORS:
        return [_unsupported(f"{path}.operator", req.operator, _FIELD_OPERATORS)]
    if len(req.values) != 1:
        return [_invalid(f"{path}.values", req.values, "must have one element")]
    return []


def term_errors(term: models.NodeSelectorTerm, path: str = "") -> list[str]:
    """Every parse error of a node selector term, each with its field path under `path`."""
    prefix = f"{path}." if path else ""
    errs = []
    for j, req in enumerate(term.match_expressions):
        errs += _requirement_errors(req, f"{prefix}matchExpressions[{j}]")
    for j, req in enumerate(term.match_fields):
        errs += _field_errors(req, f"{prefix}matchFields[{j}]")
    return errs


@functools.lru_cache(maxsize=4096)
def term_parses(term: models.NodeSelectorTerm) -> bool:
    """Whether kube-scheduler can parse the term (one that cannot matches no node).
    Memoised: the same few terms are judged every cycle."""
    return not term_errors(term)


def preferred_terms_error(terms: Sequence[models.PreferredSchedulingTerm]) -> str:
    """NewPreferredSchedulingTerms' error for a pod's preferred terms, "" when they parse:
    terms of weight 0 and empty terms are skipped unparsed, as kube does; several errors
    are joined as Go's flattened aggregate prints them."""
    errs: list[str] = []
    for i, pref in enumerate(terms):
        term = pref.preference
        if pref.weight == 0 or not (term.match_expressions or term.match_fields):
            continue
        if not term_parses(term):
            errs += term_errors(term, f"[{i}]")
    unique = list(dict.fromkeys(errs))
    if len(unique) <= 1:
        return "".join(unique)
    return "[" + ", ".join(unique) + "]"
