"""The embedded keyed state backend: keyed state, timers, TTL, asynchronous incremental snapshots.

Flink's heap keyed state backend semantics (versioned copy-on-write state tables, timers as
key-grouped state, FLIP-25 TTL) producing format v1 checkpoints through a `CheckpointWriter`.
May import `core`, `format`, `read` and `store`; never `flink`, the runtime or Spark. Inside, the states,
timers and snapshots see their backend through `context` (an interface), and `keyed` is on top.
"""

from __future__ import annotations

from flinkstate.backend.container_states import ListState, MapState
from flinkstate.backend.keyed import KeyedStateBackend, system_clock
from flinkstate.backend.snapshot import CompactionPolicy, KeyedSnapshot
from flinkstate.backend.states import AggregatingState, ReducingState, State, ValueState
from flinkstate.backend.tables import DEFAULT_BUCKETS
from flinkstate.backend.timers import Timer, TimerService

__all__ = [
    "KeyedStateBackend",
    "KeyedSnapshot",
    "CompactionPolicy",
    "system_clock",
    "State",
    "ValueState",
    "ListState",
    "MapState",
    "ReducingState",
    "AggregatingState",
    "Timer",
    "TimerService",
    "DEFAULT_BUCKETS",
]
