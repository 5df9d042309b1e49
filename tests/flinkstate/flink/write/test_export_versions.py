"""Export for the Flink release that restores it: `--flink-version` 1.18 ... 2.3, each written as that release writes.

Fast tier: the bytes (metadata version, operators without uid in 1.x) and the refusals. Slow tier (`flink`):
the release itself restores the export and its dump equals the original's (1.20 and 2.3 always; the
other releases with FLINKSTATE_FLINK_VERSIONS=all or a comma list).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fsc_helpers import flink_harness as _harness
from flink_dump import check_savepoint

from flinkstate.cli import main
from flinkstate.flink import read_metadata
from flinkstate.flink.write.export import rewrite_flink_savepoint
from flinkstate.flink.write.savepoint_writer import TARGET_VERSIONS, UnsupportedFlinkVersionError

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "flink-2.3-canonical" / "files"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The checked-in Flink 2.3 savepoint imported into a flinkstate root."""
    r = str(tmp_path_factory.mktemp("root") / "root")
    assert main(["import", str(FIXTURE / "savepoint"), r, "--raw-values"]) == 0  # the job's Kryo state, as bytes
    return r


@pytest.fixture(scope="module")
def root_1x(root: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """root without the job's Kryo state (kryo/opaque): Flink 2.3 wrote it with Kryo 5, which Flink 1.x would read with
    Kryo 2, so an export for 1.x refuses it (test_export_faithful.py); every other state goes to 1.x."""
    import shutil

    import flinkstate as fs

    r = str(tmp_path_factory.mktemp("root-1x") / "root")
    shutil.copytree(root, r)
    with fs.open(r).begin() as w:
        w.remove_state("kryo", "opaque")
    return r


def _for(line: str, root: str, root_1x: str) -> str:
    return root_1x if line.startswith("1.") else root


@pytest.mark.parametrize(("line", "version"), [("1.18", 4), ("1.20", 4), ("2.0", 5), ("2.1", 6), ("2.3", 6)])
def test_export_writes_the_metadata_of_the_target_release(root: str, root_1x: str, tmp_path: Path, line: str, version: int,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """1.x metadata has no operator names or uids (Flink finds operators by the hashed uid); the rows read back the same.
    For 1.x the job's Kryo 5 state is refused by name, nothing written; without it the export goes."""
    dest = tmp_path / "sp"
    if line.startswith("1."):
        assert main(["export", root, str(dest), "--flink-version", line]) == 2
        assert f"IncompatibleReleaseError: cannot export for Flink {line}" in capsys.readouterr().err and not dest.exists()
    assert main(["export", _for(line, root, root_1x), str(dest), "--flink-version", line]) == 0
    meta = read_metadata(str(dest))
    assert meta.version == version
    assert line in meta.flink_version.versions
    uids = {op.uid for op in meta.operators}
    original = {op.uid for op in read_metadata(str(FIXTURE / "savepoint")).operators if op.uid}
    assert (uids == {None}) if version == 4 else ({"long-keyed", "string-keyed", "opstate", "bcast", "kryo"} <= uids <= original)
    assert check_savepoint(dest, FIXTURE / "expected.jsonl") > 700


@pytest.mark.parametrize("line", ["1.17", "1.13", "3.0", "2.4", "latest"])
def test_export_refuses_releases_it_cannot_target_by_name(root: str, tmp_path: Path, line: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """An unsupported --flink-version names the release and the supported ones; nothing is written."""
    dest = tmp_path / "sp"
    assert main(["export", root, str(dest), "--flink-version", line]) != 0
    err = capsys.readouterr().err
    assert f"Flink {line}" in err and "1.18, 1.19, 1.20, 2.0, 2.1, 2.2, 2.3" in err
    assert not dest.exists()
    assert os.listdir(tmp_path) == []
    with pytest.raises(UnsupportedFlinkVersionError, match=line):
        rewrite_flink_savepoint(str(FIXTURE / "savepoint"), str(dest), flink_version=line)
    assert not dest.exists()


def _selected(always: tuple[str, ...]) -> tuple[str, ...]:
    env = os.environ.get("FLINKSTATE_FLINK_VERSIONS", "").strip()
    if env == "all":
        return tuple(TARGET_VERSIONS)
    return always + tuple(v.strip() for v in env.split(",") if v.strip() and v.strip() not in always)


@pytest.mark.flink
@pytest.mark.slow
@pytest.mark.parametrize("line", list(TARGET_VERSIONS))
def test_export_for_release_is_restored_by_it(root: str, root_1x: str, tmp_path: Path, line: str, canonical_flink_dump: tuple[str, ...]) -> None:
    """flinkstate export --flink-version X (snappy), restored by real Flink X (RocksDB, parallelism 2): the original's dump."""
    if line not in _selected(("1.20", "2.3")):
        pytest.skip(f"Flink {line} runs on demand: FLINKSTATE_FLINK_VERSIONS=all or ={line}")
    h = _harness()
    original = list(canonical_flink_dump)  # FIXTURE / "savepoint" restored by Flink 2.3
    dest = tmp_path / "sp"
    assert main(["export", _for(line, root, root_1x), str(dest), "--flink-version", line, "--compression", "snappy"]) == 0
    got = h.restore_and_dump(dest, tmp_path / "dump.txt", "rocksdb", 2, version=line)
    assert len(got) > 700
    assert got == original


@pytest.mark.flink
@pytest.mark.slow
def test_newer_metadata_is_refused_by_older_flink(root: str, tmp_path: Path) -> None:
    """Why the target matters: Flink 1.20 cannot restore the 2.3 export (metadata version 6)."""
    dest = tmp_path / "sp"
    assert main(["export", root, str(dest)]) == 0
    with pytest.raises(RuntimeError, match="Unrecognized checkpoint version number: 6"):
        _harness().restore_and_dump(dest, tmp_path / "dump.txt", "hashmap", 1, version="1.20")


SAVEPOINT_1_20 = FIXTURE.parents[1] / "flink-1.20" / "canonical" / "savepoint"
UIDS = ("long-keyed", "string-keyed", "opstate", "bcast")


def test_flink_1x_savepoint_reads_by_uid_and_says_its_release(capsys: pytest.CaptureFixture[str]) -> None:
    """1.x metadata has no uids: read_state by uid still finds the operator; describe and the operators table name the release."""
    import flinkstate as fs
    from flinkstate.flink.bridge.source import FlinkSource

    src = fs.open(str(SAVEPOINT_1_20))
    assert src.read_state("long-keyed", "count").num_rows == 37
    ops = src.checkpoint().inspect.operators()
    assert set(ops.column("flink_version").to_pylist()) == {"1.19-1.20"}
    assert "long-keyed" not in ops.column("operator").to_pylist()  # listed by id unless named
    named = FlinkSource(str(SAVEPOINT_1_20), uids=UIDS)
    assert set(UIDS) <= set(named.checkpoint().inspect.operators().column("operator").to_pylist())
    assert main(["describe", str(SAVEPOINT_1_20)]) == 0
    out = capsys.readouterr().out
    assert "written by Flink 1.19-1.20" in out and "records no operator uids" in out
    assert main(["describe", str(SAVEPOINT_1_20), *[a for u in UIDS for a in ("--uid", u)]]) == 0
    assert "operator long-keyed (id " in capsys.readouterr().out


def test_import_names_1x_operators_by_uid_and_refuses_unknown_uids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`flinkstate import --uid`: operators are named; a uid that hashes to no operator is refused before anything is written."""
    import flinkstate as fs

    root = tmp_path / "root"
    assert main(["import", str(SAVEPOINT_1_20), str(root), "--uid", "long-keyed", "--uid", "no-such-uid"]) != 0
    assert "'no-such-uid' names no operator" in capsys.readouterr().err
    assert not (root / "_flinkstate").exists()
    assert main(["import", str(SAVEPOINT_1_20), str(root), *[a for u in UIDS for a in ("--uid", u)]]) == 0
    store = fs.open(str(root))
    assert set(UIDS) <= set(store.metadata().operators)
    assert store.read_state("long-keyed", "count").num_rows == 37
