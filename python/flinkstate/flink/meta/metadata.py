"""Parse a Flink checkpoint/savepoint `_metadata` file (format versions 3 to 6).

Layout: Flink's `Checkpoints`, `MetadataV2V3SerializerBase` and `MetadataV3..V6Serializer`.
Handles this decoder reads: inline ByteStreamStateHandle, FileStateHandle, RelativeFileStateHandle,
KeyGroupsStateHandle (V1, V2 and savepoint) and OperatorStreamStateHandle. RocksDB/ForSt handles
(IncrementalRemoteKeyedStateHandle: incremental or full) are parsed here with their shared and
private file lists and read by `rocksdb`; changelog handles, file-merging segments and unaligned
channel state are refused with UnsupportedFlinkFormatError naming them.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from flinkstate.core.errors import OperatorNotFoundError
from flinkstate.flink._io import DataReader, FlinkFiles, _split_url, join_url
from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.meta.handles import (  # re-exported: the parsed metadata's parts
    MODES,
    KeyGroupsHandle,
    OperatorState,
    OperatorStateHandle,
    StreamHandle,
    SubtaskState,
    UnsupportedKeyedHandle,
)
from flinkstate.flink.meta.names import find_operator
from flinkstate.flink.meta.version import FlinkVersionGuess, guess_flink_version

__all__ = [
    "MAGIC",
    "CheckpointMetadata",
    "KeyGroupsHandle",
    "OperatorState",
    "OperatorStateHandle",
    "StreamHandle",
    "SubtaskState",
    "UnsupportedKeyedHandle",
    "parse_metadata",
    "read_metadata",
]

MAGIC = 0x4960672D
_MASTER_MAGIC = 0xC96B1696 - (1 << 32)
SUPPORTED_VERSIONS = (3, 4, 5, 6)

# StreamStateHandle / KeyedStateHandle type bytes (MetadataV2V3SerializerBase).
_NULL, _BYTES, _FILE, _KG, _OP, _INCR, _RELATIVE, _SP_KG = 0, 1, 2, 3, 4, 5, 6, 7
_INCR_V2, _KG_V2 = 11, 12
_CHANGELOG = {8: "ChangelogStateBackendHandle", 9: "ChangelogStateHandleStreamImpl", 10: "InMemoryChangelogStateHandle",
              13: "ChangelogStateBackendHandle (v2)", 14: "ChangelogStateHandleStreamImpl (v2)"}
_STREAM_KINDS = {15: "SegmentFileStateHandle (file-merging checkpoint)",
                 16: "EmptyFileMergingOperatorStreamStateHandle (file-merging checkpoint)",
                 17: "FileMergingOperatorStreamStateHandle (file-merging checkpoint)",
                 18: "EmptySegmentFileStateHandle (file-merging checkpoint)"}
@dataclass(frozen=True)
class CheckpointMetadata:
    """A parsed `_metadata`: version, checkpoint id, master states and operators."""

    path: str
    version: int
    checkpoint_id: int
    master_states: list[tuple[str, int, bytes]]
    operators: list[OperatorState]
    options: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # read options (PyFlink declarations)
    files: FlinkFiles = field(default_factory=FlinkFiles, compare=False, repr=False)
    relocated: dict[str, str] = field(default_factory=dict)

    @property
    def directory(self) -> str:
        """The directory (local path or URL) relative file handles are resolved against."""
        return _split_url(self.path)[0] if "://" in self.path else os.path.dirname(self.path)

    @property
    def default_max_parallelism(self) -> int:
        """The max parallelism flinkstate gives operators added to this savepoint later (each Flink operator keeps its own):
        the largest of its keyed operators', else of all its operators', else Flink's default 128."""
        keyed = [op.max_parallelism for op in self.operators if any(s.managed_keyed is not None for s in op.subtasks)]
        return max(keyed or [op.max_parallelism for op in self.operators] or [128])

    @cached_property
    def flink_version(self) -> FlinkVersionGuess:
        """Which Flink release(s) wrote this, and the evidence (metadata version, RocksDB files, operator-state layout)."""
        return guess_flink_version(self)

    def narrowed(self, uid_or_name: str, subtask: int | None = None) -> CheckpointMetadata:
        """This metadata with only one operator (and with `subtask`, only that subtask's handles): what a scan task
        carries to a Spark executor, which otherwise receives every operator's handles with every partition."""
        op = self.operator(uid_or_name)
        if subtask is not None:
            op = replace(op, subtasks=[s for s in op.subtasks if s.index == subtask])
        return replace(self, master_states=[], operators=[op])

    def operator(self, uid_or_name: str) -> OperatorState:
        """The operator with this uid (on 1.x: whose hash is its id), hex operator id, or else name (`names.find_operator`)."""
        found = find_operator(self.operators, uid_or_name)
        if found is not None:
            return found
        for op in self.operators:
            if op.name == uid_or_name:
                return op
        known = ", ".join(op.label for op in self.operators)
        raise OperatorNotFoundError(f"operator {uid_or_name!r} is not in {self.path} (operators: {known})")


def read_metadata(path: str, files: FlinkFiles | None = None) -> CheckpointMetadata:
    """Parse the `_metadata` file at path (or inside the directory path): a local path, memory:// or s3:// URL.

    Absolute state file paths whose folders no longer exist are resolved against the copied layout
    (`meta.relocated` says which folders; nothing is logged here: the source says so once).
    """
    files = files if files is not None else FlinkFiles()
    if "://" not in path or path.startswith("file:"):
        # absolute: handles resolve against it in Spark tasks too, whose working folder is not the driver's
        path = os.path.abspath(path[7:] if path.startswith("file://") else path.removeprefix("file:"))
        if os.path.isdir(path):
            path = os.path.join(path, "_metadata")
    elif posixpath.basename(path.rstrip("/")) != "_metadata":
        path = join_url(path.rstrip("/"), "_metadata")
    try:
        data = files.read(path)
    except (FileNotFoundError, IsADirectoryError) as e:
        raise CorruptFileError(f"{path}: no _metadata file") from e
    meta = parse_metadata(data, path, files)
    _relocate(meta)
    return meta


def _absolute_handles(meta: CheckpointMetadata) -> list[StreamHandle]:
    """Every absolute-path file handle of the checkpoint."""
    out: list[StreamHandle] = []
    for op in meta.operators:
        for sub in op.subtasks:
            for h in (sub.managed_operator, sub.raw_operator, sub.managed_keyed, sub.raw_keyed):
                if isinstance(h, (KeyGroupsHandle, OperatorStateHandle)):
                    out.append(h.stream)
                elif isinstance(h, UnsupportedKeyedHandle):
                    out.extend(s for s in (h.meta_stream, *(s for _, s in h.shared), *(s for _, s in h.private)) if s is not None)
    return [s for s in out if s.kind == "file"]


def _relocate(meta: CheckpointMetadata) -> None:
    """Map each recorded folder that no longer exists to the copied layout: chk-N/, ../shared/, ../taskowned/ or ../chk-N/."""
    base = meta.directory
    parent = _split_url(base)[0]
    by_folder: dict[str, str] = {}
    for s in _absolute_handles(meta):
        folder, name = _split_url(s.path)
        by_folder.setdefault(folder, name)
    for folder, sample in by_folder.items():
        if folder in meta.files.relocated:  # decided for another checkpoint of the same source
            meta.relocated[folder] = meta.files.relocated[folder]
            continue
        if meta.files.exists(join_url(folder, sample)):
            continue
        name = _split_url(folder)[1]
        candidates = [base] if name == _split_url(base)[1] else []
        if name in ("shared", "taskowned") or name.startswith("chk-"):
            candidates.append(join_url(parent, name))
        candidates.append(base)  # a savepoint's own files, its folder renamed
        for c in candidates:
            if meta.files.exists(join_url(c, sample)):
                meta.files.relocated[folder] = c
                meta.relocated[folder] = c
                break


def parse_metadata(data: bytes, path: str = "_metadata", files: FlinkFiles | None = None) -> CheckpointMetadata:
    """Parse `_metadata` bytes; path names the file in error messages and anchors relative handles; files reads them."""
    files = files if files is not None else FlinkFiles()
    r = DataReader(data, where=path)
    if r.i32() & 0xFFFFFFFF != MAGIC:
        raise CorruptFileError(f"{path}: not a Flink _metadata file (bad magic number)")
    version = r.i32()
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFlinkFormatError(f"{path}: Flink metadata version {version} is not supported (versions 3 to 6 are)")
    checkpoint_id = r.i64()
    if checkpoint_id < 0:
        raise CorruptFileError(f"{path}: invalid checkpoint id {checkpoint_id}")
    masters = [_master_state(r) for _ in range(_count(r, "master states"))]
    operators = [_operator_state(r, version, files) for _ in range(_count(r, "operators"))]
    return CheckpointMetadata(path, version, checkpoint_id, masters, operators, files=files)


def _count(r: DataReader, what: str) -> int:
    n = r.i32()
    if n < 0 or n > r.remaining():
        raise CorruptFileError(f"{r.where}: invalid number of {what} ({n}) at offset {r.pos - 4}")
    return n


def _master_state(r: DataReader) -> tuple[str, int, bytes]:
    if r.i32() != _MASTER_MAGIC:
        raise CorruptFileError(f"{r.where}: bad master state magic number at offset {r.pos - 4}")
    inner = DataReader(r.sized(), where=r.where)
    version = inner.i32()
    name = inner.utf()
    return name, version, inner.sized()


def _operator_state(r: DataReader, version: int, files: FlinkFiles) -> OperatorState:
    name = uid = None
    if version >= 5:
        name = r.utf() or None
        uid = r.utf() or None
    lower, upper = r.i64(), r.i64()
    op_id = (lower & (2**64 - 1)).to_bytes(8, "big").hex() + (upper & (2**64 - 1)).to_bytes(8, "big").hex()
    parallelism, max_parallelism = r.i32(), r.i32()
    label = uid or name or op_id
    coord = _stream_handle(r, f"coordinator state of operator {label}", files)
    n = r.i32()
    if n == -1:
        return OperatorState(name, uid, op_id, parallelism, max_parallelism, coord.data if coord else None, [], True)
    if n < 0 or n > r.remaining():
        raise CorruptFileError(f"{r.where}: invalid number of subtasks ({n}) of operator {label}")
    subtasks = []
    for _ in range(n):
        index = r.i32()
        if index < 0:  # a finished subtask: nothing follows
            continue
        where = f"operator {label} subtask {index}"
        managed_op = _operator_handle(r, where, files) if r.i32() != 0 else None
        raw_op = _operator_handle(r, where, files) if r.i32() != 0 else None
        managed_kg = _keyed_handle(r, where, files)
        raw_kg = _keyed_handle(r, where, files)
        for kind in ("InputChannelStateHandle", "ResultSubpartitionStateHandle"):
            if r.i32() != 0:
                raise UnsupportedFlinkFormatError(
                    f"{r.where}: {where} holds unaligned checkpoint channel state ({kind}), which is not supported"
                )
        subtasks.append(SubtaskState(index, managed_op, raw_op, managed_kg, raw_kg))
    coord_bytes = coord.data if coord is not None else None
    return OperatorState(name, uid, op_id, parallelism, max_parallelism, coord_bytes, subtasks)


def _stream_handle(r: DataReader, where: str, files: FlinkFiles) -> StreamHandle | None:
    t = r.u8()
    if t == _NULL:
        return None
    if t == _BYTES:
        name = r.utf()
        data = r.sized()
        return StreamHandle("inline", name, len(data), data, files)
    if t == _FILE:
        size = r.i64()
        return StreamHandle("file", r.utf(), size, None, files)
    if t == _RELATIVE:
        rel = r.utf()
        return StreamHandle("relative", rel, r.i64(), None, files)
    if t in _STREAM_KINDS:
        raise UnsupportedFlinkFormatError(f"{r.where}: {where} uses {_STREAM_KINDS[t]}, which is not supported")
    raise CorruptFileError(f"{r.where}: {where}: unknown stream state handle type {t} at offset {r.pos - 1}")


def _offsets(r: DataReader, n: int) -> np.ndarray:
    if n < 0 or 8 * n > r.remaining():
        raise CorruptFileError(f"{r.where}: invalid number of offsets ({n}) at offset {r.pos}")
    p = r._need(8 * n)
    return np.frombuffer(r.buf[p : p + 8 * n], dtype=">i8").astype(np.int64)


def _keyed_handle(r: DataReader, where: str, files: FlinkFiles) -> KeyGroupsHandle | UnsupportedKeyedHandle | None:
    t = r.u8()
    if t == _NULL:
        return None
    if t in (_KG, _KG_V2, _SP_KG):
        start, n = r.i32(), r.i32()
        offsets = _offsets(r, n)
        stream = _stream_handle(r, where, files)
        if t == _KG_V2:
            r.utf()  # stateHandleId
        if stream is None:
            raise CorruptFileError(f"{r.where}: {where}: key-groups handle without a stream")
        kind = {_KG: "KeyGroupsStateHandle", _KG_V2: "KeyGroupsStateHandle", _SP_KG: "KeyGroupsSavepointStateHandle"}[t]
        return KeyGroupsHandle(kind, start, offsets, stream)
    if t in (_INCR, _INCR_V2):
        checkpoint_id = r.i64()
        r.utf()  # backend UUID
        start, n = r.i32(), r.i32()
        if t == _INCR_V2:
            r.i64()  # checkpointed size
        meta_stream = _stream_handle(r, where, files)
        lists = []
        for _ in range(2):  # shared (SST files), private (MANIFEST, CURRENT, OPTIONS): local name -> handle
            lists.append(tuple((r.utf(), _stream_handle(r, where, files)) for _ in range(_count(r, "incremental handle files"))))
        if t == _INCR_V2:
            r.utf()  # state handle id
        return UnsupportedKeyedHandle("IncrementalRemoteKeyedStateHandle (RocksDB native/incremental)", start, n,
                                      checkpoint_id, meta_stream, lists[0], lists[1])
    if t in _CHANGELOG:
        raise UnsupportedFlinkFormatError(f"{r.where}: {where} uses {_CHANGELOG[t]} (changelog state backend), which is not supported")
    raise CorruptFileError(f"{r.where}: {where}: unknown keyed state handle type {t} at offset {r.pos - 1}")


def _operator_handle(r: DataReader, where: str, files: FlinkFiles) -> OperatorStateHandle | None:
    t = r.u8()
    if t == _NULL:
        return None
    if t in _STREAM_KINDS:
        raise UnsupportedFlinkFormatError(f"{r.where}: {where} uses {_STREAM_KINDS[t]}, which is not supported")
    if t != _OP:
        raise CorruptFileError(f"{r.where}: {where}: unknown operator state handle type {t} at offset {r.pos - 1}")
    states: dict[str, tuple[str, np.ndarray]] = {}
    for _ in range(_count(r, "operator states")):
        name = r.utf()
        mode = r.u8()
        if mode >= len(MODES):
            raise CorruptFileError(f"{r.where}: {where}: operator state {name!r} has unknown mode {mode}")
        states[name] = (MODES[mode], _offsets(r, r.i32()))
    stream = _stream_handle(r, where, files)
    if stream is None:
        raise CorruptFileError(f"{r.where}: {where}: operator state handle without a stream")
    return OperatorStateHandle(states, stream)
