"""What a regular install gets: the built wheel holds every file the packages open, and the installed package (not
the source tree) runs the CLI and Spark round trip of a real Flink savepoint, down to real Flink restoring the export.

The tests import the source tree (pyproject's pytest `pythonpath`); these build the wheel as `pip install .` does and
use it the way a user does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"flinkstate": ROOT / "python" / "flinkstate", "pyspark_flinkstate": ROOT / "connector" / "pyspark_flinkstate"}
# importlib.resources.files("<package>").joinpath("<name>"): how the packages load their data files
_RESOURCE = re.compile(r"""files\(\s*["']([\w.]+)["']\s*\)\s*\.joinpath\(\s*["']([^"']+)["']\s*\)""")


def build_wheel(out: Path) -> Path:
    """The wheel `pip install .` builds from a clean checkout (no dependencies fetched): built from a copy of what the
    build reads, since a `build/` folder left in the working tree would hand setuptools files the package data lacks."""
    src = out / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for top in ("python", "connector"):
        shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = out.glob("flinkstate-*.whl")
    return wheel


def package_files() -> dict[str, list[str]]:
    """Per package: its non-Python files (wheel paths), and the data files its code names through importlib.resources."""
    data, named = [], []
    for pkg, path in PACKAGES.items():
        for f in path.rglob("*"):
            if f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in f.parts:
                data.append(f"{pkg}/{f.relative_to(path).as_posix()}")
            if f.suffix == ".py":
                for module, name in _RESOURCE.findall(f.read_text(encoding="utf-8")):
                    named.append(f"{module.replace('.', '/')}/{name}")
    return {"data": sorted(data), "named": sorted(named)}


def test_the_wheel_holds_every_file_the_packages_open(tmp_path: Path) -> None:
    wheel = zipfile.ZipFile(build_wheel(tmp_path))
    names = set(wheel.namelist())
    found = package_files()
    assert "flinkstate/flink/write/savepoint_properties.bin" in found["named"]  # the export's CheckpointProperties tail
    missing = [f for f in found["data"] + found["named"] if f not in names]
    assert not missing, f"files the packages open that a regular install does not get: {missing} (pyproject package-data)"
    # data is loaded through importlib.resources only: a path built from __file__ would escape this check
    relative = [str(p.relative_to(ROOT)) for path in PACKAGES.values() for p in path.rglob("*.py")
                if "__file__" in p.read_text(encoding="utf-8")]
    assert not relative, f"modules that open files next to __file__ (use importlib.resources.files): {relative}"
    assert {"flinkstate/py.typed", "pyspark_flinkstate/py.typed"} <= names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = wheel.read(entry_points).decode()
    for line in ("flinkstate = flinkstate.cli:main", "sql = pyspark_flinkstate.demo:answer_with_spark",
                 "spark = pyspark_flinkstate.maintenance:cli_runner"):
        assert line in text


# ------------------------------------------------------------------ the installed package, end to end
FIXTURE = ROOT / "tests" / "fixtures" / "flink-2.3-canonical" / "files" / "savepoint"
SPARK_CHANGE = textwrap.dedent("""
    import os, sys
    import flinkstate, pyspark_flinkstate
    venv = sys.prefix
    assert flinkstate.__file__.startswith(venv) and pyspark_flinkstate.__file__.startswith(venv), (flinkstate.__file__, venv)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    pyspark_flinkstate.check_workers(spark)
    where = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark_flinkstate").__file__).collect()[0]
    assert where.startswith(venv), where  # Spark's Python workers import the installed package too
    root = sys.argv[1]
    (spark.createDataFrame([(5, 424242)], "key long, value long").write.format("flinkstate")
     .options(operator="long-keyed", state="count").mode("append").save(root))
    got = spark.read.format("flinkstate").options(operator="long-keyed", state="count").load(root).where("key = 5").collect()
    assert [r.value for r in got] == [424242], got
    spark.stop()
    print("changed", where)
""")


def _linked_dependencies(wheel: Path, extras: set[str], dest: Path) -> Path:
    """dest: links to this interpreter's installed distributions that the wheel's own Requires-Dist (with `extras`)
    reaches, directly or through their requirements, at versions those requirements accept; returns dest.

    Why: resolving and unpacking pyspark, pyarrow, pandas... into a fresh venv from the index costs about 45 s a run,
    most of it the index lookups. A venv that sees these links (a .pth file) holds only what the wheel declares (a
    module the package imports without declaring it is not there), and pip still resolves every declared requirement
    against it: what is missing here or at a version a requirement refuses, pip installs from the index. pip never
    uninstalls through the links: dest is outside the venv, which pip treats as another environment."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()

    def wanted(requires: list[str], extras: set[str]) -> list[Requirement]:
        reqs = map(Requirement, requires)
        return [r for r in reqs if r.marker is None or any(r.marker.evaluate({"extra": x}) for x in extras | {""})]

    todo = wanted([line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")], extras)
    seen: set[tuple[str, frozenset[str]]] = set()
    dest.mkdir()
    while todo:
        req = todo.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            continue  # pip installs it
        if not req.specifier.contains(dist.version, prereleases=True) or dist.files is None:
            continue
        site = Path(str(dist.locate_file("")))
        for top in {f.parts[0] for f in dist.files if f.parts[0] not in ("..", "__pycache__")}:
            if not (dest / top).exists() and (site / top).exists():
                (dest / top).symlink_to(site / top)
        todo += wanted(dist.requires or [], set(req.extras))
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed as `pip install '.[spark,s3]'` would: pip resolves the
    wheel's requirements against the dependencies this interpreter has (linked, _linked_dependencies) and installs
    the rest from the index; returns its bin folder."""
    tmp = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(tmp / "dist")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "zz_deps.pth").write_text(f"{_linked_dependencies(wheel, {'spark', 's3'}, tmp / 'deps')}\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", f"{wheel}[spark,s3]"],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    isolated = "import importlib.util as u; print([m for m in ('moto', 'pytest', 'hypothesis') if u.find_spec(m)])"
    extra = subprocess.run([str(venv / "bin" / "python"), "-c", isolated], capture_output=True, text=True, check=True)
    assert extra.stdout.strip() == "[]", f"the venv sees the test environment's own packages: {extra.stdout}"
    return venv / "bin"


def _clean_env(bin_dir: Path) -> dict[str, str]:
    """The environment of a user of that venv: its bin first, no PYTHONPATH (the tests' points at the source tree)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = str(bin_dir / "python")
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    return env


@pytest.mark.slow
@pytest.mark.flink
@pytest.mark.spark
def test_installed_package_imports_changes_with_spark_exports_and_flink_restores(installed: Path, tmp_path: Path,
                                                                                canonical_flink_dump: tuple[str, ...]) -> None:
    from fsc_helpers import flink_harness

    env = _clean_env(installed)

    def run(*argv: str) -> str:
        r = subprocess.run(list(argv), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
        assert r.returncode == 0, f"{argv}: {r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        return r.stdout

    where = run(str(installed / "python"), "-c", "import flinkstate; print(flinkstate.__file__)").strip()
    assert where.startswith(str(installed.parent)), where
    root, dest = tmp_path / "root", tmp_path / "exported"
    run(str(installed / "flinkstate"), "import", str(FIXTURE), str(root), "--raw-values")
    script = tmp_path / "change.py"
    script.write_text(SPARK_CHANGE, encoding="utf-8")
    assert "changed" in run(str(installed / "python"), str(script), str(root))
    run(str(installed / "flinkstate"), "export", str(root), str(dest))
    harness = flink_harness()
    original = list(canonical_flink_dump)  # FIXTURE restored by Flink (HashMap, parallelism 1)
    want = sorted("long-keyed count 5 424242" if line.startswith("long-keyed count 5 ") else line for line in original)
    assert want != sorted(original)
    assert harness.restore_and_dump(dest, tmp_path / "restored.txt", "rocksdb", 2) == want
