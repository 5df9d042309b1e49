"""Run real Apache Flink 2.3.0 (local MiniCluster, one JVM) to write savepoints for the tests.

Stdlib only. The jars come from the `apache-flink-libraries` wheel (downloaded once with pip
into a cache directory and unpacked there); the project's own Java job is compiled with javac
against flink-dist and run with java 17.

    python flinkjobs/harness.py OUT_DIR [N] [files|inline|snappy ...] [keys=K skeys=K rate=R]
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

FLINK_VERSION = "2.3.0"
HERE = Path(__file__).resolve().parent
JOB_SOURCE = HERE / "src" / "StateGenJob.java"
VARIANTS = ("files", "inline", "snappy")
NATIVE_VARIANTS = ("native", "checkpoint")
ROCKSDB_VARIANTS = ("rocksdb", "rocksdb-checkpoint")
_JARS = ("flink-dist-", "log4j-")


def cache_dir() -> Path:
    """Where the Flink jars and compiled classes are kept (FLINKSTATE_FLINK_CACHE overrides)."""
    env = os.environ.get("FLINKSTATE_FLINK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "flinkstate" / f"flink-{FLINK_VERSION}"


def flink_lib() -> Path:
    """The directory holding flink-dist and log4j jars, downloaded and unpacked once."""
    lib = cache_dir() / "pyflink" / "lib"
    if (lib / f"flink-dist-{FLINK_VERSION}.jar").exists():
        return lib
    dl = cache_dir() / "download"
    dl.mkdir(parents=True, exist_ok=True)
    wheels = list(dl.glob(f"apache_flink_libraries-{FLINK_VERSION}-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dl),
             f"apache-flink-libraries=={FLINK_VERSION}"],
            check=True,
        )
        wheels = list(dl.glob(f"apache_flink_libraries-{FLINK_VERSION}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        for name in z.namelist():
            base = name.rsplit("/", 1)[-1]
            if name.startswith("pyflink/lib/") and base.startswith(_JARS) and base.endswith(".jar"):
                z.extract(name, cache_dir())
    shutil.rmtree(dl)  # the 330 MB wheel is not needed once the jars are out
    return lib


def classpath(lib: Path) -> list[Path]:
    """flink-dist plus the log4j jars (without the JSON layout)."""
    return sorted(p for p in lib.glob("*.jar") if p.name.startswith(_JARS) and "layout" not in p.name)


def compile_job() -> Path:
    """Compile StateGenJob.java against flink-dist (cached by the source's hash); return the classes dir."""
    lib = flink_lib()
    sources = sorted((HERE / "src").glob("*.java"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    classes = cache_dir() / f"classes-{digest}"
    if not (classes / "RestoreDumpJob.class").exists():
        tmp = classes.with_name(classes.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        subprocess.run(["javac", "-cp", str(lib / f"flink-dist-{FLINK_VERSION}.jar"), "-d", str(tmp), *map(str, sources)], check=True)
        tmp.rename(classes)
    return classes


def run_job(
    out: Path, n: int = 100, variants: tuple[str, ...] = VARIANTS, timeout: float = 600, props: dict[str, int] | None = None
) -> None:
    """Run the generator job: OUT/<variant>/savepoint and OUT/<variant>/expected.jsonl per variant.

    props sets the job's system properties flinkstate.keys / skeys / rate (distinct keys, records/s).
    """
    classes = compile_job()
    cp = os.pathsep.join([str(classes)] + [str(p) for p in classpath(flink_lib())])
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for v in variants:
        shutil.rmtree(out / v, ignore_errors=True)
    cmd = [
        "java", "--add-opens", "java.base/java.util=ALL-UNNAMED", "--add-opens", "java.base/java.lang=ALL-UNNAMED",
        "-Dlog4j2.level=ERROR", *(f"-Dflinkstate.{k}={v}" for k, v in (props or {}).items()), "-cp", cp, "StateGenJob", str(out), str(n), *variants,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"Flink job failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


def restore_and_dump(savepoint: Path, out_file: Path, backend: str = "hashmap", parallelism: int = 1,
                     uids: tuple[str, ...] = (), timeout: float = 600) -> list[str]:
    """Restore savepoint in RestoreDumpJob (StateGenJob's states; uids = long-keyed, string-keyed overrides); its dump lines."""
    classes = compile_job()
    cp = os.pathsep.join([str(classes)] + [str(p) for p in classpath(flink_lib())])
    cmd = [
        "java", "--add-opens", "java.base/java.util=ALL-UNNAMED", "--add-opens", "java.base/java.lang=ALL-UNNAMED",
        "-Dlog4j2.level=ERROR", "-cp", cp, "RestoreDumpJob", str(Path(savepoint).resolve()), str(Path(out_file).resolve()),
        backend, str(parallelism), *uids,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"Flink restore job failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return Path(out_file).read_text(encoding="utf-8").splitlines()


def main(argv: list[str]) -> int:
    """Command line: OUT_DIR [N] [variants...] [name=value job properties]."""
    if not argv:
        print(__doc__)
        return 2
    n = int(argv[1]) if len(argv) > 1 else 100
    props = {k: int(v) for k, _, v in (a.partition("=") for a in argv[2:] if "=" in a)}
    variants = tuple(a for a in argv[2:] if "=" not in a) or VARIANTS
    run_job(Path(argv[0]), n, variants, props=props)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
