"""docs/observability.md's list of span attributes names exactly those the code sets
(issue 21: `splitsched.binder.id` and `splitsched.resource_version` were set but not
listed). The code's are read from the source: every attribute-shaped string (dotted,
lower case) that is a dict key, an item assigned by subscript, or `set_attribute`'s first
argument, in the modules that trace."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "observability.md"
ATTRIBUTE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
#: Not services' code: generated stubs, the test tooling, the demo.
SKIPPED = ("splitsched/v1/", "splitsched/testing/", "splitsched/demo/")


def tracing_modules() -> list[Path]:
    """The services' modules that mention tracing or OpenTelemetry."""
    out = []
    for path in sorted([*ROOT.glob("services/**/*.py"), *ROOT.glob("splitsched/**/*.py")]):
        if path.relative_to(ROOT).as_posix().startswith(SKIPPED):
            continue
        text = path.read_text()
        if "opentelemetry" in text or "tracing" in text:
            out.append(path)
    return out


def key_nodes(tree: ast.AST) -> list[ast.expr]:
    """The expressions in attribute-key position: dict keys, subscript assignment targets'
    indexes, `set_attribute`'s first argument."""
    out: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            out += [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            out.append(node.slice)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "set_attribute"
            and node.args
        ):
            out.append(node.args[0])
    return out


def attributes_in_code() -> dict[str, str]:
    """Each attribute the code sets, with one module that sets it."""
    found: dict[str, str] = {}
    for path in tracing_modules():
        for key in key_nodes(ast.parse(path.read_text())):
            name = key.value if isinstance(key, ast.Constant) else None
            if isinstance(name, str) and ATTRIBUTE.match(name):
                found.setdefault(name, path.relative_to(ROOT).as_posix())
    return found


def attributes_in_doc() -> set[str]:
    """The attribute names in backquotes in the doc's **Attributes** paragraph."""
    text = DOC.read_text()
    start = text.index("**Attributes**")
    paragraph = text[start : text.index("\n\n", start)]
    return {name for name in re.findall(r"`([^`]+)`", paragraph) if ATTRIBUTE.match(name)}


def test_the_scan_finds_attributes_of_every_service() -> None:
    code = attributes_in_code()
    assert code["splitsched.resource_version"] == "services/watcher/entries.py"
    assert code["splitsched.confirmed_by"] == "services/scheduler/spans.py"
    assert code["splitsched.bind.result"] == "services/binder/spans.py"
    assert code["k8s.pod.name"] == "splitsched/runtime/tracing.py"


def test_every_attribute_the_code_sets_is_listed_and_no_other() -> None:
    code, doc = attributes_in_code(), attributes_in_doc()
    missing = {name: where for name, where in code.items() if name not in doc}
    assert not missing, f"set in the code but not listed in {DOC.name}: {missing}"
    assert not doc - set(code), f"listed in {DOC.name} but set nowhere: {doc - set(code)}"
