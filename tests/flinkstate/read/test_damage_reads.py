"""Damage suite for reads: a damaged data file, Delta log or log row is named in a typed error,
never read back as wrong data, and `flinkstate verify` finds it; nothing is deleted or changed.

Every scenario runs on a local root and on s3:// (a moto server).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import flinkstate as fs
from flinkstate.cli import main
from flinkstate.format import constants as C

COUNT = fs.ValueStateDescriptor(name="count", value_type=pa.int64())
OTHER = fs.ValueStateDescriptor(name="other", value_type=pa.int64())
GAP = fs.TimerServiceDescriptor(name="gap")


@pytest.fixture()
def store(where: dict[str, Any]) -> fs.CheckpointStore:
    """Checkpoint 1: state count in two key-group ranges, state other, timers; checkpoint 2: a delta of count."""
    s = fs.open(where["root"], where["storage_options"])
    with s.begin(max_parallelism=32) as w:
        keys = [f"k{i}" for i in range(40)]
        w.put_state("sessions", COUNT, pa.table({"key": keys, "value": list(range(40))}), ranges=[(0, 15), (16, 31)])
        w.put_state("sessions", OTHER, pa.table({"key": keys, "value": list(range(40, 80))}), ranges=[(0, 15), (16, 31)])
        w.put_timers("sessions", GAP, pa.table({"key": ["a"], "timestamp": [5]}))
    with s.begin() as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["c"], "value": [3], "tombstone": [False]}), mode="delta")
    return s


def files_of(store: fs.CheckpointStore) -> dict[str, str]:
    """Every file below the root (relative path -> sha256 of its bytes)."""
    fsys, base = store.io.fs, store.io.fs_path("x")[:-1]
    if store.io.scheme == "s3":
        fsys.invalidate_cache()
        base = base[len("s3://"):]
    return {str(p)[len(base):]: hashlib.sha256(fsys.cat_file(p)).hexdigest() for p in fsys.find(base)}


@pytest.fixture()
def unchanged(store: fs.CheckpointStore) -> Iterator[Any]:
    """Call it after damaging the store: the test then checks no file was deleted or changed."""
    holder: dict[str, Any] = {}
    yield lambda: holder.setdefault("before", files_of(store))
    if "before" in holder:
        after = files_of(store)
        assert not [p for p in holder["before"] if p not in after], "files deleted"
        assert not [p for p in holder["before"] if p in after and after[p] != holder["before"][p]], "files changed"


def read(store: fs.CheckpointStore, rel: str) -> bytes:
    with store.io.open(rel, "rb") as f:
        return bytes(f.read())


def write(store: fs.CheckpointStore, rel: str, data: bytes) -> None:
    """Overwrite a file below the root (the damage)."""
    with store.io.open(rel, "wb") as f:
        f.write(data)
    if store.io.scheme == "s3":
        store.io.fs.invalidate_cache()


def rewrite(store: fs.CheckpointStore, rel: str, change: Any) -> None:
    """Rewrite a data file as a valid Parquet file with the same footer metadata and changed rows."""
    t = pq.read_table(io.BytesIO(read(store, rel)))
    t = change(t).replace_schema_metadata(t.schema.metadata)
    sink = io.BytesIO()
    pq.write_table(t, sink, store_schema=True)
    write(store, rel, sink.getvalue())


def entry(store: fs.CheckpointStore, state: str, kind: str = "full", kg_start: int = 0) -> Any:
    return next(e for e in store.files(1) if e.state == state and e.kind == kind and e.key_group_start == kg_start)


def verify(store: fs.CheckpointStore, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    """Run `flinkstate verify ROOT` and return (exit status, stdout)."""
    opts = [f"--storage-option={k}={v}" for k, v in (store.io.storage_options or {}).items()]
    capsys.readouterr()
    rc = main(["verify", store.root, *opts, *extra])
    return rc, capsys.readouterr().out


def assert_named(store: fs.CheckpointStore, capsys: pytest.CaptureFixture[str], rel: str, problem: str) -> None:
    """A read of the checkpoint raises CorruptFileError naming the file and the problem; verify finds it."""
    name = re.escape(rel.rsplit("/", 1)[1])
    with pytest.raises(fs.CorruptFileError, match=name + r".*" + problem):
        for cid in (1, 2):
            store.read_state("sessions", "count", cid)
            store.read_state("sessions", "other", cid)
            store.read_timers("sessions", "gap", cid)
    with pytest.raises(fs.CorruptFileError, match=name + r".*" + problem):
        for cid in (1, 2):
            read_in_chunks(store, cid)
    rc, out = verify(store, capsys)
    assert rc == 1 and re.search(r"DAMAGED .*" + name + r".*" + problem, out), out
    assert len([line for line in out.splitlines() if line.startswith("DAMAGED")]) == 1, out


def read_in_chunks(store: fs.CheckpointStore, cid: int) -> list[pa.Table]:
    """Every state and timer of a checkpoint read as an export reads them: four key groups at a time (`chunk_reader`)."""
    ck = store.checkpoint(cid)
    out = []
    for scan in (ck.scan("sessions", "count", raw=True), ck.scan("sessions", "other", raw=True), ck.scan_timers("sessions", "gap")):
        parts = []
        for task in scan.plan():
            lo, hi = task.key_group_range
            with task.chunk_reader() as r:
                parts += [r.take(a, min(hi, a + 3)) for a in range(lo, hi + 1, 4)]
        out.append(pa.concat_tables(parts))
    return out


# ---------------------------------------------------------------------- 6. wrong reads


def test_intact_store_reads_and_verifies(store: fs.CheckpointStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert store.read_state("sessions", "count").num_rows == 41
    ck = store.checkpoint()
    whole = [ck.scan("sessions", "count", raw=True).to_arrow(), ck.scan("sessions", "other", raw=True).to_arrow(),
             ck.scan_timers("sessions", "gap").to_arrow()]
    for a, b in zip(whole, read_in_chunks(store, 2), strict=True):  # the same rows, by key group (order within one may differ)
        assert a.num_rows == b.num_rows and a.sort_by([("key", "ascending")]).equals(b.sort_by([("key", "ascending")]))
    assert all(e.checksum and e.checksum.startswith("crc32:") for e in store.files())
    rc, out = verify(store, capsys)
    assert rc == 0 and re.search(r"^ok: \d+ files of checkpoints \[1, 2\]", out, re.M), out


def test_schema_change_is_named(store: fs.CheckpointStore, unchanged: Any, capsys: pytest.CaptureFixture[str]) -> None:
    e = entry(store, "count")
    rewrite(store, e.path, lambda t: t.set_column(2, "value", t.column("value").cast(pa.string())))
    unchanged()
    assert_named(store, capsys, e.path, r"column 'value' has type string, the state declares int64")


def test_file_of_another_state_swapped_in_is_named(store: fs.CheckpointStore, unchanged: Any, capsys: pytest.CaptureFixture[str]) -> None:
    victim, other = entry(store, "count"), entry(store, "other")
    assert victim.rows == other.rows  # a valid file, same row count
    write(store, victim.path, read(store, other.path))
    unchanged()
    assert_named(store, capsys, victim.path, r"flinkstate.state='other' but the manifest records 'count'")


def test_edited_key_group_is_named(store: fs.CheckpointStore, unchanged: Any, capsys: pytest.CaptureFixture[str]) -> None:
    e = entry(store, "count")  # key groups 0..15
    rewrite(store, e.path, lambda t: t.set_column(0, "key_group", pa.array([20] + t.column("key_group").to_pylist()[1:], pa.int32())))
    unchanged()
    assert_named(store, capsys, e.path, r"key groups .*outside its recorded range 0..15")


@pytest.mark.parametrize("offset", [0.3, 0.6, 0.9])
def test_random_byte_damage_is_named(store: fs.CheckpointStore, unchanged: Any, capsys: pytest.CaptureFixture[str], offset: float) -> None:
    e = entry(store, "count")
    data = bytearray(read(store, e.path))
    i = int(len(data) * offset)
    data[i] ^= 0x5A
    write(store, e.path, bytes(data))
    unchanged()
    assert_named(store, capsys, e.path, r"checksum is crc32:[0-9a-f]{8}, the manifest records " + e.checksum)


def test_truncated_and_deleted_files_are_named(store: fs.CheckpointStore, unchanged: Any, capsys: pytest.CaptureFixture[str]) -> None:
    e = entry(store, "count")
    data = read(store, e.path)
    write(store, e.path, data[: len(data) // 2])
    unchanged()
    assert_named(store, capsys, e.path, rf"is {len(data) // 2} bytes, the manifest records {len(data)}")


def test_verify_one_checkpoint(store: fs.CheckpointStore, capsys: pytest.CaptureFixture[str]) -> None:
    delta = next(e for e in store.files(2) if e.kind == "delta")
    write(store, delta.path, b"garbage")
    assert verify(store, capsys, "--checkpoint", "1")[0] == 0  # checkpoint 1 does not use the delta file
    rc, out = verify(store, capsys, "--checkpoint", "2", "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["checkpoints"] == [2] and [d["path"] for d in doc["damaged"]] == [store.io.url(delta.path)]
    assert doc["damaged"][0]["checkpoints"] == [2]


def test_manifest_rows_without_a_checksum_still_read(where: dict[str, Any], store: fs.CheckpointStore) -> None:
    """A manifest written before the checksum column (the backend-v1 fixture has one) reads, checked by size and footer."""
    from deltalake import DeltaTable, write_deltalake

    old = store.catalog.manifest_table().drop_columns(["checksum"])
    uri = store.io.delta_uri(C.MANIFEST_TABLE)
    write_deltalake(uri, old, mode="overwrite", schema_mode="overwrite", storage_options=store.io.delta_storage_options())
    assert "checksum" not in pa.schema(DeltaTable(uri, storage_options=store.io.delta_storage_options()).schema().to_arrow()).names
    reopened = fs.open(where["root"], where["storage_options"])
    assert all(e.checksum is None for e in reopened.files())
    assert reopened.read_state("sessions", "count").num_rows == 41
    with reopened.begin() as w:  # a new checkpoint appends to the old manifest without changing its schema
        w.put_state("sessions", COUNT, pa.table({"key": ["d"], "value": [4], "tombstone": [False]}), mode="delta")
    assert reopened.read_state("sessions", "count").num_rows == 42
    e = next(e for e in reopened.files() if e.state == "count" and e.kind == "full")
    rewrite(reopened, e.path, lambda t: t.set_column(2, "value", t.column("value").cast(pa.string())))
    with pytest.raises(fs.CorruptFileError, match=r"column 'value' has type string"):
        reopened.read_state("sessions", "count")


# ---------------------------------------------------------------------- 7. damaged Delta metadata


def remove(store: fs.CheckpointStore, rel: str) -> None:
    store.io.fs.rm(store.io.fs_path(rel))
    if store.io.scheme == "s3":
        store.io.fs.invalidate_cache()


def delta_log(store: fs.CheckpointStore, table: str) -> str:
    return f"{table}/_delta_log"


def table_parts(store: fs.CheckpointStore, table: str) -> list[str]:
    return sorted(p for p in store.io.list_files(table) if p.endswith(".parquet") and "/_delta_log/" not in p)


def _garbage(store: fs.CheckpointStore, table: str) -> str:
    rel = f"{delta_log(store, table)}/{2:020d}.json"
    write(store, rel, b"garbage {")
    return rel


def _truncated_commit(store: fs.CheckpointStore, table: str) -> str:
    rel = f"{delta_log(store, table)}/{2:020d}.json"
    write(store, rel, read(store, rel)[:40])
    return rel


def _gap(store: fs.CheckpointStore, table: str) -> str:
    rel = f"{delta_log(store, table)}/{1:020d}.json"
    remove(store, rel)
    return rel


def _delta_checkpoint(store: fs.CheckpointStore, table: str) -> str:
    from deltalake import DeltaTable

    DeltaTable(store.io.delta_uri(table), storage_options=store.io.delta_storage_options()).create_checkpoint()
    rel = f"{delta_log(store, table)}/{2:020d}.checkpoint.parquet"
    write(store, rel, read(store, rel)[:30])
    return rel


def _last_checkpoint_nowhere(store: fs.CheckpointStore, table: str) -> str:
    rel = f"{delta_log(store, table)}/_last_checkpoint"
    write(store, rel, b'{"version": 99, "size": 3}')
    return rel


def _truncated_part(store: fs.CheckpointStore, table: str) -> str:
    rel = table_parts(store, table)[0] if table == C.LOG_TABLE else _manifest_part_of_checkpoint_2(store)
    write(store, rel, read(store, rel)[:10])
    return rel


def _deleted_part(store: fs.CheckpointStore, table: str) -> str:
    rel = table_parts(store, table)[0] if table == C.LOG_TABLE else _manifest_part_of_checkpoint_2(store)
    remove(store, rel)
    return rel


def _manifest_part_of_checkpoint_2(store: fs.CheckpointStore) -> str:
    from deltalake import DeltaTable

    t = DeltaTable(store.io.delta_uri(C.MANIFEST_TABLE), storage_options=store.io.delta_storage_options())
    actions = pa.table(t.get_add_actions(flatten=True)).to_pylist()
    return f"{C.MANIFEST_TABLE}/" + next(a["path"] for a in actions if a["min.checkpoint_id"] == 2)


DELTA_DAMAGE = {
    "garbage-commit": (_garbage, r"is not valid JSON"),
    "truncated-commit": (_truncated_commit, r"is not valid JSON"),
    "gap": (_gap, r"is missing \(a gap before version 2\)"),
    "truncated-delta-checkpoint": (_delta_checkpoint, r"is unreadable"),
    "last-checkpoint-nowhere": (_last_checkpoint_nowhere, r"points to the checkpoint of version 99"),
    "truncated-table-file": (_truncated_part, r"is 10 bytes, its Delta log records \d+"),
    "deleted-table-file": (_deleted_part, r"is missing"),
}


@pytest.mark.parametrize("table", [C.LOG_TABLE, C.MANIFEST_TABLE])
@pytest.mark.parametrize("damage", list(DELTA_DAMAGE))
def test_damaged_delta_metadata_is_named(store: fs.CheckpointStore, unchanged: Any, capsys: pytest.CaptureFixture[str],
                                         table: str, damage: str) -> None:
    store.checkpoints(), store.files(1), store.files(2)  # warm every cache of this process first
    make, problem = DELTA_DAMAGE[damage]
    rel = make(store, table)
    unchanged()
    culprit = re.escape(store.io.url(table)) + r" is damaged: .*" + re.escape(rel.rsplit("/", 1)[1]) + r".*" + problem
    fresh = fs.open(store.root, store.io.storage_options or None)
    for s in (store, fresh):  # the same process (caches warm) and a new handle
        with pytest.raises(fs.CorruptFileError, match=culprit):
            s.checkpoints()
            s.files(2)
            s.read_state("sessions", "count", 2)
        with pytest.raises(fs.CorruptFileError, match=culprit):
            with s.begin() as w:
                w.put_state("sessions", COUNT, pa.table({"key": ["z"], "value": [9]}))
        with pytest.raises(fs.CorruptFileError, match=culprit):
            s.retain(1)
    opts = [f"--storage-option={k}={v}" for k, v in (store.io.storage_options or {}).items()]
    capsys.readouterr()
    assert main(["describe", store.root, "--checkpoint", "2", *opts]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search("CorruptFileError: .*" + culprit, err), err
    rc, out = verify(store, capsys)
    assert rc == 1 and re.search(r"DAMAGED .*" + culprit, out), out


# ---------------------------------------------------------------------- 8. one damaged log row


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]"])
def test_one_damaged_log_row_leaves_the_other_checkpoints_readable(store: fs.CheckpointStore, unchanged: Any,
                                                                   capsys: pytest.CaptureFixture[str], bad: str) -> None:
    from deltalake import write_deltalake

    with store.begin() as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["e"], "value": [5], "tombstone": [False]}), mode="delta")
    before = {cid: store.read_state("sessions", "count", cid) for cid in (1, 2)}
    rows = store.catalog.log_table().to_pyarrow_table()  # a tool rewrites the log (a valid Delta overwrite), damaging row 3
    meta = [bad if cid == 3 else m for cid, m in zip(rows.column("checkpoint_id").to_pylist(), rows.column("metadata").to_pylist())]
    rows = rows.set_column(rows.schema.get_field_index("metadata"), "metadata", pa.array(meta, pa.string()))
    write_deltalake(store.io.delta_uri(C.LOG_TABLE), rows, mode="overwrite", storage_options=store.io.delta_storage_options())
    unchanged()
    for s in (store, fs.open(store.root, store.io.storage_options or None)):
        assert [(c.checkpoint_id, c.status) for c in s.checkpoints()] == [(1, "completed"), (2, "completed"), (3, "damaged")]
        for cid in (1, 2):
            assert s.read_state("sessions", "count", cid).equals(before[cid])
            assert s.read_timers("sessions", "gap", cid).num_rows == 1
        with pytest.raises(fs.CorruptFileError, match=r"checkpoint 3 is damaged: its metadata in the log .*_flinkstate/log"):
            s.read_state("sessions", "count")
        with pytest.raises(fs.CorruptFileError, match=r"checkpoint 3 is damaged"):
            s.read_state("sessions", "count", 3)
        with pytest.raises(fs.CorruptFileError, match=r"checkpoint 3 is damaged.*nothing was written"):
            with s.begin() as w:
                w.put_state("sessions", COUNT, pa.table({"key": ["z"], "value": [9]}))
        with pytest.raises(fs.CorruptFileError, match=r"garbage collection refused.*checkpoint 3 is damaged"):
            s.retain(1)
    opts = [f"--storage-option={k}={v}" for k, v in (store.io.storage_options or {}).items()]
    capsys.readouterr()
    assert main(["checkpoints", store.root, *opts]) == 0 and "damaged" in capsys.readouterr().out
    assert main(["describe", store.root, *opts]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoint 3 is damaged" in err, err
    rc, out = verify(store, capsys)
    assert rc == 1 and re.search(r"DAMAGED .*_flinkstate/log: checkpoint 3 is damaged", out), out
    assert re.search(r"of checkpoints \[1, 2\]", out), out  # the intact ones were still checked
    rc, out = verify(store, capsys, "--checkpoint", "3")
    assert rc == 1 and "DAMAGED" in out and "checkpoint 3 is damaged" in out, out
