"""Operators named by uid or by operator id in every option (ttl, row_fields, PyFlink declarations, uids), on Flink 1.x and 2.x.

The savepoints are the checked-in ones real Flink 1.18, 1.20 and 2.3 wrote (tests/fixtures/make_flink_fixture.py):
1.x `_metadata` records operator ids only (the id is Flink's murmur3_128 hash of the uid), 2.x records uids too.
"""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.cli import main
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.meta.metadata import read_metadata
from flinkstate.flink.meta.names import find_operator, uid_hash
from flinkstate.flink.pyflink.coders import list_state, value_state

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SAVEPOINTS = {
    "1.20": FIXTURES / "flink-1.20" / "canonical" / "savepoint",
    "1.18-rocksdb": FIXTURES / "flink-1.18" / "rocksdb" / "savepoint",
    "2.3": FIXTURES / "flink-2.3-canonical" / "files" / "savepoint",
}
UID = "long-keyed"
OP_ID = "e96676d2a3621a713f8229ed21cc08b2"  # Flink's id of uid "long-keyed"
WEEK = 7 * 86_400_000
DAY = 86_400_000


def _last_access(sp: Path) -> list[int]:
    """The last-access times Flink stored for the TTL value state `ttl` of long-keyed (read with no TTL given)."""
    return fs.open(str(sp)).read_state(UID, "ttl", raw=True).column("ttl_timestamp").to_pylist()


def test_uid_hash_is_the_operator_id_flink_1x_records() -> None:
    assert uid_hash(UID) == OP_ID
    for version in ("1.20", "2.3"):
        meta = read_metadata(str(SAVEPOINTS[version]))
        assert find_operator(meta.operators, UID) is find_operator(meta.operators, OP_ID) is meta.operator(UID)
        assert find_operator(meta.operators, "no-such-uid") is None
    assert read_metadata(str(SAVEPOINTS["1.20"])).operator(UID).uid is None  # 1.x: found by the hash only


@pytest.mark.parametrize("by", [UID, OP_ID])
@pytest.mark.parametrize("version", sorted(SAVEPOINTS))
def test_ttl_by_uid_or_operator_id_hides_expired_entries(version: str, by: str) -> None:
    """A TTL of 7 days given by uid or by operator id: 8 days after the last access nothing is live, before it all is."""
    sp = SAVEPOINTS[version]
    last = _last_access(sp)
    assert len(last) == 37
    src = fs.open(str(sp), ttl={f"{by}/ttl": WEEK})
    assert src.checkpoint().state_descriptor(UID, "ttl").ttl.ttl_ms == WEEK
    assert not any(u.endswith("/ttl") for u in src.describe()["ttl_unknown"])
    for read_by in (UID, OP_ID):
        assert src.read_state(read_by, "ttl", ttl_reference=max(last) + 8 * DAY).num_rows == 0
        assert src.read_state(read_by, "ttl", ttl_reference=min(last) + WEEK - 1).num_rows == 37
        every = src.read_state(read_by, "ttl", ttl_reference=max(last) + 8 * DAY, include_expired=True)
        assert every.num_rows == 37 and all(every.column("expired").to_pylist())
    # the same reads with no TTL given: nothing expires (the savepoint holds no TTL durations)
    assert fs.open(str(sp)).read_state(UID, "ttl", ttl_reference=max(last) + 8 * DAY).num_rows == 37


@pytest.mark.parametrize("version", ["1.20", "2.3"])
def test_ttl_from_a_string_and_for_every_operator_with_that_state(version: str) -> None:
    """ttl="op/state=ms;state=ms" (the Spark option's form); a bare state name applies to each operator having it."""
    sp = SAVEPOINTS[version]
    src = fs.open(str(sp), ttl=f"{OP_ID}/ttl={WEEK}; ttl_map={DAY}")
    ck = src.checkpoint()
    assert ck.state_descriptor(UID, "ttl").ttl.ttl_ms == WEEK
    assert ck.state_descriptor("string-keyed", "ttl_map").ttl.ttl_ms == DAY
    assert ck.ttl_unknown == (f"{ck.name_of(UID)}/ttl_list",)


@pytest.mark.parametrize("by", [UID, OP_ID])
@pytest.mark.parametrize("version", ["1.20", "2.3"])
def test_import_keeps_a_ttl_given_by_uid_or_operator_id(version: str, by: str, tmp_path: Path) -> None:
    """`flinkstate import --ttl OP/ttl=MS` (no --uid) with OP the uid or the id: the imported state expires as Flink's would."""
    sp = SAVEPOINTS[version]
    last = _last_access(sp)
    root = tmp_path / "root"
    assert main(["import", str(sp), str(root), "--ttl", f"{by}/ttl={WEEK}", "--raw-values"], out=io.StringIO()) == 0
    store = fs.open(str(root))
    name = UID if version == "2.3" else OP_ID  # 1.x records no uid: named by id unless --uid names it
    assert store.state_descriptor(name, "ttl").ttl.ttl_ms == WEEK
    assert store.read_state(name, "ttl", ttl_reference=max(last) + 8 * DAY).num_rows == 0
    assert store.read_state(name, "ttl", ttl_reference=min(last) + WEEK - 1).num_rows == 37
    def stamps(t: pa.Table) -> list[tuple[int, int]]:
        return sorted(zip(t.column("key").to_pylist(), t.column("ttl_timestamp").to_pylist()))

    assert stamps(store.read_state(name, "ttl", raw=True)) == stamps(fs.open(str(sp)).read_state(UID, "ttl", raw=True))
    named = import_savepoint(sp, tmp_path / "named", ttl={f"{by}/ttl": WEEK}, uids=[UID], raw_values=True)
    assert f"{UID}/ttl" not in named.ttl_unknown and f"{UID}/ttl_list" in named.ttl_unknown
    assert fs.open(str(tmp_path / "named")).read_state(UID, "ttl", ttl_reference=max(last) + 8 * DAY).num_rows == 0


@pytest.mark.parametrize("version", ["1.20", "2.3"])
def test_an_imported_root_reads_an_operator_by_uid_and_by_operator_id(version: str, tmp_path: Path) -> None:
    """As the savepoint in place: a root imported without `--uid` (1.x lists the operator by id) reads by the uid too,
    and a root imported from 2.x (listed by uid) by the operator id; a name that is neither is refused listing both."""
    root = tmp_path / "root"
    import_savepoint(SAVEPOINTS[version], root, raw_values=True)
    store = fs.open(str(root))
    expected = fs.open(str(SAVEPOINTS[version])).read_state(UID, "count")
    for by in (UID, OP_ID, OP_ID.upper()):
        got = store.read_state(by, "count")
        assert got.sort_by("key").equals(expected.sort_by("key")), by
        assert store.checkpoint().name_of(by) == (UID if version == "2.3" else OP_ID)
    listed = store.read_state(UID, "ttl_list", flatten=False)  # another state kind, by uid: as in place
    assert listed.num_rows > 0
    assert listed.sort_by("key").equals(fs.open(str(SAVEPOINTS[version])).read_state(UID, "ttl_list", flatten=False).sort_by("key"))
    with pytest.raises(fs.OperatorNotFoundError, match="operator .no-such-uid. is not in checkpoint 1; operators: .*"):
        store.read_state("no-such-uid", "count")


REFUSED = [
    ({"ttl": {"nope/ttl": WEEK}}, r"ttl 'nope/ttl': 'nope' names no operator .*operators: .*e96676d2a3621a713f8229ed21cc08b2"),
    ({"ttl": {f"{UID}/nope": WEEK}}, r"ttl 'long-keyed/nope': operator .* has no TTL state 'nope'.*TTL states: \['ttl', 'ttl_list'\]"),
    ({"ttl": {f"{OP_ID}/count": WEEK}}, r"ttl '.*/count': state 'count' of operator .* is not a TTL state"),
    ({"ttl": {"nope": WEEK}}, r"ttl 'nope': no operator of .* has a TTL state 'nope'; TTL states: .*/ttl_map"),
    ({"ttl": {f"{UID}/ttl": WEEK, f"{OP_ID}/ttl": DAY}}, "name the same state with different values"),
    ({"row_fields": "nope/row=a,b"}, r"row_fields 'nope/row': 'nope' names no operator"),
    ({"row_fields": {f"{OP_ID}/nope": ["a"]}}, r"row_fields '.*/nope': operator .* has no keyed state 'nope'.*'row'"),
    ({"pyflink": {"nope/total": value_state(pa.int64())}}, r"pyflink 'nope/total': 'nope' names no operator"),
    ({"pyflink": {f"{UID}/count": value_state(pa.int64())}}, r"pyflink 'long-keyed/count': state 'count' of operator .* is not a PyFlink state"),
    ({"pyflink": {"total": value_state(pa.int64())}}, r"pyflink 'total': no operator .* has a PyFlink state 'total'; PyFlink states: none"),
    ({"uids": ["no-such-uid"]}, r"uid 'no-such-uid' names no operator .*operators:"),
]


@pytest.mark.parametrize("version", ["1.20", "2.3"])
@pytest.mark.parametrize("kw,match", REFUSED, ids=[f"{next(iter(k))}-{i}" for i, (k, _) in enumerate(REFUSED)])
def test_an_unmatched_operator_or_state_in_an_option_is_refused_by_name(version: str, kw: dict, match: str) -> None:
    src = fs.open(str(SAVEPOINTS[version]), **kw)
    with pytest.raises(InvalidArgumentError, match=match):
        src.read_state(UID, "count")


@pytest.mark.parametrize("version", ["1.20", "2.3"])
def test_import_refuses_an_unmatched_ttl_or_uid_before_writing(version: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    sp, root = SAVEPOINTS[version], tmp_path / "root"
    for args, said in ((["--ttl", f"nope/ttl={WEEK}"], "'nope' names no operator"),
                       (["--ttl", f"{UID}/count_ttl={WEEK}"], "has no TTL state 'count_ttl'"),
                       (["--ttl", f"{OP_ID}/count={WEEK}"], "is not a TTL state"),
                       (["--ttl", f"nope={WEEK}"], "has a TTL state 'nope'"),
                       (["--uid", "no-such-uid"], "'no-such-uid' names no operator")):
        assert main(["import", str(sp), str(root), *args, "--raw-values"]) != 0
        assert said in capsys.readouterr().err
        assert not root.exists() or not any(root.iterdir())
    with pytest.raises(InvalidArgumentError, match="'nope' names no operator"):
        import_savepoint(sp, root, ttl={"nope/ttl": WEEK})
    assert not root.exists() or not any(root.iterdir())


@pytest.mark.parametrize("version", ["1.20", "2.3"])
def test_row_fields_by_operator_id_and_uid(version: str) -> None:
    sp = str(SAVEPOINTS[version])
    for by in (UID, OP_ID):
        t = fs.open(sp, row_fields=f"{by}/row=id,label").read_state(UID, "row")
        assert t.schema.field("value").type.names == ["id", "label"]


def test_describe_refuses_an_unknown_uid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", str(SAVEPOINTS["1.20"]), "--uid", UID, "--uid", "no-such-uid"]) != 0
    assert "'no-such-uid' names no operator" in capsys.readouterr().err
    out = io.StringIO()
    assert main(["describe", str(SAVEPOINTS["1.20"]), "--uid", UID], out=out) == 0
    assert f"operator {UID} (id {OP_ID}" in out.getvalue()


def test_an_operator_named_by_uid_is_read_by_its_id_too() -> None:
    """With uids given (1.x) or recorded (2.x), reads, timers and operator state take the operator id as well."""
    for version in ("1.20", "2.3"):
        src = fs.open(str(SAVEPOINTS[version]), uids=[UID, "opstate"])
        assert UID in src.checkpoint().operators
        assert src.read_state(OP_ID, "count").equals(src.read_state(UID, "count"))
        assert src.read_timers(OP_ID, "event_user-timers").num_rows == src.read_timers(UID, "event_user-timers").num_rows > 0
        opstate_id = read_metadata(str(SAVEPOINTS[version])).operator("opstate").operator_id
        assert src.read_operator_state(opstate_id, "split").num_rows == 60


PYFLINK = FIXTURES / "pyflink-2.3" / "savepoint"


def test_pyflink_declarations_by_uid_or_operator_id() -> None:
    """A PyFlink declaration keyed by the operator id applies like one keyed by uid; an unknown state is refused."""
    by_long = read_metadata(str(PYFLINK)).operator("by-long").operator_id
    for key in ("by-long/total", f"{by_long}/total"):
        src = fs.open(str(PYFLINK), pyflink={key: value_state(pa.int64())})
        assert src.read_state("by-long", "total").schema.field("value").type == pa.int64()
        assert src.read_state("by-string", "total").schema.field("value").type == pa.binary()  # that operator only
    with pytest.raises(InvalidArgumentError, match=rf"pyflink 'by-long/totl': operator by-long \(id {by_long}\) has no PyFlink state 'totl'.*'total'"):
        fs.open(str(PYFLINK), pyflink={"by-long/totl": value_state(pa.int64())}).checkpoint()
    with pytest.raises(InvalidArgumentError, match=r"pyflink 'histry': no operator .* has a PyFlink state 'histry'.*by-long/history"):
        fs.open(str(PYFLINK), pyflink={"histry": list_state(pa.string())}).checkpoint()
