"""File kinds of format v1 as one enum: the manifest's `kind` value, its scope, delta-ness and sort keys."""

from __future__ import annotations

from enum import Enum

from flinkstate.format import constants as C

__all__ = ["FileKind", "Scope"]


class Scope(str, Enum):
    """What a file holds state of: keyed state, timers, operator state or coordinator state."""

    KEYED = "keyed"
    TIMERS = "timers"
    OPERATOR = "operator"
    COORDINATOR = "coordinator"


class FileKind(str, Enum):
    """A data file's kind, as stored in the manifest and in the file's `flinkstate.file.kind` metadata."""

    FULL = C.KIND_FULL
    DELTA = C.KIND_DELTA
    TIMERS_FULL = C.KIND_TIMERS_FULL
    TIMERS_DELTA = C.KIND_TIMERS_DELTA
    OPERATOR = C.KIND_OPERATOR
    COORDINATOR = C.KIND_COORDINATOR

    @property
    def scope(self) -> Scope:
        """The scope of state the file holds."""
        return _SCOPE[self]

    @property
    def is_delta(self) -> bool:
        """True for delta files (upserts and tombstones over older files)."""
        return self in (FileKind.DELTA, FileKind.TIMERS_DELTA)

    @property
    def sort_keys(self) -> tuple[str, ...]:
        """The columns rows are sorted by (as far as they exist and are orderable in the file)."""
        return _SORT[self.scope]

    @classmethod
    def of(cls, scope: Scope, delta: bool = False) -> FileKind:
        """The kind of a full or delta file of a scope (operator and coordinator files have no deltas)."""
        if scope == Scope.KEYED:
            return cls.DELTA if delta else cls.FULL
        if scope == Scope.TIMERS:
            return cls.TIMERS_DELTA if delta else cls.TIMERS_FULL
        return cls(scope.value)


_SCOPE = {FileKind.FULL: Scope.KEYED, FileKind.DELTA: Scope.KEYED, FileKind.TIMERS_FULL: Scope.TIMERS,
          FileKind.TIMERS_DELTA: Scope.TIMERS, FileKind.OPERATOR: Scope.OPERATOR, FileKind.COORDINATOR: Scope.COORDINATOR}
_SORT = {Scope.KEYED: (C.COL_KEY_GROUP, C.COL_KEY, C.COL_USER_KEY), Scope.TIMERS: (C.COL_KEY_GROUP, C.COL_TIMESTAMP, C.COL_KEY),
         Scope.OPERATOR: (C.COL_SUBTASK,), Scope.COORDINATOR: ()}
