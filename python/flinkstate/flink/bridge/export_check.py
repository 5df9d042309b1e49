"""Before an export writes anything: every change made to an imported operator since its import is encoded once with
the serializers it will be written with, so a value they cannot hold (an enum constant the enum lacks, a null in a
Tuple or in a Long, a character string of two characters) is refused by name (operator, state, column, serializer)
while nothing exists at the destination, and not by a job halfway through the files.

Changes are the rows of the files that checkpoints after the import created (Spark or library writes, deltas and
rewrites; a tombstone writes nothing); the files the import wrote hold what Flink wrote and need no check. Operator and
broadcast states are small and read whole: every one is checked.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.bridge.export_task import flink_rows
from flinkstate.flink.bridge.serializer_json import IMPORT_CHECKPOINT_PROPERTY
from flinkstate.flink.serde._vencode import column_encoder
from flinkstate.flink.write.keyed_records import ColumnValueError, serializer_problem
from flinkstate.flink.write.savepoint_writer import OperatorExport, encode_state
from flinkstate.format import constants as C
from flinkstate.format.datafile import read_data_file
from flinkstate.format.filekind import Scope
from flinkstate.read.checkpoint import StoreCheckpoint

__all__ = ["check_changes"]


def check_changes(ck: StoreCheckpoint, operators: list[OperatorExport], reads: dict[str, dict[str, tuple[str, str]]],
                  lists: dict[str, frozenset[str]]) -> None:
    """Encode what changed since each operator's import with the serializers it is exported with; the first value that
    does not fit is an InvalidArgumentError naming operator, state, column and serializer."""
    props = ck.metadata.properties
    for op in operators:
        for name, (mode, table, m) in op.operator_states.items():
            _operator_state(op, name, mode, table, m)
        imported = props.get(IMPORT_CHECKPOINT_PROPERTY + op.uid)
        if op.keyed is None or imported is None:
            continue  # not imported: its serializers come from its Arrow types (a job's typed error names a value that does not fit)
        for flink_name, (scope, name) in reads.get(op.uid, {}).items():
            files = ck.state_files(op.uid, name, Scope.KEYED if scope == "keyed" else Scope.TIMERS)
            for e in files:
                if e.created_by_checkpoint_id <= int(imported):
                    continue
                rows = read_data_file(ck.io, e, max_parallelism=op.max_parallelism)
                if C.COL_TOMBSTONE in rows.column_names:
                    rows = rows.filter(pc.invert(rows.column(C.COL_TOMBSTONE))).drop_columns([C.COL_TOMBSTONE])
                if rows.num_rows:
                    encode_state(op, op.keyed.meta[flink_name], {flink_name: flink_rows(rows, name in lists.get(op.uid, ()))})


def _operator_state(op: OperatorExport, name: str, mode: str, table: pa.Table, m) -> None:
    """Encode an operator state's values (and a broadcast state's keys) as its file will: a value that does not fit is an
    InvalidArgumentError naming it."""
    ctx = f"operator {op.uid!r}, operator state {name!r}"
    roles = [("value", "VALUE_SERIALIZER")] + ([("key", "KEY_SERIALIZER")] if mode == "BROADCAST" else [])
    for column, role in roles:
        node = m.serializers[role]
        try:
            column_encoder(node, ctx)(table.column(column).combine_chunks())
        except (TypeError, AttributeError, OverflowError, ValueError, KeyError) as e:
            raise InvalidArgumentError(f"{ctx}, {ColumnValueError(column, serializer_problem(node, e))}") from e
