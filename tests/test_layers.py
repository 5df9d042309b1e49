"""The import graph of both packages: no cycle, and no import from a lower layer to a higher one.

`LAYERS` is the one list of the layers: for a package, its children bottom up. A module may import
what is in its own child or in a child listed before it, never one listed after it; children joined
by " | " sit side by side and import neither each other. A package's `__init__` is its front: it may
import its children, and nobody inside the package imports it, unless LAYERS lists `__init__` among
the children (then the children above it, like the CLI, use it). Every import counts: at module
level, inside functions and under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"flinkstate": ROOT / "python" / "flinkstate", "pyspark_flinkstate": ROOT / "connector" / "pyspark_flinkstate"}

LAYERS: dict[str, list[str]] = {
    "": ["flinkstate", "pyspark_flinkstate"],
    "flinkstate": ["core", "format", "read", "store", "flink | backend", "runtime", "__init__", "report", "demo", "cli_sources", "cli", "__main__"],
    "flinkstate.store": ["root", "registry", "writer", "maintenance", "store", "rewrite | verify"],
    "flinkstate.flink": ["errors", "_io | _jit", "serde", "meta", "pyflink | sql | sources", "files", "write", "bridge"],
    "pyspark_flinkstate": ["options | schema | worker_noise | workers", "flink_jobs", "resolve | commit", "metadata", "reader | writer_tables | native",
                           "stream_reader | writer | source_tables | tables", "stream_writer | savepoint | maintenance", "source", "__init__", "demo"],
    "flinkstate.backend": ["tables", "context", "arrow_io", "states", "container_states", "timers", "snapshot", "keyed"],
}


def modules() -> dict[str, Path]:
    """Every module of both packages by dotted name (a package by its own name)."""
    out = {}
    for pkg, top in SOURCES.items():
        for p in top.rglob("*.py"):
            parts = [pkg, *p.relative_to(top).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = p
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of ours it imports (`from pkg import name` counts name when it is a module)."""
    mods = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _rank(package: str, child: str) -> tuple[int, str] | None:
    for i, floor in enumerate(LAYERS.get(package, ())):
        if child in [c.strip() for c in floor.split("|")]:
            return i, floor
    return None


def violation(src: str, dst: str) -> str | None:
    """Why src may not import dst, or None."""
    a, b = src.split("."), dst.split(".")
    if src.startswith(dst + "."):  # a module imports the front of a package it is in
        front, mine = _rank(dst, "__init__"), _rank(dst, a[len(b)])
        if front is not None and mine is not None and mine[0] > front[0]:
            return None  # listed above the front: it uses the package's public names
        return f"{src} imports {dst}, the front (__init__) of its own package"
    if dst.startswith(src + "."):  # a package's front imports its children: those listed below it, if it is listed
        front, child = _rank(src, "__init__"), _rank(src, b[len(a)])
        if front is not None and child is not None and child[0] > front[0]:
            return f"{src} (the front) imports {dst}, listed above it in LAYERS[{src!r}]"
        return None
    i = 0
    while a[i] == b[i]:
        i += 1
    package = ".".join(a[:i])
    ra, rb = _rank(package, a[i]), _rank(package, b[i])
    if package in LAYERS and (ra is None or rb is None):
        return f"{'.'.join(a[:i + 1]) if ra is None else '.'.join(b[:i + 1])} is not in LAYERS[{package!r}]"
    if ra is None or rb is None:
        return None  # a package without layers: its modules import each other freely (no cycle)
    if rb[0] > ra[0]:
        return f"{src} (layer {ra[1]!r} of {package or 'the project'}) imports {dst} from the higher layer {rb[1]!r}"
    if rb[0] == ra[0] and a[i] != b[i]:
        return f"{src} imports {dst}: {a[i]!r} and {b[i]!r} sit side by side in {package}"
    return None


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    graph = import_graph()
    found = sorted(filter(None, (violation(src, dst) for src, dsts in graph.items() for dst in dsts)))
    assert found == []


def test_every_package_says_what_it_holds_and_may_import() -> None:
    missing = [str(p.relative_to(ROOT)) for top in SOURCES.values() for p in top.rglob("__init__.py")
               if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert missing == []


def test_tests_mirror_the_packages() -> None:
    """Every test folder under tests/flinkstate and tests/pyspark_flinkstate is a package of the source."""
    extra = []
    for pkg, top in SOURCES.items():
        for d in (ROOT / "tests" / pkg).rglob("*"):
            if d.is_dir() and d.name != "__pycache__" and not (top / d.relative_to(ROOT / "tests" / pkg)).is_dir():
                extra.append(str(d.relative_to(ROOT)))
    assert extra == []


@pytest.mark.parametrize(("src", "dst", "why"), [
    ("flinkstate.core.ttl", "flinkstate.store.store", "higher layer"),
    ("flinkstate.flink.serde.values", "flinkstate.flink.files.canonical", "higher layer"),
    ("flinkstate.backend.keyed", "flinkstate.flink.bridge.source", "side by side"),
    ("flinkstate.format.checks", "flinkstate.format", "front (__init__) of its own package"),
    ("flinkstate.store.root", "flinkstate.store.writer", "higher layer"),
])
def test_the_checks_catch_what_they_are_for(src: str, dst: str, why: str) -> None:
    assert why in (violation(src, dst) or "")
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert violation("flinkstate.store.store", "flinkstate.read.checkpoint") is None
