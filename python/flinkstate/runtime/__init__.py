"""A small job runner hosting one keyed operator over N subtasks with checkpoints and restore.

May import `backend`, `flink` (a Flink savepoint as a restore source), `store` and below.
"""

from __future__ import annotations

from flinkstate.runtime.coordinator import CoordinatorContext, OperatorCoordinator
from flinkstate.runtime.job import (
    EVENT_TIMERS,
    PROCESSING_TIMERS,
    CheckpointStats,
    Context,
    JobResult,
    KeyedJob,
    KeyedProcessFunction,
    RuntimeContext,
)

__all__ = [
    "KeyedJob",
    "KeyedProcessFunction",
    "Context",
    "RuntimeContext",
    "CheckpointStats",
    "JobResult",
    "OperatorCoordinator",
    "CoordinatorContext",
    "EVENT_TIMERS",
    "PROCESSING_TIMERS",
]
