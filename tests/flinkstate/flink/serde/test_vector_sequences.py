"""String[] and generic arrays, and ListState values of variable width, decoded in lockstep (`_vseq`): the same
tables as the record-by-record decoders give, on savepoints real Flink 2.3 wrote; bad framing is an error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from flinkstate.flink import read_keyed_state, read_metadata
from flinkstate.flink.files import canonical, state_decoder
from flinkstate.flink.serde._vector import Source, vector_reader
from flinkstate.flink.serde._vseq import lockstep_delimited
from flinkstate.flink.serde.serializers import TypeNode

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
# value state of String[] (names, strs), Integer[] (boxed), Row(enum, long[], String[]) (mixed), list state of String[]
SEQUENCE_STATES = ("names", "strs", "boxed", "mixed", "arr_list")


def _savepoints() -> list[Path]:
    return sorted(p.parent for p in (FIXTURES / "flink-2.3-canonical").rglob("_metadata"))


@pytest.mark.parametrize("path", _savepoints(), ids=lambda p: "/".join(p.parts[-3:]))
def test_sequences_decode_as_record_by_record(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    meta = read_metadata(str(path))
    vector = read_keyed_state(meta, "long-keyed")
    plans = [s for s in SEQUENCE_STATES if s in vector.states]
    assert plans, f"{path} has none of {SEQUENCE_STATES}"
    canonical._FRAMED.clear()
    monkeypatch.setattr(state_decoder, "record_plan", lambda *a, **k: None)  # every state record by record
    reference = read_keyed_state(read_metadata(str(path)), "long-keyed")
    for name in plans:
        got, want = vector.states[name], reference.states[name]
        assert got.num_rows == want.num_rows > 0, name
        assert got.equals(want), name


STRING = TypeNode("string", "string")


def _buf(values: bytes) -> tuple[Source, np.ndarray, np.ndarray]:
    """The value, then the bytes of a next record (which no element may run into)."""
    return Source(values + b"\x00\x00\x00\x09next"), np.array([0]), np.array([len(values)])


def test_delimited_elements_and_errors() -> None:
    read = vector_reader(STRING, "test")
    assert read is not None
    src, start, end = _buf(b"\x02a,\x03bc,\x00,\x01")  # "a", "bc", null, ""
    values, counts = lockstep_delimited(src, src.arr, read, start, end, pa.string())
    assert values.to_pylist() == ["a", "bc", None, ""] and counts.tolist() == [4]
    for bad, why in ((b"\x02a,", "ends with"), (b"\x02a;\x02b", "delimited"), (b"\x05ab", "past the end")):
        src, start, end = _buf(bad)
        with pytest.raises((ValueError, IndexError), match=why):
            lockstep_delimited(src, src.arr, read, start, end, pa.string())
