"""A real Flink savepoint, retained checkpoint, or job checkpoint folder with the store's read API.

`flinkstate.open(path)` returns a `FlinkSource` when path holds Flink's `_metadata` (or `chk-N`
folders holding one) instead of a flinkstate root: `checkpoints()`, `checkpoint(id)` (a pinned
`FlinkCheckpoint`), `metadata(id)` and the `read_*` calls work as on a store, through the same scan.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flinkstate.core.errors import CheckpointNotFoundError, InvalidArgumentError
from flinkstate.core.ttl import StateTtlConfig
from flinkstate.flink._io import FlinkFiles, join_url
from flinkstate.flink.bridge.checkpoint import FlinkCheckpoint, load_flink_checkpoint
from flinkstate.flink.bridge.mapping import ReadOptions, SqlRows, parse_ttl
from flinkstate.format.metadata import CheckpointInfo, CheckpointMetadata
from flinkstate.read.reads import ReadApi
from flinkstate.store.store import CheckpointStore

__all__ = ["FlinkSource", "chk_folders", "is_flink_path", "open_store"]

_LOG = logging.getLogger(__name__)


def _norm(path: str | os.PathLike[str]) -> str:
    """A local path without `file://`, or a URL without a trailing slash (s3a:// read as s3://)."""
    p = os.fspath(path)
    if p.startswith("file://"):
        return p[7:]
    if "://" in p:
        scheme, rest = p.split("://", 1)
        return ("s3" if scheme in ("s3a", "s3n") else scheme) + "://" + rest.rstrip("/")
    return p


def chk_folders(path: str, files: FlinkFiles | None = None) -> dict[int, str]:
    """The `chk-N` folders holding a `_metadata` in a Flink job's checkpoint folder, by N."""
    files = files if files is not None else FlinkFiles()
    out = {}
    for entry in files.list_dir(path):
        n = entry.removeprefix("chk-")
        if entry.startswith("chk-") and n.isdigit() and files.exists(join_url(join_url(path, entry), "_metadata")):
            out[int(n)] = join_url(path, entry)
    return out


def is_flink_path(path: str, storage_options: dict[str, Any] | None = None) -> bool:
    """True when a path or URL (local, memory://, s3://) is a Flink savepoint/checkpoint (`_metadata`), or a job folder with `chk-N` ones."""
    path = _norm(path)
    if "://" in path and path.split("://", 1)[0] not in ("memory", "s3"):
        return False
    files = FlinkFiles(storage_options)
    if files.exists(join_url(path, "_flinkstate")) or files.is_dir(join_url(path, "_flinkstate")):
        return False
    if os.path.basename(path) == "_metadata":
        return files.exists(path)
    return files.exists(join_url(path, "_metadata")) or bool(chk_folders(path, files))


class FlinkSource(ReadApi):
    """The checkpoints of a Flink savepoint, retained checkpoint or job checkpoint folder (read only).

    Files are read through the project's FileIO (`files`: local, memory:// or s3:// with
    storage_options). A checkpoint copied away from where Flink wrote it is read from the copied
    layout; one warning per open names the folders so resolved (and `describe` lists them).
    """

    def __init__(self, path: str | os.PathLike[str], *, ttl: str | Mapping[str, StateTtlConfig | int] | None = None,
                 reference_ms: int | None = None, uids: Iterable[str] = (), pyflink: Mapping[str, Any] | None = None,
                 unpickle: bool = False, storage_options: dict[str, Any] | None = None, raw_values: bool = False,
                 row_fields: str | Mapping[str, Sequence[str] | str] | None = None, sql_rows: SqlRows = "columns",
                 sql_plan: str | os.PathLike[str] | None = None,
                 kryo_classes: str | Sequence[str] | Mapping[str, str] | None = None) -> None:
        """uids names operators that Flink 1.x metadata records only by id (matched by Flink's hash of the uid);
        ttl: TTL durations per "operator/state" or "state" (ms, a StateTtlConfig; or "op/state=ms;state=ms");
        raw_values: Kryo/Avro values as their serialized bytes; row_fields: names of Row fields per "operator/state";
        sql_rows: SQL operators' RowData keys and values as columns (default) or as BinaryRowData bytes; sql_plan: the
        job's compiled plan (`COMPILE PLAN` JSON) whose nodes name those columns as the SQL does (else f0..fn);
        kryo_classes: schemas of the user classes in Kryo values, "com.acme.Order=id:String,tags:List<String>;..."
        (Kryo writes a class's fields without names; JDK types, collections and maps need none)."""
        from flinkstate.flink.pyflink.coders import PyFlinkOptions

        self.path = _norm(path)
        self.uids = tuple(uids)
        self.options = ReadOptions.of(raw_values, row_fields, sql_rows=sql_rows, sql_plan=sql_plan, kryo_classes=kryo_classes)
        self.ttl = parse_ttl(ttl)
        # PyFlink jobs: state types per "operator/state" or "state" (flink.pyflink.value_state...); unpickle runs code
        self.pyflink = PyFlinkOptions(dict(pyflink or {}), unpickle=bool(unpickle))
        self.reference_ms = reference_ms
        self.files = FlinkFiles(storage_options)
        self._warned = False
        if os.path.basename(self.path) == "_metadata" or self.files.exists(join_url(self.path, "_metadata")):
            folder = os.path.dirname(self.path) if os.path.basename(self.path) == "_metadata" else self.path
            self._folders = {-1: folder}  # one savepoint/checkpoint: its id is in its _metadata
        else:
            self._folders = chk_folders(self.path, self.files)
            if not self._folders:
                raise CheckpointNotFoundError(f"{self.path}: no Flink _metadata here, and no chk-N folder holding one")
        self._loaded: dict[int, FlinkCheckpoint] = {}

    @property
    def root(self) -> str:
        """The path opened."""
        return self.path

    def __repr__(self) -> str:
        return f"FlinkSource({self.path!r})"

    def _load(self, key: int) -> FlinkCheckpoint:
        ck = self._loaded.get(key)
        if ck is None:
            ck = self._loaded[key] = load_flink_checkpoint(self._folders[key], ttl=self.ttl, reference_ms=self.reference_ms,
                                                         uids=self.uids, pyflink=self.pyflink, files=self.files, options=self.options)
            self._say_relocated(ck.meta.relocated)
        return ck

    def _say_relocated(self, relocated: Mapping[str, str]) -> None:
        """Warn once per open that state files are read from the copied layout, not where `_metadata` says."""
        if relocated and not self._warned:
            self._warned = True
            moved = "; ".join(f"{a} -> {b}" for a, b in sorted(relocated.items()))
            _LOG.warning("%s: this Flink checkpoint was copied away from where Flink wrote it; its state files are read "
                         "from the copied layout (%s)", self.path, moved)

    def checkpoint(self, checkpoint_id: int | None = None) -> FlinkCheckpoint:
        """One savepoint/checkpoint (default the latest), pinned."""
        if checkpoint_id is not None and (isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int)):
            raise InvalidArgumentError(f"checkpoint id must be an integer, got {checkpoint_id!r}")
        if -1 in self._folders:
            ck = self._load(-1)
            if checkpoint_id is not None and checkpoint_id != ck.checkpoint_id:
                raise CheckpointNotFoundError(f"{self.path} holds Flink checkpoint {ck.checkpoint_id}, not {checkpoint_id}")
            return ck
        if checkpoint_id is None:
            return self._load(max(self._folders))
        if checkpoint_id not in self._folders:
            raise CheckpointNotFoundError(f"{self.path}: no retained Flink checkpoint {checkpoint_id} (retained: {sorted(self._folders)})")
        return self._load(checkpoint_id)

    def checkpoints(self, *, include_discarded: bool = False) -> list[CheckpointInfo]:
        """Every retained checkpoint (or the one savepoint), oldest first (from their `_metadata` only)."""
        from flinkstate.flink.meta.metadata import read_metadata

        out = []
        for k in sorted(self._folders):
            if k in self._loaded:
                out.append(self._loaded[k].info)
                continue
            meta = read_metadata(self._folders[k], self.files)
            self._say_relocated(meta.relocated)
            created = self.reference_ms if self.reference_ms is not None else self.files.modified_ms(meta.path)
            out.append(FlinkCheckpoint(meta, {}, created).info)
        return out

    def latest_checkpoint_id(self) -> int | None:
        """Id of the newest retained checkpoint."""
        return self.checkpoint().checkpoint_id

    def info(self, checkpoint_id: int | None = None) -> CheckpointInfo:
        """Figures of one checkpoint."""
        return self.checkpoint(checkpoint_id).info

    def metadata(self, checkpoint_id: int | None = None) -> CheckpointMetadata:
        """Operators and descriptors mapped from the serializer snapshots."""
        ck = self.checkpoint(checkpoint_id)
        return CheckpointMetadata(info=ck.info, operators=ck.operators, properties={"flink.path": ck.meta.path})

    def describe(self, checkpoint_id: int | None = None) -> dict[str, Any]:
        """A JSON-able description: operators (uid, operator id, parallelism, max parallelism, files, bytes, per-subtask
        sizes) and their states (kind, TTL or ttl_unknown, files, rows, bytes: None where the format does not tell)."""
        from flinkstate.flink.bridge.sizes import operator_size, subtask_sizes

        ck = self.checkpoint(checkpoint_id)
        states: dict[str, list[dict[str, Any]]] = {}
        for r in ck.inspect.states().to_pylist():
            states.setdefault(r["operator"], []).append({k: r[k] for k in ("state", "state_kind", "ttl", "ttl_unknown", "files", "rows", "bytes",
                                                                          "key_serializer", "value_serializer")})
        ops = []
        for name, om in sorted(ck.operators.items()):
            fop = ck.meta.operator(ck.uids[name])
            size = operator_size(ck.meta, fop)
            ops.append({"uid": name, "operator_id": fop.operator_id, "name": fop.name, "parallelism": fop.parallelism,
                        "max_parallelism": fop.max_parallelism,
                        "keyed_states": {n: d.kind for n, d in sorted(om.keyed_states.items())},
                        "timer_services": sorted(om.timer_services), "operator_states": {n: d.mode for n, d in sorted(om.operator_states.items())},
                        "files": size.files, "bytes": size.bytes, "subtasks": [t.to_dict() for t in subtask_sizes(ck.meta, fop)],
                        "states": states.get(name, []),
                        **({"error": f"{type(ck.broken[name]).__name__}: {ck.broken[name]}"} if name in ck.broken else {})})
        guess = ck.meta.flink_version
        out = {"path": ck.meta.path, "metadata_version": ck.meta.version, "flink_version": guess.label,
               "flink_version_evidence": list(guess.evidence), "checkpoint": ck.info.to_dict(), "operators": ops,
               "ttl_unknown": list(ck.ttl_unknown), "refused": dict(sorted(ck.refused.items()))}
        if ck.meta.relocated:
            out["relocated"] = dict(sorted(ck.meta.relocated.items()))  # recorded folder -> copied folder read instead
        if ck.meta.version <= 4:  # Flink 1.x: what an upgrade to 2.x does with the state Kryo 2 serialized
            from flinkstate.flink.bridge.kryo_types import upgrade_report

            out["upgrade_to_2x"] = upgrade_report(ck.meta, dict(ck.uids))
        return out


def open_store(path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None, **flink: Any) -> Any:
    """Open the checkpoint store at a local path or fsspec URL (it may be empty).

    A Flink savepoint, retained checkpoint or job checkpoint folder (`_metadata`, `chk-N/`) opens as a
    read-only `flinkstate.flink.bridge.source.FlinkSource` with the same read API; `flink` keywords
    (raw_values, row_fields, sql_rows, sql_plan, kryo_classes, ttl, reference_ms) go to it and are refused for a flinkstate root.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"path must be a local path or URL (str or os.PathLike), got {path!r} ({type(path).__name__})")
    if is_flink_path(os.fspath(path), storage_options):
        return FlinkSource(path, storage_options=storage_options, **flink)
    if flink:
        raise InvalidArgumentError(f"{os.fspath(path)} is not a Flink savepoint or checkpoint: options {sorted(flink)} apply to those only")
    return CheckpointStore(path, storage_options)
