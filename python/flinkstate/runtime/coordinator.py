"""An operator coordinator whose events stay consistent with checkpoints (FLINK-28639).

Subtasks send events to the coordinator (`Context.send_to_coordinator`); the coordinator
sends events to subtasks (`CoordinatorContext.send_event`). Events to subtasks are not
delivered at once: they wait in an outbox and are delivered at the next element boundary of
the job. When a checkpoint is taken, the coordinator's state is taken at the same instant as
the subtasks' snapshots, and the events still in the outbox (generated before the
checkpoint but not yet seen by the subtasks, so not reflected in their state) are stored in
the checkpoint with it and replayed to the subtasks on restore. Nothing is lost or delivered
twice across a restore: an event is either in the subtask's state or in the checkpoint.

Payloads are bytes (serialize with json or pickle yourself); they are stored in the
coordinator file of the checkpoint (`CheckpointWriter.put_coordinator`).
"""

from __future__ import annotations

from collections import deque

import pyarrow as pa

from flinkstate.errors import InvalidArgumentError
from flinkstate.format.datafile import coordinator_schema

__all__ = ["OperatorCoordinator", "CoordinatorContext", "coordinator_table", "parse_coordinator_table"]


class CoordinatorContext:
    """What a coordinator gets in `start`: send events to subtasks, know the parallelism."""

    def __init__(self, parallelism: int) -> None:
        self.parallelism = parallelism
        self.outbox: deque[tuple[int, bytes]] = deque()

    def send_event(self, subtask: int, event: bytes) -> None:
        """Queue an event for a subtask (delivered at the next element boundary, checkpointed while queued)."""
        if not 0 <= subtask < self.parallelism:
            raise InvalidArgumentError(f"subtask {subtask} is not in [0, {self.parallelism})")
        if not isinstance(event, (bytes, bytearray)):
            raise InvalidArgumentError(f"coordinator events are bytes, got {type(event).__name__}")
        self.outbox.append((subtask, bytes(event)))


class OperatorCoordinator:
    """Override the hooks you need (Flink's OperatorCoordinator, single-process)."""

    def start(self, context: CoordinatorContext) -> None:
        """Called once, after `reset_to_checkpoint` on restore."""
        self.context = context

    def handle_event_from_operator(self, subtask: int, event: bytes) -> None:  # noqa: B027 - optional hook
        """An event a subtask sent (processed before any later checkpoint)."""

    def checkpoint_coordinator(self, checkpoint_id: int) -> bytes:
        """The coordinator's state for a checkpoint (bytes)."""
        return b""

    def reset_to_checkpoint(self, checkpoint_id: int, state: bytes | None) -> None:  # noqa: B027 - optional hook
        """Restore the state returned by `checkpoint_coordinator` (None: no state stored)."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:  # noqa: B027 - optional hook
        """A checkpoint committed."""


def coordinator_table(state: bytes, events: list[tuple[int, bytes]]) -> pa.Table:
    """The coordinator file's rows: one 'state' row, then the buffered events in order."""
    rows = [{"record_type": "state", "subtask": None, "seq": 0, "payload": state}]
    rows += [{"record_type": "event", "subtask": s, "seq": i + 1, "payload": p} for i, (s, p) in enumerate(events)]
    return pa.Table.from_pylist(rows, schema=coordinator_schema())


def parse_coordinator_table(table: pa.Table) -> tuple[bytes | None, list[tuple[int, bytes]]]:
    """Inverse of `coordinator_table`: (state, events in order)."""
    state = None
    events = []
    for r in sorted(table.to_pylist(), key=lambda r: r["seq"]):
        if r["record_type"] == "state":
            state = r["payload"]
        else:
            events.append((int(r["subtask"]), r["payload"]))
    return state, events
