"""Key lookups on Flink canonical and heap files read only the header and the byte ranges of the keys' key groups."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import flinkstate as fs
from flinkstate.core.keygroups import assign_key_group
from flinkstate.flink.files import canonical

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
FILES = {
    "canonical": FIXTURES / "flink-2.3-canonical" / "files" / "savepoint",
    "snappy": FIXTURES / "flink-2.3-canonical" / "snappy" / "savepoint",
    "heap-native": FIXTURES / "flink-2.3-native" / "native" / "savepoint",
    "heap-checkpoint": FIXTURES / "flink-2.3-native" / "checkpoint" / "checkpoint" / "chk-3",
    "inline": FIXTURES / "flink-2.3-canonical" / "inline" / "savepoint",
}


def _sorted(t: pa.Table) -> list[str]:
    return sorted(map(str, t.to_pylist()))


@pytest.mark.parametrize("variant", sorted(FILES))
def test_lookups_equal_the_full_read_filtered(variant: str) -> None:
    src = fs.open(str(FILES[variant]))
    for op, state in (("long-keyed", "count"), ("long-keyed", "list"), ("long-keyed", "row"), ("string-keyed", "map")):
        full = src.read_state(op, state, include_expired=True)
        keys = full.column("key").unique().to_pylist()
        for pick in (keys[:1], keys[::7], keys[-3:]):
            want = full.filter(pc.is_in(full.column("key"), pa.array(pick, full.column("key").type)))
            assert _sorted(src.read_state(op, state, keys=pick, include_expired=True)) == _sorted(want), (op, state, pick)
    ck = src.checkpoint()
    for service in ck.operator("long-keyed").timer_services:
        timers = ck.scan_timers("long-keyed", service).to_arrow()
        pick = timers.column("key").to_pylist()[:2]
        want = timers.filter(pc.is_in(timers.column("key"), pa.array(pick, timers.column("key").type)))
        assert _sorted(ck.scan_timers("long-keyed", service, keys=pick).to_arrow()) == _sorted(want), service
    assert src.read_state("long-keyed", "count", keys=[10**15]).num_rows == 0  # a key that is not there


def _handle_of(src: Any, uid: str, key: Any) -> tuple[Any, int]:
    ck = src.checkpoint()
    op = ck.meta.operator(uid)
    kg = assign_key_group(key, op.max_parallelism, key_type=pa.int64())
    for sub in op.subtasks:
        h = sub.managed_keyed
        if h is not None and h.start <= kg <= h.end:
            return h, kg
    raise AssertionError(kg)


@pytest.mark.parametrize("variant", ["canonical", "heap-checkpoint"])
def test_one_key_reads_its_key_group_bytes_only(variant: str) -> None:
    src = fs.open(str(FILES[variant]))
    key = src.read_state("long-keyed", "count").column("key")[0].as_py()
    h, kg = _handle_of(src, "long-keyed", key)  # (opens the checkpoint: _metadata and headers)
    offsets = h.offsets
    positive = np.sort(offsets[offsets > 0])
    off = int(offsets[kg - h.start])
    nxt = positive[positive > off]
    segment = (int(nxt[0]) if len(nxt) else h.stream.size) - off
    before = src.files.bytes_read
    got = src.read_state("long-keyed", "count", keys=[key])
    lookup = src.files.bytes_read - before
    assert got.column("key").to_pylist() == [key]
    assert lookup == int(positive[0]) + segment  # the header, then that key group's range: nothing else
    size = os.path.getsize(h.stream.location(src.checkpoint().meta.directory))
    assert size == h.stream.size
    if variant == "heap-checkpoint":
        assert lookup * 4 < size  # every key group holds data here: the lookup skips most of the file
    before = src.files.bytes_read
    src.read_state("long-keyed", "count")
    if variant == "canonical":  # framed by the first full read above: kept, not read again
        assert src.files.bytes_read == before
        canonical._FRAMED.clear()
        src.read_state("long-keyed", "count")
        assert src.files.bytes_read - before >= size  # a full read of a file not framed yet (or heap-native) reads every file


@pytest.mark.s3
def test_s3_lookup_uses_ranged_reads(s3: dict[str, Any]) -> None:
    local = FILES["heap-checkpoint"]
    for dirpath, _, names in os.walk(local):
        for n in names:
            p = os.path.join(dirpath, n)
            s3["client"].upload_file(p, s3["bucket"], f"chk-3/{os.path.relpath(p, local)}")
    src = fs.open(f"s3://{s3['bucket']}/chk-3", s3["storage_options"])
    full = src.read_state("long-keyed", "count")
    key = full.column("key")[0].as_py()
    h, _ = _handle_of(src, "long-keyed", key)
    before, calls = src.files.bytes_read, src.files.read_calls
    got = src.read_state("long-keyed", "count", keys=[key])
    assert _sorted(got) == _sorted(full.filter(pc.equal(full.column("key"), key)))
    assert (src.files.bytes_read - before) * 4 < h.stream.size
    assert src.files.read_calls - calls == 2  # the header and the key group's range
