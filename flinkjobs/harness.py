"""Run real Apache Flink 1.18 to 2.3 (local MiniCluster, one JVM) to write savepoints for the tests.

Stdlib only. The jars come from `apache-flink-libraries` (downloaded once per version with pip
into ~/.cache/flinkstate/flink-<version> and unpacked there); the project's own Java jobs are
compiled with javac against that version's flink-dist, with the version's compat/ shim, and run
with java 17.

    python flinkjobs/harness.py OUT_DIR [N] [files|inline|snappy ...] [keys=K skeys=K rate=R parallelism=P maxp=M window_maxp=M]
        [conf="key=value;key=value"] [version=1.20]
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

FLINK_VERSION = "2.3.0"
# The newest patch release of each Flink line the reader and writer are checked against (apache-flink-libraries).
FLINK_VERSIONS = {"1.18": "1.18.1", "1.19": "1.19.3", "1.20": "1.20.5", "2.0": "2.0.2", "2.1": "2.1.3", "2.2": "2.2.1", "2.3": "2.3.0"}
HERE = Path(__file__).resolve().parent
JOB_SOURCE = HERE / "src" / "StateGenJob.java"
# The jobs every version compiles (with its compat/ shim); the newest version compiles every src/*.java.
MATRIX_SOURCES = ("StateGenJob.java", "RestoreDumpJob.java", "ProductionJob.java", "ShapesJob.java", "DataStreamStatesJob.java")
# sources written against the 1.19+ API (Duration windows, TaskInfo, fromData) that 1.18's Compat does not shim:
# their fixtures are taken on 2.3 and 1.20 only
SINCE_1_19 = ("DataStreamStatesJob.java",)
VARIANTS = ("files", "inline", "snappy")
NATIVE_VARIANTS = ("native", "checkpoint")
ROCKSDB_VARIANTS = ("rocksdb", "rocksdb-checkpoint")
_JARS = ("flink-dist-", "flink-cep-", "log4j-")  # the jobs' class path (CEP: DataStreamStatesJob's patterns)
# SQL and Table API jobs (flinkjobs/sql/) also need the table jars the distribution ships beside flink-dist
_TABLE_JARS = ("flink-table-api-java-uber-", "flink-table-planner-loader-", "flink-table-runtime-", "flink-cep-",
               "flink-connector-files-", "flink-json-", "flink-csv-")
# Kept for the inventory of serializer snapshots (flinkjobs/inventory.py), on no job's class path: the Scala API
# (lib/) and flink-python (opt/), whose classes a job puts in state too.
_EXTRA_JARS = ("flink-scala_", "flink-python-")
SQL_DIR = HERE / "sql"
# What Flink's own config.yaml passes on Java 17 (1.18 needs more of these than 2.x).
JVM_FLAGS = ("-XX:+IgnoreUnrecognizedVMOptions", *(
    f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "sun.nio.ch", "java.text", "java.time",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks")),
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED", "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED")


def resolve(version: str | None = None) -> str:
    """The full version for '1.20' or '1.20.5' (None: the newest); ValueError naming the known ones otherwise."""
    if version is None:
        return FLINK_VERSION
    if version in FLINK_VERSIONS:
        return FLINK_VERSIONS[version]
    if version in FLINK_VERSIONS.values():
        return version
    raise ValueError(f"Flink {version} is not one the harness runs ({', '.join(FLINK_VERSIONS)})")


def compat_dir(version: str | None = None) -> Path:
    """The per-version shim (compat/<line>/Compat.java): 1.18 lacks the 1.19+ API the jobs use."""
    return HERE / "compat" / ("v1_18" if resolve(version).startswith("1.18.") else "current")


def cache_dir(version: str | None = None) -> Path:
    """Where one version's Flink jars and compiled classes are kept (FLINKSTATE_FLINK_CACHE overrides the parent)."""
    env = os.environ.get("FLINKSTATE_FLINK_CACHE")
    parent = Path(env) if env else Path.home() / ".cache" / "flinkstate"
    return parent / f"flink-{resolve(version)}"


def flink_lib(version: str | None = None) -> Path:
    """The directory holding flink-dist, the table jars and log4j, downloaded and unpacked once.

    apache-flink-libraries comes as a wheel (jars under pyflink/lib/ and pyflink/opt/) for some releases and as a
    source archive (under <name>/deps/lib/ and deps/opt/) for others; either way only flink-dist, the table
    jars (for SQL jobs), log4j and the jars the serializer inventory reads (_EXTRA_JARS) are kept, and the ~300 MB
    download is deleted.
    """
    version = resolve(version)
    lib = cache_dir(version) / "pyflink" / "lib"
    if (lib / f"flink-dist-{version}.jar").exists() and all(any(lib.glob(f"{t}*.jar")) for t in _TABLE_JARS + _EXTRA_JARS):
        return lib
    dl = cache_dir(version) / "download"
    dl.mkdir(parents=True, exist_ok=True)
    found = [p for p in dl.iterdir() if p.name.endswith((".whl", ".tar.gz"))]
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dl),
             f"apache-flink-libraries=={version}"],
            check=True,
        )
        found = [p for p in dl.iterdir() if p.name.endswith((".whl", ".tar.gz"))]
    lib.mkdir(parents=True, exist_ok=True)
    for archive in found:
        for base, read in _jars_in(archive):
            if (lib / base).exists():
                continue  # a cache made before the table (or extra) jars were kept: only those are added
            tmp = lib / (base + ".tmp")
            tmp.write_bytes(read())
            tmp.rename(lib / base)
    shutil.rmtree(dl)
    if not (lib / f"flink-dist-{version}.jar").exists():
        raise RuntimeError(f"apache-flink-libraries {version} holds no flink-dist-{version}.jar")
    return lib


def _jars_in(archive: Path):
    """(file name, reader) of the jars kept (flink-dist, log4j, table, extra) in a wheel or source archive."""
    def wanted(name: str) -> str | None:
        parent, _, base = name.rpartition("/")
        ok = (parent.endswith(("pyflink/lib", "deps/lib", "pyflink/opt", "deps/opt")) and base.endswith(".jar")
              and base.startswith(_JARS + _TABLE_JARS + _EXTRA_JARS))
        return base if ok else None

    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                if (base := wanted(name)) is not None:
                    yield base, lambda name=name: z.read(name)
        return
    with tarfile.open(archive, "r:gz") as t:
        for m in t:
            if m.isfile() and (base := wanted(m.name)) is not None:
                f = t.extractfile(m)
                assert f is not None
                yield base, f.read


def classpath(lib: Path) -> list[Path]:
    """flink-dist, flink-cep and the log4j jars (without the JSON layout)."""
    return sorted(p for p in lib.glob("*.jar") if p.name.startswith(_JARS) and "layout" not in p.name)


def compile_job(version: str | None = None) -> Path:
    """Compile the jobs and the version's compat shim against its flink-dist and flink-cep (cached by the sources' hash);
    return the classes dir."""
    version = resolve(version)
    lib = flink_lib(version)
    sources = sorted((HERE / "src").glob("*.java"))
    if version != FLINK_VERSION:
        sources = [p for p in sources if p.name in MATRIX_SOURCES]
    if version.startswith("1.18."):
        sources = [p for p in sources if p.name not in SINCE_1_19]
    sources += sorted(compat_dir(version).glob("*.java"))
    return _compile(sources, classpath(lib), "classes", version, "RestoreDumpJob.class")


def _compile(sources: list[Path], cp: list[Path], name: str, version: str, marker: str, resources: Path | None = None) -> Path:
    """javac sources against cp into a cache folder named by their hash (shared by processes), with the files below
    `resources` copied beside the classes (a service file, say)."""
    extra = sorted(p for p in resources.rglob("*") if p.is_file()) if resources is not None and resources.is_dir() else []
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources + extra)).hexdigest()[:16]
    classes = cache_dir(version) / f"{name}-{digest}"
    if not (classes / marker).exists():
        tmp = classes.with_name(classes.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        proc = subprocess.run(["javac", "-nowarn", "-cp", os.pathsep.join(map(str, cp)), "-d", str(tmp), *map(str, sources)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"javac of {name} against Flink {version} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        for p in extra:
            assert resources is not None
            target = tmp / p.relative_to(resources)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, target)
        try:
            tmp.rename(classes)
        except OSError:  # another process compiled the same sources first
            shutil.rmtree(tmp, ignore_errors=True)
    return classes


def compile_sql_job(version: str | None = None) -> Path:
    """Compile flinkjobs/sql/*.java against the version's flink-dist and table jars (cached by the sources' hash)."""
    version = resolve(version)
    return _compile(sorted(SQL_DIR.glob("*.java")), sql_classpath(flink_lib(version)), "sql-classes", version, "SqlJob.class",
                    resources=SQL_DIR / "resources")  # the table factory's service file


KRYO_DIR = HERE / "kryo"


def _kryo_classes(version: str) -> Path:
    """flinkjobs/kryo/*.java (KryoWire, KryoUpgradeJob) compiled with the version's compat/ shim."""
    return _compile(sorted(KRYO_DIR.glob("*.java")) + sorted(compat_dir(version).glob("*.java")), classpath(flink_lib(version)),
                    "kryo-classes", version, "KryoWire.class")


def _run_kryo(main: str, args: list[str], what: str, version: str, timeout: float) -> str:
    cp = classpath(flink_lib(version))
    cmd = ["java", *JVM_FLAGS, "-Dlog4j2.level=ERROR", "-cp", os.pathsep.join([str(_kryo_classes(version)), *map(str, cp)]), main, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"Flink {version} {what} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


def kryo_upgrade_savepoint(out: Path, n: int = 60, backend: str = "hashmap", version: str | None = None,
                           timeout: float = 900) -> Path:
    """flinkjobs/kryo/KryoUpgradeJob.java on Flink `version` (default 1.20: state Flink 1.x gives to Kryo 2) and `backend`:
    records 0..n-1, then a CANONICAL savepoint; returns out, holding savepoint/ and dump.txt (the state the job held)."""
    version = resolve(version or "1.20")
    out = Path(out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    _run_kryo("KryoUpgradeJob", ["gen", str(out), str(n), backend], "Kryo upgrade job", version, timeout)
    return out


def kryo_upgrade_restore(savepoint: Path, out_file: Path, backend: str = "hashmap", version: str | None = None,
                         states: tuple[str, ...] = (), timeout: float = 900) -> list[str]:
    """Restore KryoUpgradeJob (its states, or only `states`) from savepoint on Flink `version` (default 2.3) and dump every
    key's state as the job's gen wrote dump.txt; the dump's lines (a RuntimeError with Flink's output when it fails)."""
    version = resolve(version)
    args = ["restore", str(Path(savepoint).resolve()), str(Path(out_file).resolve()), backend, *states]
    _run_kryo("KryoUpgradeJob", args, "Kryo upgrade restore", version, timeout)
    return Path(out_file).read_text(encoding="utf-8").splitlines()


def kryo_wire(out: Path, version: str | None = None, timeout: float = 300) -> Path:
    """flinkjobs/kryo/KryoWire.java on Flink `version`: every Kryo wire form flinkstate decodes, serialized by that
    version's own KryoSerializer (Kryo 2.24 in 1.x, 5.6 in 2.x), one JSON line each with its bytes and the value
    (and per group the serializer's snapshot), written to out."""
    version = resolve(version)
    out = Path(out).resolve()
    _run_kryo("KryoWire", ["gen", str(out)], "KryoWire", version, timeout)
    return out


def kryo_read(lines: list[tuple[str, str, bytes]], version: str | None = None, timeout: float = 300) -> list[str]:
    """What Flink `version`'s own KryoSerializer reads from bytes: per (group, name, bytes) of KryoWire's groups, the value
    rendered as KryoWire renders it ("... LEFT n" when n bytes were not read, "ERROR: ..." when it fails)."""
    import tempfile

    version = resolve(version)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.tsv", Path(tmp) / "out.tsv"
        src.write_text("".join(f"{g}\t{n}\t{b.hex()}\n" for g, n, b in lines), encoding="utf-8")
        _run_kryo("KryoWire", ["read", str(src), str(dst)], "KryoWire read", version, timeout)
        return [line.split("\t", 2)[2] for line in dst.read_text(encoding="utf-8").splitlines()]


def sql_classpath(lib: Path) -> list[Path]:
    """flink-dist, the table API, planner loader and runtime, and log4j: what a SQL job runs on."""
    return classpath(lib) + sorted(p for p in lib.glob("*.jar") if p.name.startswith(_TABLE_JARS))


def run_sql_job(args: list[str], timeout: float = 900, version: str | None = None, main: str = "SqlJob") -> str:
    """Run flinkjobs/sql/<main>.java (SqlJob, SqlOpsJob, SqlStateDump) on Flink `version` with `args`; its standard output."""
    version = resolve(version)
    lib = flink_lib(version)
    cp = os.pathsep.join([str(compile_sql_job(version))] + [str(p) for p in sql_classpath(lib)])
    cmd = ["java", *JVM_FLAGS, "-Dlog4j2.level=ERROR", "-cp", cp, main, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"Flink {version} SQL job failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


SQL_QUERIES = ("agg", "agg_ttl", "dedup", "dedup_last", "join", "window", "gwindow", "topn")


def sql_savepoint(query: str, out: Path, rows: int = 2000, rate: int = 200, backend: str = "hashmap", fmt: str = "canonical",
                  parallelism: int = 2, wait: int = 40, version: str | None = None, timeout: float = 900) -> Path:
    """Run SqlJob's query (SQL_QUERIES) from its compiled plan until `wait` changelog rows came, then stop it with a
    savepoint (fmt canonical or native, no drain): returns out, holding savepoint/ (its state produced exactly the rows
    of changelog.txt), plan.json (what the job ran), changelog.txt (every sink row with its kind, "+U[k2, 11, 33]", in
    order), emitted.txt (the changelog folded to its current rows, sorted) and statement.sql (the INSERT compiled)."""
    out = Path(out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    run_sql_job(["savepoint", query, str(out), str(rows), str(rate), backend, fmt, str(parallelism), str(wait)], timeout, version)
    (taken,) = (out / "savepoint-dir").iterdir()
    taken.rename(out / "savepoint")
    (out / "savepoint-dir").rmdir()
    (out / "savepoint.txt").unlink()
    return out


def sql_restore(query: str, savepoint: Path, plan: Path, out: Path, backend: str = "hashmap", parallelism: int = 2,
                version: str | None = None, initial: Path | None = None, timeout: float = 900) -> Path:
    """Restore the SQL job run from `plan` (the plan.json of sql_savepoint: the same operators and uids) from `savepoint`
    (Flink's or one flinkstate exported) and run it to the end of its bounded input: returns out, holding changelog.txt
    (the rows the restored job emitted, with their kinds) and emitted.txt (`initial`, an emitted.txt, plus that changelog
    folded to the current rows, sorted; without `initial`, a retraction of a row emitted before the savepoint is ignored)."""
    out = Path(out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    args = ["restore", query, str(out), str(Path(plan).resolve()), backend, str(parallelism), str(Path(savepoint).resolve())]
    if initial is not None:
        args.append(str(Path(initial).resolve()))
    run_sql_job(args, timeout, version)
    return out


SQL_OPS_SETS = ("plain", "minibatch")


def sql_ops_savepoint(set_name: str, out: Path, rows: int = 60, rate: int = 100, backend: str = "hashmap", parallelism: int = 2,
                      version: str | None = None, timeout: float = 900) -> Path:
    """Run SqlOpsJob's statement set `set_name` (SQL_OPS_SETS: every stateful SQL operator, from its compiled plan) until
    its sources are past `rows`, then stop it with a savepoint: returns out, holding savepoint/ (CANONICAL on hashmap,
    NATIVE on rocksdb), plan.json, queries.json (each query's sink and statement, and whether Flink compiled it) and
    dump.jsonl (SqlStateDump of a canonical savepoint of that state: on rocksdb one taken just before the native one)."""
    out = Path(out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    run_sql_job(["savepoint", set_name, str(out), str(rows), str(rate), backend, str(parallelism)], timeout, version, "SqlOpsJob")
    (taken,) = (out / "savepoint-dir").iterdir()
    taken.rename(out / "savepoint")
    (out / "savepoint-dir").rmdir()
    (out / "savepoint.txt").unlink()
    canonical = out / "savepoint"
    if backend == "rocksdb":
        (canonical,) = (out / "canonical-dir").iterdir()
        (out / "canonical.txt").unlink()
    sql_state_dump(canonical, out / "dump.jsonl", version)
    shutil.rmtree(out / "canonical-dir", ignore_errors=True)
    shutil.rmtree(out / "flush-dir", ignore_errors=True)
    return out


def sql_ops_restore(set_name: str, savepoint: Path, plan: Path, out: Path, backend: str = "hashmap", parallelism: int = 2,
                    seconds: int = 5, rows: int = 60, rate: int = 100, version: str | None = None, timeout: float = 900) -> Path:
    """Restore SqlOpsJob's plan from savepoint (Flink's or an exported one), run it `seconds`, and stop it with a canonical
    savepoint: returns that savepoint (a restore Flink refuses raises, with Flink's error)."""
    out = Path(out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    run_sql_job(["restore", set_name, str(out), str(Path(plan).resolve()), backend, str(parallelism), str(Path(savepoint).resolve()),
                 str(seconds), str(rows), str(rate)], timeout, version, "SqlOpsJob")
    (taken,) = (out / "savepoint-dir").iterdir()
    return taken


def sql_state_dump(savepoint: Path, out: Path, version: str | None = None) -> Path:
    """SqlStateDump: every keyed state entry and timer of a canonical savepoint as Flink's own serializers read it (JSON lines)."""
    run_sql_job([str(Path(savepoint).resolve()), str(Path(out).resolve())], 600, version, "SqlStateDump")
    return Path(out)


def java_command(main: str, args: list[str], version: str | None = None, props: dict[str, object] | None = None,
                 jvm: tuple[str, ...] = ()) -> list[str]:
    """The java command line running class main of the compiled jobs on the version's Flink jars (jvm: extra JVM options)."""
    version = resolve(version)
    classes = compile_job(version)
    cp = os.pathsep.join([str(classes)] + [str(p) for p in classpath(flink_lib(version))])
    return ["java", *JVM_FLAGS, *jvm, "-Dlog4j2.level=ERROR", *(f"-Dflinkstate.{k}={v}" for k, v in (props or {}).items()),
            "-cp", cp, main, *args]


def run_job(
    out: Path, n: int = 100, variants: tuple[str, ...] = VARIANTS, timeout: float = 600, props: dict[str, object] | None = None,
    version: str | None = None,
) -> None:
    """Run the generator job on Flink `version` (default the newest): OUT/<variant>/savepoint and OUT/<variant>/expected.jsonl.

    props sets the job's system properties flinkstate.keys / skeys / rate (distinct keys, records/s), and
    conf extra Flink settings ("key=value;key=value").
    """
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for v in variants:
        shutil.rmtree(out / v, ignore_errors=True)
    cmd = java_command("StateGenJob", [str(out), str(n), *variants], version, props)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"Flink {resolve(version)} job failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


def restore_and_dump(savepoint: Path, out_file: Path, backend: str = "hashmap", parallelism: int = 1,
                     uids: tuple[str, ...] = (), timeout: float = 600, version: str | None = None) -> list[str]:
    """Restore savepoint in RestoreDumpJob on Flink `version` (StateGenJob's states; uids = long-keyed, string-keyed overrides); its dump lines."""
    args = [str(Path(savepoint).resolve()), str(Path(out_file).resolve()), backend, str(parallelism), *uids]
    _run_java("RestoreDumpJob", args, "restore job", timeout, version)
    return Path(out_file).read_text(encoding="utf-8").splitlines()


def _run_java(main: str, args: list[str], what: str, timeout: float, version: str | None = None,
              props: dict[str, object] | None = None, jvm: tuple[str, ...] = ()) -> str:
    """Run class main of the compiled jobs; its standard output, or RuntimeError with the end of its output when it fails."""
    proc = subprocess.run(java_command(main, args, version, props, jvm), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"Flink {resolve(version)} {what} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


# The resave job's memory: a capped heap (the restore streams the snapshot) and RocksDB's managed memory, off heap.
RESAVE_HEAP = "2g"
RESAVE_MANAGED = "512m"


def resave(src: Path, out: Path, variants: tuple[str, ...] = ("rocksdb",), timeout: float = 3600, version: str | None = None,
           props: dict[str, object] | None = None) -> dict[str, Path]:
    """Real Flink restores `src` (a savepoint or retained checkpoint of StateGenJob, any format and backend) in
    StateGenJob's topology on each variant's backend and at once, with no new record, takes the variant's snapshot:
    {variant: OUT/<variant>/savepoint, or OUT/<variant>/checkpoint for a checkpoint variant}, the same state as src.

    Why: a production-size RocksDB snapshot written record by record (run_job) takes over an hour on 2 cores; restoring
    the canonical one into RocksDB and saving it takes minutes. variants as run_job's (rocksdb: a NATIVE savepoint of
    incremental RocksDB, rocksdb-full: non-incremental, rocksdb-checkpoint: a retained incremental checkpoint, files:
    CANONICAL...); props as run_job's (keys/skeys only matter to new records; parallelism, maxp, window_maxp must be
    src's). The JVM's heap is RESAVE_HEAP, RocksDB's managed memory RESAVE_MANAGED (Flink 1.19+ only: the job's
    idle source needs a rate limiter 1.18 lacks).
    """
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for v in variants:
        shutil.rmtree(out / v, ignore_errors=True)
    conf = f"taskmanager.memory.managed.size={RESAVE_MANAGED}"
    props = {"conf": conf, **(props or {})}
    _run_java("StateGenJob", ["resave", str(Path(src).resolve()), str(out), *variants], "resave job", timeout, version,
              props, (f"-Xmx{RESAVE_HEAP}",))
    return {v: out / v / ("checkpoint" if v.endswith("checkpoint") else "savepoint") for v in variants}


def max_parallelism_savepoint(out: Path, n: int = 300, timeout: float = 900) -> Path:
    """MaxParallelismJob on Flink 2.3: three operators of max parallelism 128 (derived), 256 (derived from parallelism 86)
    and 4096 (set explicitly); returns the CANONICAL savepoint OUT/savepoint."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "savepoint", ignore_errors=True)
    _run_java("MaxParallelismJob", ["gen", str(out), str(n)], "max-parallelism job", timeout)
    return out / "savepoint"


def max_parallelism_restore(savepoint: Path, out_file: Path, backend: str, parallelism: tuple[int, int, int],
                            timeout: float = 900) -> list[str]:
    """Restore MaxParallelismJob's operators at (derived, derived256, explicit) parallelisms; the dump's lines."""
    args = ["restore", str(Path(savepoint).resolve()), str(Path(out_file).resolve()), backend, *map(str, parallelism)]
    _run_java("MaxParallelismJob", args, "max-parallelism restore", timeout)
    return Path(out_file).read_text(encoding="utf-8").splitlines()


def skew_savepoint(out: Path, n: int = 4000, timeout: float = 900) -> Path:
    """SkewJob on Flink 2.3: a keyed operator where three hot keys get 80% of the records; returns the CANONICAL
    savepoint OUT/savepoint."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "savepoint", ignore_errors=True)
    _run_java("SkewJob", [str(out), str(n)], "skew job", timeout)
    return out / "savepoint"


def production_run(out: Path, n: int, backend: str, incremental: bool, snappy: bool, snapshots: tuple[str, ...],
                   version: str | None = None, timeout: float = 900) -> Path:
    """ProductionJob (flinkjobs/src/ProductionJob.java) on `backend` (hashmap, rocksdb, forst): OUT/<snapshot>/savepoint for
    snapshots canonical and native, OUT/checkpoint (the retained checkpoint folder) for checkpoint, and OUT/dump.txt."""
    out = Path(out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    args = ["gen", str(out), str(n), backend, str(incremental).lower(), str(snappy).lower(), *snapshots]
    _run_java("ProductionJob", args, "production job", timeout, version)
    return out


def production_restore(savepoint: Path, out_file: Path, backend: str, parallelism: int, wide_parallelism: int,
                       version: str | None = None, timeout: float = 900) -> list[str]:
    """Restore ProductionJob's operators from savepoint (at parallelism; "wide" at wide_parallelism); the dump's lines."""
    args = ["restore", str(Path(savepoint).resolve()), str(Path(out_file).resolve()), backend, str(parallelism), str(wide_parallelism)]
    _run_java("ProductionJob", args, "production restore", timeout, version)
    return Path(out_file).read_text(encoding="utf-8").splitlines()


def datastream_states(out: Path, n: int = 60, backend: str = "hashmap", parallelism: int = 2,
                      formats: tuple[str, ...] = ("canonical", "native"), version: str | None = None, timeout: float = 900) -> Path:
    """DataStreamStatesJob (flinkjobs/src/DataStreamStatesJob.java): one state per serializer category Flink's DataStream
    operators and user functions put in state, records 0..n-1 on `backend` at `parallelism`; OUT/<format>/savepoint for
    each of formats (canonical, native)."""
    out = Path(out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    _run_java("DataStreamStatesJob", ["gen", str(out), str(n), backend, str(parallelism), *formats], "DataStream states job", timeout,
              version)
    return out


def datastream_dump(savepoint: Path, out_file: Path, backend: str = "hashmap", parallelism: int = 2, version: str | None = None,
                    timeout: float = 900) -> list[str]:
    """Real Flink restores DataStreamStatesJob's savepoint (its own, or one flinkstate exported) and dumps every state of
    every operator with the serializers the savepoint's snapshots restore: JSON lines, sorted."""
    args = ["dump", str(Path(savepoint).resolve()), str(Path(out_file).resolve()), backend, str(parallelism)]
    _run_java("DataStreamStatesJob", args, "DataStream states dump", timeout, version)
    return Path(out_file).read_text(encoding="utf-8").splitlines()


def datastream_enum_key(version: str | None = None, timeout: float = 300) -> str:
    """What Flink answers when a stream is keyed by an enum: "REFUSED <exception>" or "ACCEPTED"."""
    return _run_java("DataStreamStatesJob", ["enumkey"], "enum key check", timeout, version).strip().splitlines()[-1]


SOURCES_DIR = HERE / "sources"
KAFKA_DIR = HERE / "kafka"
# flink-connector-kafka with kafka-clients, from a package that redistributes Flink's connector jars (connector 4.0.1-2.0,
# built for Flink 2.0; its serializers write the same bytes on 2.x). Only these two jars are kept.
KAFKA_PACKAGE = "shigawire-apache-flink-libraries==2.0.0.post1"
KAFKA_JARS = ("flink-connector-kafka.jar", "kafka-clients.jar")


def sources_classpath(version: str | None = None) -> list[Path]:
    """flink-dist, flink-connector-files and log4j: what the FileSource job runs on."""
    lib = flink_lib(version)
    return classpath(lib) + sorted(lib.glob("flink-connector-files-*.jar"))


def _run_main(main: str, classpath_: list[Path], args: list[str], what: str, timeout: float) -> str:
    """Run class main on classpath_ with args; its standard output, or RuntimeError with the end of its output."""
    cmd = ["java", *JVM_FLAGS, "-Dlog4j2.level=ERROR", "-cp", os.pathsep.join(map(str, classpath_)), main, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} {main} {args[:1]} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


def run_source_job(args: list[str], version: str | None = None, timeout: float = 600) -> str:
    """Run flinkjobs/sources/FileSourceJob.java on Flink `version` with args; its standard output."""
    version = resolve(version)
    cp = sources_classpath(version)
    classes = _compile(sorted(SOURCES_DIR.glob("*.java")), cp, "sources-classes", version, "FileSourceJob.class")
    return _run_main("FileSourceJob", [classes, *cp], args, f"Flink {version}", timeout)


LEGACY_KAFKA_DIR = HERE / "legacykafka"


def run_legacy_kafka_job(args: list[str], version: str = "1.20", timeout: float = 600) -> str:
    """Run flinkjobs/legacykafka/LegacyKafkaJob.java (the legacy FlinkKafkaConsumer's union state, Flink 1.x) with args."""
    version = resolve(version)
    cp = classpath(flink_lib(version))
    classes = _compile(sorted(LEGACY_KAFKA_DIR.glob("*.java")), cp, "legacykafka-classes", version, "LegacyKafkaJob.class")
    return _run_main("LegacyKafkaJob", [classes, *cp], args, f"Flink {version}", timeout)


def kafka_lib() -> Path:
    """The Kafka connector and kafka-clients jars, downloaded once with pip into the cache (only those two kept)."""
    env = os.environ.get("FLINKSTATE_FLINK_CACHE")
    lib = (Path(env) if env else Path.home() / ".cache" / "flinkstate") / "kafka-connector" / "lib"
    if all((lib / j).exists() for j in KAFKA_JARS):
        return lib
    dl = lib.parent / "download"
    dl.mkdir(parents=True, exist_ok=True)
    if not any(dl.glob("*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dl), KAFKA_PACKAGE], check=True)
    lib.mkdir(parents=True, exist_ok=True)
    for wheel in dl.glob("*.whl"):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                base = name.rpartition("/")[2]
                if name.startswith("pyflink/lib/") and base in KAFKA_JARS and not (lib / base).exists():
                    (lib / (base + ".tmp")).write_bytes(z.read(name))
                    (lib / (base + ".tmp")).rename(lib / base)
    shutil.rmtree(dl)
    missing = [j for j in KAFKA_JARS if not (lib / j).exists()]
    if missing:
        raise RuntimeError(f"{KAFKA_PACKAGE} holds no {missing}")
    return lib


def run_kafka_serde(args: list[str], extra_classes: Path | None = None, timeout: float = 300) -> str:
    """Run flinkjobs/kafka/KafkaSerde.java (the Kafka connector's own serializers) on Flink 2.3's flink-dist; its output.

    extra_classes: a folder of classes put before the connector jar (a newer connector's serializers compiled from its
    source, `tests/fixtures/make_source_fixture.py kafka5`)."""
    version = resolve(None)
    kafka = kafka_lib()
    cp = classpath(flink_lib(version)) + [kafka / j for j in KAFKA_JARS]
    classes = _compile(sorted(KAFKA_DIR.glob("*.java")), cp, "kafka-classes", version, "KafkaSerde.class")
    return _run_main("KafkaSerde", [classes, *([extra_classes] if extra_classes else []), *cp], args, "Kafka connector", timeout)


def shapes_run(out: Path, n: int, backend: str, snapshots: tuple[str, ...] = ("canonical",), version: str | None = None,
               timeout: float = 900) -> Path:
    """ShapesJob (flinkjobs/src/ShapesJob.java: Tuple, POJO, enum, Row and Kryo values in keyed, operator, union and
    broadcast state) on `backend` (hashmap, rocksdb): OUT/<snapshot>/savepoint for snapshots canonical and native, and
    OUT/dump.txt (the state the job held, as lines)."""
    out = Path(out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    _run_java("ShapesJob", ["gen", str(out), str(n), backend, *snapshots], "shapes job", timeout, version)
    return out


def shapes_restore(savepoint: Path, out_file: Path, backend: str = "hashmap", parallelism: int = 2, version: str | None = None,
                   timeout: float = 900) -> list[str]:
    """Restore ShapesJob's operators from savepoint at parallelism on backend; the dump's lines (sorted)."""
    args = ["restore", str(Path(savepoint).resolve()), str(Path(out_file).resolve()), backend, str(parallelism)]
    _run_java("ShapesJob", args, "shapes restore", timeout, version)
    return Path(out_file).read_text(encoding="utf-8").splitlines()


def main(argv: list[str]) -> int:
    """Command line: OUT_DIR [N] [variants...] [name=value job properties]."""
    if not argv:
        print(__doc__)
        return 2
    n = int(argv[1]) if len(argv) > 1 else 100
    named = dict(a.partition("=")[::2] for a in argv[2:] if "=" in a)
    version = named.pop("version", None)
    props: dict[str, object] = {k: int(v) if v.isdigit() else v for k, v in named.items()}  # conf=... stays text
    variants = tuple(a for a in argv[2:] if "=" not in a) or VARIANTS
    run_job(Path(argv[0]), n, variants, props=props, version=version)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
