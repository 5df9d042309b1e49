"""State surgery in one process: change max parallelism, the core of a savepoint rewrite.

`rescale(store, max_parallelism)` writes a new checkpoint (or savepoint) in which every
keyed state and timer service (of every operator, or of the operators named) is rewritten
in full with each key re-assigned to its key group for the new max parallelism (Flink's
assignment), everything else carried over. `rescale_into(writer)` does the same inside a
`CheckpointWriter` the caller composes with other changes (rename, remove, put,
`set_max_parallelism` per operator). The Spark connector's SavepointWriter does the same
work distributed over key-group ranges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from flinkstate.core.errors import OperatorNotFoundError
from flinkstate.format import constants as C

if TYPE_CHECKING:
    from flinkstate.store.store import CheckpointStore
    from flinkstate.store.writer import CheckpointWriter

__all__ = ["rescale", "rescale_into", "rekey"]


def rekey(table: pa.Table, max_parallelism: int) -> pa.Table:
    """Drop the stored key groups; the writer re-assigns them for `max_parallelism`."""
    del max_parallelism  # the writer computes the key groups with Flink's assignment
    return table.drop_columns([C.COL_KEY_GROUP]) if C.COL_KEY_GROUP in table.column_names else table


def rescale_into(writer: CheckpointWriter, *, skip: set[tuple[str, str]] | None = None) -> None:
    """Re-put in full (new key groups) every keyed state and timer service of the operators whose max parallelism
    the writer changes (`writer.rescaled_operators()`), from the writer's base.

    States the writer already replaced in full (under any uid, renames followed) are kept
    as written; `skip` names further (operator, state) pairs the caller replaces itself.
    """
    store = writer.store
    base = writer.base
    if base is None:
        return
    skip = skip or set()
    bid = base.checkpoint_id
    for uid in writer.rescaled_operators():
        op = writer.operators[uid]
        src_uid = writer.base_uid(uid)
        mp = writer.max_parallelism_of(uid)
        for name, desc in list(op.keyed_states.items()):
            if (uid, name) in skip or writer.rewritten(uid, "keyed", name):
                continue
            t = store.read_state(src_uid, name, bid, raw=True)
            writer.put_state(uid, desc, rekey(t, mp), mode="full")
        for name, tdesc in list(op.timer_services.items()):
            if (uid, name) in skip or writer.rewritten(uid, "timers", name):
                continue
            t = store.read_timers(src_uid, name, bid)
            writer.put_timers(uid, tdesc, rekey(t, mp), mode="full")


def rescale(
    store: CheckpointStore,
    max_parallelism: int,
    *,
    kind: Literal["checkpoint", "savepoint"] = "checkpoint",
    base: int | Literal["latest"] = "latest",
    operators: Sequence[str] | None = None,
) -> Any:
    """A new checkpoint or savepoint of `base` with every key in its key group for `max_parallelism`.

    operators: only these operators change (the others keep theirs); None: every operator, and the checkpoint's
    default (what operators added later get).
    """
    w = store.begin(kind=kind, base=base, max_parallelism=max_parallelism if operators is None else None)
    with w:
        for uid in operators or ():
            if uid not in w.operators:
                raise OperatorNotFoundError(f"operator {uid!r} is not in the checkpoint to rescale; operators: {sorted(w.operators)}")
            w.set_max_parallelism(max_parallelism, uid)
        rescale_into(w)
    return w.info
