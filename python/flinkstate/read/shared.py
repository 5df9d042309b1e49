"""What every task of a flinkstate checkpoint's scans shares: rows in the output schema, and the re-check that tells a
checkpoint discarded while it was read from a damaged file."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from flinkstate.core.errors import CheckpointNotFoundError, CorruptFileError
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C

__all__ = ["conform", "rechecked"]


def conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """t with schema's columns in schema's order and types (the stored rows may order or type them loosely)."""
    cols = []
    for f in schema:
        if f.name not in t.column_names:
            cols.append(pa.nulls(t.num_rows, f.type))
            continue
        c = t.column(f.name)
        cols.append(c if c.type == f.type else c.cast(f.type))  # only columns whose type differs: nested casts are costly
    return pa.Table.from_arrays(cols, schema=schema)


@contextmanager
def rechecked(io: FileIO, origin: tuple[int, str] | None) -> Iterator[None]:
    """A damaged or missing file of a checkpoint that a fresh read of the log no longer retains (discarded and collected
    by another writer while it was read) is CheckpointNotFoundError, not damage."""
    try:
        yield
    except CorruptFileError as e:
        if origin is None:
            raise
        from flinkstate.format.manifest import DeltaCatalog

        cid, attempt = origin
        if any(r.checkpoint_id == cid and r.attempt_id == attempt and r.status == C.STATUS_COMPLETED for r in DeltaCatalog(io).records()):
            raise
        raise CheckpointNotFoundError(f"checkpoint {cid} was discarded at {io.root} while it was being read ({e})") from e
