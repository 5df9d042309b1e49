"""The package's layering: the core never imports Spark, the connector no private name, one merge."""

from __future__ import annotations

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_the_core_never_imports_spark_or_the_connector() -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.split(".")[0] in ("pyspark", "pyspark_flinkstate"))
           for p in (ROOT / "python" / "flinkstate").rglob("*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_connector_uses_no_private_name_of_the_core() -> None:
    found = []
    for p in (ROOT / "connector" / "pyspark_flinkstate").rglob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flinkstate"):
                found += [f"{p.name}: from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value.id if isinstance(node.value, ast.Name) else None
                if owner in ("self", "cls") or (owner, node.attr) == ("sys", "_getframe"):
                    continue
                found.append(f"{p.name}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_one_merge_function() -> None:
    """Only the scan tasks (keyed state and timers: format.merge.read_range, and format.stream.RangeStream, the same
    merge a sub-range at a time) call the merge; nothing else reads views its own way."""
    callers = []
    for p in list((ROOT / "python").rglob("*.py")) + list((ROOT / "connector").rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        for name in ("read_range(", "_read_view(", "merge_tables("):
            if name in text and p.name != "merge.py":
                callers.append(f"{p.relative_to(ROOT)}: {name}")
    assert sorted(callers) == ["python/flinkstate/format/stream.py: merge_tables(", "python/flinkstate/read/keyed_scan.py: read_range(",
                               "python/flinkstate/read/timer_scan.py: read_range("]
