"""The documentation site stays true: it builds strictly, its references cover the code, and every guide runs.

- `mkdocs build --strict`: no broken link, anchor, include or mkdocstrings reference (a few seconds).
- The generated references (docs/hooks/reference.py) against the code: the parsers' defaults are the ones the
  option reference shows, every command's --help links its section, every error says when it is raised.
- Every python, bash and sql block of every page, in order, in one process per page started as a user starts a
  script (tests/doc_blocks.py, the README's machinery), in a fresh folder where `tests/fixtures` is the clone's
  (read only) and, for pages that say `test-needs: demo`, `demo-checkpoints` is a copy of one demo run. Each
  `show()` must print a table with rows. A page's front matter `test-marks:` gives its pytest marks: pages that
  start Spark are `spark`, the costly ones `slow` too (their cost is in the report of the commit adding them).
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from doc_blocks import code_blocks, expected_tables, run_script, script_of, shown_tables

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def front_matter(text: str) -> dict[str, list[str]]:
    """The page's `key: a, b` front-matter lines (what MkDocs reads as page meta and ignores)."""
    m = _FRONT.match(text)
    lines = m.group(1).splitlines() if m else []
    return {k.strip(): [v.strip() for v in vals.split(",") if v.strip()] for k, _, vals in (line.partition(":") for line in lines)}


def _reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_site_builds_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stderr[-5000:]
    page = (tmp_path / "site" / "reference" / "cli.html").read_text()
    assert 'id="import"' in page and "--flink-version" in page  # generated at build time, not a stale copy
    assert "flinkstate storage format, version" in (tmp_path / "site" / "reference" / "format.html").read_text()  # FORMAT.md included


def test_option_reference_is_what_the_parsers_apply() -> None:
    from pyspark_flinkstate.options import OPTIONS, READ_OPTIONS, WRITE_OPTIONS, parse_read_options, parse_write_options

    doc = _reference().spark_options()
    read, write = parse_read_options({"path": "p"}), parse_write_options({"path": "p", "operator": "o", "state": "s"})
    fields = {"flattenCollections": "flatten", "includeExpired": "include_expired", "rawValues": "raw_values", "sqlRows": "sql_rows",
              "topN": "top_n", "ttlBucket": "ttl_bucket", "table": "table", "savepoint": "savepoint", "operation": "operation"}
    for o in OPTIONS:
        assert o.type and o.meaning, o.name
        assert f"| `{o.name}` |" in doc, o.name
        if o.name in fields:
            applied = {getattr(opts, fields[o.name]) for opts in (read, write) if hasattr(opts, fields[o.name])}
            assert applied == {o.default}, (o.name, applied, o.default)
    assert set(READ_OPTIONS) | set(WRITE_OPTIONS) <= {o.name for o in OPTIONS}


def test_every_command_and_flag_is_in_the_cli_reference_and_its_help_links_there(capsys: pytest.CaptureFixture[str]) -> None:
    from flinkstate.cli import main

    ref = _reference()
    doc = ref.cli_reference()
    _, commands, _ = ref._parser_commands()
    assert {"import", "export", "describe", "insight"} <= set(commands)
    for name, sp in commands.items():
        assert f"{{#{name}}}" in doc, name
        for a in sp._actions:
            for flag in [] if isinstance(a, argparse._HelpAction) else a.option_strings:
                assert flag in doc, (name, flag)
        with pytest.raises(SystemExit):
            main([name, "--help"])
        assert f"docs: docs/reference/cli.md#{name}" in capsys.readouterr().out, name
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "docs/index.md" in capsys.readouterr().out


def test_every_error_is_documented_with_when_it_is_raised() -> None:
    import flinkstate

    exported, others = _reference().error_classes()
    assert len(exported) >= 15 and flinkstate.StorageError in exported
    doc = _reference().errors_reference()
    for c in exported + others:
        assert (c.__doc__ or "").strip(), f"{c.__module__}.{c.__name__} has no docstring saying when it is raised"
        assert f"`{c.__name__}`" in doc


@pytest.fixture(scope="session")
def demo_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the demo job (no Spark part): the checkpoints the guides start from."""
    from flinkstate.cli import main

    path = tmp_path_factory.mktemp("demo") / "demo-checkpoints"
    assert main(["demo", "--path", str(path), "--no-sql"], out=io.StringIO()) == 0
    return path


@pytest.fixture(scope="session")
def user_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """PATH with `flinkstate` first: this interpreter's (the source tree), as an activated virtual environment has it."""
    bin_dir = tmp_path_factory.mktemp("bin")
    shim = bin_dir / "flinkstate"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m flinkstate "$@"\n')
    shim.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def _page_params() -> Iterator[object]:
    for page in PAGES:
        text = page.read_text()
        if code_blocks(text):
            marks = [getattr(pytest.mark, m) for m in front_matter(text).get("test-marks", [])]
            yield pytest.param(page, marks=marks, id=str(page.relative_to(DOCS)))


@pytest.mark.parametrize("page", list(_page_params()))
def test_page_blocks_run(page: Path, tmp_path: Path, user_path: str, request: pytest.FixtureRequest) -> None:
    text = page.read_text()
    blocks = code_blocks(text)
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "tests" / "fixtures").symlink_to(ROOT / "tests" / "fixtures")
    if "demo" in front_matter(text).get("test-needs", []):
        shutil.copytree(request.getfixturevalue("demo_checkpoints"), work / "demo-checkpoints")
    env = {**os.environ, "PATH": user_path, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    r = run_script(script_of(blocks), work, env, "-W", "error")
    assert r.returncode == 0, f"{page.relative_to(ROOT)}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    tables = shown_tables(r.stdout)
    assert len(tables) == expected_tables(blocks) and all(n > 0 for n in tables), r.stdout[-5000:]
    fixtures = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "tests/fixtures"], capture_output=True, text=True)
    assert not fixtures.stdout.strip(), f"{page.name} changed the checked-in fixtures: {fixtures.stdout}"
