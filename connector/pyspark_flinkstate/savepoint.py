"""Atomic multi-state rewrites with Spark, in the spirit of Flink's SavepointWriter.

    sw = SavepointWriter(spark, path)               # based on the latest checkpoint
    sw.with_state("sessions", "count", df)          # add or replace a keyed state
    sw.remove_operator("old-op")
    sw.rename_operator("a", "b")
    sw.set_max_parallelism(256)                     # every operator: each key re-assigned to its new key group
    sw.set_max_parallelism(4096, "sessions")        # one operator (Flink gives every operator its own)
    info = sw.write(savepoint=True)                 # one commit: a checkpoint or savepoint

States are written as full files, one per key-group range: rows are shuffled by Spark so
that each range is written by one task (Flink's ranges for the operator's max parallelism). The
files land first; the one Delta commit at the end makes everything visible at once, and a
failure deletes what was written.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry

if TYPE_CHECKING:
    from flinkstate.store.writer import CheckpointWriter

__all__ = ["SavepointWriter"]

ROWS_PER_FILE = 1_000_000


def _entry_json(e: FileEntry) -> str:
    return json.dumps(e.to_dict())


def _entry(s: str) -> FileEntry:
    return FileEntry(**json.loads(s))


class SavepointWriter:
    """Compose changes to a checkpoint and commit them as one new checkpoint or savepoint."""

    def __init__(self, spark: Any, path: str, storage_options: dict[str, Any] | None = None,
                 base: int | Literal["latest"] | None = "latest") -> None:
        import flinkstate

        self.spark = spark
        self.store = flinkstate.open(path, storage_options)
        self.base = base
        self._ops: list[tuple[str, tuple[Any, ...]]] = []
        self._max_parallelism: int | None = None  # every operator's (and the default): set when the write begins

    # ------------------------------------------------------------------ composing
    def with_state(self, operator: str, state: str, df: Any, *, state_kind: str | None = None, ttl_ms: int | None = None) -> SavepointWriter:
        """Add or replace a keyed state from a DataFrame (columns as `df.write.format("flinkstate")` takes)."""
        self._ops.append(("state", (operator, state, df, state_kind, ttl_ms)))
        return self

    def with_ttl(self, operator: str, state: str, ttl_ms: int) -> SavepointWriter:
        """Give an existing TTL state another TTL duration without rewriting its data (FLIP-25 allows it on restore):
        reads, `expire` and export of the written savepoint judge entries by it."""
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms <= 0:
            raise InvalidArgumentError(f"ttl_ms of operator {operator!r} state {state!r} must be a positive int, got {ttl_ms!r}")
        self._ops.append(("ttl", (operator, state, ttl_ms)))
        return self

    def remove_operator(self, operator: str) -> SavepointWriter:
        """Drop an operator and all its state."""
        self._ops.append(("remove_operator", (operator,)))
        return self

    def remove_state(self, operator: str, state: str) -> SavepointWriter:
        """Drop one keyed state, timer service or operator state."""
        self._ops.append(("remove_state", (operator, state)))
        return self

    def rename_operator(self, old: str, new: str) -> SavepointWriter:
        """Change an operator's uid."""
        self._ops.append(("rename", (old, new)))
        return self

    def set_max_parallelism(self, max_parallelism: int, operator: str | None = None) -> SavepointWriter:
        """Change max parallelism: of one operator (its uid at this point of the changes: set it before `with_state` of
        that operator), or of every operator and the default new operators get (operator None, applied first).
        Every keyed state and timer of an operator whose value changes is re-assigned to its new key group."""
        from flinkstate.core.keygroups import UPPER_BOUND_MAX_PARALLELISM

        if isinstance(max_parallelism, bool) or not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise InvalidArgumentError(f"max parallelism must be an integer in [1, {UPPER_BOUND_MAX_PARALLELISM}], got {max_parallelism!r}")
        if operator is None:
            self._max_parallelism = max_parallelism
        else:
            self._ops.append(("max_parallelism", (max_parallelism, operator)))
        return self

    # ------------------------------------------------------------------ commit
    def write(self, *, savepoint: bool = False, checkpoint_id: int | None = None, flink_savepoint: str | None = None,
              flink_compression: bool = False, flink_version: str | None = None) -> Any:
        """Write every change and commit once; returns the new CheckpointInfo.

        flink_savepoint=DEST also exports the new checkpoint as a canonical Flink savepoint at DEST for Flink
        flink_version (default the newest; Flink restores it), as a Spark job (`flink_jobs.export_savepoint`: DEST on a
        filesystem every executor sees). DEST and the version are checked first, so an existing
        savepoint there or an unsupported version fails before anything is committed.
        """
        if flink_savepoint is not None:
            from flinkstate.flink.write.savepoint_writer import (
                DEFAULT_FLINK_VERSION,
                check_destination,
                metadata_version_for,
            )

            flink_version = flink_version or DEFAULT_FLINK_VERSION
            metadata_version_for(flink_version)
            check_destination(flink_savepoint)
            info = self.write(savepoint=True, checkpoint_id=checkpoint_id)
            from pyspark_flinkstate.flink_jobs import export_savepoint

            # one Spark task per Flink subtask writes its keyed file; the driver writes _metadata
            export_savepoint(self.spark, self.store, flink_savepoint, checkpoint_id=info.checkpoint_id, compression=flink_compression,
                             flink_version=flink_version)
            return info
        kind = "savepoint" if savepoint else "checkpoint"
        w = self.store.begin(kind=kind, checkpoint_id=checkpoint_id, base=self.base, max_parallelism=self._max_parallelism)
        try:
            for what, args in self._ops:
                if what == "rename":
                    old, new = args
                    w.rename_operator(old, new)
                elif what == "remove_operator":
                    w.remove_operator(args[0])
                elif what == "remove_state":
                    w.remove_state(*args)
                elif what == "max_parallelism":
                    w.set_max_parallelism(*args)
                elif what == "state":
                    operator, state, df, state_kind, ttl_ms = args
                    self._put_df(w, operator, state, df, state_kind, ttl_ms)
                elif what == "ttl":
                    operator, state, ttl_ms = args
                    w.declare(operator, _declared(w, operator, state).with_ttl_ms(ttl_ms))
            if w.rescaled:
                self._rescale(w)
        except BaseException:
            w.abort()
            raise
        return w.commit()

    def _put_df(self, w: CheckpointWriter, operator: str, state: str, df: Any, state_kind: str | None, ttl_ms: int | None) -> None:
        from pyspark_flinkstate.options import WriteOptions
        from pyspark_flinkstate.writer import (
            _arrow_schema,
            _check_columns,
            _new_descriptor,
        )

        schema = _arrow_schema(df.schema)
        o = WriteOptions(path=w.io.root, operator=operator, state=state, state_kind=state_kind, ttl_ms=ttl_ms)
        op = w.operators.get(operator)
        existing = op.keyed_states.get(state) if op is not None else None
        desc = existing if existing is not None and state_kind in (None, existing.kind) else _new_descriptor(o, schema)
        if desc is existing and ttl_ms:  # a new duration for the state rewritten
            desc = existing.with_ttl_ms(ttl_ms)
        flattened = _check_columns(desc, schema, f"operator {operator!r} state {state!r}", False)
        mp = w.max_parallelism_of(operator)
        p = self._ranges_count(mp)
        io, kind, cid, dd = w.io, w.kind, w.checkpoint_id, desc.to_dict()

        def bucket(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from flinkstate.core.descriptors import descriptor_from_dict
            from flinkstate.core.keygroups import assign_key_groups
            from flinkstate.format.writer import cast_key

            kt = descriptor_from_dict(dd).key_type
            for b in it:
                keys = cast_key(b.column(b.schema.get_field_index("key")), kt, f"operator {operator!r} state {state!r}")
                kg = assign_key_groups(keys, mp).to_numpy()
                yield b.append_column("__b", pa.array((kg * p // mp).astype("int32")))

        def write(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from flinkstate.core.descriptors import descriptor_from_dict
            from flinkstate.core.keygroups import key_group_range
            from flinkstate.format.writer import with_key_groups, write_state_files

            from pyspark_flinkstate.writer import to_storage_table

            bl = [b for b in it if b.num_rows]
            if not bl:
                return
            t = pa.Table.from_batches(bl)
            buckets = sorted(set(t.column("__b").to_pylist()))
            d = descriptor_from_dict(dd)
            st = to_storage_table(t.drop_columns(["__b"]), d, tombstones=False, flattened_list=flattened).drop_columns([C.COL_TOMBSTONE])
            st = with_key_groups(st, mp, f"state {d.name!r}", d.key_type)
            ranges = [key_group_range(mp, p, i) for i in buckets]
            entries = write_state_files(io, operator, d, st, checkpoint_id=cid, checkpoint_kind=kind, max_parallelism=mp,
                                        ranges=ranges, seq=1 + min(buckets))
            yield pa.RecordBatch.from_pydict({"entry": [_entry_json(e) for e in entries]})

        from pyspark.sql.types import IntegerType, StructField, StructType

        with _quiet():
            bschema = StructType(list(df.schema.fields) + [StructField("__b", IntegerType(), True)])
            out = df.mapInArrow(bucket, bschema).repartition(p, "__b").mapInArrow(write, "entry string")
        entries = [_entry(r.entry) for r in out.collect()]
        w.add_state_files(operator, desc, entries, mode="full", allow_schema_change=True)

    def _ranges_count(self, mp: int) -> int:
        par = max(1, int(self.spark.sparkContext.defaultParallelism))
        return max(1, min(mp, 2 * par))

    def _rescale(self, w: CheckpointWriter) -> None:
        """Re-assign every carried keyed state and timer service of the operators whose max parallelism changed to
        their new key groups (Spark job per state).

        States this write replaced (under whatever uid renames gave them since) are kept as written.
        """
        base = w.base
        if base is None:
            return
        ck = self.store.checkpoint(base.checkpoint_id)
        for uid in w.rescaled_operators():
            op = w.operators[uid]
            src = w.base_uid(uid)
            for name, desc in list(op.keyed_states.items()):
                if w.rewritten(uid, "keyed", name):
                    continue
                entries = self._rekey_job(w, uid, desc, ck.scan(src, name, raw=True).plan(), timers=False)
                w.add_state_files(uid, desc, entries, mode="full", allow_schema_change=True)
            for name, tdesc in list(op.timer_services.items()):
                if w.rewritten(uid, "timers", name):
                    continue
                entries = self._rekey_job(w, uid, tdesc, ck.scan_timers(src, name).plan(), timers=True)
                w.add_timer_files(uid, tdesc, entries, mode="full")

    def _rekey_job(self, w: CheckpointWriter, uid: str, desc: Any, tasks: list[Any], *, timers: bool) -> list[FileEntry]:
        """Read the old rows per task of the base checkpoint's scan, shuffle by new range, write full files per new range.

        The shuffle goes through files (Arrow IPC in a scratch folder of the root), so every
        type is kept exactly; the scratch files are removed afterwards.
        """
        import uuid

        mp = w.max_parallelism_of(uid)
        p = self._ranges_count(mp)
        io: FileIO = w.io
        scratch = f"{C.META_DIR}/tmp/{uuid.uuid4().hex}"
        dd = desc.to_dict()
        kind, cid = w.kind, w.checkpoint_id

        def _desc() -> Any:
            from flinkstate.core.descriptors import (
                TimerServiceDescriptor,
                descriptor_from_dict,
            )

            return TimerServiceDescriptor.from_dict(dd) if timers else descriptor_from_dict(dd)

        def phase1(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            import pyarrow.ipc as ipc
            from flinkstate.core.keygroups import assign_key_groups

            out = []
            for b in it:
                for n in b.column(0).to_pylist():
                    task = tasks[n]  # the scan tasks travel in this function's closure
                    view = task.to_arrow()
                    if view.num_rows == 0:
                        continue
                    view = view.drop_columns([C.COL_KEY_GROUP])
                    kg = assign_key_groups(view.column(C.COL_KEY), mp).to_numpy()
                    bk = kg * p // mp
                    for i in sorted(set(bk.tolist())):
                        part = view.filter(pa.array(bk == i))
                        rel = f"{scratch}/b{i:05d}-{task.key_group_range[0]:05d}.arrow"
                        with io.open(rel, "wb") as f, ipc.new_file(f, part.schema) as wr:
                            wr.write_table(part)
                        out.append((i, rel))
            yield pa.RecordBatch.from_pydict({"b": [o[0] for o in out], "path": [o[1] for o in out]}, schema=pa.schema([("b", pa.int32()), ("path", pa.string())]))

        def phase2(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            import pyarrow.ipc as ipc
            from flinkstate.core.keygroups import key_group_range
            from flinkstate.format.writer import write_state_files, write_timer_files

            d = _desc()
            groups: dict[int, list[str]] = {}
            for b in it:
                for i, path in zip(b.column(0).to_pylist(), b.column(1).to_pylist()):
                    groups.setdefault(i, []).append(path)
            res = []
            for i, paths in sorted(groups.items()):
                parts = []
                for rel in sorted(paths):
                    with io.open(rel, "rb") as f:
                        parts.append(ipc.open_file(f).read_all())
                t = pa.concat_tables(parts)
                fn = write_timer_files if timers else write_state_files
                res += fn(io, uid, d, t, checkpoint_id=cid, checkpoint_kind=kind, max_parallelism=mp, ranges=[key_group_range(mp, p, i)], seq=1 + i)
            yield pa.RecordBatch.from_pydict({"entry": [_entry_json(e) for e in res]}, schema=pa.schema([("entry", pa.string())]))

        if not tasks:
            return []
        try:
            tdf = self.spark.createDataFrame([(n,) for n in range(len(tasks))], "task int").repartition(max(1, len(tasks)))
            with _quiet():
                located = tdf.mapInArrow(phase1, "b int, path string")
                out = located.repartition(p, "b").mapInArrow(phase2, "entry string").collect()
            return [_entry(r.entry) for r in out]
        finally:
            try:
                fs, root = io.fs, io.fs_path(scratch)
                if fs.exists(root):
                    fs.rm(root, recursive=True)
            except OSError:
                pass


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence PySpark's notice that pandas 3 is not fully supported (mapInArrow uses no pandas)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
        yield


def _declared(w: CheckpointWriter, operator: str, state: str) -> Any:
    """The keyed state's declaration in the savepoint being written; typed errors listing what exists."""
    from flinkstate.core.errors import OperatorNotFoundError, StateNotFoundError

    op = w.operators.get(operator)
    if op is None:
        raise OperatorNotFoundError(f"operator {operator!r} is not in the savepoint being written; operators: {sorted(w.operators)}")
    d = op.keyed_states.get(state)
    if d is None:
        raise StateNotFoundError(f"operator {operator!r} has no keyed state {state!r}; keyed states: {sorted(op.keyed_states)}")
    return d
