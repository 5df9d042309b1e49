"""`store.read_state` and Spark return the same rows: one scan path, one TTL rule, for every keyed state kind."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pyarrow as pa
import pytest

import flinkstate as fs

pytestmark = pytest.mark.spark

TTL = fs.StateTtlConfig(ttl_ms=10_000)
T0 = int(time.time() * 1000) - 15_000  # near the checkpoints' own time: some keys are live then
KINDS = {
    "value": fs.ValueStateDescriptor(name="value", value_type=pa.int64(), ttl=TTL),
    "reducing": fs.ReducingStateDescriptor(name="reducing", value_type=pa.int64(), ttl=TTL),
    "aggregating": fs.AggregatingStateDescriptor(name="aggregating", value_type=pa.struct([("n", pa.int64()), ("s", pa.string())]), ttl=TTL),
    "list": fs.ListStateDescriptor(name="list", value_type=pa.string(), ttl=TTL),
    "map": fs.MapStateDescriptor(name="map", user_key_type=pa.string(), user_value_type=pa.float64(), ttl=TTL),
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Keys last accessed 0..19 s after T0 (TTL 10 s); a second checkpoint upserts and deletes some."""
    path = str(tmp_path_factory.mktemp("parity") / "job")
    store = fs.open(path)
    n = 20
    keys = [f"k{i}" for i in range(n)]
    ts = [T0 + 1000 * i for i in range(n)]
    with store.begin(max_parallelism=64) as w:
        for name in ("value", "reducing"):
            w.put_state("op", KINDS[name], pa.table({"key": keys, "value": list(range(n)), "ttl_timestamp": ts}))
        w.put_state("op", KINDS["aggregating"], pa.table({"key": keys, "value": [{"n": i, "s": f"s{i}"} for i in range(n)], "ttl_timestamp": ts}))
        w.put_state("op", KINDS["list"], pa.table({"key": keys, "value": [[f"a{i}", f"b{i}"] for i in range(n)],
                                                    "ttl_timestamp": [[t, t + 5000] for t in ts]}))
        w.put_state("op", KINDS["map"], pa.table({"key": [k for k in keys for _ in (0, 1)], "user_key": ["x", "y"] * n,
                                                   "value": [float(i) for i in range(2 * n)], "ttl_timestamp": [t + d for t in ts for d in (0, 7000)]}))
    with store.begin() as w:
        w.put_state("op", KINDS["value"], pa.table({"key": ["k0", "k1", "new"], "value": [100, 0, 5], "ttl_timestamp": [T0 + 30_000, 0, T0],
                                                     "tombstone": [False, True, False]}), mode="delta")
    return path


def _norm(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return int(v.timestamp() * 1000)
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, list):
        if v and isinstance(v[0], tuple):  # a map from Arrow: (key, value) pairs
            return tuple(sorted((k, _norm(x)) for k, x in v))
        return tuple(_norm(x) for x in v)
    return v


def _rows(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(sorted((k, _norm(v)) for k, v in r.items())) for r in records)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("reference", "include_expired", "flatten"), [
    (None, False, True), (T0 + 12_500, False, True), (T0 + 12_500, True, True), (T0 + 12_500, False, False), (T0 + 12_500, True, False),
])
def test_library_and_spark_return_the_same_rows(spark: Any, root: str, kind: str, reference: int | None, include_expired: bool,
                                                 flatten: bool) -> None:
    store = fs.open(root)
    lib = store.read_state("op", kind, ttl_reference=reference, include_expired=include_expired, flatten=flatten)
    opts = {"operator": "op", "state": kind, "includeExpired": str(include_expired).lower(), "flattenCollections": str(flatten).lower()}
    if reference is not None:
        opts["ttlReferenceTime"] = str(reference)
    df = spark.read.format("flinkstate").options(**opts).load(root)
    got = [r.asDict(recursive=True) for r in df.collect()]
    assert set(df.columns) == set(lib.column_names)
    assert _rows(got) == _rows(lib.to_pylist())
    if reference is not None and flatten and not include_expired:  # the reference time really hides some entries, not all
        assert 0 < lib.num_rows < store.read_state("op", kind, include_expired=True, ttl_reference=reference).num_rows
