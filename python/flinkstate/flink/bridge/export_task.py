"""One Flink subtask of an export: read one key-group range of a flinkstate checkpoint, write that subtask's keyed file.

The driver (`store_export.run_export`) plans one `RangeExport` per subtask of every operator with keyed state:
the operator's state metadata (types mapped, serializers chosen) and, per state and timer service, the store's
scan tasks bounded to the subtask's key-group range. A job is picklable (a Spark task); it writes into the
savepoint's temporary folder and returns the file's name, size and key-group offsets for the driver's `_metadata`.
Memory per job: one chunk of key groups at a time (about `chunk_bytes` of rows), read from the store's row groups as
it comes (`ScanTask.chunk_reader`), encoded, framed and appended; never the subtask's range of a state at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.flink.write.savepoint_folder import KeyedFile
from flinkstate.flink.write.savepoint_writer import KeyedFileWriter, OperatorExport
from flinkstate.read.scan import ChunkReader, ScanTask

__all__ = ["CHUNK_BYTES", "chunk_ranges", "ExportRunner", "RangeExport", "export_range", "explode_lists", "flink_rows", "run_local"]


CHUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class RangeExport:
    """One subtask's keyed file to write (picklable: a Spark task).

    operator carries the keyed state's metadata only (no tables); scans maps each state and timer service
    (`_timer_state/<service>`) to the schema of its rows and the store's scan tasks of this range; lists names the
    list states (one row per key in flinkstate, one per element in Flink).
    """

    operator: OperatorExport
    index: int
    key_group_range: tuple[int, int]
    scans: dict[str, tuple[pa.Schema, list[ScanTask]]]
    lists: frozenset[str]
    folder: str
    compression: bool = False
    chunk_bytes: int = CHUNK_BYTES  # rows read, encoded and written at a time: about this many bytes (Parquet-encoded)


ExportRunner = Callable[[list[RangeExport]], list[KeyedFile]]


def explode_lists(t: pa.Table) -> pa.Table:
    """flinkstate list state (one row per key, a list value) as one row per element, order kept."""
    values = t.column("value").combine_chunks()
    rows = pc.list_parent_indices(values)
    lists = [c for c in ("value", "ttl_timestamp", "ttl_last_access") if c in t.column_names and pa.types.is_list(t.schema.field(c).type)]
    out = t.drop_columns(lists).take(rows)
    for c in lists:  # TTL list state keeps a last-access time per element
        out = out.append_column(c, pc.list_flatten(t.column(c).combine_chunks()))
    return out


def flink_rows(t: pa.Table, is_list: bool) -> pa.Table:
    """A state's stored rows as the Flink encoders take them: last-access times as ttl_last_access, list elements apart."""
    if "ttl_timestamp" in t.column_names:
        t = t.rename_columns(["ttl_last_access" if c == "ttl_timestamp" else c for c in t.column_names])
    return explode_lists(t) if is_list else t


def export_range(job: RangeExport) -> KeyedFile:
    """Encode the job's range of every state and timer service and append it to the subtask's keyed file a chunk of key
    groups at a time (`chunk_ranges`), each chunk's rows read from the store as it comes (`ScanTask.chunk_reader`: the
    row groups holding it): the rows, encoded records, framed streams and file bytes of one chunk are held at a time,
    not the subtask's."""
    readers: dict[str, tuple[pa.Schema, list[tuple[tuple[int, int], ChunkReader]]]] = {}
    try:
        for name, (schema, tasks) in job.scans.items():
            readers[name] = (schema, [])
            for t in tasks:
                readers[name][1].append((t.key_group_range, t.chunk_reader()))
        nbytes = sum(r.nbytes for _, rs in readers.values() for _, r in rs)
        w = KeyedFileWriter(job.folder, job.operator, job.key_group_range, job.compression)
        try:
            for lo, hi in chunk_ranges(job.key_group_range, nbytes, job.chunk_bytes):
                part = {name: flink_rows(_rows_in(schema, rs, lo, hi), name in job.lists) for name, (schema, rs) in readers.items()}
                w.write((lo, hi), part)
                del part
            return w.close()
        except BaseException:
            w.abort()
            raise
    finally:
        for _, rs in readers.values():
            for _, r in rs:
                r.close()


def _rows_in(schema: pa.Schema, readers: list[tuple[tuple[int, int], ChunkReader]], lo: int, hi: int) -> pa.Table:
    """The rows of key groups lo..hi from the readers of the tasks (their key-group ranges) meeting them."""
    parts = [r.take(max(lo, a), min(hi, b)) for (a, b), r in readers if a <= hi and b >= lo]
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schema.empty_table()
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def chunk_ranges(key_group_range: tuple[int, int], nbytes: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """key_group_range cut into consecutive ranges of equal width holding about chunk_bytes of nbytes each (key groups
    hold about the same number of keys: Flink hashes keys to them)."""
    lo, hi = key_group_range
    n = max(1, min(hi - lo + 1, -(-nbytes // max(1, chunk_bytes))))
    width = hi - lo + 1
    return [(lo + width * i // n, lo + width * (i + 1) // n - 1) for i in range(n)]


def run_local(jobs: list[RangeExport]) -> list[KeyedFile]:
    """Write the subtasks' keyed files one after the other in this process (one range in memory at a time)."""
    return [export_range(j) for j in jobs]
