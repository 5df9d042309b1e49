"""A real Flink savepoint whose operators have max parallelism 128, 256 and 4096: import, change through Spark,
export, and real Flink restores it at other parallelisms with exactly that change.

flinkjobs/src/MaxParallelismJob.java ran on Flink 2.3: "derived" (parallelism 2, Flink derives 128),
"derived256" (parallelism 86, Flink derives 256) and "explicit" (setMaxParallelism(4096)). Its savepoint is checked in
(tests/fixtures/flink-2.3-maxp, `python tests/fixtures/make_flink_fixture.py maxp` writes it again with real Flink) and
imported (each operator keeps its own max parallelism), one state is changed with `df.write.format("flinkstate")`
(operator "explicit", state "count": key 5 upserted, key 1000 added), the root is exported, and Flink restores
the export at parallelism 3 / 5 / 4 with RocksDB (the original restores at 1 / 3 / 2 with the HashMap backend as
the baseline). Flink's dump after the restore is the baseline with exactly that change, and every operator
reports the max parallelism it had.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fsc_helpers import flink_harness

import flinkstate as fs
from flinkstate.cli import main
from flinkstate.flink.meta.metadata import read_metadata
from flinkstate.core.keygroups import assign_key_groups

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.spark]

MAXP = {"derived": 128, "derived256": 256, "explicit": 4096}
SAVEPOINT = Path(__file__).resolve().parent.parent / "fixtures" / "flink-2.3-maxp" / "savepoint"  # make_flink_fixture.py maxp


def _with_change(baseline: list[str]) -> list[str]:
    out = [line for line in baseline if not line.startswith("explicit count 5 ")]
    assert len(out) == len(baseline) - 1
    return sorted(out + ["explicit count 5 424242", "explicit count 1000 7"])


def test_three_max_parallelisms_import_change_export_restore(spark, tmp_path: Path) -> None:
    import pyarrow as pa

    harness = flink_harness()
    savepoint = Path(shutil.copytree(SAVEPOINT, tmp_path / "savepoint"))
    meta = read_metadata(str(savepoint))
    assert {op.uid: (op.parallelism, op.max_parallelism) for op in meta.operators if op.uid in MAXP} == {
        "derived": (2, 128), "derived256": (86, 256), "explicit": (2, 4096)}
    baseline = harness.max_parallelism_restore(savepoint, tmp_path / "baseline.txt", "hashmap", (1, 3, 2))
    assert {f"{op} maxParallelism {mp}" for op, mp in MAXP.items()} <= set(baseline)
    assert sum(line.startswith("derived timer ") for line in baseline) == 37 and len(baseline) > 120

    src = fs.open(str(savepoint))  # read in place: key lookups hash with each operator's own max parallelism
    for uid, key in (("derived", 5), ("derived256", "k5"), ("explicit", 5)):
        assert src.read_state(uid, "count", keys=[key]).column("key").to_pylist() == [key]
        rows = spark.read.format("flinkstate").options(operator=uid, state="count").load(str(savepoint)).where(f"key = {key!r}").collect()
        assert [r.key for r in rows] == [key]

    root = tmp_path / "root"
    assert main(["import", str(savepoint), str(root)]) == 0
    store = fs.open(str(root))
    ck = store.checkpoint()
    assert {u: ck.max_parallelism_of(u) for u in MAXP} == MAXP
    for uid, mp in MAXP.items():  # key groups as Flink assigned them, with each operator's own max parallelism
        t = store.read_state(uid, "count")
        key_type = ck.state_descriptor(uid, "count").key_type
        assert assign_key_groups(t.column("key").cast(key_type), mp).equals(t.column("key_group").combine_chunks())

    (spark.createDataFrame([(5, 424242), (1000, 7)], "key long, value long").write.format("flinkstate")
     .options(operator="explicit", state="count").mode("append").save(str(root)))
    row = spark.read.format("flinkstate").options(operator="explicit", state="count").load(str(root)).where("key = 1000").collect()
    assert [(r.value, r.key_group) for r in row] == [(7, assign_key_groups(pa.array([1000], pa.int64()), 4096)[0].as_py())]

    dest = tmp_path / "export"
    assert main(["export", str(root), str(dest)]) == 0
    assert {op.uid: op.max_parallelism for op in read_metadata(str(dest)).operators if op.uid in MAXP} == MAXP
    restored = harness.max_parallelism_restore(dest, tmp_path / "restored.txt", "rocksdb", (3, 5, 4))
    assert restored == _with_change(baseline)
