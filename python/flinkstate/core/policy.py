"""The compaction policy shared by the embedded backend, maintenance and Spark appends.

One definition: a state's chain in a key-group range (its newest full file plus later deltas)
is due for a new full file when it has `max_deltas` deltas, or when the deltas' bytes exceed
`max_delta_ratio` times the full file's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CompactionPolicy"]


@dataclass(frozen=True)
class CompactionPolicy:
    """When an incremental checkpoint writes a full file instead of one more delta.

    A state's chain (its newest full file in the backend's range plus later deltas) is
    compacted into a new full file when it has `max_deltas` deltas, or when the deltas'
    bytes exceed `max_delta_ratio` times the full file's bytes.
    """

    max_deltas: int = 8
    max_delta_ratio: float = 0.5

    def needs_full(self, full_bytes: int, deltas: int, delta_bytes: int) -> bool:
        """True when the chain should be compacted."""
        if deltas >= self.max_deltas:
            return True
        return delta_bytes > self.max_delta_ratio * max(full_bytes, 1)
