"""What the states, timer services and snapshots of a backend see of the `KeyedStateBackend` that owns them.

Interfaces only, so those modules sit below `keyed` (which implements both) and never import it back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from flinkstate.backend.tables import VersionClock

__all__ = ["KeyContext", "SnapshotSource"]


class KeyContext(Protocol):
    """The current key and namespace a state object reads and writes under, and the clock TTL uses."""

    _key: Any
    _namespace: Any
    clock: Callable[[], int]

    def _set_key_unchecked(self, key: Any) -> None:
        """Make key current (a timer firing: it is known to be in the backend's range)."""
        ...


class SnapshotSource(Protocol):
    """What a snapshot's asynchronous part needs of its backend: its range and parallelism, its lock and versions."""

    max_parallelism: int
    key_group_range: tuple[int, int]
    base_checkpoint_id: int | None
    reuse_aborted: bool
    _lock: threading.RLock
    _versions: VersionClock
