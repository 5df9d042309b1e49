"""What a reader sees of a keyed state (visibility): TTL hiding and list/map flattening, in the library."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from flinkstate.format import constants as C

from fsc_helpers import ttl_store as _store


def test_ttl_visibility_and_flattening_in_the_library(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ck = store.checkpoint()
    # expiry = last access + 1 s: at 15 s only b and c are visible
    assert sorted(ck.scan("op", "v", ttl_reference=15_000).to_arrow().column("key").to_pylist()) == ["b", "c"]
    t = store.read_state("op", "v", ttl_reference=15_000, include_expired=True)
    assert dict(zip(t.column("key").to_pylist(), t.column("expired").to_pylist())) == {"a": True, "b": False, "c": False}
    assert t.column("ttl_expires_at").type == pa.timestamp("ms", tz="UTC")
    assert store.read_state("op", "v").num_rows == 0  # judged at the checkpoint's own time: all expired long ago
    raw = store.read_state("op", "v", raw=True)
    assert raw.column(C.COL_TTL).to_pylist() == [10_000, 20_000, 30_000] or sorted(raw.column(C.COL_TTL).to_pylist()) == [10_000, 20_000, 30_000]
    flat = store.read_state("op", "l")
    assert sorted(zip(flat.column("key").to_pylist(), flat.column("value").to_pylist())) == [("a", 1), ("a", 2), ("b", 3)]
    lists = store.read_state("op", "l", flatten=False)
    assert dict(zip(lists.column("key").to_pylist(), lists.column("value").to_pylist())) == {"a": [1, 2], "b": [3]}
