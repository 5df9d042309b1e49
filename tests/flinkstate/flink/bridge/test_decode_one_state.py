"""Reading one state of a Flink savepoint decodes that state's records only (not the operator's), with equal rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from flinkstate.flink import read_metadata
from flinkstate.flink.bridge.mapping import decode_subtask
from flinkstate.flink.files import canonical

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SAVEPOINTS = [FIXTURES / "flink-2.3-canonical" / "files" / "savepoint", FIXTURES / "flink-2.3-canonical" / "snappy" / "savepoint",
              FIXTURES / "flink-2.3-rocksdb" / "rocksdb" / "savepoint"]


@pytest.mark.parametrize("path", SAVEPOINTS, ids=["canonical", "snappy", "rocksdb"])
def test_one_state_decodes_only_its_records_and_equals_the_whole_decode(path: Path) -> None:
    meta = read_metadata(str(path))
    op = meta.operator("long-keyed")
    checked = 0
    for sub in op.subtasks:
        whole = decode_subtask(meta, op, sub)
        for name in ("count", "list", "ttl"):
            canonical._FRAMED.clear()
            one = decode_subtask(meta, op, sub, states=[name])
            assert one[name].table(True).equals(whole[name].table(True)), name
            others = {n: d.row_count() for n, d in one.items() if n != name}
            assert whole[name].row_count() > 0 and set(others.values()) == {0}, others  # nothing else decoded
            again = decode_subtask(meta, op, sub, states=[name])  # canonical: the framing comes from the cache
            assert again[name].table(True).equals(whole[name].table(True))
            checked += 1
    assert checked >= 3
