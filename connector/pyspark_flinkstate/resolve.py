"""Planning a read on the driver: check the options against the store and pin what to read.

`resolve(options)` opens the job root once, checks that the checkpoint, operator and state
exist (typed errors listing what does), and returns a picklable `Resolved` holding the
checkpoint figures, the descriptor and the manifest entries, so that schema(), reader() and
the executors all see the same checkpoint even if a new one is committed meanwhile.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from flinkstate.core.errors import (
    CheckpointNotFoundError,
    InvalidArgumentError,
    StateNotFoundError,
)
from flinkstate.core.io import FileIO
from flinkstate.format.datafile import FileEntry
from flinkstate.format.metadata import CheckpointInfo
from flinkstate.read.changes import operator_max_parallelism
from flinkstate.read.checkpoint import StoreCheckpoint
from flinkstate.store.store import CheckpointStore

from pyspark_flinkstate.options import INSIGHT_TABLES, METADATA_TABLES, ReadOptions, parse_read_options

__all__ = ["Resolved", "open_store", "resolve", "output_columns", "non_null_columns", "TS_MS"]

TS_MS = pa.timestamp("ms", tz="UTC")
TS_US = pa.timestamp("us", tz="UTC")


@dataclass
class Resolved:
    """Everything a read needs, fixed at planning time (picklable)."""

    opts: ReadOptions
    io: FileIO | None
    checkpoint_id: int | None = None
    max_parallelism: int = 0
    created_at_ms: int = 0
    desc: dict[str, Any] | None = None  # keyed state / operator state descriptor
    timer_services: list[dict[str, Any]] = field(default_factory=list)
    entries: list[FileEntry] = field(default_factory=list)
    # changes
    from_checkpoint_id: int | None = None
    from_max_parallelism: int = 0
    from_entries: list[FileEntry] | None = None
    state_in_to: bool = True
    # metadata tables: which checkpoints
    checkpoint_ids: list[int] = field(default_factory=list)
    # the pinned checkpoint a state / timers / operatorState read scans, and those of the metadata tables
    checkpoint: StoreCheckpoint | None = None
    pinned: list[StoreCheckpoint] = field(default_factory=list)
    infos: list[CheckpointInfo] = field(default_factory=list)

    def descriptor(self) -> Any:
        """The keyed state descriptor object."""
        from flinkstate.core.descriptors import descriptor_from_dict

        assert self.desc is not None
        return descriptor_from_dict(self.desc)

    def ttl_ms(self) -> int | None:
        """TTL in ms of the keyed state (None when off)."""
        if self.opts.table not in ("state", "changes"):
            return None
        d = self.descriptor()
        return d.ttl.ttl_ms if d.ttl_enabled else None


def open_store(opts: ReadOptions) -> Any:
    """The root or Flink savepoint the options name, opened."""
    import flinkstate

    return flinkstate.open(opts.path, opts.storage_options or None, **opts.flink_options())


def _need(value: str | None, name: str, choices: list[str], what: str) -> str:
    if not value:
        raise InvalidArgumentError(f"option {name!r} is required for this table; {what}: {choices}")
    return value


def resolve(options: Any, store: Any = None) -> Resolved:
    """Validate the options against the store (opened from the options' path, unless one opened there is given) and pin
    the checkpoint, descriptor and files."""
    opts = options if isinstance(options, ReadOptions) else parse_read_options(options)
    store = open_store(opts) if store is None else store
    res = Resolved(opts=opts, io=getattr(store, "io", None))  # a Flink savepoint has no FileIO: its tasks read its files
    table = opts.table
    if table in INSIGHT_TABLES and table != "history":
        res.pinned = [store.checkpoint(opts.checkpoint_id)]  # the latest, or the one asked for
        res.checkpoint_ids = [res.pinned[0].checkpoint_id]
        if opts.operator is not None:
            res.pinned[0].operator(opts.operator)  # OperatorNotFoundError lists the operators
            res.opts = dataclasses.replace(opts, operator=res.pinned[0].name_of(opts.operator))
        return res
    if table in METADATA_TABLES or table == "history":
        infos = store.checkpoints()
        if opts.checkpoint_id is not None:
            store.info(opts.checkpoint_id)  # CheckpointNotFoundError lists what exists (a Flink savepoint's too)
            infos = [c for c in infos if c.checkpoint_id == opts.checkpoint_id]
        res.infos = infos
        res.checkpoint_ids = [c.checkpoint_id for c in infos]
        if table != "checkpoints":
            res.pinned = [store.checkpoint(cid) for cid in res.checkpoint_ids]
        if opts.operator is not None and table != "checkpoints":
            known = set()
            for ck in res.pinned:
                known.update(ck.operators)
            names = {ck.name_of(opts.operator) for ck in res.pinned} & known  # a Flink operator by uid or operator id
            if opts.operator not in known and len(names) == 1:
                res.opts = dataclasses.replace(opts, operator=names.pop())
            elif opts.operator not in known:
                from flinkstate.core.errors import OperatorNotFoundError

                raise OperatorNotFoundError(f"operator {opts.operator!r} is not in any retained checkpoint; operators: {sorted(known)}")
        return res
    if table == "changes":
        return _resolve_changes(store, opts, res)
    ck = res.checkpoint = store.checkpoint(opts.checkpoint_id)  # one load of the log: everything below reads ck
    res.checkpoint_id = ck.checkpoint_id
    res.created_at_ms = ck.created_at_ms
    operator = _need(opts.operator, "operator", sorted(ck.operators), f"operators in checkpoint {ck.checkpoint_id}")
    op = ck.operator(operator)
    res.max_parallelism = ck.max_parallelism_of(operator)  # key groups are the operator's own
    if table == "state":
        name = _need(opts.state, "state", sorted(op.keyed_states), f"keyed states of operator {operator!r}")
        res.desc = ck.state_descriptor(operator, name).to_dict()
    elif table == "timers":
        res.timer_services = [s.to_dict() for s in ck.timer_services_of(operator, opts.state or None)]  # typed errors list them
    elif table == "operatorState":
        name = _need(opts.state, "state", sorted(op.operator_states), f"operator states of operator {operator!r}")
        res.desc = ck.operator_state_descriptor(operator, name).to_dict()
    return res


def _resolve_changes(store: CheckpointStore, opts: ReadOptions, res: Resolved) -> Resolved:
    retained = [c.checkpoint_id for c in store.checkpoints()]
    if not retained:
        raise CheckpointNotFoundError(f"no committed checkpoint at {store.root}")
    to_id = opts.to_checkpoint_id if opts.to_checkpoint_id is not None else opts.checkpoint_id
    to_rec = store.record(to_id)
    if opts.from_checkpoint_id is None:
        earlier = [c for c in retained if c < to_rec.checkpoint_id]
        if not earlier:
            raise CheckpointNotFoundError(
                f"option 'fromCheckpointId' is required: checkpoint {to_rec.checkpoint_id} has no earlier retained checkpoint; retained: {retained}"
            )
        from_id = earlier[-1]
    else:
        from_id = opts.from_checkpoint_id
        if from_id > to_rec.checkpoint_id:
            raise InvalidArgumentError(
                f"option 'fromCheckpointId' {from_id} is after 'toCheckpointId' {to_rec.checkpoint_id}: changes run from an older checkpoint to a newer one"
            )
    ck_to, ck_from = store.checkpoint(to_rec.checkpoint_id), store.checkpoint(from_id)
    from_rec = ck_from.record
    res.checkpoint_id, res.created_at_ms = ck_to.checkpoint_id, ck_to.created_at_ms
    res.from_checkpoint_id = ck_from.checkpoint_id
    ops_to = ck_to.operators
    ops_from = ck_from.operators
    operator = _need(opts.operator, "operator", sorted(set(ops_to) | set(ops_from)), "operators")
    if operator not in ops_to and operator not in ops_from:
        from flinkstate.core.errors import OperatorNotFoundError

        raise OperatorNotFoundError(
            f"operator {operator!r} is in neither checkpoint {from_rec.checkpoint_id} nor {to_rec.checkpoint_id}; operators: {sorted(set(ops_to) | set(ops_from))}"
        )
    states = sorted(set(ops_to[operator].keyed_states if operator in ops_to else {}) | set(ops_from[operator].keyed_states if operator in ops_from else {}))
    name = _need(opts.state, "state", states, f"keyed states of operator {operator!r}")
    res.from_max_parallelism, res.max_parallelism = operator_max_parallelism(ck_from, ck_to, operator)
    in_to = operator in ops_to and name in ops_to[operator].keyed_states
    in_from = operator in ops_from and name in ops_from[operator].keyed_states
    if not in_to and not in_from:
        raise StateNotFoundError(f"operator {operator!r} has no keyed state {name!r} in checkpoint {from_rec.checkpoint_id} or {to_rec.checkpoint_id}; keyed states: {states}")
    desc = (ops_to if in_to else ops_from)[operator].keyed_states[name]
    res.desc = desc.to_dict()
    res.state_in_to = in_to
    res.entries = ck_to.state_files(operator, name) if in_to else []
    res.from_entries = ck_from.state_files(operator, name) if in_from else None
    return res


def non_null_columns(res: Resolved) -> frozenset[str]:
    """Columns of a read that never hold nulls: a state's, timer's or change's key and key group.

    Declared NOT NULL in the Spark schema, they spare Spark a null check per row and column in
    each of the two row copies it makes of a Python source's Arrow batches (about a sixth of the
    JVM time of a full scan); the reader refuses a batch breaking the promise (SchemaMismatchError).
    """
    if res.opts.table in ("state", "timers", "changes"):
        return frozenset({"key", "key_group"})
    return frozenset()


def output_columns(res: Resolved) -> list[tuple[str, pa.DataType]]:
    """The (name, Arrow type) columns a read returns."""
    from flinkstate.read.inspect import (
        CHECKPOINTS_SCHEMA,
        FILES_SCHEMA,
        OPERATORS_SCHEMA,
        STATES_SCHEMA,
    )

    opts = res.opts
    t = opts.table
    from flinkstate.read.insight import HISTORY_SCHEMA, KEY_GROUPS_SCHEMA, SUBTASKS_SCHEMA, TOP_KEYS_SCHEMA, TTL_EXPIRY_SCHEMA

    meta = {"checkpoints": CHECKPOINTS_SCHEMA, "files": FILES_SCHEMA, "states": STATES_SCHEMA, "operators": OPERATORS_SCHEMA,
            "keyGroups": KEY_GROUPS_SCHEMA, "subtasks": SUBTASKS_SCHEMA, "topKeys": TOP_KEYS_SCHEMA, "ttlExpiry": TTL_EXPIRY_SCHEMA,
            "history": HISTORY_SCHEMA}
    if t in ("sourceSplits", "sourceEnumerator"):
        from flinkstate.flink.bridge.source_positions import ENUMERATOR_SCHEMA, SPLITS_SCHEMA

        return [(f.name, f.type) for f in (SPLITS_SCHEMA if t == "sourceSplits" else ENUMERATOR_SCHEMA)]
    if t in meta:
        return [(f.name, f.type) for f in meta[t]]
    if t == "timers":
        from flinkstate.core.descriptors import TimerServiceDescriptor

        s = TimerServiceDescriptor.from_dict(res.timer_services[0])
        cols = [("key", s.key_type)]
        if s.namespace_type is not None:
            cols.append(("namespace", s.namespace_type))
        return cols + [("timestamp", pa.int64()), ("domain", pa.string()), ("timer_service", pa.string()), ("key_group", pa.int32())]
    if t == "operatorState":
        from flinkstate.core.descriptors import OperatorStateDescriptor

        assert res.desc is not None
        d = OperatorStateDescriptor.from_dict(res.desc)
        cols = [("subtask", pa.int32())]
        if d.key_type is not None:
            cols.append(("key", d.key_type))
        return cols + [("value", d.value_type)]
    d = res.descriptor()
    cols = [("key", d.key_type)]
    if d.namespace_type is not None:
        cols.append(("namespace", d.namespace_type))
    flatten = opts.flatten and t == "state"
    ttl = d.ttl_enabled
    if d.kind == "map":
        if flatten or t == "changes":
            cols += [("user_key", d.user_key_type), ("value", d.user_value_type)]
            ttl_t: pa.DataType = TS_US
        else:
            cols += [("value", pa.map_(d.user_key_type, d.user_value_type))]
            ttl_t = pa.map_(d.user_key_type, TS_US)
    elif d.kind == "list":
        if flatten:
            cols += [("value", d.value_type)]
            ttl_t = TS_US
        else:
            cols += [("value", pa.list_(d.value_type))]
            ttl_t = pa.list_(TS_US)
    else:
        cols += [("value", d.value_type)]
        ttl_t = TS_US
    cols.append(("key_group", pa.int32()))
    if ttl:
        cols.append(("ttl_expires_at", ttl_t))
        if opts.include_expired and t == "state":
            cols.append(("expired", pa.bool_()))
    if t == "changes":
        cols = [("checkpoint_id", pa.int64()), ("change_type", pa.string())] + cols
    return cols
