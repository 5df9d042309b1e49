"""The driver's side of a Spark write that every writer shares: the max parallelism it plans, the one commit, cleanup.

Below `writer` and `writer_tables`, which plan and write the files; imports only flinkstate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.io import FileIO
from flinkstate.format.datafile import FileEntry

__all__ = ["plan_max_parallelism", "commit_planned", "delete_entries"]


def plan_max_parallelism(w: Any, operator: str, requested: int | None) -> int:
    """The max parallelism a write of one operator uses: the operator's own; an operator the checkpoint does not have
    yet takes option maxParallelism, else the checkpoint's default. A requested value unlike the operator's is refused."""
    if operator not in w.operators:
        return requested if requested is not None else w.max_parallelism
    own = w.max_parallelism_of(operator)
    if requested is not None and requested != own:
        raise InvalidArgumentError(
            f"option maxParallelism={requested} differs from operator {operator!r}'s max parallelism {own}; change it with "
            f"pyspark_flinkstate.SavepointWriter(...).set_max_parallelism({requested}, operator={operator!r})"
        )
    return own


def commit_planned(plan: Any, entries: list[FileEntry], register: Callable[[Any, Any], None]) -> Any:
    """The driver's commit of the tasks' files: begin against the log version the job read (the files are removed if
    that fails), adopt them, `register(writer, store)` them, commit once; nothing is committed if a step fails."""
    import flinkstate

    store = flinkstate.open(plan.io.root, plan.io.storage_options or None)
    try:
        w = store.begin(kind=plan.kind, checkpoint_id=plan.checkpoint_id, base=plan.base_checkpoint_id, at_log_version=plan.planned_version)
    except BaseException:
        delete_entries(plan.io, entries)
        raise
    try:
        w.adopt(entries)
        w.declare_max_parallelism(plan.operator, plan.max_parallelism)  # as planned: other operators keep theirs
        register(w, store)
    except BaseException:
        w.abort()
        raise
    return w.commit()


def delete_entries(io: FileIO, entries: list[FileEntry]) -> None:
    """Remove files a failed write left behind (best effort)."""
    for e in entries:
        try:
            io.delete(e.path)
        except OSError:
            continue
