"""The records of a RocksDB native savepoint or incremental checkpoint (IncrementalRemoteKeyedStateHandle).

Sources: `RocksIncrementalSnapshotStrategy`, `RocksDBListState` (list `add()` is a MERGE with
`StringAppendTESTOperator`, delimiter ','), `RocksDBKeyedStateBackend`. The handle's metadata
stream is the KeyedBackendSerializationProxy header; its shared SST files hold one column family
per state (named after it). Keys and values are in the canonical formats, so each column family's
records are resolved (newest put/delete per key, merge operands appended with ',' in sequence
order) and handed to the canonical decoders. Keys outside the subtask's key-group range (left by
rescaling) are dropped; range tombstones are not applied (Flink writes them only to clip such
ranges). MANIFEST/CURRENT/OPTIONS (private files) are not needed: the handle lists the live SSTs.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from flinkstate.flink.metadata import UnsupportedKeyedHandle
from flinkstate.flink.sst import TYPE_DELETION, TYPE_MERGE, TYPE_SINGLE_DELETION, TYPE_VALUE, read_sst

__all__ = ["column_families", "records_buffer"]

_I32 = struct.Struct(">i")


def column_families(handle: UnsupportedKeyedHandle, base_dir: str, prefix: int) -> dict[str, list[tuple[bytes, bytes]]]:
    """Per column family, the live (key, value) pairs of the handle's SSTs in key order, in its key-group range."""
    by_cf: dict[str, list[tuple[bytes, int, int, bytes]]] = defaultdict(list)
    for name, stream in handle.shared:
        if stream is None or not name.endswith(".sst"):
            continue
        sst = read_sst(stream.read(base_dir), f"{stream.location(base_dir) if stream.kind != 'inline' else 'inline'} ({name})")
        by_cf[sst.column_family].extend(sst.records)
    lo, hi = handle.start, handle.start + handle.count - 1
    out: dict[str, list[tuple[bytes, bytes]]] = {}
    for cf, records in by_cf.items():
        records.sort(key=lambda r: (r[0], -r[1]))
        live: list[tuple[bytes, bytes]] = []
        i = 0
        while i < len(records):
            key = records[i][0]
            operands: list[bytes] = []
            base: bytes | None = None
            j = i
            while j < len(records) and records[j][0] == key:
                _, _, kind, value = records[j]
                j += 1
                if kind == TYPE_MERGE:
                    operands.append(value)
                    continue
                if kind == TYPE_VALUE:
                    base = value
                elif kind not in (TYPE_DELETION, TYPE_SINGLE_DELETION):
                    raise ValueError(f"column family {cf!r}: record type {kind} is not supported")
                break
            while j < len(records) and records[j][0] == key:
                j += 1
            i = j
            if base is None and not operands:
                continue
            kg = int.from_bytes(key[:prefix], "big")
            if not lo <= kg <= hi:
                continue
            parts = ([base] if base is not None else []) + operands[::-1]
            live.append((key, b",".join(parts)))
        out[cf] = live
    return out


def records_buffer(pairs: list[tuple[bytes, bytes]]) -> tuple[bytes, list[int]]:
    """The pairs framed as canonical records (i32 klen, key, i32 vlen, value) and each record's offset."""
    parts = []
    starts = []
    pos = 0
    for k, v in pairs:
        starts.append(pos)
        parts.append(_I32.pack(len(k)) + k + _I32.pack(len(v)) + v)
        pos += 8 + len(k) + len(v)
    return b"".join(parts), starts
