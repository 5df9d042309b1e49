"""Checkpoint metadata: what a checkpoint holds (operators, descriptors) and its figures."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    TimerServiceDescriptor,
    descriptor_from_dict,
)
from flinkstate.core.errors import OperatorNotFoundError
from flinkstate.core.keygroups import UPPER_BOUND_MAX_PARALLELISM
from flinkstate.format.constants import FORMAT_VERSION

__all__ = ["CheckpointInfo", "OperatorMetadata", "CheckpointMetadata"]


@dataclass(frozen=True)
class CheckpointInfo:
    """One committed checkpoint or savepoint as listed by `store.checkpoints()`."""

    checkpoint_id: int
    kind: str  # "checkpoint" or "savepoint"
    status: str  # "completed" or "discarded"
    created_at: dt.datetime
    max_parallelism: int  # the checkpoint's default: what an operator added without its own gets (each operator has its own)
    files: int
    rows: int | None  # None: not known without decoding (a Flink savepoint or checkpoint)
    bytes: int
    base_checkpoint_id: int | None = None
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (time as ISO 8601)."""
        return {
            "checkpoint_id": self.checkpoint_id,
            "kind": self.kind,
            "status": self.status,
            "created_at": self.created_at.isoformat(),
            "max_parallelism": self.max_parallelism,
            "files": self.files,
            "rows": self.rows,
            "bytes": self.bytes,
            "base_checkpoint_id": self.base_checkpoint_id,
            "format_version": self.format_version,
        }


@dataclass
class OperatorMetadata:
    """The declared state of one operator (by uid) in a checkpoint."""

    uid: str
    keyed_states: dict[str, KeyedStateDescriptor] = field(default_factory=dict)
    timer_services: dict[str, TimerServiceDescriptor] = field(default_factory=dict)
    operator_states: dict[str, OperatorStateDescriptor] = field(default_factory=dict)
    has_coordinator: bool = False
    parallelism: int | None = None
    #: key groups of this operator's keyed state and timers (Flink gives every operator its own); None only while a
    #: writer builds an operator: a stored checkpoint always has it (format v1: the checkpoint's max parallelism)
    max_parallelism: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form stored in the checkpoint log."""
        return {
            "keyed_states": [d.to_dict() for d in self.keyed_states.values()],
            "timer_services": [d.to_dict() for d in self.timer_services.values()],
            "operator_states": [d.to_dict() for d in self.operator_states.values()],
            "has_coordinator": self.has_coordinator,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
        }

    @classmethod
    def from_dict(cls, uid: str, d: dict[str, Any]) -> OperatorMetadata:
        """Inverse of `to_dict` (a document of format v1 gets its max parallelism from `CheckpointMetadata.decode_operators`)."""
        ks = [descriptor_from_dict(x) for x in d.get("keyed_states", [])]
        ts = [TimerServiceDescriptor.from_dict(x) for x in d.get("timer_services", [])]
        os_ = [OperatorStateDescriptor.from_dict(x) for x in d.get("operator_states", [])]
        own = d.get("max_parallelism")
        if own is not None and (isinstance(own, bool) or not isinstance(own, int) or not 1 <= own <= UPPER_BOUND_MAX_PARALLELISM):
            raise ValueError(f"operator {uid!r} has max parallelism {own!r}, not an integer in [1, {UPPER_BOUND_MAX_PARALLELISM}]")
        return cls(
            uid=uid,
            keyed_states={x.name: x for x in ks},
            timer_services={x.name: x for x in ts},
            operator_states={x.name: x for x in os_},
            has_coordinator=bool(d.get("has_coordinator", False)),
            parallelism=d.get("parallelism"),
            max_parallelism=own,
        )

    def copy(self, uid: str | None = None) -> OperatorMetadata:
        """A shallow copy (descriptors are immutable), optionally under another uid."""
        return OperatorMetadata(
            uid=uid or self.uid,
            keyed_states=dict(self.keyed_states),
            timer_services=dict(self.timer_services),
            operator_states=dict(self.operator_states),
            has_coordinator=self.has_coordinator,
            parallelism=self.parallelism,
            max_parallelism=self.max_parallelism,
        )


@dataclass(frozen=True)
class CheckpointMetadata:
    """A checkpoint's figures plus every operator's declared state."""

    info: CheckpointInfo
    operators: dict[str, OperatorMetadata]
    properties: dict[str, str] = field(default_factory=dict)

    def operator(self, uid: str) -> OperatorMetadata:
        """One operator's metadata; OperatorNotFoundError lists the operators that exist."""
        op = self.operators.get(uid)
        if op is None:
            raise OperatorNotFoundError(f"operator {uid!r} is not in checkpoint {self.info.checkpoint_id}; operators: {sorted(self.operators)}")
        return op

    @staticmethod
    def encode(operators: dict[str, OperatorMetadata], properties: dict[str, str]) -> dict[str, Any]:
        """The JSON document stored in the log's metadata column."""
        return {
            "format_version": FORMAT_VERSION,
            "operators": {uid: op.to_dict() for uid, op in sorted(operators.items())},
            "properties": dict(properties),
        }

    @staticmethod
    def decode_operators(doc: dict[str, Any], max_parallelism: int) -> dict[str, OperatorMetadata]:
        """Operators from the stored JSON document of a checkpoint whose log row records `max_parallelism`.

        Format v1 has one max parallelism per checkpoint (the log row's): every operator gets it. From v2 on
        each operator records its own (KeyError when one does not: the document is damaged).
        """
        version = doc.get("format_version", 1)
        out = {}
        for uid, d in doc.get("operators", {}).items():
            if version < 2:
                d = {**d, "max_parallelism": max_parallelism}
            elif d.get("max_parallelism") is None:
                raise KeyError(f"operator {uid!r} records no max parallelism (format v{version} requires one)")
            out[uid] = OperatorMetadata.from_dict(uid, d)
        return out
