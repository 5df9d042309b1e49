"""Export Flink savepoints: decode a savepoint into `OperatorExport`s (round trip) and write one out."""

from __future__ import annotations

from flinkstate.core.errors import StateNotFoundError
from flinkstate.flink.files.canonical import read_keyed_state
from flinkstate.flink.files.operator_state import (
    operator_state_headers,
    operator_state_names,
    read_operator_state,
)
from flinkstate.flink.meta.metadata import read_metadata
from flinkstate.flink.meta.version import source_releases
from flinkstate.flink.write.releases import check_target_release
from flinkstate.flink.write.savepoint_writer import (
    DEFAULT_FLINK_VERSION,
    OperatorExport,
    metadata_version_for,
    write_savepoint,
)

__all__ = ["load_flink_savepoint", "rewrite_flink_savepoint"]


def load_flink_savepoint(path: str) -> list[OperatorExport]:
    """Decode every stateful operator with a uid of a canonical savepoint into OperatorExports (serializer snapshots kept)."""
    meta = read_metadata(path)
    releases = source_releases(meta)
    out = []
    for op in meta.operators:
        has_keyed = any(s.managed_keyed is not None for s in op.subtasks)
        modes = operator_state_names(meta, op.operator_id)
        if not has_keyed and not modes and op.coordinator_state is None:
            continue
        keyed = read_keyed_state(meta, op.operator_id, raw_values=True) if has_keyed else None  # Kryo/Avro bytes written back as read
        ops = {}
        state_metas = operator_state_headers(meta, op.operator_id)
        for name, mode in modes.items():
            try:
                ops[name] = (mode, read_operator_state(meta, op.operator_id, name), state_metas[name])
            except StateNotFoundError:
                continue
        out.append(OperatorExport(op.uid or op.operator_id, op.parallelism, op.max_parallelism, keyed, ops, op.name, op.coordinator_state,
                                  source_releases=releases))
    return out


def rewrite_flink_savepoint(src: str, dest: str, *, compression: bool = False, flink_version: str = DEFAULT_FLINK_VERSION) -> str:
    """Decode the savepoint at src and write it again at dest for Flink flink_version (a round trip Flink restores); a
    state holding bytes that release reads differently (Kryo values of the other major release) is refused by name."""
    metadata_version_for(flink_version)  # an unsupported target is refused first, by name
    meta = read_metadata(src)
    operators = load_flink_savepoint(src)
    check_target_release(operators, flink_version)
    return write_savepoint(dest, operators, checkpoint_id=meta.checkpoint_id, compression=compression, flink_version=flink_version)
