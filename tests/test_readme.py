"""The README, the front door: its two set-up commands come first (CI runs the second), and its tour runs as written,
in order, and shows rows: from a fresh clone, as a user runs it.

Spark's Python workers run `PYSPARK_PYTHON` (default: the `python3` on PATH). The fresh-clone
tests make PATH's `python3` a bare virtual environment without flinkstate or PySpark, as it
is for a user who runs `.venv/bin/python script.py` without activating the venv.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from doc_blocks import code_blocks, expected_tables, run_script, script_of, shown_tables

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_starts_with_the_two_set_up_commands_and_links_only_pages_that_exist() -> None:
    commands = [code.strip() for lang, code in code_blocks(README.read_text(), ("bash",), with_skipped=True)]
    assert commands[0].startswith("python3 -m venv .venv && .venv/bin/pip install '.[spark,s3]'"), commands[0]
    assert commands[1] == "python3 -m venv .venv && .venv/bin/pip install '.[dev]' && .venv/bin/python -m pytest", commands[1]
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert links and all((README.parent / link).exists() for link in links if "://" not in link), links


ROOT = Path(__file__).resolve().parent.parent

@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's tracked files (what a clone holds) in a temporary folder."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout.decode().split("\0")
    dest = tmp_path_factory.mktemp("clone") / "flinkstate"
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    return dest


@pytest.fixture(scope="module")
def user_env(clone: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A user's environment: this interpreter has the package, the `python3` on PATH has nothing."""
    bare = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(bare)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env["PATH"] = f"{bare / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # stands in for `pip install .` into this interpreter (the index is not needed for the test)
    env["PYTHONPATH"] = os.pathsep.join([str(clone / "python"), str(clone / "connector")])
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


@pytest.mark.slow
@pytest.mark.spark
def test_workers_without_flinkstate_get_an_error_naming_their_interpreter(clone: Path, user_env: dict[str, str], tmp_path: Path) -> None:
    script = (
        "from pyspark.sql import SparkSession\n"
        "import pyspark_flinkstate\n"
        "from flinkstate.core.errors import WorkerPythonError\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "try:\n"
        "    pyspark_flinkstate.register(spark)\n"
        "    print('REGISTERED')\n"
        "except WorkerPythonError as e:\n"
        "    print('ERROR', e)\n"
        "spark.stop()\n"
    )
    r = run_script(script, tmp_path, user_env)
    assert r.returncode == 0, r.stderr[-3000:]
    bare_python3 = user_env["PATH"].split(os.pathsep)[0] + "/python3"
    assert "ERROR" in r.stdout and bare_python3 in r.stdout and f"PYSPARK_PYTHON={sys.executable}" in r.stdout, r.stdout


@pytest.mark.slow
@pytest.mark.spark
def test_readme_blocks_run_from_a_fresh_clone_the_documented_way(clone: Path, user_env: dict[str, str], tmp_path: Path) -> None:
    # the tour's python and bash blocks, in document order, in the clone, in one process started as a user starts it,
    # with `flinkstate` on PATH as the activated venv has it (tests/doc_blocks.py: the docs site's pages run the same way);
    # one table with rows per show(), no warning (the driver runs with -W error), and the state the blocks leave
    blocks = code_blocks((clone / "README.md").read_text())
    assert any(lang == "python" for lang, _ in blocks) and any(lang == "bash" for lang, _ in blocks), blocks
    shim = tmp_path / "bin" / "flinkstate"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m flinkstate "$@"\n')
    shim.chmod(0o755)
    env = {**user_env, "PYSPARK_PYTHON": sys.executable, "PATH": f"{shim.parent}{os.pathsep}{user_env['PATH']}"}
    r = run_script(script_of(blocks), clone, env, "-W", "error")
    assert r.returncode == 0, r.stderr[-3000:]
    tables = shown_tables(r.stdout)
    assert len(tables) == expected_tables(blocks) and all(n > 0 for n in tables), r.stdout
    import flinkstate as fs

    assert fs.open(clone / "state").read_state("long-keyed", "count", keys=[7]).num_rows == 0
    assert (clone / "fixed-savepoint" / "_metadata").is_file()


def test_ci_runs_exactly_the_readme_test_command() -> None:
    commands = [code.strip() for _, code in code_blocks(README.read_text(), ("bash",), with_skipped=True)]
    test_command = next(c for c in commands if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    steps = [line for line in ci if line.strip() and not line.startswith("#")]
    assert steps[-1] == test_command, steps
    assert all(line.startswith(("set ", "cd ")) for line in steps[:-1]), steps


def test_install_extras_pin_pandas_to_what_pyspark_supports() -> None:
    # PySpark 4 emits a FutureWarning for pandas >= 3 in every session that touches pandas
    import tomllib

    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("spark", "dev"):
        pandas = [Requirement(r) for r in extras[extra] if Requirement(r).name == "pandas"]
        assert pandas, f"extra {extra!r} does not pin pandas"
        assert not pandas[0].specifier.contains("3.0.0") and pandas[0].specifier.contains("2.3.3"), (extra, str(pandas[0]))


EDITABLE_SCRIPT = """
import os, sys
import pyarrow as pa
import flinkstate as fs
import pyspark_flinkstate
from pyspark.sql import SparkSession

root = sys.argv[1]
with fs.open(root).begin(max_parallelism=128) as w:
    w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64()),
                pa.table({"key": ["a", "b", "c"], "value": [1, 2, 3]}))
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
read = lambda: spark.read.format("flinkstate").options(operator="sessions", state="count").load(root).count()
try:
    print("LOOKUP", read())
except Exception as e:
    print("LOOKUP", "DATA_SOURCE_NOT_FOUND" if "DATA_SOURCE_NOT_FOUND" in str(e) else repr(e))
    pyspark_flinkstate.register(spark)
    print("REGISTERED", read())
print("FROM", os.path.realpath(pyspark_flinkstate.__file__))
spark.stop()
"""


def _dev_site(dest: Path) -> Path:
    """This interpreter's installed packages, flinkstate's own excepted: what `.[spark]` adds to a venv."""
    import sysconfig

    dest.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("flinkstate", "pyspark_flinkstate", "__editable__")) and entry.suffix != ".pth":
            (dest / entry.name).symlink_to(entry)
    return dest


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("mode", ["readme-strict", "plain"])
def test_editable_install_spark_finds_the_source(mode: str, clone: Path, tmp_path: Path) -> None:
    # the README's editable command (link tree: Spark's lookup lists it), or a plain `pip install -e .`
    # (import hook: the lookup misses it, register(spark) works); both run the clone's source
    found = re.findall(r"`pip install -e ([^`]*editable_mode=strict[^`]*)`", README.read_text())
    assert found, "README names no editable install that Spark's lookup sees"
    args = shlex.split(found[0]) if mode == "readme-strict" else ["."]
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "zz_dev.pth").write_text(str(_dev_site(tmp_path / "dev-site")) + "\n")  # the extras, without flinkstate
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "-e", *args],
                         cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-3000:]
    (tmp_path / "script.py").write_text(EDITABLE_SCRIPT)
    env["PYSPARK_PYTHON"] = str(python)
    r = subprocess.run([str(python), "script.py", str(tmp_path / "job")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"FROM {(clone / 'connector' / 'pyspark_flinkstate' / '__init__.py').resolve()}" in r.stdout, r.stdout
    if mode == "readme-strict":
        assert "LOOKUP 3" in r.stdout, r.stdout
    else:
        assert "LOOKUP DATA_SOURCE_NOT_FOUND" in r.stdout and "REGISTERED 3" in r.stdout, r.stdout
