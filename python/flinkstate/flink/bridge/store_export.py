"""Export a flinkstate checkpoint as a canonical Flink savepoint through the store's public read API.

The driver plans (`plan_export`: every state's serializers chosen, `export_meta`: an imported state's own, snapshots byte
for byte; the changes since the import encoded once with them, `export_check`; Kryo bytes the target release reads
differently refused, `write.releases`; the destination checked; nothing written), one job per subtask
of every operator with keyed state reads that subtask's key-group range and writes its keyed file
(`export_task.export_range`, here one after the other or as Spark tasks), and the driver writes `_metadata` and
renames the temporary folder into place (`run_export`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import StateNotFoundError
from flinkstate.flink.bridge.export_task import ExportRunner, RangeExport, run_local
from flinkstate.flink.bridge.export_meta import (
    Recorded,
    key_serializer,
    keyed_meta,
    operator_meta,
    timer_meta,
)
from flinkstate.flink.bridge.export_check import check_changes
from flinkstate.flink.bridge.serializer_json import (
    OPERATOR_ID_PROPERTY,
    OPERATOR_NAME_PROPERTY,
    SOURCE_RELEASE_PROPERTY,
)
from flinkstate.flink.bridge.source import open_store
from flinkstate.flink.files.canonical import KeyedState
from flinkstate.flink.serde.kryo.migrate import KryoMigrationError, Migration, migrate_state
from flinkstate.flink.write.savepoint_folder import discard, publish, temp_folder
from flinkstate.flink.write.releases import check_target_release
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
    migrations: dict[str, list[Migration]] = field(default_factory=dict)  # "operator/state" -> Kryo 2 parts migrated for 2.x

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
    """Check an export (the arguments of `export_savepoint`) and choose every state's serializers: an unsupported target,
    a destination holding a savepoint, a type without a Flink serializer, a POJO class for no state, an imported state
    whose types changed (SerializerMismatchError), a changed value its serializer cannot hold, Kryo bytes of the other
    major release (IncompatibleReleaseError) are refused here."""
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
        recorded = Recorded(meta.properties, uid)
        if key_types:
            keyed = KeyedState(key_serializer(key_types[0], recorded, uid))
            for name, d in op.keyed_states.items():
                keyed.meta[name] = keyed_meta(d, recorded, uid, pojo_classes.pop(f"{uid}/{name}", None))
                reads.setdefault(uid, {})[name] = ("keyed", name)  # read per subtask range by the jobs
            for name, d in op.timer_services.items():
                service = name if name.startswith(f"{d.domain}_") else f"{d.domain}_{name}"  # imported services keep Flink's name
                m = timer_meta(service, d, recorded, uid)
                keyed.meta[m.name] = m
                reads.setdefault(uid, {})[m.name] = ("timers", name)
            lists[uid] = frozenset(n for n, d in op.keyed_states.items() if d.kind == "list")
        states = {}
        for name, d in op.operator_states.items():
            mode, m = operator_meta(name, d, recorded, uid)
            states[name] = (mode, ck.scan_operator_state(uid, name).to_arrow(), m)
        flink_id = meta.properties.get(OPERATOR_ID_PROPERTY + uid)
        coordinator = None
        if flink_id is not None and op.has_coordinator:  # only a Flink coordinator's own bytes go back to Flink
            t = ck.scan_coordinator(uid).to_arrow()
            payloads = t.filter(pc.equal(t.column("record_type"), "state")).column("payload").to_pylist()
            coordinator = payloads[0] if payloads else None
        if keyed is None and not states and coordinator is None:
            continue
        releases = tuple(r for r in meta.properties.get(SOURCE_RELEASE_PROPERTY + uid, "").split(",") if r)
        ops.append(OperatorExport(uid, op.parallelism or 1, ck.max_parallelism_of(uid), keyed, states, coordinator_state=coordinator,
                                  operator_id=flink_id, source_releases=releases,
                                  name=meta.properties.get(OPERATOR_NAME_PROPERTY + uid) if flink_id is not None else None))  # each operator its own max parallelism, as Flink checks on restore
    if pojo_classes:
        raise StateNotFoundError(f"POJO classes given for keyed states that checkpoint {cid} does not have: {sorted(pojo_classes)}")
    ops, migrations = _migrated(ops, flink_version)  # Kryo 2 (Flink 1.x) states, as Flink 2.x reads them
    check_target_release(ops, flink_version)  # bytes the target release would read differently: refused before anything is written
    check_changes(ck, ops, reads, lists)  # changed values that their serializers cannot write: likewise
    return ExportPlan(ck, dest, ops, reads, lists, compression, flink_version, migrations)


def _migrated(ops: list[OperatorExport], flink_version: str) -> tuple[list[OperatorExport], dict[str, list[Migration]]]:
    """For a Flink 2.x target, every keyed state that Flink 1.x's Kryo 2 serialized with the serializers Flink 2.x gives
    the same Java types (`serde.kryo.migrate`): per "operator/state" what was migrated and how. A state that cannot be
    is a KryoMigrationError naming it, before anything is written; 1.x targets keep their serializers."""
    if int(flink_version.split(".")[0]) < 2:
        return ops, {}
    out: dict[str, list[Migration]] = {}
    failed: list[KryoMigrationError] = []
    rows: list[dict[str, str]] = []
    for op in ops:
        if op.keyed is None:
            continue
        key = op.keyed.key_type
        for name, m in list(op.keyed.meta.items()):
            try:
                new, key, done = migrate_state(m, key, f"operator {op.uid!r}, state {name!r}")
            except KryoMigrationError as e:
                failed.append(e)
                rows.append({"operator": op.uid, "state": name, "path": "", "declared": "", "migrated_to": "", "without_migration": "",
                             "error": str(e)})
                continue
            if done:
                op.keyed.meta[name] = new
                out[f"{op.uid}/{name}"] = done
                rows += [{"operator": op.uid, "state": name, **{k: v for k, v in d.to_dict().items() if k != "written"},
                          "migrated_to": d.written, "without_migration": d.without, "error": ""} for d in done]
        op.keyed.key_type = key
    if failed:
        head = f"{len(failed)} state(s) cannot be written for Flink {flink_version}: " if len(failed) > 1 else ""
        raise KryoMigrationError(head + "; ".join(map(str, failed)), rows) from failed[0]
    return ops, out


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

    Every state's serializers are chosen before any file is written: a state imported from Flink keeps the ones Flink
    wrote it with (snapshots byte for byte; a state nobody changed comes back as Flink wrote it), others are mapped from
    their Arrow types (UnsupportedSerializerError names state and type); what `plan_export` refuses is refused before
    anything is written; dest holding a savepoint is refused (SavepointExistsError). Returns the savepoint directory.
    flink_version is the Flink release that will restore it ("1.18" ... "2.3", default the newest); others are
    refused by name (UnsupportedFlinkVersionError).
    pojo_classes maps "operator/state" to a Java class name: that state's struct values are written as that POJO
    (Flink's PojoSerializer, fields by name) instead of a Row (or instead of the serializer it was imported with).
    """
    return run_export(plan_export(store_or_root, dest, checkpoint_id=checkpoint_id, compression=compression, pojo_classes=pojo_classes,
                                  storage_options=storage_options, flink_version=flink_version))
