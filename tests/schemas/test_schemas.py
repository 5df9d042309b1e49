"""The format: real checkpoints validated against schemas/v<N>/*.schema.json and the claims of FORMAT.md.

A module fixture builds a job root with the store API: every keyed state kind (nested types,
TTL, namespaces, struct keys), full files, deltas with tombstones, a partial full rewrite,
timers of both domains (full and delta), operator state of each mode, coordinator state,
a lost commit race, a savepoint and a checkpoint on top of it. Every data file (through its
JSON description), every manifest row, every log row and every metadata document is then
validated against the JSON Schemas, and the physical claims of the specification (sort
order, key groups, merge rule, TTL list shape, GC rule, Arrow type encoding) are checked on
the files themselves. Negative tests show the schemas reject what they must. Every object is
validated against the schemas of its own format version (a release writes the newest, `C.FORMAT_VERSION`,
and reads every earlier one: the checked-in v1 root of tests/fixtures/backend-v1 validates against v1).
"""

from __future__ import annotations

import base64
import copy
import decimal
import datetime as dt
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from referencing import Registry, Resource

import flinkstate as fs
from flinkstate.core.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    OperatorStateDescriptor,
    ReducingStateDescriptor,
    TimerServiceDescriptor,
    ValueStateDescriptor,
)
from flinkstate.core.errors import CommitConflictError, CorruptFileError
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry, operator_state_schema, read_data_file, state_schema, timer_schema
from flinkstate.format.inspect import describe_data_file
from flinkstate.core.io import FileIO
from flinkstate.core.keygroups import assign_key_group, assign_key_groups, key_group_range
from flinkstate.core.ttl import StateTtlConfig

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_NAMES = ("data-file", "manifest-row", "log-row", "checkpoint-metadata")
VERSIONS = C.SUPPORTED_FORMAT_VERSIONS
MAXP = 16
SOURCE_MAXP = 64  # the operator "source" has its own max parallelism (format v2)
BIG_ROWS = 70_000  # > one row group of 65536 rows

# ---------------------------------------------------------------------------------------
# schemas
# ---------------------------------------------------------------------------------------


def _load(version: int, name: str) -> dict[str, Any]:
    return json.loads((ROOT / "schemas" / f"v{version}" / f"{name}.schema.json").read_text())


ALL_SCHEMAS = {v: {n: _load(v, n) for n in SCHEMA_NAMES} for v in VERSIONS}
SCHEMAS = ALL_SCHEMAS[C.FORMAT_VERSION]  # what this release writes
REGISTRY: Registry = Registry().with_resources(
    [(s["$id"], Resource.from_contents(s)) for by_name in ALL_SCHEMAS.values() for s in by_name.values()]
)


def validator(name: str, version: int = C.FORMAT_VERSION) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        ALL_SCHEMAS[version][name], registry=REGISTRY, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def assert_valid(name: str, doc: Any, version: int = C.FORMAT_VERSION) -> None:
    errors = sorted(validator(name, version).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, f"{name} v{version}: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]) + f"\n{json.dumps(doc, default=str)[:2000]}"


def assert_invalid(name: str, doc: Any, version: int = C.FORMAT_VERSION) -> None:
    assert not validator(name, version).is_valid(doc), f"{name} v{version} accepted: {json.dumps(doc, default=str)[:1000]}"


# ---------------------------------------------------------------------------------------
# descriptors of the test job
# ---------------------------------------------------------------------------------------

TTL = StateTtlConfig(ttl_ms=60_000, update_type="OnReadAndWrite", state_visibility="ReturnExpiredIfNotCleanedUp", cleanup_full_snapshot=True)
TUPLE_KEY = pa.struct([("f0", pa.string()), ("f1", pa.int32())])

COUNT = ValueStateDescriptor(name="count", value_type=pa.int64(), key_type=pa.string(), ttl=StateTtlConfig(ttl_ms=1_000))
PROFILE = ValueStateDescriptor(
    name="profile",
    key_type=pa.int64(),
    value_type=pa.struct([("name", pa.string()), ("tags", pa.list_(pa.string())), ("scores", pa.map_(pa.string(), pa.float64())),
                          ("amount", pa.decimal128(12, 2)), ("seen", pa.timestamp("ms", tz="UTC"))]),
    ttl=StateTtlConfig(ttl_ms=5_000, update_type="Disabled"),
)
ITEMS = ListStateDescriptor(name="items", key_type=pa.int64(), namespace_type=pa.string(),
                            value_type=pa.struct([("a", pa.int32()), ("b", pa.string())]), ttl=TTL)
CART = MapStateDescriptor(name="cart", key_type=pa.int32(), namespace_type=pa.int64(), user_key_type=pa.string(),
                          user_value_type=pa.struct([("qty", pa.int32()), ("price", pa.float64())]), ttl=StateTtlConfig(ttl_ms=10_000))
TOTAL = ReducingStateDescriptor(name="total", key_type=TUPLE_KEY, value_type=pa.float64())
AVG = AggregatingStateDescriptor(name="avg", key_type=pa.int16(), value_type=pa.struct([("sum", pa.int64()), ("count", pa.int64())]))
BIG = ValueStateDescriptor(name="big", key_type=pa.int64(), value_type=pa.int32())
EVENT_TIMERS = TimerServiceDescriptor(name="window-end", domain="event", key_type=pa.string(), namespace_type=pa.int64())
PROC_TIMERS = TimerServiceDescriptor(name="idle", domain="processing", key_type=pa.int32())
SPLITS = OperatorStateDescriptor(name="splits", value_type=pa.string(), mode="list")
OFFSETS = OperatorStateDescriptor(name="offsets", value_type=pa.struct([("partition", pa.int32()), ("offset", pa.int64())]), mode="union")
RULES = OperatorStateDescriptor(name="rules", value_type=pa.list_(pa.string()), mode="broadcast", key_type=pa.string())

KEYED = {d.name: d for d in (COUNT, PROFILE, ITEMS, CART, TOTAL, AVG, BIG)}
TIMERS = {d.name: d for d in (EVENT_TIMERS, PROC_TIMERS)}

HALVES = [key_group_range(MAXP, 2, 0), key_group_range(MAXP, 2, 1)]


def _build(store: fs.CheckpointStore) -> dict[str, Any]:
    """Write the test job; return facts the tests check against."""
    facts: dict[str, Any] = {}
    strings = [f"user-{i}" for i in range(40)]
    ids = list(range(-20, 20))
    # -- checkpoint 1: every state in full
    with store.begin(max_parallelism=MAXP) as w:
        w.put_state("sessions", COUNT, pa.table({"key": strings, "value": list(range(40)), "ttl_timestamp": [1_700_000_000_000 + i for i in range(40)]}),
                    ranges=HALVES)
        w.put_state("sessions", PROFILE, pa.table({
            "key": ids,
            "value": pa.array([{"name": f"n{i}", "tags": ["x", "y"][: i % 3], "scores": [("s", float(i))], "amount": None,
                                "seen": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)} for i in ids], PROFILE.value_type),
        }))
        w.put_state("sessions", ITEMS, pa.table({
            "key": ids, "namespace": [f"w{i % 3}" for i in ids],
            "value": [[{"a": j, "b": str(j)} for j in range(i % 4)] for i in ids],
            "ttl_timestamp": [[1_700_000_000_000 + j for j in range(i % 4)] for i in ids],
        }))
        w.put_state("sessions", CART, pa.table({
            "key": pa.array([i // 3 for i in range(30)], pa.int32()), "namespace": [i % 2 for i in range(30)],
            "user_key": [f"sku-{i % 5}-{i % 2}" for i in range(30)],
            "value": [{"qty": i, "price": 1.5 * i} for i in range(30)], "ttl_timestamp": [1_700_000_000_000] * 30,
        }), ranges=HALVES)
        w.put_state("sessions", TOTAL, pa.table({
            "key": pa.array([{"f0": f"c{i % 7}", "f1": i} for i in range(25)], TUPLE_KEY), "value": [float(i) for i in range(25)],
        }))
        w.put_state("sessions", AVG, pa.table({"key": pa.array(range(-10, 10), pa.int16()), "value": [{"sum": i, "count": 1} for i in range(20)]}))
        w.put_state("sessions", BIG, pa.table({"key": pa.array(range(BIG_ROWS), pa.int64()), "value": pa.array([i % 1000 for i in range(BIG_ROWS)], pa.int32())}))
        w.put_timers("sessions", EVENT_TIMERS, pa.table({"key": strings, "namespace": [i % 4 for i in range(40)], "timestamp": [10_000 - 7 * i for i in range(40)]}),
                     ranges=HALVES)
        w.put_timers("sessions", PROC_TIMERS, pa.table({"key": pa.array(range(30), pa.int32()), "timestamp": [5_000 + (i * 37) % 11 for i in range(30)]}))
        w.put_operator_state("source", SPLITS, pa.table({"subtask": pa.array([1, 0, 1], pa.int32()), "value": ["s-2", "s-0", "s-1"]}))
        w.put_operator_state("source", OFFSETS, pa.table({"subtask": pa.array([0, 1], pa.int32()), "value": [{"partition": 0, "offset": 10}, {"partition": 1, "offset": 7}]}))
        w.put_operator_state("sessions", RULES, pa.table({"subtask": pa.array([0, 0], pa.int32()), "key": ["r1", "r2"], "value": [["a"], ["b", "c"]]}))
        w.put_coordinator("source", pa.table({
            "record_type": ["state", "event", "event"], "subtask": pa.array([None, 0, 1], pa.int32()),
            "seq": pa.array([0, 1, 2], pa.int64()), "payload": [b"enumerator-state", b"split-request", b"\x00\x01"],
        }))
        w.set_max_parallelism(SOURCE_MAXP, "source")
        w.set_parallelism("sessions", 2)
        w.set_parallelism("source", 2)
        w.set_property("job", "schema-tests")
    # -- checkpoint 2: deltas with tombstones, a partial full rewrite, timer deltas
    with store.begin() as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["user-1", "user-2", "new-key"], "value": [100, None, 7],
                                                 "ttl_timestamp": [1_800_000_000_000, None, 1_800_000_000_001], "tombstone": [False, True, False]}), mode="delta")
        w.put_state("sessions", ITEMS, pa.table({"key": [0, 1], "namespace": ["w0", "w1"], "value": [[{"a": 9, "b": "nine"}], None],
                                                 "ttl_timestamp": [[1_800_000_000_000], None], "tombstone": [False, True]}), mode="delta")
        w.put_state("sessions", CART, pa.table({"key": pa.array([0, 1], pa.int32()), "namespace": [0, 1], "user_key": ["sku-0-0", "sku-new"],
                                                "value": [None, {"qty": 1, "price": 2.0}], "ttl_timestamp": [None, 1_800_000_000_000],
                                                "tombstone": [True, False]}), mode="delta", ranges=HALVES)
        w.put_state("sessions", TOTAL, pa.table({"key": pa.array([{"f0": "c0", "f1": 0}, {"f0": "c1", "f1": 1}], TUPLE_KEY),
                                                 "value": [None, 42.0], "tombstone": [True, False]}), mode="delta")
        w.put_state("sessions", AVG, pa.table({"key": pa.array([-10, 5], pa.int16()), "value": [None, {"sum": 99, "count": 9}], "tombstone": [True, False]}),
                    mode="delta")
        lo, hi = HALVES[0]
        w.put_state("sessions", PROFILE, pa.table({
            "key": [i for i in ids if lo <= assign_key_group(i, MAXP, pa.int64()) <= hi][:3],
            "value": pa.array([{"name": "rewritten", "tags": [], "scores": [], "amount": decimal.Decimal("1.00"), "seen": None}] * 3, PROFILE.value_type),
        }), key_group_range=HALVES[0])
        w.put_timers("sessions", EVENT_TIMERS, pa.table({"key": ["user-0", "user-1", "user-x"], "namespace": [0, 1, 3], "timestamp": [10_000, 9_993, 1],
                                                         "tombstone": [True, True, False]}), mode="delta")
        w.put_timers("sessions", PROC_TIMERS, pa.table({"key": pa.array([3], pa.int32()), "timestamp": [1], "tombstone": [False]}), mode="delta")
        w.put_coordinator("source", pa.table({"record_type": ["state"], "subtask": pa.array([None], pa.int32()), "seq": pa.array([0], pa.int64()),
                                              "payload": [b"enumerator-state-2"]}))
    # -- checkpoint 3 wins a commit race; the other attempt 3 is refused (its manifest rows stay invisible)
    winner, loser = store.begin(), store.begin()
    winner.put_state("sessions", COUNT, pa.table({"key": ["race-winner"], "value": [3], "ttl_timestamp": [1], "tombstone": [False]}), mode="delta")
    loser.put_state("sessions", COUNT, pa.table({"key": ["race-loser"], "value": [4], "ttl_timestamp": [1], "tombstone": [False]}), mode="delta")
    winner.commit()
    with pytest.raises(CommitConflictError):
        loser.commit()
    facts["lost_attempt"] = loser.attempt_id
    # -- savepoint 4 (self-contained) with one more delta written straight into its folder
    with store.begin(kind="savepoint") as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["user-5"], "value": [None], "ttl_timestamp": [None], "tombstone": [True]}), mode="delta")
    # -- checkpoint 5 on top of the savepoint
    with store.begin() as w:
        w.put_state("sessions", AVG, pa.table({"key": pa.array([6], pa.int16()), "value": [{"sum": 6, "count": 1}], "tombstone": [False]}), mode="delta")
        w.put_operator_state("source", SPLITS, pa.table({"subtask": pa.array([0], pa.int32()), "value": ["s-9"]}))
    return facts


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("schemas") / "job"
    store = fs.open(str(root))
    facts = _build(store)
    yield {"root": root, "store": store, **facts}


@pytest.fixture(scope="module")
def gc_job(job: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A copy of the job root after `retain(1)`: checkpoints 1-3 discarded and garbage-collected."""
    root = tmp_path_factory.mktemp("schemas-gc") / "job"
    shutil.copytree(job["root"], root)
    store = fs.open(str(root))
    deleted = store.retain(1)
    return {"root": root, "store": store, "deleted": deleted, "before": _data_files(job["root"])}


def _data_files(root: Path) -> list[str]:
    out = []
    for base in (C.SHARED_DIR, C.SAVEPOINTS_DIR):
        out += [p.relative_to(root).as_posix() for p in (root / base).rglob("*.parquet")]
    return sorted(out)


def _delta_rows(root: Path, rel: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(str(root / rel)).to_pyarrow_table().to_pylist()


def _log_json(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in row.items()}


# ---------------------------------------------------------------------------------------
# the schemas themselves
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_documents_are_valid_draft_2020_12(name: str, version: int) -> None:
    schema = ALL_SCHEMAS[version][name]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith(f"/v{version}/{name}.schema.json")


def test_spec_names_every_column_kind_and_metadata_key() -> None:
    spec = (ROOT / "schemas" / "FORMAT.md").read_text(encoding="utf-8")
    names = [v for k, v in vars(C).items() if k.startswith(("COL_", "META_", "KIND_")) and isinstance(v, str)]
    names += [C.LOG_TABLE, C.MANIFEST_TABLE, C.TIMERS_SUBDIR, C.OPERATOR_SUBDIR, C.COORDINATOR_SUBDIR, "flinkstate.timer.domain", "flinkstate.operator_state.mode"]
    missing = [n for n in names if f"`{n}`" not in spec]
    assert not missing, f"FORMAT.md does not name {missing}"


# ---------------------------------------------------------------------------------------
# data files
# ---------------------------------------------------------------------------------------


def test_every_data_file_matches_the_data_file_schema(job: dict[str, Any]) -> None:
    store, root = job["store"], job["root"]
    paths = _data_files(root)
    assert len(paths) > 30
    kinds, state_kinds, modes, domains = set(), set(), set(), set()
    for p in paths:
        d = describe_data_file(store.io, p)
        assert_valid("data-file", d)
        kinds.add(d["kind"])
        state_kinds.add(d["metadata"].get(C.META_STATE_KIND))
        modes.add(d["metadata"].get("flinkstate.operator_state.mode"))
        domains.add(d["metadata"].get("flinkstate.timer.domain"))
    assert kinds == set(C.FILE_KINDS)
    assert {"value", "list", "map", "reducing", "aggregating"} <= state_kinds
    assert {"list", "union", "broadcast"} <= modes
    assert {"event", "processing"} <= domains


def test_big_file_has_several_zstd_row_groups(job: dict[str, Any]) -> None:
    store = job["store"]
    (entry,) = store.state_files("sessions", "big", 1)
    d = describe_data_file(store.io, entry.path)
    assert d["row_groups"] == [65536, BIG_ROWS - 65536]
    assert d["compression"] == ["ZSTD"] and d["sorted"] and d["sort_keys"] == ["key_group", "key"]


def _declared_schema(store: fs.CheckpointStore, e: FileEntry, cid: int) -> pa.Schema:
    op = store.metadata(cid).operators[e.operator]
    if e.kind in (C.KIND_FULL, C.KIND_DELTA):
        return state_schema(op.keyed_states[e.state], delta=e.kind == C.KIND_DELTA)  # type: ignore[index]
    if e.kind in (C.KIND_TIMERS_FULL, C.KIND_TIMERS_DELTA):
        return timer_schema(op.timer_services[e.state], delta=e.kind == C.KIND_TIMERS_DELTA)  # type: ignore[index]
    if e.kind == C.KIND_OPERATOR:
        return operator_state_schema(op.operator_states[e.state])  # type: ignore[index]
    from flinkstate.format.datafile import coordinator_schema

    return coordinator_schema()


def test_files_agree_with_manifest_and_declared_types(job: dict[str, Any]) -> None:
    store = job["store"]
    seen = 0
    for info in store.checkpoints():
        for e in store.files(info.checkpoint_id):
            d = describe_data_file(store.io, e.path)
            m = d["metadata"]
            assert d["kind"] == e.kind
            assert int(m[C.META_KG_START]) == e.key_group_start and int(m[C.META_KG_END]) == e.key_group_end
            assert int(m[C.META_CHECKPOINT_ID]) == e.created_by_checkpoint_id
            assert m[C.META_STATE] == (e.state or "") and m[C.META_OPERATOR] == e.operator
            assert d["num_rows"] == e.rows and store.io.size(e.path) == e.bytes
            if e.kind in (C.KIND_FULL, C.KIND_DELTA):
                assert int(m[C.META_MAX_PARALLELISM]) == info.max_parallelism
                assert m[C.META_STATE_KIND] == store.state_descriptor(e.operator, e.state, info.checkpoint_id).kind  # type: ignore[arg-type]
            file_schema = pq.read_schema(store.io.fs_path(e.path)).remove_metadata()
            assert file_schema.equals(_declared_schema(store, e, info.checkpoint_id)), (e.path, file_schema)
            seen += 1
    assert seen > 40


def test_sort_order_key_group_then_key_and_timers_by_timestamp(job: dict[str, Any]) -> None:
    store, root = job["store"], job["root"]
    checked = {"keyed": 0, "timers": 0, "struct-key": 0}
    for p in _data_files(root):
        t = pq.read_table(store.io.fs_path(p))
        kind = t.schema.metadata[C.META_FILE_KIND.encode()].decode()
        if kind in (C.KIND_FULL, C.KIND_DELTA):
            kg = t.column("key_group").to_pylist()
            assert kg == sorted(kg), p
            if pa.types.is_struct(t.schema.field("key").type):
                checked["struct-key"] += 1  # ordered by key group only (see FORMAT.md)
                continue
            cols = ["key_group", "key"] + (["user_key"] if "user_key" in t.column_names else [])
            rows = list(zip(*(t.column(c).to_pylist() for c in cols)))
            assert rows == sorted(rows), p
            checked["keyed"] += 1
        elif kind in (C.KIND_TIMERS_FULL, C.KIND_TIMERS_DELTA):
            rows = list(zip(t.column("key_group").to_pylist(), t.column("timestamp").to_pylist(), t.column("key").to_pylist()))
            assert rows == sorted(rows), p
            checked["timers"] += 1
        elif kind == C.KIND_OPERATOR:
            sub = t.column("subtask").to_pylist()
            assert sub == sorted(sub), p
        else:
            assert t.column("seq").to_pylist() == sorted(t.column("seq").to_pylist()), p
    assert all(checked.values()), checked


def test_key_group_column_is_flinks_assignment_inside_the_file_range(job: dict[str, Any]) -> None:
    store, root = job["store"], job["root"]
    n = 0
    for p in _data_files(root):
        t = pq.read_table(store.io.fs_path(p))
        meta = {k.decode(): v.decode() for k, v in t.schema.metadata.items()}
        if "key_group" not in t.column_names:
            continue
        kg = t.column("key_group").combine_chunks()
        assert kg.type == pa.int32()
        assert kg.equals(assign_key_groups(t.column("key"), MAXP)), p
        lo, hi = int(meta[C.META_KG_START]), int(meta[C.META_KG_END])
        assert all(lo <= g <= hi for g in kg.to_pylist()), p
        n += 1
    assert n > 20


def test_ttl_list_column_is_parallel_to_the_value_list(job: dict[str, Any]) -> None:
    store = job["store"]
    n = 0
    for info in store.checkpoints():
        for e in store.state_files("sessions", "items", info.checkpoint_id):
            t = read_data_file(store.io, e)
            for v, ttl in zip(t.column("value").to_pylist(), t.column("ttl_timestamp").to_pylist()):
                if v is not None and ttl is not None:
                    assert len(v) == len(ttl)
                    n += 1
    assert n > 10
    # a TTL config with update type Disabled is stored but adds no ttl_timestamp column
    (e,) = [x for x in store.state_files("sessions", "profile", 1)]
    assert "ttl_timestamp" not in pq.read_schema(store.io.fs_path(e.path)).names
    assert store.state_descriptor("sessions", "profile", 1).ttl is not None


# ---------------------------------------------------------------------------------------
# merge rule, as FORMAT.md states it, re-implemented independently of merge.py
# ---------------------------------------------------------------------------------------


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _spec_view(store: fs.CheckpointStore, entries: list[FileEntry], pk: list[str], maxp: int) -> set[str]:
    ordered = sorted(entries, key=lambda e: (e.created_by_checkpoint_id, e.seq, e.path))
    newest_full = [-1] * maxp
    for i, e in enumerate(ordered):
        if e.kind in (C.KIND_FULL, C.KIND_TIMERS_FULL):
            for g in range(e.key_group_start, e.key_group_end + 1):
                newest_full[g] = i
    view: dict[str, dict[str, Any]] = {}
    for i, e in enumerate(ordered):
        for row in read_data_file(store.io, e).to_pylist():
            if i < newest_full[row["key_group"]]:
                continue
            view[_canon([row[c] for c in pk])] = row
    return {_canon({k: v for k, v in r.items() if k != "tombstone"}) for r in view.values() if not r.get("tombstone", False)}


def test_merge_rule_of_the_spec_matches_the_reader(job: dict[str, Any]) -> None:
    store = job["store"]
    checked = 0
    for info in store.checkpoints():
        meta = store.metadata(info.checkpoint_id)
        for uid, op in meta.operators.items():
            for name, d in op.keyed_states.items():
                if name == BIG.name:
                    continue  # 70,000 rows in one full file: nothing to merge, slow in pure Python
                pk = ["key"] + (["namespace"] if d.namespace_type is not None else []) + (["user_key"] if d.kind == "map" else [])
                want = _spec_view(store, store.state_files(uid, name, info.checkpoint_id), pk, info.max_parallelism)
                got = {_canon(r) for r in store.read_state(uid, name, info.checkpoint_id, raw=True).to_pylist()}
                assert got == want, (info.checkpoint_id, name)
                checked += 1
            for name, t in op.timer_services.items():
                pk = ["key"] + (["namespace"] if t.namespace_type is not None else []) + ["timestamp"]
                want = _spec_view(store, store.state_files(uid, name, info.checkpoint_id, scope="timers"), pk, info.max_parallelism)
                got = {_canon(r) for r in store.read_timers(uid, name, info.checkpoint_id).to_pylist()}
                assert got == want, (info.checkpoint_id, name)
                checked += 1
    assert checked > 20
    # tombstones really delete, later deltas really win
    count = {r["key"]: r["value"] for r in store.read_state("sessions", "count", raw=True).to_pylist()}  # ttl_timestamp 1: stored rows
    assert count["user-1"] == 100 and "user-2" not in count and count["new-key"] == 7 and count["race-winner"] == 3 and "user-5" not in count
    assert "race-loser" not in count  # the attempt that lost the race is invisible


# ---------------------------------------------------------------------------------------
# manifest, log, metadata
# ---------------------------------------------------------------------------------------


def test_every_manifest_row_matches_the_schema(job: dict[str, Any]) -> None:
    root = job["root"]
    rows = _delta_rows(root, C.MANIFEST_TABLE)
    assert rows
    for r in rows:
        assert_valid("manifest-row", r)
        assert r["key_group_start"] <= r["key_group_end"]
        assert r["created_by_checkpoint_id"] <= r["checkpoint_id"]
    log = _delta_rows(root, C.LOG_TABLE)
    committed = {(r["checkpoint_id"], r["attempt_id"]) for r in log if r["event"] == C.EVENT_COMPLETED}
    attempts = {(r["checkpoint_id"], r["attempt_id"]) for r in rows}
    lost = {a for a in attempts if a not in committed}
    assert lost == {(3, job["lost_attempt"])}, "only the attempt that lost the race has rows without a COMPLETED event"
    for r in log:
        if r["event"] == C.EVENT_COMPLETED:
            assert r["files"] == sum(1 for m in rows if (m["checkpoint_id"], m["attempt_id"]) == (r["checkpoint_id"], r["attempt_id"]))


def test_delta_tables_have_the_documented_schemas(job: dict[str, Any]) -> None:
    from deltalake import DeltaTable

    root = job["root"]
    expected = {
        C.MANIFEST_TABLE: [("checkpoint_id", "long", False), ("attempt_id", "string", False), ("operator", "string", False), ("state", "string", True),
                           ("kind", "string", False), ("path", "string", False), ("key_group_start", "integer", False), ("key_group_end", "integer", False),
                           ("created_by_checkpoint_id", "long", False), ("seq", "integer", False), ("rows", "long", False), ("bytes", "long", False),
                           ("checksum", "string", True)],
        C.LOG_TABLE: [("checkpoint_id", "long", False), ("attempt_id", "string", False), ("event", "string", False), ("kind", "string", False),
                      ("event_time", "timestamp", False), ("created_at", "timestamp", False), ("max_parallelism", "integer", False),
                      ("format_version", "integer", False), ("base_checkpoint_id", "long", True), ("files", "long", False), ("rows", "long", False),
                      ("bytes", "long", False), ("metadata", "string", False)],
    }
    for rel, cols in expected.items():
        t = DeltaTable(str(root / rel))
        got = [(f.name, f.type.type, f.nullable) for f in t.schema().fields]
        assert got == cols, rel
        assert t.metadata().partition_columns == []
        first = json.loads((root / rel / "_delta_log" / "00000000000000000000.json").read_text().splitlines()[0])
        assert first["commitInfo"][C.DELTA_FORMAT_VERSION_KEY] == str(C.FORMAT_VERSION)
        for schema_name, schema_rows in (("manifest-row", C.MANIFEST_TABLE), ("log-row", C.LOG_TABLE)):
            # checksum came later in v1: optional, so manifests written before it stay valid
            assert [c for c, _, _ in expected[schema_rows] if c != "checksum"] == SCHEMAS[schema_name]["required"]


def test_every_log_row_and_metadata_document_matches_the_schemas(gc_job: dict[str, Any]) -> None:
    root = gc_job["root"]  # checkpoints 1, 2, 3 discarded (not the savepoint): DISCARDED rows
    rows = _delta_rows(root, C.LOG_TABLE)
    events = {(r["event"], r["kind"]) for r in rows}
    assert events == {("COMPLETED", "checkpoint"), ("COMPLETED", "savepoint"), ("DISCARDED", "checkpoint"), ("COLLECTING", "checkpoint")}
    discarded = {r["checkpoint_id"] for r in rows if r["event"] == C.EVENT_DISCARDED}
    manifest_ids = {e["checkpoint_id"] for e in _delta_rows(root, C.MANIFEST_TABLE)}
    attempts = {(e["checkpoint_id"], e["attempt_id"]) for e in _delta_rows(root, C.MANIFEST_TABLE)}
    assert discarded - manifest_ids  # GC pruned the manifest rows of discarded checkpoints nothing pins
    kept = [r for r in rows if r["event"] == C.EVENT_COMPLETED and r["checkpoint_id"] not in discarded]
    assert kept and all((r["checkpoint_id"], r["attempt_id"]) in attempts for r in kept)
    for r in rows:
        doc = _log_json(r)
        assert_valid("log-row", doc)
        if r["event"] == C.EVENT_COLLECTING:  # what the collection may delete, announced before it deleted anything
            collection = json.loads(r["metadata"])
            errors = list(jsonschema.Draft202012Validator(SCHEMAS["log-row"]["$defs"]["collection"]).iter_errors(collection))
            assert not errors, errors[:3]
            assert collection["latest"] == r["checkpoint_id"] and r["files"] > 0
            assert set(collection["protected"]) >= {x["checkpoint_id"] for x in kept}
        if r["event"] == C.EVENT_COMPLETED and (r["checkpoint_id"], r["attempt_id"]) in attempts:  # rows: all or none
            meta = json.loads(r["metadata"])
            assert_valid("checkpoint-metadata", meta)
            assert r["metadata"] == json.dumps(meta, sort_keys=True, separators=(",", ":"))
            files = [e for e in _delta_rows(root, C.MANIFEST_TABLE) if (e["checkpoint_id"], e["attempt_id"]) == (r["checkpoint_id"], r["attempt_id"])]
            assert r["bytes"] == sum(e["bytes"] for e in files)
            assert r["rows"] == sum(e["rows"] for e in files if e["kind"] not in C.DELTA_KINDS)
    meta = json.loads(next(r["metadata"] for r in rows if r["checkpoint_id"] == 5 and r["event"] == C.EVENT_COMPLETED))
    ops = meta["operators"]
    assert set(ops) == {"sessions", "source"} and ops["source"]["has_coordinator"] and meta["properties"] == {"job": "schema-tests"}
    assert {u: o["max_parallelism"] for u, o in ops.items()} == {"sessions": MAXP, "source": SOURCE_MAXP}
    assert {r["max_parallelism"] for r in rows} == {MAXP}  # the log row: the checkpoint's default
    assert {d["kind"] for d in ops["sessions"]["keyed_states"]} == {"value", "list", "map", "reducing", "aggregating"}
    assert {d["mode"] for o in ops.values() for d in o["operator_states"]} == {"list", "union", "broadcast"}


def test_a_v1_root_matches_the_v1_schemas_and_a_checkpoint_on_it_the_newest(tmp_path: Path) -> None:
    """The checked-in root of release 0.1.0 (format v1) validates against schemas/v1; a checkpoint written on top of it
    validates against the newest version's schemas while the v1 files it carries keep validating against v1."""
    root = tmp_path / "v1"
    shutil.copytree(ROOT / "tests" / "fixtures" / "backend-v1", root)
    store = fs.open(str(root))
    old_files = _data_files(root)
    for p in old_files:
        d = describe_data_file(store.io, p)
        assert d["format_version"] == 1
        assert_valid("data-file", d, 1)
        assert_invalid("data-file", d)
    for r in _delta_rows(root, C.LOG_TABLE):
        assert_valid("log-row", _log_json(r), 1)
        assert_valid("checkpoint-metadata", json.loads(r["metadata"]), 1)
        assert_invalid("checkpoint-metadata", json.loads(r["metadata"]))  # no max parallelism per operator
    for m in _delta_rows(root, C.MANIFEST_TABLE):
        assert_valid("manifest-row", {k: v for k, v in m.items() if k != "checksum" or v is not None}, 1)
    with store.begin() as w:
        w.set_max_parallelism(256, "added")
        w.put_state("added", BIG, pa.table({"key": pa.array([1, 2], pa.int64()), "value": pa.array([1, 2], pa.int32())}))
    new = [r for r in _delta_rows(root, C.LOG_TABLE) if r["checkpoint_id"] == 3]
    assert len(new) == 1 and new[0]["format_version"] == C.FORMAT_VERSION
    assert_valid("log-row", _log_json(new[0]))
    meta = json.loads(new[0]["metadata"])
    assert {u: o["max_parallelism"] for u, o in meta["operators"].items()} == {"fixture-op": 32, "added": 256}
    for p in _data_files(root):
        d = describe_data_file(store.io, p)
        assert d["format_version"] == (1 if p in old_files else C.FORMAT_VERSION)
        assert_valid("data-file", d, d["format_version"])


def test_stored_arrow_types_decode_to_the_declared_types(job: dict[str, Any]) -> None:
    store = job["store"]
    meta = store.record(1).metadata
    declared = {**{("k", n): d for n, d in KEYED.items()}, **{("t", n): d for n, d in TIMERS.items()}}
    n = 0
    for d in meta["operators"]["sessions"]["keyed_states"] + meta["operators"]["sessions"]["timer_services"]:
        ref = declared.get(("k", d["name"])) or declared[("t", d["name"])]
        for field in ("key_type", "namespace_type", "value_type", "user_key_type", "user_value_type"):
            if d.get(field) is None:
                continue
            raw = base64.b64decode(d[field]["arrow"], validate=True)
            assert raw[:4] == b"\xff\xff\xff\xff" and len(raw) % 8 == 0
            assert int.from_bytes(raw[4:8], "little") == len(raw) - 8
            schema = pa.ipc.read_schema(pa.py_buffer(raw))
            assert schema.names == ["t"] and schema.field(0).nullable
            assert schema.field(0).type == getattr(ref, field), (d["name"], field)
            assert d[field]["name"] == str(getattr(ref, field))
            n += 1
    assert n >= 15


def test_savepoints_are_self_contained_and_gc_spares_them(gc_job: dict[str, Any]) -> None:
    store, root = gc_job["store"], gc_job["root"]
    assert gc_job["deleted"] and all(p.startswith("shared/") for p in gc_job["deleted"])
    gone = set(gc_job["before"]) - set(_data_files(root))
    assert gone and gone <= set(gc_job["deleted"])
    for p in _data_files(root):
        assert_valid("data-file", describe_data_file(store.io, p))
    infos = {c.checkpoint_id: c for c in store.checkpoints()}
    assert sorted(infos) == [4, 5] and infos[4].kind == "savepoint"
    sp = store.files(4)
    assert sp and all(e.path.startswith("savepoints/sp-0000000004/") for e in sp)
    assert all((root / e.path).exists() for e in sp)
    live = {e.path for cid in infos for e in store.files(cid)}
    shared_left = {p for p in _data_files(root) if p.startswith("shared/")}
    assert shared_left <= live, "the registry deletes every shared file no retained checkpoint uses"
    for info in infos.values():
        for e in store.files(info.checkpoint_id):
            assert_valid("manifest-row", {**e.to_dict(), "checkpoint_id": info.checkpoint_id, "attempt_id": store.record(info.checkpoint_id).attempt_id})
    assert store.read_state("sessions", "count", 4).num_rows > 0


def test_unknown_data_file_version_is_refused_with_a_typed_error(tmp_path: Path) -> None:
    io = FileIO(str(tmp_path))
    future = str(C.FORMAT_VERSION + 1)
    table = pa.table({"key_group": pa.array([0], pa.int32()), "key": ["a"], "value": [1]})
    table = table.replace_schema_metadata({C.META_FORMAT_VERSION: future, C.META_FILE_KIND: "full"})
    with io.open("f.parquet", "wb") as f:
        pq.write_table(table, f)
    e = FileEntry(path="f.parquet", operator="op", state="s", kind="full", key_group_start=0, key_group_end=0, created_by_checkpoint_id=1, rows=1, bytes=1)
    with pytest.raises(CorruptFileError, match=f"format version {future}"):
        read_data_file(io, e)


# ---------------------------------------------------------------------------------------
# negative tests: the schemas reject wrong documents
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def samples(job: dict[str, Any]) -> dict[str, Any]:
    store, root = job["store"], job["root"]
    by_kind: dict[tuple[str, str], dict[str, Any]] = {}
    for p in _data_files(root):
        d = describe_data_file(store.io, p)
        by_kind.setdefault((d["kind"], d["metadata"][C.META_STATE]), d)
    log = [_log_json(r) for r in _delta_rows(root, C.LOG_TABLE)]
    completed = next(r for r in log if r["event"] == "COMPLETED" and r["checkpoint_id"] == 1)
    return {
        "files": by_kind,
        "manifest": _delta_rows(root, C.MANIFEST_TABLE)[0],
        "log": completed,
        "meta": json.loads(completed["metadata"]),
    }


def _drop_column(d: dict[str, Any], name: str) -> dict[str, Any]:
    d = copy.deepcopy(d)
    d["columns"] = [c for c in d["columns"] if c["name"] != name]
    d["column_order"] = ",".join(c["name"] for c in d["columns"])
    return d


def _set_column(d: dict[str, Any], name: str, **kw: Any) -> dict[str, Any]:
    d = copy.deepcopy(d)
    for c in d["columns"]:
        if c["name"] == name:
            c.update(kw)
    return d


def _with(d: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    d = copy.deepcopy(d)
    cur = d
    for p in path[:-1]:
        cur = cur[p]
    if value is _DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


_DELETE = object()


def test_data_file_schema_rejects_wrong_descriptions(samples: dict[str, Any]) -> None:
    f = samples["files"]
    full_value, delta_map, full_list = f[("full", "count")], f[("delta", "cart")], f[("full", "items")]
    timers, coord, bcast = f[("timers-full", "window-end")], f[("coordinator", "")], f[("operator", "rules")]
    for good in (full_value, delta_map, full_list, timers, coord, bcast):
        assert_valid("data-file", good)
    bad = [
        _drop_column(full_value, "key_group"),  # a missing column
        _drop_column(full_value, "key"),
        _drop_column(delta_map, "tombstone"),  # a delta without tombstones
        _drop_column(delta_map, "user_key"),  # a map file without user keys
        _drop_column(timers, "timestamp"),
        _drop_column(coord, "seq"),
        _drop_column(bcast, "key"),  # broadcast state needs its key column
        _with(full_value, ["metadata", C.META_FORMAT_VERSION], C.FORMAT_VERSION),  # the version is a string
        _with(full_value, ["metadata", C.META_FORMAT_VERSION], str(C.FORMAT_VERSION - 1)),  # an earlier version's file
        _with(full_value, ["format_version"], str(C.FORMAT_VERSION)),
        _with(full_value, ["metadata", C.META_FORMAT_VERSION], _DELETE),
        _with(full_value, ["metadata", C.META_MAX_PARALLELISM], _DELETE),
        _with(full_value, ["metadata", C.META_STATE_KIND], "set"),
        _with(full_value, ["kind"], "snapshot"),  # unknown kind
        _with(_with(full_value, ["kind"], "snapshot"), ["metadata", C.META_FILE_KIND], "snapshot"),
        _with(full_value, ["kind"], "delta"),  # kind and metadata disagree
        _with(full_value, ["sorted"], False),
        _with(full_value, ["compression"], ["SNAPPY"]),
        _with(full_value, ["sort_keys"], ["key"]),
        _with(timers, ["sort_keys"], ["key_group", "key"]),
        _with(timers, ["metadata", "flinkstate.timer.domain"], "ingestion"),
        _with(coord, ["metadata", C.META_STATE], "x"),
        _with(full_value, ["column_order"], "key,key_group,value,ttl_timestamp"),  # order matters
        _set_column(full_value, "key_group", type="int64"),
        _set_column(full_value, "key", nullable=True),
        _set_column(full_value, "ttl_timestamp", type="list<item: int64>"),  # list TTL on a value state
        _set_column(full_list, "ttl_timestamp", type="int64"),  # scalar TTL on a list state
        _set_column(full_list, "value", type="int64"),  # list state stores one list per key
        _set_column(delta_map, "tombstone", nullable=True),
        _set_column(coord, "payload", type="string"),
        _with(full_value, ["metadata", C.META_OPERATOR], "../escape"),
        _with(full_value, ["path"], "shared/op/../x.parquet"),
    ]
    for b in bad:
        assert_invalid("data-file", b)


def test_data_file_schema_rejects_a_real_unsorted_snappy_file(tmp_path: Path) -> None:
    io = FileIO(str(tmp_path))
    keys = ["b", "a", "c"]
    table = pa.table({
        "key_group": pa.array([assign_key_group(k, MAXP) for k in keys], pa.int32()), "key": keys, "value": pa.array([1, 2, 3], pa.int64()),
    }).sort_by([("key_group", "descending")])
    meta = {C.META_FORMAT_VERSION: str(C.FORMAT_VERSION), C.META_FILE_KIND: "full", C.META_OPERATOR: "op", C.META_STATE: "s", C.META_KG_START: "0",
            C.META_KG_END: str(MAXP - 1), C.META_CHECKPOINT_ID: "1", C.META_STATE_KIND: "value", C.META_MAX_PARALLELISM: str(MAXP)}
    schema = pa.schema([pa.field("key_group", pa.int32(), False), pa.field("key", pa.string(), False), pa.field("value", pa.int64())], metadata=meta)
    rel = "shared/op/s/0000000001-full-kg00000-00015-0123456789ab.parquet"
    table = pa.Table.from_arrays(table.columns, schema=schema)
    with io.open(rel, "wb") as fh:
        pq.write_table(table, fh, compression="snappy")
    d = describe_data_file(io, rel)
    assert d["sorted"] is False and d["compression"] == ["SNAPPY"]
    errors = {e.json_path for e in validator("data-file").iter_errors(d)}
    assert {"$.sorted", "$.compression[0]"} <= errors
    with io.open(rel, "wb") as fh:
        pq.write_table(table.sort_by([("key_group", "ascending"), ("key", "ascending")]), fh, compression="zstd")
    assert_valid("data-file", describe_data_file(io, rel))


def test_manifest_row_schema_rejects_wrong_rows(samples: dict[str, Any]) -> None:
    row = samples["manifest"]
    assert_valid("manifest-row", row)
    coord = {**row, "kind": "coordinator", "state": None, "key_group_start": 0, "key_group_end": 0,
             "path": "shared/source/_coordinator/0000000001-coordinator-kg00000-00000-0123456789ab.parquet"}
    assert_valid("manifest-row", coord)
    for b in [
        _with(row, ["kind"], "snapshot"),
        _with(row, ["attempt_id"], "not-hex"),
        _with(row, ["key_group_start"], -1),
        _with(row, ["key_group_end"], 32768),
        _with(row, ["rows"], "3"),
        _with(row, ["seq"], _DELETE),
        _with(row, ["path"], "/abs/file.parquet"),
        _with(row, ["path"], "shared/op/state/file.parquet"),
        _with(row, ["operator"], "a..b"),
        {**row, "extra": 1},
        {**coord, "state": "s"},
        {**coord, "key_group_end": 3},
        {**row, "kind": "delta"} if row["kind"] == "full" else {**row, "kind": "full"},  # kind and file name disagree
    ]:
        assert_invalid("manifest-row", b)


def test_log_row_schema_rejects_wrong_rows(samples: dict[str, Any]) -> None:
    row = samples["log"]
    assert_valid("log-row", row)
    for b in [
        _with(row, ["event"], "STARTED"),
        _with(row, ["kind"], "snapshot"),
        _with(row, ["format_version"], C.FORMAT_VERSION + 1),
        _with(row, ["format_version"], C.FORMAT_VERSION - 1),
        _with(row, ["format_version"], str(C.FORMAT_VERSION)),
        _with(row, ["max_parallelism"], 0),
        _with(row, ["max_parallelism"], 32769),
        _with(row, ["created_at"], "yesterday"),
        _with(row, ["created_at"], "2024-01-01T00:00:00+02:00"),
        _with(row, ["metadata"], "{}"),
        _with(row, ["metadata"], _DELETE),
        {**row, "event": "DISCARDED"},  # a DISCARDED row carries the metadata {}
        {**row, "event": "DISCARDED", "metadata": "{}", "kind": "savepoint"},  # savepoints are never discarded
    ]:
        assert_invalid("log-row", b)
    assert_valid("log-row", {**row, "event": "DISCARDED", "metadata": "{}"})


def test_metadata_schema_rejects_wrong_documents(samples: dict[str, Any]) -> None:
    meta = samples["meta"]
    assert_valid("checkpoint-metadata", meta)
    states = meta["operators"]["sessions"]["keyed_states"]
    i_map = next(i for i, s in enumerate(states) if s["kind"] == "map")
    i_val = next(i for i, s in enumerate(states) if s["kind"] == "value" and s["ttl"] is not None)
    ops = meta["operators"]["sessions"]["operator_states"]
    i_bc = next(i for i, s in enumerate(ops) if s["mode"] == "broadcast")
    ks = ["operators", "sessions", "keyed_states"]
    for b in [
        _with(meta, ["format_version"], str(C.FORMAT_VERSION)),
        _with(meta, ["format_version"], C.FORMAT_VERSION + 1),
        _with(meta, ["format_version"], 1),  # a v1 document records no max parallelism per operator
        _with(meta, ["operators", "sessions", "max_parallelism"], _DELETE),
        _with(meta, ["operators", "sessions", "max_parallelism"], 0),
        _with(meta, ["operators", "sessions", "max_parallelism"], 32769),
        _with(meta, ["operators"], _DELETE),
        _with(meta, ks + [i_val, "kind"], "set"),  # unknown state kind
        _with(meta, ks + [i_map, "user_key_type"], _DELETE),
        _with(meta, ks + [i_val, "value_type"], _DELETE),
        _with(meta, ks + [i_val, "user_key_type"], states[i_map]["user_key_type"]),
        _with(meta, ks + [i_val, "key_type", "arrow"], "not base64!"),
        _with(meta, ks + [i_val, "key_type"], "string"),  # types are {arrow, name} objects
        _with(meta, ks + [i_val, "ttl", "ttl_ms"], 0),
        _with(meta, ks + [i_val, "ttl", "update_type"], "OnWrite"),
        _with(meta, ks + [i_val, "ttl", "ttl_time_characteristic"], "EventTime"),
        _with(meta, ks + [i_val, "ttl", "incremental_cleanup"], {"cleanup_size": -1, "run_cleanup_for_every_record": False}),
        _with(meta, ks + [i_val, "ttl", "state_visibility"], _DELETE),
        _with(meta, ["operators", "sessions", "operator_states", i_bc, "key_type"], None),
        _with(meta, ["operators", "sessions", "timer_services", 0, "domain"], "ingestion"),
        _with(meta, ["operators", "sessions", "has_coordinator"], "yes"),
        _with(meta, ["operators", "sessions", "parallelism"], 0),
        _with(meta, ["properties", "n"], 1),
        {**meta, "operators": {"bad/uid": meta["operators"]["sessions"]}},
    ]:
        assert_invalid("checkpoint-metadata", b)
