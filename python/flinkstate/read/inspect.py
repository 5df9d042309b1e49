"""Metadata tables of checkpoints as Arrow tables: checkpoints, files, states, operators.

Computed from what a pinned checkpoint already holds (figures, descriptors, manifest
entries): no data file is opened. Spark's metadata tables expose exactly these. A Flink
savepoint's tables (`flink.bridge.checkpoint.FlinkInspect`) take their sizes from its handles instead;
a figure the format does not tell is NULL, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flinkstate.format.filekind import FileKind, Scope

if TYPE_CHECKING:
    from flinkstate.format.metadata import CheckpointInfo
    from flinkstate.read.scan import Checkpoint

__all__ = ["CheckpointInspect", "checkpoints_table", "CHECKPOINTS_SCHEMA", "FILES_SCHEMA", "STATES_SCHEMA", "OPERATORS_SCHEMA"]

_TS_US = pa.timestamp("us", tz="UTC")
CHECKPOINTS_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("kind", pa.string()), ("status", pa.string()), ("created_at", _TS_US),
                                ("max_parallelism", pa.int32()), ("files", pa.int64()), ("rows", pa.int64()), ("bytes", pa.int64()),
                                ("base_checkpoint_id", pa.int64()), ("format_version", pa.int32())])
FILES_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("operator", pa.string()), ("state", pa.string()), ("path", pa.string()),
                          ("kind", pa.string()), ("key_group_start", pa.int32()), ("key_group_end", pa.int32()),
                          ("created_by_checkpoint_id", pa.int64()), ("rows", pa.int64()), ("bytes", pa.int64())])
STATES_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("operator", pa.string()), ("state", pa.string()), ("state_kind", pa.string()),
                           ("key_type", pa.string()), ("namespace_type", pa.string()), ("user_key_type", pa.string()),
                           ("value_type", pa.string()), ("ttl", pa.int64()), ("ttl_unknown", pa.bool_()), ("files", pa.int64()),
                           ("rows", pa.int64()), ("bytes", pa.int64()), ("key_serializer", pa.string()),
                           ("value_serializer", pa.string())])
OPERATORS_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("operator", pa.string()), ("parallelism", pa.int32()),
                              ("max_parallelism", pa.int32()), ("keyed_states", pa.int32()), ("timer_services", pa.int32()),
                              ("operator_states", pa.int32()), ("has_coordinator", pa.bool_()), ("files", pa.int64()),
                              ("rows", pa.int64()), ("bytes", pa.int64()), ("flink_version", pa.string())])


# (files, rows, bytes) of a state or operator; None where the checkpoint's format does not tell (Flink savepoints).
Figures = tuple[int | None, int | None, int | None]


def checkpoints_table(infos: Sequence[CheckpointInfo]) -> pa.Table:
    """One row per checkpoint or savepoint."""
    rows = [c.to_dict() | {"created_at": c.created_at} for c in infos]
    return pa.Table.from_pylist(rows, schema=CHECKPOINTS_SCHEMA)


@dataclass(frozen=True)
class CheckpointInspect:
    """The metadata tables of one pinned checkpoint."""

    checkpoint: Checkpoint  # with `io` and `entries`: a StoreCheckpoint (its tables read no data file)

    def files(self, operator: str | None = None) -> pa.Table:
        """One row per file the checkpoint uses, with absolute paths."""
        ck = self.checkpoint
        es = [e for e in ck.entries if operator is None or e.operator == operator]
        return pa.table({
            "checkpoint_id": pa.array([ck.checkpoint_id] * len(es), pa.int64()),
            "operator": [e.operator for e in es], "state": [e.state for e in es], "path": [ck.io.url(e.path) for e in es],
            "kind": [e.kind for e in es], "key_group_start": pa.array([e.key_group_start for e in es], pa.int32()),
            "key_group_end": pa.array([e.key_group_end for e in es], pa.int32()),
            "created_by_checkpoint_id": pa.array([e.created_by_checkpoint_id for e in es], pa.int64()),
            "rows": pa.array([e.rows for e in es], pa.int64()), "bytes": pa.array([e.bytes for e in es], pa.int64()),
        }, schema=FILES_SCHEMA)

    def _sizes(self) -> dict[tuple[str, str | None, Scope], Figures]:
        """(files, rows, bytes) per (operator, state, scope)."""
        sizes: dict[tuple[str, str | None, Scope], list[int]] = {}
        for e in self.checkpoint.entries:
            s = sizes.setdefault((e.operator, e.state, FileKind(e.kind).scope), [0, 0, 0])
            s[0] += 1
            s[1] += e.rows
            s[2] += e.bytes
        return {k: (f, r, b) for k, (f, r, b) in sizes.items()}

    def _operator_totals(self) -> dict[str, Figures]:
        """(files, rows, bytes) per operator."""
        totals: dict[str, list[int]] = {}
        for e in self.checkpoint.entries:
            t = totals.setdefault(e.operator, [0, 0, 0])
            t[0] += 1
            t[1] += e.rows
            t[2] += e.bytes
        return {k: (f, r, b) for k, (f, r, b) in totals.items()}

    def _ttl(self, uid: str, name: str, desc: Any) -> tuple[int | None, bool]:
        """(TTL duration in ms or None without TTL, whether the checkpoint lacks the duration of a TTL state)."""
        return (desc.ttl.ttl_ms if desc.ttl_enabled else None), False


    def states(self, operator: str | None = None) -> pa.Table:
        """One row per keyed state, timer service and operator state.

        A TTL state whose duration the checkpoint does not hold (a Flink savepoint's) has ttl NULL and ttl_unknown true.
        """
        ck = self.checkpoint
        sizes = self._sizes()
        none: Figures = (0, 0, 0)
        out: list[dict[str, Any]] = []
        for uid, op in sorted(ck.operators.items()):
            if operator is not None and uid != operator:
                continue
            for name, d in sorted(op.keyed_states.items()):
                f, r, b = sizes.get((uid, name, Scope.KEYED), none)
                ttl, unknown = self._ttl(uid, name, d)
                out.append({"checkpoint_id": ck.checkpoint_id, "operator": uid, "state": name, "state_kind": d.kind, "key_type": str(d.key_type),
                            "namespace_type": None if d.namespace_type is None else str(d.namespace_type),
                            "user_key_type": str(d.user_key_type) if d.kind == "map" else None,  # type: ignore[union-attr]
                            "value_type": str(d.value_type), "ttl": ttl, "ttl_unknown": unknown,  # type: ignore[union-attr]
                            "files": f, "rows": r, "bytes": b, **self._serializers(uid, name)})
            for name, t in sorted(op.timer_services.items()):
                f, r, b = sizes.get((uid, name, Scope.TIMERS), none)
                out.append({"checkpoint_id": ck.checkpoint_id, "operator": uid, "state": name, "state_kind": f"timers-{t.domain}",
                            "key_type": str(t.key_type), "namespace_type": None if t.namespace_type is None else str(t.namespace_type),
                            "user_key_type": None, "value_type": None, "ttl": None, "ttl_unknown": False,
                            "files": f, "rows": r, "bytes": b, **self._serializers(uid, name)})
            for name, o in sorted(op.operator_states.items()):
                f, r, b = sizes.get((uid, name, Scope.OPERATOR), none)
                out.append({"checkpoint_id": ck.checkpoint_id, "operator": uid, "state": name, "state_kind": f"operator-{o.mode}",
                            "key_type": None if o.key_type is None else str(o.key_type), "namespace_type": None, "user_key_type": None,
                            "value_type": str(o.value_type), "ttl": None, "ttl_unknown": False, "files": f, "rows": r, "bytes": b,
                            **self._serializers(uid, name)})
        return pa.Table.from_pylist(out, schema=STATES_SCHEMA)

    def _serializers(self, uid: str, name: str) -> dict[str, str | None]:
        """key_serializer and value_serializer columns: a Flink savepoint's serializer snapshot classes (NULL otherwise)."""
        key, value = self.checkpoint.serializers_of(uid, name)
        return {"key_serializer": key, "value_serializer": value}

    def operators(self) -> pa.Table:
        """One row per operator: parallelism, max parallelism, states of each kind, coordinator, files, rows, bytes, and the
        Flink release(s) that wrote it."""
        ck = self.checkpoint
        totals = self._operator_totals()
        rows = []
        written_by = ck.flink_version
        for uid, op in sorted(ck.operators.items()):
            f, r, b = totals.get(uid, (0, 0, 0))
            rows.append({"checkpoint_id": ck.checkpoint_id, "operator": uid, "parallelism": op.parallelism,
                         "max_parallelism": ck.max_parallelism_of(uid),
                         "keyed_states": len(op.keyed_states), "timer_services": len(op.timer_services),
                         "operator_states": len(op.operator_states), "has_coordinator": op.has_coordinator,
                         "files": f, "rows": r, "bytes": b, "flink_version": written_by})
        return pa.Table.from_pylist(rows, schema=OPERATORS_SCHEMA)
