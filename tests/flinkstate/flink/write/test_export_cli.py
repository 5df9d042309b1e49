"""`flinkstate export`: a checkpoint of a root becomes a canonical Flink savepoint the reader reads back."""

from __future__ import annotations

import io
import json
import os

import pyarrow as pa

import flinkstate as fs
from flinkstate.cli import main
from flinkstate.flink import read_keyed_state, read_metadata


def _root(tmp_path) -> str:
    root = str(tmp_path / "job")
    store = fs.open(root)
    for cid, value in ((1, 1), (2, 5)):
        with store.begin(checkpoint_id=cid, max_parallelism=128) as w:
            w.put_state("counter", fs.ValueStateDescriptor(name="count", value_type=pa.int64()),
                        pa.table({"key": ["a", "b"], "value": [value, value + 1]}))
    return root


def _counts(dest: str) -> list:
    t = read_keyed_state(read_metadata(dest), "counter").states["count"]
    return sorted(zip(t.column("key").to_pylist(), t.column("value").to_pylist()))


def test_export_latest_and_named_checkpoint(tmp_path):
    root = _root(tmp_path)
    out = io.StringIO()
    assert main(["export", root, str(tmp_path / "sp2"), "--compression", "snappy"], out=out) == 0
    assert "from checkpoint 2" in out.getvalue() and _counts(str(tmp_path / "sp2")) == [("a", 5), ("b", 6)]
    out = io.StringIO()
    assert main(["export", root, str(tmp_path / "sp1"), "--checkpoint", "1", "--json"], out=out) == 0
    doc = json.loads(out.getvalue())
    assert doc["checkpoint_id"] == 1 and os.path.isfile(os.path.join(doc["savepoint"], "_metadata"))
    assert _counts(str(tmp_path / "sp1")) == [("a", 1), ("b", 2)]


def test_export_refuses_existing_savepoint_and_unknown_checkpoint(tmp_path, capsys):
    root = _root(tmp_path)
    assert main(["export", root, str(tmp_path / "sp")], out=io.StringIO()) == 0
    before = sorted(os.listdir(tmp_path / "sp"))
    assert main(["export", root, str(tmp_path / "sp")], out=io.StringIO()) == 2
    assert "SavepointExistsError" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path / "sp")) == before
    assert main(["export", root, str(tmp_path / "sp9"), "--checkpoint", "9"], out=io.StringIO()) == 2
    assert "CheckpointNotFoundError" in capsys.readouterr().err and not (tmp_path / "sp9").exists()
