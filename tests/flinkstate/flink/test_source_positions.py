"""Source positions: FileSource, KafkaSource and sequence sources' splits and enumerators, read, rewound, restored.

The `flink` tests check against the connectors' own classes (FileSourceSplitSerializer, PendingSplitsCheckpointSerializer
of Flink 2.3/1.20; flink-connector-kafka 4.0.1's serializers) and real Flink restoring a rewound savepoint.
"""

from __future__ import annotations

import fcntl
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.bridge.source_positions import (
    load_source,
    rewind_root,
    rewind_savepoint,
    source_enumerator,
    source_splits,
    write_enumerator,
    write_splits,
)
from flinkstate.flink.bridge.store_export import export_savepoint
from flinkstate.flink.sources import (
    AddPartition,
    DropTopic,
    ForgetPath,
    RereadFile,
    SetOffset,
    SetSequence,
    SplitNotFoundError,
    UnknownSourceError,
    apply_edits,
    decode_source,
    encode_source,
)
from flinkstate.flink.sources.codec import unframe_element
from flinkstate.flink.sources.kafka import split_owner
from fsc_helpers import flink_harness

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import make_source_fixture as msf  # noqa: E402

MIN = -(1 << 63)


def _counts(line: str) -> dict[str, int]:
    rows = (FIXTURES / f"sources-files-{line}" / "counts.txt").read_text(encoding="utf-8").split()
    return {rows[i]: int(rows[i + 1]) for i in range(0, len(rows), 2)}


def _name(path: str) -> str:
    return path.rsplit("/", 1)[1].removesuffix(".txt")


@pytest.mark.parametrize("line", ["2.3", "1.20"])
def test_file_source_positions_are_what_the_job_read(line: str) -> None:
    """Each reader split's records to skip is what the job emitted of that file before the savepoint; the enumerator's
    pending files were not started, and every file is a processed path."""
    ck = fs.open(FIXTURES / f"sources-files-{line}" / "savepoint").checkpoint()
    counts = _counts(line)
    splits = source_splits(ck).to_pylist()
    assert {r["source_kind"] for r in splits} == {"file"} and len(splits) == 2
    for r in splits:
        assert (r["reader_offset"], r["records_to_skip"]) == (-1, counts[_name(r["path"])])
    enum = source_enumerator(ck).to_pylist()
    pending = {_name(r["path"]) for r in enum if r["entry"] == "split"}
    assert {r["status"] for r in enum if r["entry"] == "split"} == {"pending"}
    assert pending.isdisjoint(counts) and len(pending) == 2
    assert sorted(_name(r["path"]) for r in enum if r["entry"] == "processed_path") == [f"f{i}" for i in range(msf.FILES)]
    read = {f for f, n in counts.items() if n == msf.LINES}
    assert read | pending | {_name(r["path"]) for r in splits} == {f"f{i}" for i in range(msf.FILES)}


@pytest.mark.flink
@pytest.mark.parametrize("line", ["2.3", "1.20"])
def test_file_source_decoded_as_the_connector_does(line: str, tmp_path: Path) -> None:
    """flinkstate's split and enumerator rows are what FileSourceSplitSerializer / PendingSplitsCheckpointSerializer give."""
    h = flink_harness()
    ck = fs.open(FIXTURES / f"sources-files-{line}" / "savepoint").checkpoint()
    raw = ck.scan_operator_state("files", "SourceReaderState").to_arrow().column("value").to_pylist()
    (tmp_path / "splits.hex").write_text("".join(f"{v} {b.hex()}\n" for v, b in (unframe_element(x, "t") for x in raw)))
    java = h.run_source_job(["splits", str(tmp_path / "splits.hex")], version=line).splitlines()
    ours = [_describe(r) for r in source_splits(ck).to_pylist()]
    assert ours == java
    coordinator = ck.scan_coordinator("files").to_arrow().column("payload")[0].as_py()
    java = h.run_source_job(["enumerator", coordinator.hex()], version=line).splitlines()
    enum = source_enumerator(ck).to_pylist()
    ours = [f"coordinator {enum[0]['coordinator_version']} enumerator {enum[0]['enumerator_version']}"]
    ours += [f"pending {_describe(r)}" for r in enum if r["entry"] == "split"]
    ours += [f"processed {r['path']}" for r in enum if r["entry"] == "processed_path"]
    assert ours == java


def _describe(r: dict) -> str:
    pos = "none" if r["records_to_skip"] is None else f"{r['reader_offset']} {r['records_to_skip']}"
    return (f"{r['split_id']} {r['path']} {r['offset']} {r['length']} {r['modification_time']} {r['file_size']} "
            f"hosts={','.join(r['hosts'])} position={pos}")


def _input_dir(line: str) -> Path:
    """The folder the fixture's job read, as its savepoint records it (the files' paths are absolute)."""
    ck = fs.open(FIXTURES / f"sources-files-{line}" / "savepoint").checkpoint()
    return Path(source_enumerator(ck).column("path")[0].as_py().removeprefix("file:")).parent


@pytest.fixture()
def inputs(tmp_path: Path) -> Iterator[None]:
    """The fixtures' input folders written again where their savepoints name them, one test at a time on this machine."""
    with open(_input_dir("2.3").parent.parent / "flinkstate-source-fixture.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for line in ("2.3", "1.20"):
            shutil.rmtree(_input_dir(line), ignore_errors=True)
            msf.write_inputs(_input_dir(line))
        yield


@pytest.mark.flink
@pytest.mark.parametrize("line", ["2.3", "1.20"])
def test_rewound_file_is_read_again_by_flink(line: str, tmp_path: Path, inputs: None) -> None:
    """A half-read file rewound to its start and a read file forgotten: real Flink restoring the export emits both files'
    every line again; the other half-read file only its rest, the pending ones whole, the read one nothing.
    2.3: `rewind_savepoint` (the CLI's path); 1.20: import, a write of the splits and enumerator tables, export."""
    h = flink_harness()
    src = FIXTURES / f"sources-files-{line}" / "savepoint"
    ck = fs.open(src).checkpoint()
    counts = _counts(line)
    splits = source_splits(ck).to_pylist()
    rewound, other = sorted(splits, key=lambda r: r["path"])
    read = sorted(f for f, n in counts.items() if n == msf.LINES)
    forgotten = next(r["path"] for r in source_enumerator(ck).to_pylist() if r["entry"] == "processed_path" and _name(r["path"]) == read[0])
    dest = tmp_path / "rewound"
    if line == "2.3":
        rewind_savepoint(src, dest, {"files": [RereadFile(rewound["path"]), ForgetPath(forgotten)]})
    else:
        root = tmp_path / "root"
        import_savepoint(src, root, uids=["files"])  # Flink 1.x records the uid's hash only
        store = fs.open(root)
        write_splits(store, pa.table({"operator": ["files"], "subtask": pa.array([rewound["subtask"]], pa.int32()),
                                      "split_id": [rewound["split_id"]], "records_to_skip": pa.array([0], pa.int64())}))
        write_enumerator(store, pa.table({"operator": ["files"], "entry": ["processed_path"], "path": [forgotten]}), delete=True)
        export_savepoint(store, dest, flink_version=line)
    want = {f"f{i}": msf.LINES - counts.get(f"f{i}", 0) for i in range(msf.FILES)}
    want[_name(rewound["path"])] = msf.LINES
    want[read[0]] = msf.LINES
    after = tmp_path / "after.txt"  # the job stops once it emitted as many lines, and 2 s later (more would be counted)
    h.run_source_job(["restore", str(_input_dir(line)), str(dest), str(after), str(sum(want.values()))], version=line)
    got = {f: int(n) for f, n in (x.split() for x in after.read_text().splitlines())}
    assert {f: n for f, n in got.items() if n} == {f: n for f, n in want.items() if n}
    assert got[_name(rewound["path"])] == msf.LINES and got[read[0]] == msf.LINES


def test_sequence_sources_of_every_release() -> None:
    """The DataGeneratorSource (NumberSequenceSource in 1.18) of the generator job's savepoints, 1.18 to 2.3."""
    seen = []
    for meta in sorted(m for m in FIXTURES.glob("flink-*/*/savepoint/_metadata") if "sql" not in m.parts[-4]):
        ck = fs.open(meta.parent, uids=["source"]).checkpoint()  # Flink 1.x records the uid's hash only
        if "source" not in ck.operators:
            continue
        t = source_splits(ck, "source").to_pylist()
        assert [(r["source_kind"], r["split_id"], r["subtask"]) for r in t] == [("number_sequence", "1", 0)]
        assert 0 < t[0]["number_from"] < t[0]["number_to"]
        state = load_source(ck, "source")
        assert state.enumerator is not None and state.enumerator.entries == []
        elements, coordinator = encode_source(state)
        raw = ck.scan_operator_state("source", "SourceReaderState").to_arrow()
        assert [b for _, b in elements] == raw.column("value").to_pylist()
        assert coordinator == ck.scan_coordinator("source").to_arrow().column("payload")[0].as_py()
        seen.append(meta.parts[-4])
    assert {"flink-1.18", "flink-1.20", "flink-2.3-canonical"} <= set(seen)


def test_bad_edits_are_typed_errors_and_write_nothing(tmp_path: Path) -> None:
    src = FIXTURES / "sources-files-2.3" / "savepoint"
    root = tmp_path / "root"
    import_savepoint(src, root)
    store = fs.open(root)
    before = [c.checkpoint_id for c in store.checkpoints()]
    with pytest.raises(SplitNotFoundError, match="no file '/nowhere.txt'"):
        rewind_root(store, {"files": [RereadFile("/nowhere.txt")]})
    with pytest.raises(fs.InvalidArgumentError, match="below zero"):
        rewind_root(store, {"files": [RereadFile(source_splits(store.checkpoint()).column("path")[0].as_py(), offset=-5)]})
    with pytest.raises(fs.InvalidArgumentError, match="is a file source"):
        rewind_root(store, {"files": [SetOffset("orders", 0, 5)]})
    with pytest.raises(fs.OperatorNotFoundError, match="operator .count. is not"):
        rewind_root(store, {"count": [ForgetPath("/x")]})
    assert [c.checkpoint_id for c in store.checkpoints()] == before
    with pytest.raises(SplitNotFoundError):
        rewind_savepoint(src, tmp_path / "dest", {"files": [ForgetPath("/nowhere.txt")]})
    assert not (tmp_path / "dest").exists()
    with pytest.raises(UnknownSourceError, match="unknown kind"):
        decode_source("op", [(0, b"\x00\x00\x00\x07\x00\x00\x00\x03abc")], None)
    with pytest.raises(UnknownSourceError, match="parses as kafka and as number_sequence"):
        decode_source("op", [], b"\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x00")
    with pytest.raises(UnknownSourceError, match="not a file source"):
        decode_source("op", [], b"\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x00", kind="file")  # type: ignore[arg-type]


def test_unknown_source_stays_bytes(tmp_path: Path) -> None:
    """A source of no known kind is listed as unknown with its split bytes, nothing guessed."""
    root = tmp_path / "root"
    import_savepoint(FIXTURES / "sources-files-2.3" / "savepoint", root)
    store = fs.open(root)
    desc = store.metadata().operators["files"].operator_states["SourceReaderState"]
    with store.begin() as w:
        w.put_operator_state("files", desc, pa.table({"subtask": pa.array([0], pa.int32()), "value": [b"\x00\x00\x00\x09\x00\x00\x00\x02hi"]}))
    t = source_splits(store.checkpoint()).to_pylist()
    assert [(r["source_kind"], r["split_version"], r["split_bytes"]) for r in t] == [("unknown", 9, b"hi")]
    assert source_enumerator(store.checkpoint()).num_rows == 0


# ---- Kafka: the connector's own serializers (no broker) ----------------------------------------------------------------

def _kafka_lines(state) -> list[str]:  # noqa: ANN001
    """The split lines KafkaSerde read prints, for a decoded state."""
    return [f"split {rs.subtask} {rs.split.topic} {rs.split.partition} {rs.split.starting_offset} {rs.split.stopping_offset}"
            for rs in state.splits]


def _enum_lines(enum, offsets: bool, unassigned: str) -> list[str]:  # noqa: ANN001
    """The enumerator lines KafkaSerde read prints (offsets: connector 5.x lists the enumerator's splits with offsets;
    unassigned: the name its AssignmentStatus gives status 1)."""
    v = enum.version
    rows = []
    for e in enum.entries:
        status = "assigned" if e.status == "assigned" else unassigned
        s = e.split
        tail = f" {MIN if s.starting_offset is None else s.starting_offset} {s.stopping_offset}" if offsets else ""
        rows.append(f"enum {v} {status} {s.topic} {s.partition}{tail}")
    out = sorted(rows) + [f"enum {v} initial {'true' if enum.initial_discovery_finished in (None, True) else 'false'}"]
    if v == 0:
        out += sorted(f"enum0 {e.subtask} {e.split.topic} {e.split.partition} {e.split.starting_offset} {e.split.stopping_offset}" for e in enum.entries)
    return out


def _decode_dir(folder: Path) -> tuple[list[tuple[int, bytes]], dict[int, bytes]]:
    elements = [(int(a), bytes.fromhex(b)) for a, b in (x.split() for x in (folder / "splits.txt").read_text().splitlines() if x)]
    enums = {int(p.stem.split("-")[1]): bytes.fromhex(p.read_text().strip()) for p in sorted(folder.glob("enum-*.hex"))}
    return elements, enums


def _java_view(folder: Path, offsets: bool, unassigned: str) -> list[str]:
    elements, enums = _decode_dir(folder)
    lines: list[str] = []
    for v, coord in sorted(enums.items()):
        state = decode_source("kafka", elements, coord)
        assert state.kind == "kafka" and state.enumerator is not None and state.enumerator.version == v
        if not lines:
            lines += _kafka_lines(state)
        lines += _enum_lines(state.enumerator, offsets, unassigned)
        assert encode_source(state) == (elements, coord)  # written back byte for byte
    return lines


def test_kafka_enumerator_v3_of_connector_5(tmp_path: Path) -> None:
    """Splits and enumerator states v0-v3 written by connector 5.0's classes (make_source_fixture.py kafka5): decoded as
    those classes read them, and written back byte for byte; after KAFKA_EDITS flinkstate writes the very bytes that
    connector 5.0's classes read (when the fixture was made) to exactly the rewound offsets."""
    folder = FIXTURES / "sources-kafka-5.0"
    java = (folder / "expected.txt").read_text(encoding="utf-8").splitlines()
    assert _java_view(folder, offsets=True, unassigned="unassigned") == java
    msf.write_rewound(folder, tmp_path / "rewound")
    for p in sorted((folder / "rewound").iterdir()):
        assert (tmp_path / "rewound" / p.name).read_text() == p.read_text(), p.name
    read = (folder / "rewound-expected.txt").read_text(encoding="utf-8").splitlines()
    want = _rewound_expectation([x for x in java if x.startswith("split ")])
    assert [x for x in read if x.startswith("split ")] == want + ["split 2 orders 7 55 -9223372036854775808"]
    assert "enum 3 assigned orders 0 1000 -9223372036854775808" in read and "enum 3 assigned orders 7 55 -9223372036854775808" in read
    assert not any(" orders 2 " in x for x in read)


def _write_dir(folder: Path, elements: list[tuple[int, bytes]], enums: dict[int, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "splits.txt").write_text("".join(f"{s} {b.hex()}\n" for s, b in elements))
    for v, b in enums.items():
        (folder / f"enum-{v}.hex").write_text(b.hex())


KAFKA_EDITS = msf.kafka_edits()


def _rewound_expectation(java: list[str]) -> list[str]:
    """The connector's view of the original bytes with KAFKA_EDITS applied by hand (not by flinkstate)."""
    out = []
    for line in java:
        f = line.split()
        if f[0] == "split":
            if f[2:4] == ["orders", "0"]:
                f[4] = "1000"
            if f[2:4] == ["orders", "1"]:
                f[4] = "-1"
            if f[2:4] == ["orders", "2"]:
                continue
        out.append(" ".join(f))
    return out


@pytest.mark.flink
def test_kafka_connector_classes_read_what_flinkstate_writes(tmp_path: Path) -> None:
    """Connector 4.0.1's serializers write splits and enumerator states v0-v2; flinkstate decodes them as its deserializers
    do, writes them back byte for byte, and its rewound bytes deserialize to exactly the rewound positions; the same state
    as a savepoint goes through import, rewind on the root and export."""
    h = flink_harness()
    written = tmp_path / "written"
    written.mkdir()
    printed = h.run_kafka_serde(["write", str(written)]).splitlines()
    assert "v3 missing" in printed
    owners = [x.split()[1:] for x in printed if x.startswith("owner ")]
    assert len(owners) == 48 and all(split_owner(t, int(p), int(n)) == int(s) for t, p, n, s in owners)  # the reader a new partition gets
    java = h.run_kafka_serde(["read", str(written)]).splitlines()
    assert _java_view(written, offsets=False, unassigned="unassigned_initial") == java

    elements, enums = _decode_dir(written)
    rewound_dir = tmp_path / "rewound"
    new_enums = {}
    for v, coord in enums.items():
        state = apply_edits(decode_source("kafka", elements, coord), KAFKA_EDITS, parallelism=3)
        new_elements, new_enums[v] = encode_source(state)
    _write_dir(rewound_dir, new_elements, new_enums)
    got = h.run_kafka_serde(["read", str(rewound_dir)]).splitlines()
    want = _rewound_expectation([x for x in java if x.startswith("split ")]) + ["split 2 orders 7 55 -9223372036854775808"]
    assert [x for x in got if x.startswith("split ")] == want
    enum2 = [x for x in got if x.startswith("enum 2 ")]
    assert "enum 2 assigned orders 7" in enum2 and not any(" orders 2" in x for x in enum2)
    enum0 = [x for x in got if x.startswith("enum0 ")]
    assert "enum0 0 orders 0 1000 -9223372036854775808" in enum0 and "enum0 2 orders 7 55 -9223372036854775808" in enum0

    # the same Kafka state as a savepoint: a root whose source holds it, exported, read in place, imported, rewound, exported
    root = tmp_path / "root"
    import_savepoint(FIXTURES / "sources-files-2.3" / "savepoint", root)
    store = fs.open(root)
    desc = store.metadata().operators["files"].operator_states["SourceReaderState"]
    with store.begin() as w:
        w.put_operator_state("files", desc, pa.table({"subtask": pa.array([s for s, _ in elements], pa.int32()), "value": [b for _, b in elements]}))
        w.set_parallelism("files", 3)
        w.put_coordinator("files", pa.table({"record_type": ["state"], "subtask": pa.array([None], pa.int32()), "seq": pa.array([0], pa.int64()),
                                             "payload": [enums[2]]}))
    kafka_sp = Path(export_savepoint(store, tmp_path / "kafka-savepoint"))
    in_place = source_splits(fs.open(kafka_sp).checkpoint())
    assert set(in_place.column("source_kind").to_pylist()) == {"kafka"}
    root2 = tmp_path / "root2"
    import_savepoint(kafka_sp, root2)
    assert source_splits(fs.open(root2).checkpoint()).equals(in_place)
    rewind_root(fs.open(root2), {"files": KAFKA_EDITS})
    out = Path(export_savepoint(fs.open(root2), tmp_path / "kafka-rewound"))
    ck = fs.open(out).checkpoint()
    final = tmp_path / "final"
    raw = ck.scan_operator_state("files", "SourceReaderState").to_arrow()
    _write_dir(final, list(zip(raw.column("subtask").to_pylist(), raw.column("value").to_pylist())),
               {2: ck.scan_coordinator("files").to_arrow().column("payload")[0].as_py()})
    got = h.run_kafka_serde(["read", str(final)]).splitlines()
    assert sorted(x for x in got if x.startswith("split ")) == sorted(want)
    assert "enum 2 assigned orders 7" in got


def test_sequence_rewind_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "root"
    import_savepoint(FIXTURES / "flink-2.3-canonical" / "files" / "savepoint", root)
    store = fs.open(root)
    rewind_root(store, {"source": [SetSequence("1", 5)]})
    assert source_splits(store.checkpoint(), "source").column("number_from").to_pylist() == [5]


def test_cli_sources_and_rewind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's commands: `sources` on a savepoint, `rewind` into a new savepoint and on a root; bad input exits 2
    naming what is wrong, and writes nothing."""
    import json

    from flinkstate.cli import main

    src = FIXTURES / "sources-files-2.3" / "savepoint"
    assert main(["sources", str(src), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    half = doc["splits"][0]["path"]
    done = next(r["path"] for r in doc["enumerator"] if r["entry"] == "processed_path" and r["path"] not in
                {s["path"] for s in doc["splits"]} | {e["path"] for e in doc["enumerator"] if e["entry"] == "split"})
    assert main(["rewind", str(src), str(tmp_path / "bad"), "--operator", "files", "--reread-file", "/nope.txt"]) == 2
    assert "SplitNotFoundError" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert main(["rewind", str(src), str(tmp_path / "out"), "--operator", "files", "--reread-file", half.removeprefix("file:"),
                 "--forget-path", done]) == 0
    assert "rewound source files (2 changes)" in capsys.readouterr().out
    out = fs.open(tmp_path / "out").checkpoint()
    assert {r["path"]: r["records_to_skip"] for r in source_splits(out).to_pylist()}[half] is None
    assert done not in source_enumerator(out).column("path").to_pylist()
    root = tmp_path / "root"
    import_savepoint(FIXTURES / "flink-2.3-canonical" / "files" / "savepoint", root)
    assert main(["rewind", str(root), "--operator", "source", "--sequence", "1:7"]) == 0
    assert main(["rewind", str(root), "--operator", "source", "--offset", "t:0:-1"]) == 2
    assert "InvalidArgumentError" in capsys.readouterr().err
    assert main(["describe", str(root)]) == 0
    assert "source source: number_sequence, 1 splits" in capsys.readouterr().out
    assert source_splits(fs.open(root).checkpoint()).column("number_from").to_pylist() == [7]
    assert len(fs.open(root).checkpoints()) == 2


def test_kafka_bad_edits() -> None:
    folder = FIXTURES / "sources-kafka-5.0"
    elements, enums = _decode_dir(folder)
    state = decode_source("kafka", elements, enums[3])
    with pytest.raises(fs.InvalidArgumentError, match="offset -4 is below zero"):
        apply_edits(state, [SetOffset("orders", 0, -4)])
    with pytest.raises(SplitNotFoundError, match="no partition orders-5 .*it holds orders-0"):
        apply_edits(state, [SetOffset("orders", 5, 10)])
    with pytest.raises(SplitNotFoundError, match="no topic 'gone'"):
        apply_edits(state, [DropTopic("gone")])
    with pytest.raises(fs.InvalidArgumentError, match="already holds partition orders-1"):
        apply_edits(state, [AddPartition("orders", 1, 0)])
    moved = apply_edits(state, [SetOffset("orders", 9, "committed")])  # only the enumerator holds it (unassigned, v3 keeps offsets)
    assert [e.split.starting_offset for e in moved.enumerator.entries if e.split.partition == 9] == [-3]  # type: ignore[union-attr]
    assert state.enumerator is not None and [e.split.starting_offset for e in state.enumerator.entries if e.split.partition == 9] == [-2]



# ---- the legacy FlinkKafkaConsumer (Flink 1.x): union state topic-partition-offset-states -------------------------------

LEGACY = FIXTURES / "sources-kafka-legacy-1.20"


def test_legacy_kafka_consumer_offsets_in_place() -> None:
    """Every partition's offset as Flink 1.20 restores it (restored.txt), read in place; elements written back byte for byte."""
    from flinkstate.flink.bridge.source_positions import legacy_elements
    from flinkstate.flink.sources.kafka_legacy import SENTINELS, decode_element, encode_element

    ck = fs.open(LEGACY / "savepoint", uids=["kafka-legacy"]).checkpoint()
    rows = source_splits(ck, "kafka-legacy").to_pylist()
    assert {r["source_kind"] for r in rows} == {"kafka_legacy"}
    restored = sorted(x.split(" ") for x in (LEGACY / "restored.txt").read_text(encoding="utf-8").splitlines())
    stored = {v: k for k, v in SENTINELS.items()}
    got = sorted([r["topic"], str(r["partition"]), str(stored[r["starting_marker"]] if r["starting_marker"] else r["starting_offset"] - 1)]
                 for r in rows)
    assert got == [x[:3] for x in restored]
    for _, data in legacy_elements(ck, "kafka-legacy"):
        assert encode_element(decode_element(data, "t")) == data
    with pytest.raises(UnknownSourceError, match="legacy FlinkKafkaConsumer"):
        load_source(ck, "kafka-legacy")
    assert source_enumerator(ck, "kafka-legacy").num_rows == 0


@pytest.mark.flink
def test_legacy_kafka_elements_flinkstate_writes_are_read_by_flink(tmp_path: Path) -> None:
    """Elements flinkstate writes (other offsets, sentinels, a new partition, a non-ASCII and a 70-character topic) are what
    Flink 1.20's TupleSerializer of KryoSerializer<KafkaTopicPartition> reads, cachedHash included."""
    import dataclasses

    from flinkstate.flink.bridge.source_positions import legacy_elements
    from flinkstate.flink.sources.kafka_legacy import decode_element, encode_element, java_hash

    ck = fs.open(LEGACY / "savepoint", uids=["kafka-legacy"]).checkpoint()
    base = decode_element(legacy_elements(ck, "kafka-legacy")[0][1], "t")
    entries = [dataclasses.replace(base, offset=999), dataclasses.replace(base, partition=17, offset=-915623761774),
               dataclasses.replace(base, topic="p\u00e9\u20ac\U0001f600", partition=2, offset=5),
               dataclasses.replace(base, topic="t" * 70, partition=2_000_000, offset=0)]
    (tmp_path / "elements.hex").write_text("".join(encode_element(e).hex() + "\n" for e in entries))
    got = flink_harness().run_legacy_kafka_job(["decode", str(tmp_path / "elements.hex")]).splitlines()
    assert got == [f"{e.topic} {e.partition} {e.offset} {(31 * java_hash(e.topic) + e.partition + (1 << 31)) % (1 << 32) - (1 << 31)}"
                   for e in entries]
