"""Metadata tables: `checkpoints`, `files` (the manifest) and `states`, as Arrow tables.

Pure pyarrow over the store: they run in the task of the read's single partition.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__all__ = ["checkpoints_table", "files_table", "states_table"]


def _store(res: Any) -> Any:
    from flinkstate.store import CheckpointStore

    s = CheckpointStore.__new__(CheckpointStore)
    from flinkstate.format.manifest import DeltaCatalog

    s.io = res.io
    s.catalog = DeltaCatalog(res.io)
    return s


def checkpoints_table(res: Any) -> pa.Table:
    """One row per retained checkpoint or savepoint (or the one asked for)."""
    store = _store(res)
    wanted = set(res.checkpoint_ids)
    rows = [c.to_dict() | {"created_at": c.created_at} for c in store.checkpoints() if c.checkpoint_id in wanted]
    return pa.Table.from_pylist(rows) if rows else pa.table({})


def files_table(res: Any) -> pa.Table:
    """One row per file each checkpoint uses, with absolute paths."""
    store = _store(res)
    cols: dict[str, list[Any]] = {k: [] for k in ("checkpoint_id", "operator", "state", "path", "kind", "key_group_start",
                                                    "key_group_end", "created_by_checkpoint_id", "rows", "bytes")}
    op = res.opts.operator
    for cid in res.checkpoint_ids:
        for e in store.files(cid):
            if op is not None and e.operator != op:
                continue
            cols["checkpoint_id"].append(cid)
            cols["operator"].append(e.operator)
            cols["state"].append(e.state)
            cols["path"].append(store.io.url(e.path))
            cols["kind"].append(e.kind)
            cols["key_group_start"].append(e.key_group_start)
            cols["key_group_end"].append(e.key_group_end)
            cols["created_by_checkpoint_id"].append(e.created_by_checkpoint_id)
            cols["rows"].append(e.rows)
            cols["bytes"].append(e.bytes)
    return pa.table(cols)


def states_table(res: Any) -> pa.Table:
    """One row per keyed state, timer service and operator state of each checkpoint."""
    store = _store(res)
    out: list[dict[str, Any]] = []
    op_filter = res.opts.operator
    for cid in res.checkpoint_ids:
        meta = store.metadata(cid)
        files = store.files(cid)
        sizes: dict[tuple[str, str | None, str], list[int]] = {}
        for e in files:
            scope = "timers" if e.kind.startswith("timers") else ("operator" if e.kind == "operator" else "keyed")
            s = sizes.setdefault((e.operator, e.state, scope), [0, 0, 0])
            s[0] += 1
            s[1] += e.rows
            s[2] += e.bytes
        for uid, op in sorted(meta.operators.items()):
            if op_filter is not None and uid != op_filter:
                continue
            for name, d in sorted(op.keyed_states.items()):
                f, r, b = sizes.get((uid, name, "keyed"), [0, 0, 0])
                out.append({
                    "checkpoint_id": cid, "operator": uid, "state": name, "state_kind": d.kind, "key_type": str(d.key_type),
                    "namespace_type": None if d.namespace_type is None else str(d.namespace_type),
                    "user_key_type": str(d.user_key_type) if d.kind == "map" else None,  # type: ignore[union-attr]
                    "value_type": str(d.value_type), "ttl": d.ttl.ttl_ms if d.ttl_enabled else None,  # type: ignore[union-attr]
                    "files": f, "rows": r, "bytes": b,
                })
            for name, t in sorted(op.timer_services.items()):
                f, r, b = sizes.get((uid, name, "timers"), [0, 0, 0])
                out.append({
                    "checkpoint_id": cid, "operator": uid, "state": name, "state_kind": f"timers-{t.domain}", "key_type": str(t.key_type),
                    "namespace_type": None if t.namespace_type is None else str(t.namespace_type), "user_key_type": None,
                    "value_type": None, "ttl": None, "files": f, "rows": r, "bytes": b,
                })
            for name, o in sorted(op.operator_states.items()):
                f, r, b = sizes.get((uid, name, "operator"), [0, 0, 0])
                out.append({
                    "checkpoint_id": cid, "operator": uid, "state": name, "state_kind": f"operator-{o.mode}",
                    "key_type": None if o.key_type is None else str(o.key_type), "namespace_type": None, "user_key_type": None,
                    "value_type": str(o.value_type), "ttl": None, "files": f, "rows": r, "bytes": b,
                })
    return pa.Table.from_pylist(out) if out else pa.table({})
