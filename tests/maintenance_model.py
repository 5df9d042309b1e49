"""A model of random keyed-state histories (puts, deletes, list appends, timers over several checkpoints), for the
tests of compaction and TTL expiry in the core and with Spark: every read must stay what the model says."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

import flinkstate as fs

TTL_MS = 1_000
VAL = fs.ValueStateDescriptor(name="val", key_type=pa.string(), value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=TTL_MS))
LST = fs.ListStateDescriptor(name="lst", key_type=pa.int64(), value_type=pa.string(), ttl=fs.StateTtlConfig(ttl_ms=TTL_MS))
MAP = fs.MapStateDescriptor(name="map", key_type=pa.string(), namespace_type=pa.string(), user_key_type=pa.int32(),
                            user_value_type=pa.float64(), ttl=fs.StateTtlConfig(ttl_ms=TTL_MS))
PLAIN = fs.ValueStateDescriptor(name="plain", key_type=pa.string(), value_type=pa.int64())
TIM = fs.TimerServiceDescriptor(name="tim", key_type=pa.string())
MP = 16


class Model:
    """What every state holds after a history of full puts and deltas (newest wins, tombstones delete)."""

    def __init__(self) -> None:
        self.val: dict[str, tuple[int, int]] = {}
        self.lst: dict[int, list[tuple[str, int]]] = {}
        self.map: dict[tuple[str, str, int], tuple[float, int]] = {}
        self.plain: dict[str, int] = {}
        self.tim: set[tuple[str, int]] = set()


def _val_table(rows: dict[str, tuple[int, int] | None]) -> pa.Table:
    ks = sorted(rows)
    return pa.table({"key": ks, "value": pa.array([None if rows[k] is None else rows[k][0] for k in ks], pa.int64()),
                     "ttl_timestamp": pa.array([None if rows[k] is None else rows[k][1] for k in ks], pa.int64()),
                     "tombstone": [rows[k] is None for k in ks]})


def _lst_table(rows: dict[int, list[tuple[str, int]] | None]) -> pa.Table:
    ks = sorted(rows)
    return pa.table({"key": pa.array(ks, pa.int64()),
                     "value": pa.array([None if rows[k] is None else [v for v, _ in rows[k]] for k in ks], pa.list_(pa.string())),
                     "ttl_timestamp": pa.array([None if rows[k] is None else [t for _, t in rows[k]] for k in ks], pa.list_(pa.int64())),
                     "tombstone": [rows[k] is None for k in ks]})


def _map_table(rows: dict[tuple[str, str, int], tuple[float, int] | None]) -> pa.Table:
    ks = sorted(rows)
    return pa.table({"key": [k[0] for k in ks], "namespace": [k[1] for k in ks], "user_key": pa.array([k[2] for k in ks], pa.int32()),
                     "value": pa.array([None if rows[k] is None else rows[k][0] for k in ks], pa.float64()),
                     "ttl_timestamp": pa.array([None if rows[k] is None else rows[k][1] for k in ks], pa.int64()),
                     "tombstone": [rows[k] is None for k in ks]})


def random_history(root: str, seed: int, checkpoints: int = 7) -> tuple[fs.CheckpointStore, Model]:
    """A full put, then random puts, deletes and list appends over several delta checkpoints (and a full rewrite now and then)."""
    rnd = random.Random(seed)
    m = Model()
    store = fs.open(root)
    now = lambda: rnd.randrange(0, 5_000)  # noqa: E731  last-access times spread around the expiry times tested
    for c in range(checkpoints):
        full = c == 0 or rnd.random() < 0.15
        with store.begin(max_parallelism=MP) as w:
            if full:  # a full rewrite of every state, split in ranges
                m.val = {f"v{i}": (rnd.randrange(100), now()) for i in range(rnd.randrange(10, 40))}
                m.lst = {i: [(f"e{i}-{j}", now()) for j in range(rnd.randrange(1, 4))] for i in range(rnd.randrange(5, 20))}
                m.map = {(f"m{i}", f"n{i % 2}", j): (rnd.random(), now()) for i in range(rnd.randrange(5, 15)) for j in range(rnd.randrange(1, 3))}
                m.plain = {f"p{i}": rnd.randrange(1000) for i in range(rnd.randrange(5, 30))}
                m.tim = {(f"t{i}", rnd.randrange(10_000)) for i in range(rnd.randrange(5, 30))}
                ranges = rnd.choice([[(0, MP - 1)], [(0, 7), (8, 15)], [(0, 3), (4, 9), (10, 15)]])
                w.put_state("op", VAL, _val_table(m.val).drop_columns(["tombstone"]), ranges=ranges)
                w.put_state("op", LST, _lst_table(m.lst).drop_columns(["tombstone"]), ranges=ranges)
                w.put_state("op2", MAP, _map_table(m.map).drop_columns(["tombstone"]), ranges=ranges)
                w.put_state("op", PLAIN, pa.table({"key": sorted(m.plain), "value": pa.array([m.plain[k] for k in sorted(m.plain)], pa.int64())}))
                w.put_timers("op", TIM, pa.table({"key": [k for k, _ in sorted(m.tim)], "timestamp": pa.array([t for _, t in sorted(m.tim)], pa.int64())}),
                             ranges=ranges)
                continue
            dv: dict[str, tuple[int, int] | None] = {}
            for _ in range(rnd.randrange(1, 8)):
                k = f"v{rnd.randrange(50)}"
                dv[k] = None if rnd.random() < 0.3 else (rnd.randrange(100), now())
            dl: dict[int, list[tuple[str, int]] | None] = {}
            for _ in range(rnd.randrange(1, 5)):
                k = rnd.randrange(25)
                if rnd.random() < 0.25:
                    dl[k] = None
                else:  # an append: the key's list with new elements (a list delta row carries the whole list)
                    dl[k] = (m.lst.get(k) or []) + [(f"x{c}-{k}-{j}", now()) for j in range(rnd.randrange(1, 3))]
            dm: dict[tuple[str, str, int], tuple[float, int] | None] = {}
            for _ in range(rnd.randrange(1, 6)):
                k = (f"m{rnd.randrange(20)}", f"n{rnd.randrange(2)}", rnd.randrange(3))
                dm[k] = None if rnd.random() < 0.3 else (rnd.random(), now())
            dt_: dict[tuple[str, int], bool] = {}
            for _ in range(rnd.randrange(1, 5)):
                if m.tim and rnd.random() < 0.4:
                    dt_[rnd.choice(sorted(m.tim))] = True
                else:
                    dt_[(f"t{rnd.randrange(40)}", rnd.randrange(10_000))] = False
            w.put_state("op", VAL, _val_table(dv), mode="delta")
            w.put_state("op", LST, _lst_table(dl), mode="delta")
            w.put_state("op2", MAP, _map_table(dm), mode="delta")
            tk = sorted(dt_)
            w.put_timers("op", TIM, pa.table({"key": [k for k, _ in tk], "timestamp": pa.array([t for _, t in tk], pa.int64()),
                                              "tombstone": [dt_[k] for k in tk]}), mode="delta")
        for k, v in dv.items():
            m.val.pop(k, None) if v is None else m.val.__setitem__(k, v)
        for k, lv in dl.items():
            m.lst.pop(k, None) if lv is None else m.lst.__setitem__(k, lv)
        for k, mv in dm.items():
            m.map.pop(k, None) if mv is None else m.map.__setitem__(k, mv)
        for k, gone in dt_.items():
            m.tim.discard(k) if gone else m.tim.add(k)
    return store, m


def rows_of(t: pa.Table) -> list[Any]:
    return sorted((tuple(sorted(r.items())) for r in t.to_pylist()), key=repr)


def model_rows(m: Model, state: str, at: int | None = None) -> list[Any]:
    """The raw rows the model says a state holds (entries expired at `at` dropped when given), without key groups."""
    alive = (lambda ts: True) if at is None else (lambda ts: ts + TTL_MS > at)  # noqa: E731
    if state == "val":
        return sorted(((k, v, ts) for k, (v, ts) in m.val.items() if alive(ts)), key=repr)
    if state == "lst":
        out = []
        for k, els in m.lst.items():
            kept = [(v, ts) for v, ts in els if alive(ts)]
            if kept:
                out.append((k, [v for v, _ in kept], [ts for _, ts in kept]))
        return sorted(out, key=repr)
    return sorted(((k, ns, uk, v, ts) for (k, ns, uk), (v, ts) in m.map.items() if alive(ts)), key=repr)


def stored(store: fs.CheckpointStore, state: str) -> list[Any]:
    op = "op2" if state == "map" else "op"
    t = store.read_state(op, state, raw=True).drop_columns(["key_group"])
    return sorted((tuple(r.values()) for r in t.to_pylist()), key=repr)


def everything(store: fs.CheckpointStore, ref: int) -> dict[str, Any]:
    """Every read a user makes of the root: raw and shaped state (at a fixed TTL time), flattened or not, timers."""
    out: dict[str, Any] = {}
    for op, st in (("op", "val"), ("op", "lst"), ("op2", "map"), ("op", "plain")):
        out[f"{st}/raw"] = rows_of(store.read_state(op, st, raw=True))
        out[f"{st}/read"] = rows_of(store.read_state(op, st, ttl_reference=ref, include_expired=True))
        out[f"{st}/nested"] = rows_of(store.read_state(op, st, ttl_reference=ref, flatten=False))
    out["timers"] = rows_of(store.read_timers("op", "tim"))
    return out
