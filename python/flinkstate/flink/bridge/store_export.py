"""Export a flinkstate checkpoint as a canonical Flink savepoint through the store's public read API.

The driver plans (`plan_export`: every type mapped, the destination checked, nothing written), one job per subtask
of every operator with keyed state reads that subtask's key-group range and writes its keyed file
(`export_task.export_range`, here one after the other or as Spark tasks), and the driver writes `_metadata` and
renames the temporary folder into place (`run_export`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import InvalidArgumentError, StateNotFoundError
from flinkstate.flink.bridge.export_task import ExportRunner, RangeExport, run_local
from flinkstate.flink.bridge.serializer_json import (
    OPERATOR_ID_PROPERTY,
    SERIALIZERS_PROPERTY,
    node_from_json,
)
from flinkstate.flink.bridge.source import open_store
from flinkstate.flink.files.canonical import KeyedState
from flinkstate.flink.serde.encode import _COMP_CLS, type_for_arrow
from flinkstate.flink.serde.serializers import VOID_NAMESPACE, StateMeta, TypeNode, arrow_type
from flinkstate.flink.write.savepoint_folder import discard, publish, temp_folder
from flinkstate.flink.write.savepoint_writer import (
    DEFAULT_FLINK_VERSION,
    OperatorExport,
    check_destination,
    metadata_version_for,
    subtask_ranges,
    write_metadata,
)
from flinkstate.read.checkpoint import StoreCheckpoint
from flinkstate.read.scan import ScanTask
from flinkstate.store.store import CheckpointStore

__all__ = ["ExportPlan", "export_savepoint", "plan_export", "run_export"]

_LONG = type_for_arrow(pa.int64(), "ttl")
_VOID = VOID_NAMESPACE
_MODES = {"list": ("OPERATOR", "SPLIT_DISTRIBUTE"), "union": ("OPERATOR", "UNION"), "broadcast": ("BROADCAST", "BROADCAST")}


def _ns(t: pa.DataType | None, ctx: str) -> TypeNode:
    return _VOID if t is None else type_for_arrow(t, ctx)


def _keyed_meta(desc, ctx: str) -> StateMeta:
    """The Flink StateMetaInfoSnapshot of a flinkstate keyed-state descriptor (TTL wraps each value)."""
    if desc.kind == "map":
        elem = type_for_arrow(desc.user_value_type, ctx)
    else:
        elem = type_for_arrow(desc.value_type, ctx)
    if desc.ttl is not None:
        elem = TypeNode("ttl", _COMP_CLS["ttl"], (_LONG, elem))
    if desc.kind == "map":
        value = TypeNode("map", _COMP_CLS["map"], (type_for_arrow(desc.user_key_type, ctx), elem))
    elif desc.kind == "list":
        value = TypeNode("list", _COMP_CLS["list"], (elem,))
    else:
        value = elem
    return StateMeta(desc.name, "KEY_VALUE", {"KEYED_STATE_TYPE": desc.kind.upper()},
                     {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": _ns(desc.namespace_type, ctx)})


def _sig(n: TypeNode) -> object:
    """What a serializer means for the data: wrappers by kind, everything else by its Arrow type."""
    if n.kind in ("ttl", "list", "map", "timer", "void"):
        return (n.kind, tuple(_sig(c) for c in n.children))
    return str(arrow_type(n))


def _kept(fresh: TypeNode, stored: dict | None, role: str) -> TypeNode:
    """The serializer an imported state came with when its meaning is unchanged (a POJO stays that POJO), else fresh."""
    if stored is None or role not in stored:
        return fresh
    old = node_from_json(stored[role])
    if old.kind in ("parray", "sarray", "garray") and str(arrow_type(old)) == str(arrow_type(fresh)):
        return old  # an array read back as an Arrow list stays that array (not a List)
    return old if _sig(old) == _sig(fresh) else fresh


def _as_pojo(node: TypeNode, cls: str, ctx: str) -> TypeNode:
    """The value serializer with its struct (inside TTL, list and map wrappers) as the POJO class cls, fields by name."""
    if node.kind == "row":
        order = sorted(range(len(node.names)), key=lambda i: node.names[i])  # Flink's PojoTypeInfo sorts fields by name
        return TypeNode("pojo", cls, tuple(node.children[i] for i in order), tuple(node.names[i] for i in order))
    if node.kind in ("ttl", "map"):
        return TypeNode(node.kind, node.cls, (node.children[0], _as_pojo(node.children[1], cls, ctx)))
    if node.kind == "list":
        return TypeNode("list", node.cls, (_as_pojo(node.children[0], cls, ctx),))
    raise InvalidArgumentError(f"{ctx}: a POJO class was given for it, but its values are not a struct ({node.kind})")


@dataclass(frozen=True)
class ExportPlan:
    """An export checked and ready to run (nothing written yet): every operator with its state metadata mapped (keyed
    tables not read), operator and coordinator state read, and the scans its subtasks' ranges are read through."""

    checkpoint: StoreCheckpoint
    dest: str
    operators: list[OperatorExport]
    reads: dict[str, dict[str, tuple[str, str]]]  # uid -> Flink state name -> ("keyed" or "timers", its name in the store)
    lists: dict[str, frozenset[str]]  # uid -> its list states
    compression: bool = False
    flink_version: str = DEFAULT_FLINK_VERSION

    def jobs(self, folder: str) -> list[RangeExport]:
        """One job per subtask of every operator with keyed state, writing into folder: the store's scan tasks of
        each state and timer service bounded to the subtask's key-group range."""
        ck = self.checkpoint
        out = []
        for op in self.operators:
            if op.keyed is None:
                continue
            for i, (lo, hi) in enumerate(subtask_ranges(op.parallelism, op.max_parallelism)):
                kgs = range(lo, hi + 1)
                scans: dict[str, tuple[pa.Schema, list[ScanTask]]] = {}
                for flink_name, (scope, name) in self.reads[op.uid].items():
                    scan = (ck.scan(op.uid, name, raw=True, key_groups=kgs) if scope == "keyed"  # stored rows: last-access times
                            else ck.scan_timers(op.uid, name, key_groups=kgs))
                    scans[flink_name] = (scan.schema, scan.plan())
                out.append(RangeExport(op, i, (lo, hi), scans, self.lists.get(op.uid, frozenset()), folder, self.compression))
        return out


def plan_export(
    store_or_root: CheckpointStore | str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    checkpoint_id: int | None = None,
    compression: bool = False,
    pojo_classes: Mapping[str, str] | None = None,
    storage_options: dict | None = None,
    flink_version: str = DEFAULT_FLINK_VERSION,
) -> ExportPlan:
    """Check an export (the arguments of `export_savepoint`) and map every state's type: an unsupported target, a
    destination holding a savepoint, a type without a Flink serializer, a POJO class for no state are refused here."""
    metadata_version_for(flink_version)  # an unsupported target is refused before anything is read
    dest = check_destination(os.fspath(dest))
    pojo_classes = dict(pojo_classes or {})
    store = store_or_root if isinstance(store_or_root, CheckpointStore) else open_store(store_or_root, storage_options)
    ck = store.checkpoint(checkpoint_id)  # pinned: every state below is read from this one checkpoint
    meta = ck.metadata
    cid = meta.info.checkpoint_id
    ops: list[OperatorExport] = []
    reads: dict[str, dict[str, tuple[str, str]]] = {}
    lists: dict[str, frozenset[str]] = {}
    for uid, op in meta.operators.items():
        keyed = None
        key_types = [d.key_type for d in op.keyed_states.values()] + [d.key_type for d in op.timer_services.values()]
        kept = json.loads(meta.properties.get(SERIALIZERS_PROPERTY + uid, "{}"))
        if key_types:
            key = type_for_arrow(key_types[0], f"operator {uid!r} key")
            keyed = KeyedState(_kept(key, kept, "key") if "key" in kept else key)
            for name, d in op.keyed_states.items():
                ctx = f"operator {uid!r}, state {name!r}"
                m = _keyed_meta(d, ctx)
                sers = {role: _kept(node, kept.get(name), role) for role, node in m.serializers.items()}
                pojo = pojo_classes.pop(f"{uid}/{name}", None)
                if pojo is not None:
                    sers["VALUE_SERIALIZER"] = _as_pojo(sers["VALUE_SERIALIZER"], pojo, ctx)
                keyed.meta[name] = StateMeta(m.name, m.backend_type, m.options, sers)
                reads.setdefault(uid, {})[name] = ("keyed", name)  # read per subtask range by the jobs
            for name, d in op.timer_services.items():
                ctx = f"operator {uid!r}, timer service {name!r}"
                sname = name if name.startswith(f"{d.domain}_") else f"{d.domain}_{name}"  # imported services keep Flink's name
                node = TypeNode("timer", _COMP_CLS["timer"], (type_for_arrow(d.key_type, ctx), _ns(d.namespace_type, ctx)))
                node = _kept(node, kept.get("_timer_state/" + sname), "VALUE_SERIALIZER")
                keyed.meta["_timer_state/" + sname] = StateMeta("_timer_state/" + sname, "PRIORITY_QUEUE", {}, {"VALUE_SERIALIZER": node})
                reads.setdefault(uid, {})["_timer_state/" + sname] = ("timers", name)
            lists[uid] = frozenset(n for n, d in op.keyed_states.items() if d.kind == "list")
        states = {}
        for name, d in op.operator_states.items():
            ctx = f"operator {uid!r}, operator state {name!r}"
            backend, mode = _MODES[d.mode]
            sers = {"VALUE_SERIALIZER": type_for_arrow(d.value_type, ctx)}
            if d.mode == "broadcast":
                sers["KEY_SERIALIZER"] = type_for_arrow(d.key_type, ctx)
            m = StateMeta(name, backend, {"OPERATOR_STATE_DISTRIBUTION_MODE": mode}, sers)
            states[name] = (mode, ck.scan_operator_state(uid, name).to_arrow(), m)
        flink_id = meta.properties.get(OPERATOR_ID_PROPERTY + uid)
        coordinator = None
        if flink_id is not None and op.has_coordinator:  # only a Flink coordinator's own bytes go back to Flink
            t = ck.scan_coordinator(uid).to_arrow()
            payloads = t.filter(pc.equal(t.column("record_type"), "state")).column("payload").to_pylist()
            coordinator = payloads[0] if payloads else None
        if keyed is None and not states and coordinator is None:
            continue
        ops.append(OperatorExport(uid, op.parallelism or 1, ck.max_parallelism_of(uid), keyed, states, coordinator_state=coordinator,
                                  operator_id=flink_id))  # each operator its own max parallelism, as Flink checks on restore
    if pojo_classes:
        raise StateNotFoundError(f"POJO classes given for keyed states that checkpoint {cid} does not have: {sorted(pojo_classes)}")
    return ExportPlan(ck, dest, ops, reads, lists, compression, flink_version)


def run_export(plan: ExportPlan, run: ExportRunner = run_local) -> str:
    """Run a planned export: one job per subtask with keyed state writes its file into a temporary folder (`run` runs
    them: here one after the other, or as Spark tasks), then the driver writes operator-state files and `_metadata`
    and renames the folder into place. A failure removes the folder: nothing appears at the destination."""
    dest = check_destination(plan.dest)  # still free
    folder = temp_folder(dest)
    try:
        jobs = plan.jobs(folder)
        files = run(jobs) if jobs else []
        keyed = {(j.operator.uid, j.index): f for j, f in zip(jobs, files)}
        write_metadata(folder, plan.operators, keyed, checkpoint_id=plan.checkpoint.checkpoint_id, flink_version=plan.flink_version)
        return publish(folder, dest)
    except BaseException:
        discard(folder)
        raise


def export_savepoint(
    store_or_root: CheckpointStore | str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    checkpoint_id: int | None = None,
    compression: bool = False,
    pojo_classes: Mapping[str, str] | None = None,
    storage_options: dict | None = None,
    flink_version: str = DEFAULT_FLINK_VERSION,
) -> str:
    """Write checkpoint checkpoint_id (default the latest) of a flinkstate store as a canonical Flink savepoint at dest,
    in this process (`plan_export`, then `run_export` with the subtasks' keyed files one after the other;
    `pyspark_flinkstate.flink_jobs.export_savepoint` writes them as Spark tasks).

    Every state's type is mapped before any file is written (UnsupportedSerializerError names state and type);
    dest holding a savepoint is refused (SavepointExistsError). Returns the savepoint directory.
    flink_version is the Flink release that will restore it ("1.18" ... "2.3", default the newest); others are
    refused by name (UnsupportedFlinkVersionError).
    pojo_classes maps "operator/state" to a Java class name: that state's struct values are written as that POJO
    (Flink's PojoSerializer, fields by name) instead of a Row.
    """
    return run_export(plan_export(store_or_root, dest, checkpoint_id=checkpoint_id, compression=compression, pojo_classes=pojo_classes,
                                  storage_options=storage_options, flink_version=flink_version))
