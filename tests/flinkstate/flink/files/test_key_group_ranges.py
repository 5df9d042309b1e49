"""Ranged reads of keyed-state files (files.key_group_ranges): a subtask decoded a chunk of key groups at a time is the
subtask decoded at once, chunk by chunk in key-group order."""

from __future__ import annotations

from pathlib import Path

import flinkstate.flink.files.key_group_ranges as kgr
import pyarrow as pa
import pytest
from flinkstate.flink import read_metadata
from flinkstate.flink.files.canonical import decode_keyed_handle
from flinkstate.flink.files.key_group_ranges import (
    decode_key_groups,
    key_group_chunks,
    read_header,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
FILES = {"canonical": FIXTURES / "flink-2.3-canonical" / "files" / "savepoint",
         "snappy": FIXTURES / "flink-2.3-canonical" / "snappy" / "savepoint",
         "heap-native": FIXTURES / "flink-2.3-native" / "native" / "savepoint"}


@pytest.mark.parametrize("variant", sorted(FILES))
def test_chunks_decode_to_the_whole_subtask(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk decoded with the header read and parsed once for the subtask (`read_header`) or read again by itself."""
    meta = read_metadata(str(FILES[variant]))
    op = meta.operator("long-keyed")
    h = op.subtasks[1].managed_keyed
    chunks = key_group_chunks(h, max(1, h.stream.size // 5))
    assert 3 <= len(chunks) <= 8  # a fifth of the file each, key groups whole
    assert chunks[0][0] == h.start and chunks[-1][1] == h.end
    assert all(b + 1 == c for (_, b), (c, _) in zip(chunks, chunks[1:]))
    whole = {n: d.table(True) for n, d in decode_keyed_handle(h, meta.directory, op)[2].items()}
    parts: dict[str, list[pa.Table]] = {n: [] for n in whole}
    reads = []
    real = kgr.header_bytes
    monkeypatch.setattr(kgr, "header_bytes", lambda *a: reads.append(a) or real(*a))
    header = read_header(h, meta.directory, op)
    for i, (first, last) in enumerate(chunks):
        decoded = decode_key_groups(h, meta.directory, op, list(range(first, last + 1)), header=header if i % 2 else None)[2]
        assert set(decoded) == set(whole)  # every chunk declares every state
        for n, d in decoded.items():
            t = d.table(True)
            assert t.num_rows == 0 or first <= min(t.column("key_group").to_pylist()) <= max(t.column("key_group").to_pylist()) <= last
            parts[n].append(t)
    for n, t in whole.items():
        assert pa.concat_tables(parts[n]).combine_chunks().equals(t.combine_chunks()), n
    assert len(reads) == 1 + (len(chunks) + 1) // 2  # read_header's, and each chunk's given none
    assert sum(t.num_rows for t in whole.values()) > 100


def test_an_inline_stream_is_one_chunk() -> None:
    meta = read_metadata(str(FIXTURES / "flink-2.3-canonical" / "inline" / "savepoint"))
    h = next(s.managed_keyed for op in meta.operators for s in op.subtasks
             if s.managed_keyed is not None and getattr(s.managed_keyed, "stream", None) is not None and s.managed_keyed.stream.data is not None)
    assert key_group_chunks(h, 1) == [(h.start, h.end)]
