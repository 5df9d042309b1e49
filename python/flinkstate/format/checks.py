"""Checks of one data file against what the manifest, the descriptor and the format record.

A read calls them on the bytes it has already fetched: size and checksum of the bytes, then
the Parquet footer (format version, file kind, operator, state, key-group range, creating
checkpoint, row count, column types against the descriptor), then the key_group column of
the rows read. Each returns the problems it found as short phrases; the reader raises them
as one CorruptFileError, `flinkstate verify` prints them.
"""

from __future__ import annotations

import zlib
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    TimerServiceDescriptor,
)
from flinkstate.format import constants as C
from flinkstate.format.schemas import (
    castable,
    coordinator_schema,
    operator_state_schema,
    state_schema,
    timer_schema,
)

__all__ = ["CHECKSUM_ALGORITHM", "checksum_of_crc", "file_checksum", "bytes_problems", "stream_problems", "footer_problems", "key_group_problems", "expected_schema"]

CHECKSUM_ALGORITHM = "crc32"

Descriptor = KeyedStateDescriptor | TimerServiceDescriptor | OperatorStateDescriptor | None


def file_checksum(data: Any) -> str:
    """The manifest's checksum of a data file's bytes: 'crc32:' and 8 hex digits (zlib CRC-32)."""
    return checksum_of_crc(zlib.crc32(data))


def checksum_of_crc(crc: int) -> str:
    """The manifest's checksum text of a CRC-32 computed as the bytes went by (`file_checksum` of the whole file)."""
    return f"{CHECKSUM_ALGORITHM}:{crc & 0xFFFFFFFF:08x}"


def bytes_problems(entry: Any, data: Any) -> list[str]:
    """Size and checksum of the bytes read against the manifest entry (no checksum recorded: size only)."""
    return stream_problems(entry, len(data), zlib.crc32(data))


def stream_problems(entry: Any, size: int, crc: int) -> list[str]:
    """`bytes_problems` of a file read as a stream: its size and the CRC-32 computed as its bytes went by."""
    out = []
    if size != entry.bytes:
        out.append(f"it is {size} bytes, the manifest records {entry.bytes}")
    recorded = getattr(entry, "checksum", None)
    if recorded and recorded.startswith(CHECKSUM_ALGORITHM + ":"):  # other algorithms: a later release's, not checked here
        got = checksum_of_crc(crc)
        if got != recorded:
            out.append(f"its checksum is {got}, the manifest records {recorded}")
    return out


def _path_operator(path: str) -> str | None:
    """The operator uid a data file was written under, from its path (shared/OP/... or savepoints/sp-N/OP/...)."""
    parts = path.split("/")
    if parts[0] == C.SHARED_DIR and len(parts) > 2:
        return parts[1]
    if parts[0] == C.SAVEPOINTS_DIR and len(parts) > 3:
        return parts[2]
    return None


def footer_problems(entry: Any, schema: pa.Schema, num_rows: int, descriptor: Descriptor = None,
                    max_parallelism: int | None = None) -> list[str]:
    """Format version, identity and row count in the footer, column types against the descriptor, and (keyed
    and timer files) the max parallelism the key groups were assigned for against the operator's."""
    meta = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (schema.metadata or {}).items()}
    raw = meta.get(C.META_FORMAT_VERSION, "0")
    version = int(raw) if raw.isdigit() else -1
    if version not in C.SUPPORTED_FORMAT_VERSIONS:
        return [f"it has format version {version}; this release reads {list(C.SUPPORTED_FORMAT_VERSIONS)}"]
    out = []
    expected = {
        C.META_FILE_KIND: entry.kind,
        C.META_STATE: entry.state or "",
        C.META_KG_START: str(entry.key_group_start),
        C.META_KG_END: str(entry.key_group_end),
        C.META_CHECKPOINT_ID: str(entry.created_by_checkpoint_id),
    }
    op = _path_operator(entry.path)
    if op is not None:  # the manifest's operator may be a rename: the path keeps the uid the file was written under
        expected[C.META_OPERATOR] = op
    for key, want in expected.items():
        got = meta.get(key)
        if got != want:
            out.append(f"its metadata {key}={got!r} but the manifest records {want!r}")
    if num_rows != entry.rows:
        out.append(f"it has {num_rows} rows but the manifest records {entry.rows}")
    written_for = meta.get(C.META_MAX_PARALLELISM)
    if max_parallelism is not None and written_for is not None and written_for != str(max_parallelism):
        out.append(f"its key groups are for max parallelism {written_for}, the operator's is {max_parallelism}")
    out += schema_problems(schema, expected_schema(entry.kind, descriptor))
    return out


def expected_schema(kind: str, descriptor: Descriptor) -> pa.Schema | None:
    """The schema a file of this kind must have under a descriptor (None: not known here)."""
    if kind == C.KIND_COORDINATOR:
        return coordinator_schema()
    delta = kind in C.DELTA_KINDS
    if isinstance(descriptor, KeyedStateDescriptor) and kind in (C.KIND_FULL, C.KIND_DELTA):
        return state_schema(descriptor, delta=delta)
    if isinstance(descriptor, TimerServiceDescriptor) and kind in (C.KIND_TIMERS_FULL, C.KIND_TIMERS_DELTA):
        return timer_schema(descriptor, delta=delta)
    if isinstance(descriptor, OperatorStateDescriptor) and kind == C.KIND_OPERATOR:
        return operator_state_schema(descriptor)
    return None


def schema_problems(schema: pa.Schema, expected: pa.Schema | None) -> list[str]:
    """Declared columns missing from the file, or of a type the declared one cannot be read as."""
    if expected is None:
        return []
    out = []
    for f in expected:
        i = schema.get_field_index(f.name)
        if i < 0:
            if f.name != C.COL_TTL:  # TTL enabled after the file was written: read without it
                out.append(f"it has no column {f.name!r} (the state declares {f.type})")
        elif not castable(schema.field(i).type, f.type):
            out.append(f"its column {f.name!r} has type {schema.field(i).type}, the state declares {f.type}")
    return out


def key_group_problems(entry: Any, table: pa.Table) -> list[str]:
    """Key groups of the rows read outside the file's recorded range."""
    if C.COL_KEY_GROUP not in table.column_names or table.num_rows == 0:
        return []
    mm = pc.min_max(table.column(C.COL_KEY_GROUP))
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo is None or lo < entry.key_group_start or hi > entry.key_group_end:
        return [f"it holds key groups {lo}..{hi}, outside its recorded range {entry.key_group_start}..{entry.key_group_end}"]
    return []
