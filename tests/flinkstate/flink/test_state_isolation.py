"""A failure stays with its state: bytes corrupted in one state of a real savepoint (its serializer snapshot, its class
name, one of its values) make that state a typed error naming operator, state and serializer when it is read, and leave
every other state of every operator readable exactly as real Flink restores it: `describe`, reads and import.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate import cli
from flinkstate.core.errors import CorruptFileError
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.meta.metadata import read_metadata

from datastream_dump import differences, dump_lines, flinkstate_lines, type_nodes, without

CELL = Path(__file__).resolve().parents[2] / "fixtures" / "flink-datastream" / "2.3" / "hashmap-canonical"
BUFFER_ENTRY = b"org.apache.flink.streaming.api.operators.co.IntervalJoinOperator$BufferEntrySerializerSnapshot"


def _savepoint(tmp: Path) -> Path:
    with tarfile.open(CELL / "savepoint.tar.gz") as t:
        t.extractall(tmp, filter="data")
    return tmp / "savepoint"


def _patch(metadata: Path, old: bytes, new: bytes, occurrence: int = 0) -> None:
    """Replace the occurrence-th `old` in the _metadata file by `new` (same length: every offset stays)."""
    assert len(old) == len(new)
    data = metadata.read_bytes()
    at = -1
    for _ in range(occurrence + 1):
        at = data.index(old, at + 1)
    metadata.write_bytes(data[:at] + new + data[at + len(old) :])


def _others_read_exactly(savepoint: Path, broken: set[str]) -> None:
    """Every state but `broken` reads as the Flink dump of the intact savepoint; each broken one is a typed error."""
    want = dump_lines(CELL / "dump.txt.gz")
    ops = sorted({json.loads(line)["op"] for line in want})
    src = fs.open(str(savepoint))
    ck = src.checkpoint()
    refused: dict[str, str] = {}
    got = flinkstate_lines(src, ops, {op: type_nodes(ck.meta, ck.uids[op]) for op in ops}, refused)
    assert set(refused) == broken | {"values/money", "values/optional"}  # the Kryo/Value states need raw_values
    assert not differences(without(want, set(refused)), got)


def _corrupt_magic(metadata: Path, occurrence: int) -> None:
    """The composite magic after the occurrence-th BufferEntrySerializerSnapshot's class name and version: 911108 -> 911109."""
    data = metadata.read_bytes()
    at = -1
    for _ in range(occurrence + 1):
        at = data.index(BUFFER_ENTRY, at + 1)
    at += len(BUFFER_ENTRY) + 4
    assert data[at : at + 4] == (911108).to_bytes(4, "big")
    metadata.write_bytes(data[:at] + (911109).to_bytes(4, "big") + data[at + 4 :])


def test_a_corrupt_serializer_snapshot_of_one_state_leaves_the_others_readable(tmp_path: Path) -> None:
    savepoint = _savepoint(tmp_path)
    _corrupt_magic(savepoint / "_metadata", 0)  # LEFT_BUFFER's, in subtask 0's header
    _others_read_exactly(savepoint, {"interval-join/LEFT_BUFFER"})
    with pytest.raises(UnsupportedSerializerError, match=r"operator interval-join, state 'LEFT_BUFFER'.*BufferEntrySerializerSnapshot.*does not parse"):
        fs.open(str(savepoint)).read_state("interval-join", "LEFT_BUFFER")
    with pytest.raises(UnsupportedSerializerError, match=r"state 'LEFT_BUFFER': subtask 1 holds other serializer snapshots"):
        fs.open(str(savepoint), raw_values=True).read_state("interval-join", "LEFT_BUFFER")  # not one table of both


def test_a_state_whose_snapshot_is_corrupt_in_every_subtask_keeps_its_framed_values_as_bytes(tmp_path: Path) -> None:
    savepoint = _savepoint(tmp_path)
    for occurrence in (0, 2):  # LEFT_BUFFER's in both subtasks' headers (RIGHT_BUFFER's are 1 and 3)
        _corrupt_magic(savepoint / "_metadata", occurrence)
    raw = fs.open(str(savepoint), raw_values=True).read_state("interval-join", "LEFT_BUFFER", raw=True)
    assert raw.num_rows == 60 and raw.schema.field("value").type == pa.binary()  # map values: framed, kept as bytes
    report = import_savepoint(str(savepoint), str(tmp_path / "root"))
    assert "interval-join/LEFT_BUFFER" in report.as_bytes and report.entries["interval-join"]["RIGHT_BUFFER"] == 60


def test_an_unknown_snapshot_class_of_one_state_leaves_the_others_readable(tmp_path: Path) -> None:
    """The issue's failure: a snapshot class the decoder does not know (here BufferEntry's, renamed) made the next
    state lose its namespace serializer and every state of the job unreachable (KeyError: 'NAMESPACE_SERIALIZER')."""
    savepoint = _savepoint(tmp_path)
    _patch(savepoint / "_metadata", BUFFER_ENTRY, BUFFER_ENTRY.replace(b"BufferEntry", b"BufferEntrx"), occurrence=1)
    _others_read_exactly(savepoint, {"interval-join/RIGHT_BUFFER"})
    with pytest.raises(UnsupportedSerializerError, match=r"interval-join, state 'RIGHT_BUFFER'.*BufferEntrxSerializerSnapshot.*not one flinkstate knows"):
        fs.open(str(savepoint)).read_state("interval-join", "RIGHT_BUFFER")
    out = io.StringIO()
    assert cli.main(["describe", str(savepoint)], out=out) == 0
    assert "interval-join/RIGHT_BUFFER" in out.getvalue() and "LEFT_BUFFER" in out.getvalue()


def test_a_corrupt_value_of_one_state_leaves_the_others_readable(tmp_path: Path) -> None:
    """An enum ordinal past its constants in one record: that state is a CorruptFileError naming it and its key group."""
    savepoint = _savepoint(tmp_path)
    meta = read_metadata(str(savepoint))
    from flinkstate.flink.files.canonical import _framed_stream
    from flinkstate.flink.serde.serializers import read_keyed_header
    from flinkstate.flink._io import DataReader

    op = meta.operator(next(o.operator_id for o in meta.operators if o.uid == "values"))
    handle = next(s.managed_keyed for s in op.subtasks if s.managed_keyed is not None)
    stream = handle.stream.data
    starts = handle.offsets[handle.offsets > 0]
    header = read_keyed_header(DataReader(stream), "test", int(starts.min()))
    sid = [m.name for m in header[2]].index("color")
    framed = _framed_stream(stream, handle, header[0], "test", 1, header).framed
    rec, _, klen, _ = framed.records(sid)
    value_at = int(rec[0]) + 4 + int(klen[0]) + 4  # the first record's value: an i32 ordinal
    data = (savepoint / "_metadata").read_bytes()
    base = data.index(stream)
    (savepoint / "_metadata").write_bytes(data[: base + value_at] + np.int32(7).byteswap().tobytes() + data[base + value_at + 4 :])
    src = fs.open(str(savepoint))
    with pytest.raises(CorruptFileError, match=r"operator values, state 'color'.*corrupt.*ordinal 7"):
        src.read_state("values", "color")
    assert src.read_state("values", "total").num_rows == 11  # the same operator's other states
    report = import_savepoint(str(savepoint), str(tmp_path / "root"))
    assert "values/color" in report.refused and "ordinal 7" in report.refused["values/color"]
    assert report.entries["values"]["total"] == 11


def test_cli_prints_an_unexpected_error_as_internal_naming_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    savepoint = _savepoint(tmp_path)
    from flinkstate.flink.bridge.source import FlinkSource

    def defect(self: FlinkSource, checkpoint_id: int | None = None) -> dict:
        raise KeyError("NAMESPACE_SERIALIZER")

    monkeypatch.setattr(FlinkSource, "describe", defect)
    assert cli.main(["describe", str(savepoint), "--json"]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"flinkstate: internal error in `flinkstate describe {savepoint} --json`: KeyError: 'NAMESPACE_SERIALIZER'")
    assert "Traceback" not in err
    monkeypatch.setenv("FLINKSTATE_TRACEBACK", "1")
    assert cli.main(["describe", str(savepoint)]) == 3
    assert "Traceback" in capsys.readouterr().err  # asked for


def test_cli_typed_errors_keep_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["describe", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.startswith("flinkstate: CheckpointNotFoundError")
