"""An operator coordinator whose events stay consistent with checkpoints (FLINK-28639).

Subtasks send events to the coordinator (`Context.send_to_coordinator`); the coordinator
sends events to subtasks (`CoordinatorContext.send_event`). Every coordinator call (events,
`checkpoint_coordinator`, `notify_checkpoint_complete`, `notify_checkpoint_aborted`) runs on
one thread, the job's processing thread, from a mailbox drained at element boundaries;
the checkpoint thread only enqueues notifications.

A checkpoint follows the document's protocol. The coordinator tells every subtask that the
checkpoint starts; each subtask sends a last event (a marker, behind every event it sent
before) and closes its gateway. The coordinator handles everything up to the last markers,
takes its state, stores the events it sent that no subtask has seen yet (the outbox) and
closes its gateway. Then the subtasks take their snapshots. Events a subtask sends while its
gateway is closed are buffered, stored in the checkpoint and sent once its snapshot is
taken; events the coordinator sends while its gateway is closed are held and sent after the
subtasks' snapshots (they are in neither side's state, so they are not stored). On restore
the stored events are replayed in both directions: nothing is lost or delivered twice
relative to the checkpoint.

Payloads are bytes (serialize with json or pickle yourself); they are stored in the
coordinator file of the checkpoint (`CheckpointWriter.put_coordinator`).
"""

from __future__ import annotations

from collections import deque

import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.format.datafile import coordinator_schema

__all__ = ["OperatorCoordinator", "CoordinatorContext", "coordinator_table", "parse_coordinator_table", "parse_coordinator_records"]


class CoordinatorContext:
    """What a coordinator gets in `start`: send events to subtasks, know the parallelism."""

    def __init__(self, parallelism: int) -> None:
        self.parallelism = parallelism
        self.outbox: deque[tuple[int, bytes]] = deque()
        self._closed = False
        self._held: list[tuple[int, bytes]] = []

    def send_event(self, subtask: int, event: bytes) -> None:
        """Queue an event for a subtask (delivered at the next element boundary, checkpointed while queued)."""
        if not 0 <= subtask < self.parallelism:
            raise InvalidArgumentError(f"subtask {subtask} is not in [0, {self.parallelism})")
        if not isinstance(event, (bytes, bytearray)):
            raise InvalidArgumentError(f"coordinator events are bytes, got {type(event).__name__}")
        if self._closed:
            self._held.append((subtask, bytes(event)))
        else:
            self.outbox.append((subtask, bytes(event)))

    def close_gateway(self) -> None:
        """The coordinator's part of a checkpoint is taken: hold new events until the subtasks' snapshots."""
        self._closed = True

    def open_gateway(self) -> None:
        """The subtasks' snapshots are taken: send the held events."""
        self._closed = False
        self.outbox.extend(self._held)
        self._held.clear()


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
        """A checkpoint committed (called on the coordinator thread)."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:  # noqa: B027 - optional hook
        """A checkpoint failed or was subsumed (called on the coordinator thread)."""


RECORD_STATE = "state"
RECORD_EVENT = "event"  # coordinator -> subtask, sent before the checkpoint, not yet seen by the subtask
RECORD_OPERATOR_EVENT = "operator_event"  # subtask -> coordinator, sent after the subtask's last event


def coordinator_table(state: bytes, events: list[tuple[int, bytes]],
                      operator_events: list[tuple[int, bytes]] | None = None) -> pa.Table:
    """The coordinator file's rows: one 'state' row, the buffered events to subtasks, then the
    buffered events from subtasks (subtask = sender), in order."""
    rows = [{"record_type": RECORD_STATE, "subtask": None, "seq": 0, "payload": state}]
    rows += [{"record_type": RECORD_EVENT, "subtask": s, "seq": i + 1, "payload": p} for i, (s, p) in enumerate(events)]
    n = len(rows)
    rows += [{"record_type": RECORD_OPERATOR_EVENT, "subtask": s, "seq": n + i, "payload": p}
             for i, (s, p) in enumerate(operator_events or [])]
    return pa.Table.from_pylist(rows, schema=coordinator_schema())


def parse_coordinator_records(table: pa.Table) -> tuple[bytes | None, list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """Inverse of `coordinator_table`: (state, events to subtasks, events from subtasks), in order."""
    state = None
    events: list[tuple[int, bytes]] = []
    operator_events: list[tuple[int, bytes]] = []
    for r in sorted(table.to_pylist(), key=lambda r: r["seq"]):
        if r["record_type"] == RECORD_STATE:
            state = r["payload"]
        elif r["record_type"] == RECORD_OPERATOR_EVENT:
            operator_events.append((int(r["subtask"]), r["payload"]))
        else:
            events.append((int(r["subtask"]), r["payload"]))
    return state, events, operator_events


def parse_coordinator_table(table: pa.Table) -> tuple[bytes | None, list[tuple[int, bytes]]]:
    """(state, events to subtasks in order) of a coordinator file."""
    state, events, _ = parse_coordinator_records(table)
    return state, events
