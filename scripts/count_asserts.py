"""Count the test suite's assertions: ``assert`` statements plus ``pytest.raises`` / ``pytest.warns`` calls.

Counted from the AST (not text), per folder under tests/ and in total, so a restructure of the tests can show
that no assertion was lost. Only the ``pytest.raises(...)`` / ``pytest.warns(...)`` spelling counts (the suite
has no other); ``with pytest.raises(A), pytest.raises(B):`` counts two.

    python scripts/count_asserts.py [tests-folder]
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_CHECK_CALLS = frozenset({"raises", "warns"})


def _is_check_call(node: ast.Call) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _CHECK_CALLS
        and isinstance(func.value, ast.Name)
        and func.value.id == "pytest"
    )


def count_file(path: Path) -> int:
    """Assertions in one Python file (0 when it does not parse)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError):
        return 0
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert) or (isinstance(node, ast.Call) and _is_check_call(node))
    )


def count_tree(root: Path) -> Counter[str]:
    """Assertions per folder (relative to ``root``'s parent) of every ``*.py`` file under ``root``."""
    per_folder: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        if any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(root).parts):
            continue
        per_folder[path.parent.relative_to(root.parent).as_posix()] += count_file(path)
    return per_folder


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else REPO / "tests"
    if not root.is_dir():
        print(f"count_asserts: {root} is not a folder", file=sys.stderr)
        return 2
    per_folder = count_tree(root.resolve())
    width = max((len(name) for name in per_folder), default=5)
    for name in sorted(per_folder):
        print(f"{name:<{width}}  {per_folder[name]:>6}")
    print(f"{'total':<{width}}  {sum(per_folder.values()):>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
