"""A writer killed inside the log's Delta commit: what it leaves is reported by verify and removed by collect_orphans.

The writer is a real process killed by the kernel the instant delta-rs hard-links its staged commit file into
`_delta_log` (tests/seccomp_kill.py), so it leaves `_delta_log/<version>.json#1` exactly as a crash there would.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
import seccomp_kill
from flinkstate.cli import main
from flinkstate.store.verify import verify_store

pytestmark = pytest.mark.skipif(not seccomp_kill.available(), reason="needs Linux seccomp on x86_64 or aarch64")

COUNT = fs.ValueStateDescriptor(name="count", value_type=pa.int64())

_KILLED_WRITER = textwrap.dedent("""
    import sys
    import pyarrow as pa
    import flinkstate as fs
    import seccomp_kill
    from flinkstate.format.manifest import DeltaCatalog

    real = DeltaCatalog.commit_log

    def commit_log(self, *args, **kwargs):  # the data files and the manifest are in; the log commit is next
        seccomp_kill.kill_on_hard_link()
        return real(self, *args, **kwargs)

    DeltaCatalog.commit_log = commit_log
    with fs.open(sys.argv[1]).begin() as w:
        w.put_state("op", fs.ValueStateDescriptor(name="count", value_type=pa.int64()),
                    pa.table({"key": ["b"], "value": [2], "tombstone": [False]}), mode="delta")
    print("the writer was not killed")
""")


def test_a_writer_killed_inside_the_log_commit_leaves_a_staged_file_verify_names_and_collect_orphans_removes(
        tmp_path: Path) -> None:
    root = str(tmp_path / "job")
    store = fs.open(root)
    with store.begin(max_parallelism=8) as w:
        w.put_state("op", COUNT, pa.table({"key": ["a"], "value": [1]}))
    tests = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITER, root], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == -signal.SIGSYS, (done.returncode, done.stdout, done.stderr)
    staged = [p for p in store.io.list_files("_flinkstate") if "#" in p]
    assert staged == ["_flinkstate/log/_delta_log/00000000000000000002.json#1"]  # version 1: checkpoint 1

    # nothing of the killed attempt is visible, and checkpoint 1 reads as before
    assert [c.checkpoint_id for c in store.checkpoints()] == [1]
    assert store.read_state("op", "count").column("key").to_pylist() == ["a"]
    report = verify_store(store)
    assert report.stray == [store.io.url(staged[0])], report.to_dict()
    assert report.ok, report.damaged
    out = io.StringIO()
    assert main(["verify", root], out=out) == 0
    assert f"STRAY {store.io.url(staged[0])}: staged by a write killed mid-commit" in out.getvalue()

    # within the retention it stays (its write might still be finishing); past it, it goes with the attempt's files
    assert not [p for p in store.collect_orphans() if "#" in p]
    assert store.io.exists(staged[0])
    deleted = store.collect_orphans(dt.timedelta(0))
    assert staged[0] in deleted and not store.io.exists(staged[0])
    assert verify_store(store).stray == []
    with store.begin() as w:  # the root takes the next commit as usual
        w.put_state("op", COUNT, pa.table({"key": ["c"], "value": [3], "tombstone": [False]}), mode="delta")
    assert w.info is not None and w.info.checkpoint_id == 2
    assert store.read_state("op", "count").column("key").to_pylist() == ["a", "c"]
