"""Every cell of the production-shaped job's configuration matrix reads in place equal to the job's dump.

flinkjobs/src/ProductionJob.java (parallelism 1, 2 and 86; max parallelism 128, 256 and 4096; a Tuple key; value, list,
map, reducing and aggregating state; TTL; timers; a Kryo state; a window; broadcast and operator state; a side output)
on HashMap (snappy off and on), RocksDB (incremental checkpoints on and off) and ForSt, as CANONICAL and NATIVE
savepoints and the retained checkpoint folder, on Flink 2.3 and 1.20 (tests/production_matrix.py). The CI cells are
checked-in fixtures; FLINKSTATE_MATRIX=all runs every cell, generating it with real Flink.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fsc_helpers import latest_checkpoint
from production_dump import expected, opaque_keys, render
from production_matrix import CELLS, CI_CELLS, cell_id, snapshot

import flinkstate as fs
from flinkstate.flink import read_metadata
from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.meta.names import find_operator, uid_hash

MAX_PARALLELISM = {"sessions": 128, "wide": 256, "explicit": 4096, "window": 128, "rules": 128}
PARALLELISM = {"sessions": 2, "wide": 86, "explicit": 2, "window": 1, "rules": 2, "parse": 2}


def _params() -> list:
    every = os.environ.get("FLINKSTATE_MATRIX") == "all"
    out = []
    for cell in CELLS:
        if cell in CI_CELLS:
            out.append(pytest.param(cell, id=cell_id(cell)))
        else:
            out.append(pytest.param(cell, id=cell_id(cell), marks=[pytest.mark.flink, pytest.mark.slow, pytest.mark.skipif(
                not every, reason="generated with real Flink on demand: FLINKSTATE_MATRIX=all")]))
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("production")


@pytest.mark.parametrize("cell", _params())
def test_cell_reads_as_the_job_dumped(cell: tuple[str, str, str], work: Path) -> None:
    """Every state, timer, window, broadcast and operator-state line equals the job's; the Kryo state is bytes per key
    where the format frames its values, else a typed error naming it, and never a failure of the other states."""
    path, dump = snapshot(cell, work)
    want, kryo_keys = expected(dump)
    src = fs.open(str(path))
    operators = read_metadata(str(latest_checkpoint(path) if cell[2] == "checkpoint" else path)).operators
    ops = {u: find_operator(operators, u) for u in PARALLELISM}  # by uid, or its hash on 1.x (ids only)
    assert {u: ops[u].max_parallelism for u in MAX_PARALLELISM} == MAX_PARALLELISM
    assert {u: ops[u].parallelism for u in PARALLELISM} == PARALLELISM
    assert render(src) == want
    framed = not (cell[1].startswith("hashmap") and cell[2] != "canonical")  # HashMap native: Kryo values not length-framed
    raw = fs.open(str(path), raw_values=True)
    if framed:
        assert opaque_keys(raw.read_state("sessions", "profile")) == kryo_keys
    else:
        # named by uid, or on 1.x (ids only) by the operator id the uid hashes to
        with pytest.raises(UnsupportedSerializerError, match=rf"operator (sessions|{uid_hash('sessions')}), state 'profile'.*Kryo.*Profile"):
            raw.read_state("sessions", "profile")
