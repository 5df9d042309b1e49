"""sort_for_kind: every sort path (already ordered, packed key group + long key, per key group) orders rows as Arrow's
stable multi-column sort does."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flinkstate.format import constants as C
from flinkstate.format.schemas import sort_for_kind


def _reference(table: pa.Table, by: list[str]) -> pa.Table:
    """Arrow's sort by the columns, ties in the rows' order (a stable sort)."""
    pos = table.append_column("pos", pa.array(np.arange(table.num_rows)))
    return pos.take(pc.sort_indices(pos, sort_keys=[(c, "ascending") for c in [*by, "pos"]])).drop_columns(["pos"])


@pytest.mark.parametrize("wide", [False, True])  # keys within 2^48 of each other (packed) or not (per key group)
@pytest.mark.parametrize("presorted", [False, True])
def test_sort_for_kind_matches_arrow_stable_sort(wide: bool, presorted: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(2, 400))
        bound = 2**63 if wide else 6
        groups = 1 if n % 3 == 0 else 5  # one key group: 64 bits for the key (key spans near 2^64)
        table = pa.table({C.COL_KEY_GROUP: rng.integers(0, groups, n).astype(np.int32), C.COL_KEY: rng.integers(-bound, bound, n, dtype=np.int64),
                          C.COL_TIMESTAMP: rng.integers(0, 4, n), "value": rng.integers(0, 100, n)})
        if presorted:
            table = _reference(table, [C.COL_KEY_GROUP, C.COL_TIMESTAMP, C.COL_KEY])
        assert sort_for_kind(table, C.KIND_FULL).equals(_reference(table, [C.COL_KEY_GROUP, C.COL_KEY]))
        assert sort_for_kind(table, C.KIND_TIMERS_FULL).equals(_reference(table, [C.COL_KEY_GROUP, C.COL_TIMESTAMP, C.COL_KEY]))


def test_sort_for_kind_string_keys_and_null_keys() -> None:
    """Keys numpy cannot order as Arrow does (strings; nulls, which Arrow puts last) take the per-key-group sort."""
    table = pa.table({C.COL_KEY_GROUP: pa.array([1, 0, 1, 0], pa.int32()), C.COL_KEY: ["b", "z", "a", "y"], "value": [1, 2, 3, 4]})
    assert sort_for_kind(table, C.KIND_FULL).column("value").to_pylist() == [4, 2, 3, 1]
    table = pa.table({C.COL_KEY_GROUP: pa.array([0, 0, 0], pa.int32()), C.COL_KEY: pa.array([None, 5, -1], pa.int64()), "value": [1, 2, 3]})
    assert sort_for_kind(table, C.KIND_FULL).column("value").to_pylist() == [3, 2, 1]
