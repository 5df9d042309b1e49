"""A real Flink savepoint, retained checkpoint, or job checkpoint folder with the store's read API.

`flinkstate.open(path)` returns a `FlinkSource` when path holds Flink's `_metadata` (or `chk-N`
folders holding one) instead of a flinkstate root: `checkpoints()`, `checkpoint(id)` (a pinned
`FlinkCheckpoint`), `metadata(id)` and the `read_*` calls work as on a store, through the same scan.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from flinkstate.errors import CheckpointNotFoundError, InvalidArgumentError
from flinkstate.flink.checkpoint import FlinkCheckpoint, load_flink_checkpoint
from flinkstate.flink.mapping import ReadOptions
from flinkstate.metadata import CheckpointInfo, CheckpointMetadata
from flinkstate.reads import ReadApi
from flinkstate.ttl import StateTtlConfig

__all__ = ["FlinkSource", "chk_folders", "is_flink_path"]


def chk_folders(path: str) -> dict[int, str]:
    """The `chk-N` folders holding a `_metadata` in a Flink job's checkpoint folder, by N."""
    out = {}
    if os.path.isdir(path):
        for entry in os.listdir(path):
            n = entry.removeprefix("chk-")
            if entry.startswith("chk-") and n.isdigit() and os.path.isfile(os.path.join(path, entry, "_metadata")):
                out[int(n)] = os.path.join(path, entry)
    return out


def is_flink_path(path: str) -> bool:
    """True when a local path is a Flink savepoint/checkpoint (`_metadata`), or a job folder with `chk-N` ones."""
    if "://" in path and not path.startswith("file://"):
        return False
    path = path.removeprefix("file://")
    if os.path.isdir(os.path.join(path, "_flinkstate")):
        return False
    return (os.path.basename(path) == "_metadata" and os.path.isfile(path)) or os.path.isfile(os.path.join(path, "_metadata")) \
        or bool(chk_folders(path))


class FlinkSource(ReadApi):
    """The checkpoints of a Flink savepoint, retained checkpoint or job checkpoint folder (read only)."""

    def __init__(self, path: str | os.PathLike[str], *, ttl: Mapping[str, StateTtlConfig | int] | None = None,
                 reference_ms: int | None = None, raw_values: bool = False,
                 row_fields: str | Mapping[str, Sequence[str] | str] | None = None) -> None:
        """raw_values: Kryo/Avro values as their serialized bytes; row_fields: names of Row fields per "operator/state"."""
        self.path = os.fspath(path).removeprefix("file://")
        self.options = ReadOptions.of(raw_values, row_fields)
        self.ttl = dict(ttl or {})
        self.reference_ms = reference_ms
        if os.path.basename(self.path) == "_metadata" or os.path.isfile(os.path.join(self.path, "_metadata")):
            folder = os.path.dirname(self.path) if os.path.basename(self.path) == "_metadata" else self.path
            self._folders = {-1: folder}  # one savepoint/checkpoint: its id is in its _metadata
        else:
            self._folders = chk_folders(self.path)
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
                                                                options=self.options)
        return ck

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
        from flinkstate.flink.metadata import read_metadata

        out = []
        for k in sorted(self._folders):
            if k in self._loaded:
                out.append(self._loaded[k].info)
                continue
            meta = read_metadata(self._folders[k])
            created = self.reference_ms if self.reference_ms is not None else int(os.path.getmtime(meta.path) * 1000)
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
        """A JSON-able description: operators (uid, operator id, parallelism, max parallelism) and their states."""
        ck = self.checkpoint(checkpoint_id)
        ops = []
        for name, om in sorted(ck.operators.items()):
            fop = ck.meta.operator(ck.uids[name])
            ops.append({"uid": name, "operator_id": fop.operator_id, "name": fop.name, "parallelism": fop.parallelism,
                        "max_parallelism": fop.max_parallelism,
                        "keyed_states": {n: d.kind for n, d in sorted(om.keyed_states.items())},
                        "timer_services": sorted(om.timer_services), "operator_states": {n: d.mode for n, d in sorted(om.operator_states.items())}})
        return {"path": ck.meta.path, "metadata_version": ck.meta.version, "checkpoint": ck.info.to_dict(), "operators": ops,
                "ttl_unknown": list(ck.ttl_unknown)}
