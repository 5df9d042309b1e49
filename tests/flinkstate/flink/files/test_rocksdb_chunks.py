"""A RocksDB handle read a run of key groups at a time: the runs the MANIFEST's key spans give, only the SSTs and data
blocks that may hold a run read, and the same rows as a read of the whole handle (fast tier)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from flink_dump import FIXTURE

from flinkstate.flink import read_metadata
from flinkstate.flink.bridge.mapping import decode_subtask, decode_subtask_chunks
from flinkstate.flink.files import rocksdb
from flinkstate.flink.files.canonical import decode_rocksdb_handle
from flinkstate.flink.files.chunks import runs
from flinkstate.flink.files.rocksdb import handle_files, rocksdb_chunks
from flinkstate.flink.meta.metadata import UnsupportedKeyedHandle

SAVEPOINT = FIXTURE.parent / "flink-2.3-rocksdb" / "rocksdb" / "savepoint"


def _sorted(t: pa.Table) -> pa.Table:
    keys = [(c, "ascending") for c in t.column_names if not pa.types.is_nested(t.schema.field(c).type)]
    return t.take(pc.sort_indices(t, sort_keys=keys)).combine_chunks()


def _handles(path: Path) -> list[tuple[object, object, UnsupportedKeyedHandle]]:
    meta = read_metadata(str(path))
    return [(meta, op, sub) for op in meta.operators for sub in op.subtasks if isinstance(sub.managed_keyed, UnsupportedKeyedHandle)]


def test_runs_cut_key_group_sizes_greedily() -> None:
    assert runs(pa.array([3, 3, 3, 9, 1, 1]).to_numpy(), 10, 6) == [(10, 11), (12, 12), (13, 13), (14, 15)]
    assert runs(pa.array([], pa.int64()).to_numpy(), 0, 6) == []


def test_runs_of_a_handle_cover_its_range_in_order() -> None:
    for meta, op, sub in _handles(SAVEPOINT):
        h = sub.managed_keyed
        prefix = 1 if op.max_parallelism <= 128 else 2
        cut = rocksdb_chunks(h, meta.directory, prefix, "test", max_bytes=1)
        assert cut[0][0] == h.start and cut[-1][1] == h.start + h.count - 1
        assert all(b[0] == a[1] + 1 and b[0] <= b[1] for a, b in zip(cut, cut[1:], strict=False))
        assert len(cut) > 1
        assert rocksdb_chunks(h, meta.directory, prefix, "test", max_bytes=1 << 40) == [(h.start, h.start + h.count - 1)]


def test_reading_run_by_run_gives_the_rows_of_a_whole_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each subtask decoded in one run, in runs of one key group's SSTs at most (decode_subtask_chunks), and in runs of a
    few key groups asked by list: the same rows of every state, and every run within the subtask's range."""
    checked = 0
    for meta, op, sub in _handles(SAVEPOINT):
        h = sub.managed_keyed
        monkeypatch.setattr(rocksdb, "CHUNK_BYTES", 1 << 40)
        whole = {n: _sorted(d.table(True)) for n, d in decode_rocksdb_handle(h, meta.directory, op)[2].items()}
        chunks = list(decode_subtask_chunks(meta, op, sub, 1))
        assert len(chunks) > 1 and all(h.start <= a <= b < h.start + h.count for (a, b), _ in chunks)
        for name, table in whole.items():
            parts = [d[name].table(True) for _, d in chunks if name in d]
            assert _sorted(pa.concat_tables(parts)).equals(table), (op.label, name)
            checked += table.num_rows
        some = list(range(h.start + 1, h.start + h.count, 3))
        asked = decode_subtask(meta, op, sub, key_groups=some)
        for name, table in whole.items():
            want = table.filter(pc.is_in(table.column("key_group"), pa.array(some, pa.int32())))
            assert _sorted(asked[name].table(True)).equals(want) if name in asked else not want.num_rows
    assert checked > 500


def test_an_sst_outside_a_run_is_not_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose key groups no SST's MANIFEST span meets opens no SST (the MANIFEST is still checked against the handle);
    a run opens exactly the SSTs whose span meets it, and a later run reuses the indexes an earlier one read."""
    meta, op, sub = next((m, o, s) for m, o, s in _handles(SAVEPOINT) if o.label == "long-keyed")
    h = sub.managed_keyed
    prefix = 1 if op.max_parallelism <= 128 else 2
    files = handle_files(h, meta.directory, "test")
    spans = [rocksdb._span(f, prefix) for f in files.live(meta.directory, "test")]
    free = [k for k in range(h.start, h.start + h.count) if not any(s is None or s[0] <= k <= s[1] for s in spans)]
    opened: list[int] = []
    real = rocksdb.read_indexes
    monkeypatch.setattr(rocksdb, "read_indexes", lambda fs, prefix: opened.append(len(fs)) or real(fs, prefix))
    if free:
        assert not any(acc.live for acc in rocksdb.column_families(h, meta.directory, prefix, "test", key_groups=(free[0], free[0])).values())
        assert not sum(opened)
    meet = [sum(s is None or s[0] <= k <= s[1] for s in spans) for k in range(h.start, h.start + h.count)]
    k = h.start + min((i for i, m in enumerate(meet) if m), key=lambda i: meet[i])  # a key group few SSTs may hold
    indexes: dict = {}
    first = rocksdb.column_families(h, meta.directory, prefix, "test", key_groups=(k, k), indexes=indexes)
    assert sum(opened) == meet[k - h.start] == len(indexes) < len(files.ssts)
    again = rocksdb.column_families(h, meta.directory, prefix, "test", key_groups=(k, k), indexes=indexes)
    assert sum(opened) == meet[k - h.start] and {c: a.live_values for c, a in again.items()} == {c: a.live_values for c, a in first.items()}
