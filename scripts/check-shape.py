"""Fail when a file in splitsched/, services/ or bench/ passes 500 lines or a function 60.

Issue 16's shape rules, checked in `make lint` so a file that grows several jobs is split
before it lands. Generated stubs (splitsched/v1) are exempt.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60
ROOTS = ("splitsched", "services", "bench")
GENERATED = Path("splitsched/v1")


def violations(repo: Path) -> list[str]:
    found: list[str] = []
    for root in ROOTS:
        for path in sorted((repo / root).rglob("*.py")):
            rel = path.relative_to(repo)
            if rel.is_relative_to(GENERATED):
                continue
            text = path.read_text(encoding="utf-8")
            lines = text.count("\n")
            if lines > MAX_FILE_LINES:
                found.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES}): split it by job")
            for node in ast.walk(ast.parse(text, filename=str(rel))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append(
                            f"{rel}:{node.lineno}: {node.name} is {length} lines "
                            f"(at most {MAX_FUNCTION_LINES})"
                        )
    return found


def main() -> int:
    found = violations(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
    for line in found:
        print(f"check-shape: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
