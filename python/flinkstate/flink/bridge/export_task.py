"""One Flink subtask of an export: read one key-group range of a flinkstate checkpoint, write that subtask's keyed file.

The driver (`store_export.run_export`) plans one `RangeExport` per subtask of every operator with keyed state:
the operator's state metadata (types mapped, serializers chosen) and, per state and timer service, the store's
scan tasks bounded to the subtask's key-group range. A job is picklable (a Spark task); it writes into the
savepoint's temporary folder and returns the file's name, size and key-group offsets for the driver's `_metadata`.
Memory per job: one key-group range of the operator's states as read, never a whole state; their encoded records and
file bytes one chunk of key groups at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.flink.write.savepoint_folder import KeyedFile
from flinkstate.flink.write.savepoint_writer import KeyedFileWriter, OperatorExport
from flinkstate.read.scan import ScanTask

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
    chunk_bytes: int = CHUNK_BYTES  # rows encoded and written at a time: about this many bytes of Arrow rows


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
    """Read the job's range of every state and timer service, then encode them and append them to the subtask's keyed
    file a chunk of key groups at a time (`chunk_ranges`): the encoded records, framed streams and file bytes of one
    chunk are held at a time, not the subtask's."""
    tables = {}
    for name, (schema, tasks) in job.scans.items():
        parts = [t.to_arrow() for t in tasks]
        tables[name] = pa.concat_tables(parts) if parts else schema.empty_table()
    chunks = chunk_ranges(job.key_group_range, sum(t.nbytes for t in tables.values()), job.chunk_bytes)
    kgs = {name: _key_groups(t) if len(chunks) > 1 else None for name, t in tables.items()}
    w = KeyedFileWriter(job.folder, job.operator, job.key_group_range, job.compression)
    try:
        for lo, hi in chunks:
            part = {name: flink_rows(_rows_in(t, kgs[name], lo, hi), name in job.lists) for name, t in tables.items()}
            w.write((lo, hi), part)
            del part
        return w.close()
    except BaseException:
        w.abort()
        raise


def _key_groups(t: pa.Table) -> tuple[np.ndarray, bool]:
    """A table's key groups, and whether they are sorted (as a scan of the store returns them)."""
    kg = t.column("key_group").to_numpy()
    return kg, bool((kg[1:] >= kg[:-1]).all())


def _rows_in(t: pa.Table, kg: tuple[np.ndarray, bool] | None, lo: int, hi: int) -> pa.Table:
    """The rows of key groups lo..hi (kg: the table's key groups and whether sorted; None: all rows): a zero-copy slice
    of sorted rows, else the rows selected."""
    if kg is None:
        return t
    groups, ordered = kg
    if ordered:
        a, b = np.searchsorted(groups, [lo, hi + 1])
        return t.slice(int(a), int(b - a))
    return t.filter(pa.array((groups >= lo) & (groups <= hi)))


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
