"""`flinkstate import`: a real Flink savepoint becomes a flinkstate savepoint with the same entries, key groups and TTL times."""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
from pathlib import Path
from typing import Any

import flinkstate as fs
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from flink_dump import KEYED_OPERATORS, OPERATOR_STATES
from flink_dump import flink_entries as _flink_entries
from flink_dump import store_entries as _store_entries
from flinkstate.cli import main
from flinkstate.core.errors import CorruptFileError
from flinkstate.flink import read_metadata, read_operator_state
from flinkstate.flink.bridge.export_task import chunk_ranges
from flinkstate.flink.bridge.export_task import run_local as export_run_local
from flinkstate.flink.bridge.import_task import run_local
from flinkstate.flink.bridge.importer import import_savepoint, plan_import, run_import
from flinkstate.flink.bridge.store_export import (
    export_savepoint,
    plan_export,
    run_export,
)
from flinkstate.flink.files.key_group_ranges import key_group_chunks
from flinkstate.read.scan import WholeChunks

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SAVEPOINTS = {
    "canonical-files": FIXTURES / "flink-2.3-canonical" / "files" / "savepoint",
    "canonical-inline": FIXTURES / "flink-2.3-canonical" / "inline" / "savepoint",
    "canonical-snappy": FIXTURES / "flink-2.3-canonical" / "snappy" / "savepoint",
    "heap-native": FIXTURES / "flink-2.3-native" / "native" / "savepoint",
    "heap-checkpoint": FIXTURES / "flink-2.3-native" / "checkpoint" / "checkpoint",
    "rocksdb-native": FIXTURES / "flink-2.3-rocksdb" / "rocksdb" / "savepoint",
    "rocksdb-incremental": FIXTURES / "flink-2.3-rocksdb" / "rocksdb-checkpoint" / "checkpoint",
}


def _import(src: Path, root: Path) -> Any:
    if "checkpoint" in src.name:  # a job's checkpoint folder: chk-N inside
        src = next(src.glob("chk-*"))
    return import_savepoint(src, root, ttl={"ttl": 60_000}, raw_values=True)


@pytest.mark.parametrize("variant", sorted(SAVEPOINTS))
def test_import_keeps_every_entry(variant: str, tmp_path: Path) -> None:
    src = SAVEPOINTS[variant]
    report = _import(src, tmp_path / "root")
    meta = read_metadata(str(next(src.glob("chk-*")) if "checkpoint" in src.name else src))
    store = fs.open(str(tmp_path / "root"))
    info = store.checkpoint()
    assert info.kind == "savepoint" and info.checkpoint_id == report.checkpoint_id
    total = 0
    for uid in KEYED_OPERATORS:
        want, got = _flink_entries(meta, uid), _store_entries(store, uid)
        assert set(got) == set(want), uid
        for name in want:
            assert got[name] == want[name], (uid, name)
            total += len(want[name])
        assert store.metadata().operators[uid].parallelism == meta.operator(uid).parallelism
    for uid, names in OPERATOR_STATES.items():
        for name in names:
            flink = read_operator_state(meta, uid, name)
            assert sorted(store.read_operator_state(uid, name).to_pylist(), key=str) == sorted(flink.to_pylist(), key=str), (uid, name)
    assert total > 500
    # a TTL duration given for a state is kept; the ones not given never expire but keep their timestamps
    d = store.state_descriptor("long-keyed", "ttl")
    assert d.ttl is not None and d.ttl.ttl_ms == 60_000
    assert "long-keyed/ttl_list" in report.ttl_unknown


def test_import_then_export_decodes_the_same(tmp_path: Path) -> None:
    """import → export with no change: Flink's reader sees the same entries, operator ids and parallelism."""
    src = SAVEPOINTS["canonical-files"]
    import_savepoint(src, tmp_path / "root", raw_values=True)
    dest = export_savepoint(str(tmp_path / "root"), str(tmp_path / "sp"))
    a, b = read_metadata(str(src)), read_metadata(dest)
    for uid in KEYED_OPERATORS:
        assert _flink_entries(b, uid) == _flink_entries(a, uid), uid
        assert b.operator(uid).operator_id == a.operator(uid).operator_id
    for uid, names in OPERATOR_STATES.items():
        for name in names:
            assert sorted(read_operator_state(b, uid, name).to_pylist(), key=str) == sorted(read_operator_state(a, uid, name).to_pylist(), key=str)


def test_cli_import_and_describe(tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(["import", str(SAVEPOINTS["canonical-snappy"]), str(tmp_path / "root"), "--ttl", "long-keyed/ttl=60000", "--raw-values"], out=out) == 0
    text = out.getvalue()
    assert "imported" in text and "savepoint 1" in text and "ttl_list" in text, text
    out = io.StringIO()
    assert main(["describe", str(tmp_path / "root")], out=out) == 0
    assert "operator long-keyed (parallelism 2, max parallelism 128)" in out.getvalue() and "60000 ms" in out.getvalue()


def test_import_of_a_job_checkpoint_folder_takes_the_latest_or_named(tmp_path: Path) -> None:
    job = tmp_path / "job"
    src = SAVEPOINTS["heap-checkpoint"]
    chk = next(src.glob("chk-*"))
    shutil.copytree(chk, job / "chk-7")
    out = io.StringIO()
    assert main(["import", str(job), str(tmp_path / "root"), "--json"], out=out) == 0
    assert '"flink_checkpoint": "' + str(job / "chk-7") in out.getvalue().replace("\\\\", "\\")
    assert main(["import", str(job), str(tmp_path / "root2"), "--flink-checkpoint", "3"], out=io.StringIO()) == 2


def test_corrupt_file_imports_nothing(tmp_path: Path, capsys) -> None:
    sp = tmp_path / "sp"
    shutil.copytree(SAVEPOINTS["canonical-files"], sp)
    meta = read_metadata(str(sp))
    handle = meta.operator("string-keyed").subtasks[1].managed_keyed
    path = sp / os.path.basename(handle.stream.path)
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[: len(data) // 2]))  # truncated: the second keyed operator's last subtask
    store = fs.open(str(tmp_path / "root"))
    with store.begin() as w:
        w.put_state("op", fs.ValueStateDescriptor(name="v", value_type=pa.int64()), pa.table({"key": ["a"], "value": [1]}))
    before = sorted(p for p in (tmp_path / "root").rglob("*"))
    with pytest.raises(CorruptFileError, match=os.path.basename(handle.stream.path)):
        import_savepoint(sp, tmp_path / "root")
    assert [c.checkpoint_id for c in fs.open(str(tmp_path / "root")).checkpoints()] == [1]
    assert main(["import", str(sp), str(tmp_path / "root")], out=io.StringIO()) == 2
    assert "CorruptFileError" in capsys.readouterr().err
    after = sorted(p for p in (tmp_path / "root").rglob("*") if "_delta_log" not in str(p))
    assert [p for p in after if p not in before] == []


def test_import_in_chunks_of_key_groups_keeps_every_entry_and_the_layout(tmp_path: Path) -> None:
    """A subtask imported a few key groups at a time (ranged reads of snappy streams, the same decoder; each chunk's rows
    appended, row groups flushed): the same entries as Flink's reader, and one file per state and subtask range."""
    src = SAVEPOINTS["canonical-snappy"]
    meta = read_metadata(str(src))
    handle = meta.operator("long-keyed").subtasks[0].managed_keyed
    chunk = handle.stream.size // 6
    assert len(key_group_chunks(handle, chunk)) >= 3
    run_import(plan_import(src, tmp_path / "root", ttl={"ttl": 60_000}),
               lambda jobs: run_local([dataclasses.replace(j, chunk_bytes=chunk) for j in jobs]))
    store = fs.open(str(tmp_path / "root"))
    for uid in KEYED_OPERATORS:
        assert _store_entries(store, uid) == _flink_entries(meta, uid), uid
        files = sorted((str(e.state), e.key_group_start, e.key_group_end) for e in store.files() if e.operator == uid)
        ranges = [(s.managed_keyed.start, s.managed_keyed.end) for s in meta.operator(uid).subtasks]
        assert files == sorted((state, *r) for state in {f[0] for f in files} for r in ranges), uid


def test_export_in_chunks_of_key_groups_writes_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subtask's keyed file encoded and appended a few key groups at a time is the file written at once: same bytes,
    same key-group offsets (snappy streams too)."""
    import flinkstate.flink.bridge.export_task as export_task

    import_savepoint(SAVEPOINTS["canonical-files"], tmp_path / "root", raw_values=True)
    ten = chunk_ranges((0, 63), 10_000, 1_000)
    assert len(ten) == 10 and ten[0][0] == 0 and ten[-1][1] == 63 and all(b + 1 == c for (_, b), (c, _) in zip(ten, ten[1:]))
    assert chunk_ranges((5, 6), 10_000, 1) == [(5, 5), (6, 6)] and chunk_ranges((0, 9), 0, 1) == [(0, 9)]
    for kg in ([1, 2, 2, 5, 7], [5, 2, 7, 2, 1]):  # rows sorted by key group are sliced, others selected
        t = pa.table({"key_group": pa.array(kg, pa.int32()), "v": range(5)})
        readers = [((0, 3), WholeChunks(t.filter(pc.less_equal(t["key_group"], 3)))), ((4, 9), WholeChunks(t.filter(pc.greater(t["key_group"], 3))))]
        got = export_task._rows_in(t.schema, readers, 2, 5)  # the tasks meeting 2..5, each for its part
        assert sorted(got.column("v").to_pylist()) == [i for i, k in enumerate(kg) if 2 <= k <= 5]
        assert export_task._rows_in(t.schema, readers, 8, 9).num_rows == 0
    cuts: list[int] = []
    real = export_task.chunk_ranges
    monkeypatch.setattr(export_task, "chunk_ranges", lambda *a: cuts.append(len(real(*a))) or real(*a))
    for compression in (False, True):
        whole = export_savepoint(str(tmp_path / "root"), str(tmp_path / f"whole-{compression}"), compression=compression)
        plan = plan_export(str(tmp_path / "root"), str(tmp_path / f"chunked-{compression}"), compression=compression)
        chunked = run_export(plan, lambda jobs: export_run_local([dataclasses.replace(j, chunk_bytes=1_000) for j in jobs]))
        a, b = read_metadata(whole), read_metadata(chunked)
        for oa, ob in zip(a.operators, b.operators, strict=True):
            for sa, sb in zip(oa.subtasks, ob.subtasks, strict=True):
                ha, hb = sa.managed_keyed, sb.managed_keyed
                if ha is not None:
                    assert ha.offsets.tolist() == hb.offsets.tolist()
                    assert ha.stream.read(a.directory) == hb.stream.read(b.directory), (oa.uid, sa.index)
    assert max(cuts) > 5  # the chunked runs cut subtasks into several chunks
