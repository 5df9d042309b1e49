"""`flinkstate import|export` as Spark jobs (flink_jobs): one task per Flink subtask gives what the single-process run gives.

Import: the same rows per keyed state, timer service, operator state and coordinator, the same declarations and
properties, one Delta commit. Export: the same keyed files byte for byte and the same `_metadata` apart from file
names. A failing task leaves nothing committed (import) and no savepoint (export); one real Flink restore of a
savepoint imported and exported with `--spark`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from fsc_helpers import flink_harness
from production_matrix import snapshot

import flinkstate as fs
from flinkstate.cli import main
from flinkstate.flink.bridge.importer import import_savepoint as import_local
from flinkstate.flink.bridge.store_export import export_savepoint as export_local
from flinkstate.flink.meta.metadata import read_metadata
from flinkstate.flink.meta.names import operator_name
from pyspark_flinkstate.flink_jobs import export_savepoint, import_savepoint

pytestmark = [pytest.mark.spark]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCES = {
    "canonical-files": FIXTURES / "flink-2.3-canonical" / "files" / "savepoint",
    "rocksdb-native": FIXTURES / "flink-2.3-rocksdb" / "rocksdb" / "savepoint",
    "rocksdb-incremental": FIXTURES / "flink-2.3-rocksdb" / "rocksdb-checkpoint" / "checkpoint",
    "skew": FIXTURES / "flink-2.3-skew" / "savepoint",
    "production-rocksdb": ("2.3", "rocksdb-full", "native"),  # Kryo state, operators at max parallelism 4096 and 256
}


def _source(name: str, work: Path) -> Path:
    src = SOURCES[name]
    return snapshot(src, work)[0] if isinstance(src, tuple) else src  # type: ignore[arg-type]


def _canonical(t: Any) -> tuple[str, list[str]]:
    """A table as its schema and its rows sorted (order-free comparison, nested values included)."""
    return str(t.schema), sorted(repr(r) for r in t.to_pylist())


def _contents(root: Path) -> dict[Any, Any]:
    """Everything a read of the latest checkpoint gives: declarations, properties, and every state's rows."""
    store = fs.open(str(root))
    ck = store.checkpoint()
    out: dict[Any, Any] = {"properties": dict(ck.metadata.properties)}
    for uid, op in ck.operators.items():
        out[(uid, "operator")] = op.to_dict()
        for name in op.keyed_states:
            out[(uid, "keyed", name)] = _canonical(ck.scan(uid, name, raw=True).to_arrow())
        for name in op.timer_services:
            out[(uid, "timers", name)] = _canonical(ck.scan_timers(uid, name).to_arrow())
        for name in op.operator_states:
            out[(uid, "operator state", name)] = _canonical(ck.scan_operator_state(uid, name).to_arrow())
        if op.has_coordinator:
            out[(uid, "coordinator")] = _canonical(ck.scan_coordinator(uid).to_arrow())
    return out


def _report(r: Any) -> tuple[Any, ...]:
    return r.checkpoint_id, r.entries, sorted(r.ttl_unknown), r.as_bytes


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_spark_import_equals_the_single_process_import(name: str, spark, tmp_path: Path) -> None:
    src = _source(name, tmp_path / "cells")
    if "checkpoint" in src.name:  # a job's checkpoint folder: its chk-N
        src = next(src.glob("chk-*"))
    kw: dict[str, Any] = {"ttl": {"ttl": 60_000}} if name in ("canonical-files", "rocksdb-native", "rocksdb-incremental") else {}
    local = import_local(src, tmp_path / "local", **kw)
    got = import_savepoint(spark, src, tmp_path / "spark", **kw)
    assert _report(got) == _report(local) and got.total > 0
    assert _contents(tmp_path / "spark") == _contents(tmp_path / "local")
    # one Delta commit each: the same log versions, one savepoint
    a, b = fs.open(str(tmp_path / "spark")), fs.open(str(tmp_path / "local"))
    assert a.catalog.log_version() == b.catalog.log_version()
    assert [c.checkpoint_id for c in a.checkpoints()] == [got.checkpoint_id]
    # as many Spark tasks as Flink subtask handles with keyed state: each range's files written by one task
    meta = read_metadata(str(src))
    ranges = {(operator_name(op, ()), s.managed_keyed.start) for op in meta.operators for s in op.subtasks if s.managed_keyed is not None}
    files = [e for e in a.checkpoint().entries if e.kind == "full"]
    assert {(e.operator, e.key_group_start) for e in files} == ranges


def _normalized_metadata(folder: Path) -> bytes:
    """`_metadata` with the random names of the state files blanked (the only difference two exports may have)."""
    return re.sub(rb"[0-9a-f]{32}", b"#" * 32, (folder / "_metadata").read_bytes())


def _files(folder: Path) -> list[bytes]:
    return sorted(p.read_bytes() for p in folder.iterdir() if p.name != "_metadata")


@pytest.mark.parametrize("name", ["canonical-files", "production-rocksdb"])
def test_spark_export_equals_the_single_process_export(name: str, spark, tmp_path: Path) -> None:
    root = tmp_path / "root"
    import_local(_source(name, tmp_path / "cells"), root)
    local = Path(export_local(str(root), tmp_path / "local", compression=True))
    got = Path(export_savepoint(spark, str(root), tmp_path / "spark", compression=True))
    assert got == tmp_path / "spark" and not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert _normalized_metadata(got) == _normalized_metadata(local)
    assert _files(got) == _files(local)  # every keyed file and operator-state file byte for byte
    # and the export decodes to the root's states (the savepoint imported again holds the same rows)
    import_local(got, tmp_path / "again")
    keyed = {k: v for k, v in _contents(tmp_path / "again").items() if k != "properties" and k[1] != "operator"}
    assert keyed == {k: v for k, v in _contents(root).items() if k != "properties" and k[1] != "operator"}


def test_cli_import_and_export_with_spark(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = SOURCES["canonical-files"]
    assert main(["import", str(src), str(tmp_path / "root"), "--ttl", "ttl=60000", "--json", "--spark"]) == 0
    report = json.loads(capsys.readouterr().out)
    local = import_local(src, tmp_path / "local", ttl={"ttl": 60_000})
    assert report["entries"] == local.entries and report["checkpoint_id"] == local.checkpoint_id
    assert main(["export", str(tmp_path / "root"), str(tmp_path / "sp"), "--spark"]) == 0
    assert "wrote Flink 2.3 savepoint" in capsys.readouterr().out
    export_local(str(tmp_path / "local"), tmp_path / "sp-local")
    assert _normalized_metadata(tmp_path / "sp") == _normalized_metadata(tmp_path / "sp-local")


def test_a_failing_import_task_commits_nothing(spark, tmp_path: Path) -> None:
    src = tmp_path / "damaged"
    shutil.copytree(SOURCES["canonical-files"], src)
    meta = read_metadata(str(src))
    op = next(o for o in meta.operators if sum(s.managed_keyed is not None for s in o.subtasks) > 1)
    last = [s for s in op.subtasks if s.managed_keyed is not None][-1]
    path = Path(last.managed_keyed.stream.location(meta.directory))
    intact = path.read_bytes()
    path.write_bytes(intact[: len(intact) * 2 // 3])  # the header stays, the last key groups are cut off
    root = tmp_path / "root"
    with pytest.raises(Exception, match="CorruptFileError"):
        import_savepoint(spark, src, root, ttl={"ttl": 60_000})
    assert not fs.open(str(root)).checkpoints()
    # files tasks wrote before the failure are referenced by nothing: the import done again reads exactly as it should
    path.write_bytes(intact)
    import_savepoint(spark, src, root, ttl={"ttl": 60_000})
    import_local(src, tmp_path / "local", ttl={"ttl": 60_000})
    assert _contents(root) == _contents(tmp_path / "local")


def test_a_failing_export_task_leaves_no_savepoint(spark, tmp_path: Path) -> None:
    root = tmp_path / "root"
    import_local(SOURCES["canonical-files"], root, ttl={"ttl": 60_000})
    ck = fs.open(str(root)).checkpoint()
    files = [e for e in ck.entries if e.kind == "full" and e.rows > 0]
    victim = max(files, key=lambda e: e.key_group_start)  # not the first subtask's range
    (root / victim.path).write_bytes(b"not parquet" * 10)
    with pytest.raises(Exception, match=re.escape(victim.path.rsplit("/", 1)[-1]) + "|Corrupt|Parquet"):
        export_savepoint(spark, str(root), tmp_path / "sp")
    assert not (tmp_path / "sp").exists()
    assert sorted(os.listdir(tmp_path)) == ["root"]  # no temporary folder left beside the destination


@pytest.mark.flink
@pytest.mark.slow
def test_spark_imported_and_exported_savepoint_restores_in_flink(spark, tmp_path: Path) -> None:
    """One real Flink run: the production job's RocksDB savepoint, imported and exported with `--spark`, restores on
    HashMap at other parallelisms to the job's exact dump (Kryo values, max parallelism 4096 and 256 included)."""
    path, dump = snapshot(SOURCES["production-rocksdb"], tmp_path / "cells")  # type: ignore[arg-type]
    assert main(["import", str(path), str(tmp_path / "root"), "--spark"]) == 0
    assert main(["export", str(tmp_path / "root"), str(tmp_path / "sp"), "--spark"]) == 0
    restored = flink_harness().production_restore(tmp_path / "sp", tmp_path / "restored.txt", "hashmap", 3, 5, version="2.3")
    assert restored == sorted(dump)
