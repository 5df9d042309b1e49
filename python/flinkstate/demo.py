"""`flinkstate demo`: sessionization of generated click events, then SQL over its checkpoints.

The job keys click events (user, country, url, event time) by user and keeps, per user,
the open session (value state with TTL), the pages of that session (map state with TTL)
and the number of finished sessions (reducing state). An event-time timer at
``last click + gap`` closes a session. It runs over 4 subtasks with incremental
checkpoints, is stopped, restored from its latest checkpoint with 3 subtasks (rescaling by
key groups) and runs to the end. Then a local SparkSession reads the checkpoints with
``spark.read.format("flinkstate")`` and answers a few questions in SQL; without PySpark or
the connector the same answers are computed with ``flinkstate.open(path)`` and pyarrow.
"""

from __future__ import annotations

import datetime as _dt
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

import pyarrow as pa

if TYPE_CHECKING:
    from flinkstate.store.store import CheckpointStore

__all__ = ["run_demo", "click_events", "prepare_demo_root", "java_problem", "SessionFunction",  # noqa: F822 (module __getattr__: made on first use)
           "OPERATOR", "SESSION_GAP_MS", "DEMO_MARKER"]

DEMO_MARKER = ".flinkstate-demo"
DEMO_ENTRIES = ("_flinkstate", "shared", DEMO_MARKER)  # all the demo writes into its root

OPERATOR = "sessions"
SESSION_GAP_MS = 10 * 60 * 1000
TTL_MS = 30 * 60 * 1000
COUNTRIES = ["DE", "FR", "US", "BR", "IN", "JP", "NG", "SE"]
URLS = [f"/{p}" for p in ("home", "search", "cart", "checkout", "product/1", "product/2", "product/3", "help", "blog", "login")]

SESSION_TYPE = pa.struct([
    pa.field("start", pa.int64()),
    pa.field("last", pa.int64()),
    pa.field("clicks", pa.int64()),
    pa.field("country", pa.string()),
])


def click_events(n: int, *, users: int = 4000, seed: int = 7, end_ms: int | None = None, step_ms: int = 60) -> Iterator[dict[str, Any]]:
    """`n` deterministic click events, slightly out of order, whose event time ends near `end_ms`.

    The active users drift over time, so sessions open and close along the run.
    """
    rng = random.Random(seed)
    end_ms = end_ms if end_ms is not None else int(time.time() * 1000)
    t = end_ms - n * step_ms
    country_of = [COUNTRIES[(i * 7 + i // 3) % len(COUNTRIES)] for i in range(users)]
    for i in range(n):
        t += rng.randint(0, 2 * step_ms)
        window = (i * users) // max(n, 1)
        u = (window + rng.randint(0, users // 4)) % users
        yield {
            "user": f"user-{u:05d}",
            "country": country_of[u],
            "url": URLS[rng.randrange(len(URLS))],
            "ts": t - rng.randint(0, 2000),  # up to 2 s out of order
        }


def _descriptors() -> dict[str, Any]:
    from flinkstate import (
        MapStateDescriptor,
        ReducingStateDescriptor,
        StateTtlConfig,
        ValueStateDescriptor,
    )
    from flinkstate.core.ttl import IncrementalCleanup

    ttl = StateTtlConfig(ttl_ms=TTL_MS, cleanup_full_snapshot=True, incremental_cleanup=IncrementalCleanup(cleanup_size=5))
    return {
        "session": ValueStateDescriptor(name="session", value_type=SESSION_TYPE, ttl=ttl),
        "pages": MapStateDescriptor(name="pages", user_key_type=pa.string(), user_value_type=pa.int64(), ttl=ttl),
        "sessions_total": ReducingStateDescriptor(name="sessions_total", value_type=pa.int64(), reduce_function=lambda a, b: a + b),
    }


def _session_function_class() -> type:
    from flinkstate.runtime import KeyedProcessFunction

    class SessionFunction(KeyedProcessFunction):
        """Sessions with an event-time gap; closed sessions are emitted as dicts."""

        def open(self, ctx: Any) -> None:
            d = _descriptors()
            self.session = ctx.get_state(d["session"])
            self.pages = ctx.get_state(d["pages"])
            self.total = ctx.get_state(d["sessions_total"])

        def process_element(self, e: dict[str, Any], ctx: Any) -> None:
            s = self.session.value()
            ts = e["ts"]
            if s is None:
                s = {"start": ts, "last": ts, "clicks": 1, "country": e["country"]}
            else:
                ctx.delete_event_time_timer(s["last"] + SESSION_GAP_MS)
                s = {"start": min(s["start"], ts), "last": max(s["last"], ts), "clicks": s["clicks"] + 1, "country": s["country"]}
            self.session.update(s)
            self.pages.put(e["url"], (self.pages.get(e["url"]) or 0) + 1)
            ctx.register_event_time_timer(s["last"] + SESSION_GAP_MS)

        def on_timer(self, timestamp: int, ctx: Any) -> None:
            s = self.session.value()
            if s is None or s["last"] + SESSION_GAP_MS > timestamp:
                return
            ctx.output({"user": ctx.current_key, "country": s["country"], "start": s["start"], "end": s["last"],
                        "clicks": s["clicks"], "pages": len(self.pages.keys())})
            self.session.clear()
            self.pages.clear()
            self.total.add(1)

    return SessionFunction


def __getattr__(name: str) -> Any:
    if name == "SessionFunction":
        return _session_function_class()
    raise AttributeError(name)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def print_table(t: pa.Table, out: TextIO, limit: int = 20) -> None:
    rows = t.slice(0, limit).to_pylist()
    cols = t.column_names
    if t.num_rows == 0:
        out.write("  " + "  ".join(cols) + "\n  (no rows)\n")
        return
    cells = [[str(r[c]) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    out.write("  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip() + "\n")
    out.write("  " + "  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")
    if t.num_rows > limit:
        out.write(f"  ... {t.num_rows - limit} more rows\n")


def utc(ms: int | None) -> str:
    """An epoch-millisecond time as a readable UTC timestamp."""
    if ms is None:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def prepare_demo_root(path: str, out: TextIO) -> None:
    """Make `path` ready for the demo: refuse a non-empty folder it did not create, and clear only its own files there."""
    from flinkstate.core.errors import InvalidArgumentError

    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidArgumentError(f"demo path {path} is a file, not a folder")
    entries = os.listdir(path) if os.path.isdir(path) else []
    if entries and DEMO_MARKER not in entries:
        raise InvalidArgumentError(f"demo path {path} is not empty and is not a demo root (it has no {DEMO_MARKER}): "
                                   "the demo only writes into a new or empty folder, or one an earlier demo wrote")
    if entries:
        out.write(f"removing the previous demo's checkpoints in {path} (other files there stay)\n")
        for name in DEMO_ENTRIES:
            target = os.path.join(path, name)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            elif os.path.lexists(target):
                os.remove(target)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, DEMO_MARKER), "w") as f:
        f.write("written by `flinkstate demo`: it may replace _flinkstate/ and shared/ here, nothing else\n")


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java, or older than 17), or None when a Java 17+ runs."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    where = f"JAVA_HOME={home}" if home else "PATH"
    if not java or not os.access(java, os.X_OK):
        return f"no Java found ({where}): Spark needs Java 17 or later"
    try:
        r = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"Java at {java} does not run ({e}): Spark needs Java 17 or later"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', r.stderr + r.stdout)
    if r.returncode != 0 or m is None:
        return f"Java at {java} does not run (exit status {r.returncode}): Spark needs Java 17 or later"
    major = int(m.group(2)) if m.group(1) == "1" and m.group(2) else int(m.group(1))
    if major < 17:
        return f"Java at {java} is version {major}: Spark needs Java 17 or later"
    return None


def _changed_pair(store: CheckpointStore, ids: list[int]) -> tuple[int, int] | None:
    """The latest two consecutive retained checkpoints whose open sessions differ."""
    from flinkstate.read.changes import state_changes

    for a, b in reversed(list(zip(ids, ids[1:]))):
        if state_changes(store, OPERATOR, "session", a, b).num_rows:
            return a, b
    return None


def run_demo(path: str | None = None, *, sql: bool = True, out: TextIO = sys.stdout, events: int = 120_000,
             users: int = 4000) -> int:
    """Run the sessionization job with checkpoints at `path` (default ./demo-checkpoints), then query them."""
    import flinkstate
    from flinkstate.runtime import KeyedJob

    path = path or os.path.join(os.getcwd(), "demo-checkpoints")
    prepare_demo_root(path, out)
    end_ms = int(time.time() * 1000)
    sim_now = [end_ms - events * 60]  # processing time of the job: follows the events (deterministic TTL)

    def clock() -> int:
        return sim_now[0]

    def source() -> Iterator[dict[str, Any]]:
        for e in click_events(events, users=users, end_ms=end_ms):
            if e["ts"] > sim_now[0]:
                sim_now[0] = e["ts"]
            yield e

    def progress(s: Any) -> None:
        kind = "full" if s.delta_parts == 0 else ("incremental" if s.full_parts == 0 else "mixed")
        out.write(
            f"  checkpoint {s.checkpoint_id:>3} {s.status:<9} {kind:<11} offset {s.source_offset:>7}  "
            f"{s.files:>3} files {_fmt_bytes(s.bytes):>10}  sync pause {s.sync_ms:6.2f} ms  async {s.async_ms:6.0f} ms\n"
        )
        out.flush()

    fn = _session_function_class()
    interval = max(1000, events // 12)
    common: dict[str, Any] = dict(key_selector=lambda e: e["user"], key_type=pa.string(), checkpoint_interval=interval,
                                  timestamp_assigner=lambda e: e["ts"], out_of_orderness_ms=2000, watermark_interval=50,
                                  clock=clock, on_checkpoint=progress, retain=5)
    t0 = time.perf_counter()
    out.write(f"flinkstate demo: {events} click events of {users} users, session gap {SESSION_GAP_MS // 60000} min, "
              f"TTL {TTL_MS // 60000} min\ncheckpoints: {path}\n\n")
    out.write("phase 1: 4 subtasks, max parallelism 128, incremental checkpoint every "
              f"{interval} events\n")
    first = int(events * 0.6)
    with KeyedJob(OPERATOR, fn, parallelism=4, max_parallelism=128, checkpoint_path=path, **common) as job:
        r1 = job.run(source(), limit=first)
        closed1 = len(r1.outputs)
    out.write(f"  processed {r1.elements} events in {r1.seconds:.1f} s, {closed1} sessions closed, "
              f"{r1.fired_timers} timers fired\n\n")

    store = flinkstate.open(path)
    latest = store.latest_checkpoint_id()
    out.write(f"phase 2: a simulated failure stops the job after {first} events; it restarts from its latest "
              f"checkpoint {latest} with 3 subtasks (key groups re-split) and continues\n")
    with KeyedJob.restore(OPERATOR, fn, checkpoint_path=path, parallelism=3, **common) as job2:
        out.write(f"  resumed at source offset {job2.source_offset} (events after it are replayed), "
                  f"watermark {utc(job2.watermark)}\n")
        r2 = job2.run(source(), final_watermark=False)
        job2.trigger_checkpoint()
        job2.wait_for_checkpoints()
        open_sessions = sum(be.num_entries("session") for be in job2.backends)
    out.write(f"  processed {r2.elements} events in {r2.seconds:.1f} s, {len(r2.outputs)} sessions closed, "
              f"{open_sessions} still open\n")
    out.write(f"job done in {time.perf_counter() - t0:.1f} s\n\n")

    store = flinkstate.open(path)
    cp = store.latest_checkpoint_id()
    meta = store.metadata(cp)
    watermark = int(meta.properties.get("runner.watermark", "0"))
    answered = False
    ids = [c.checkpoint_id for c in store.checkpoints()]
    discarded = [c.checkpoint_id for c in store.checkpoints(include_discarded=True) if c.checkpoint_id not in ids]
    if discarded:
        span = f"{discarded[0]}–{discarded[-1]}" if len(discarded) > 1 else str(discarded[0])
        out.write(f"checkpoints {span} were discarded by retention (the job keeps its latest 5); "
                  f"{', '.join(map(str, ids))} remain\n\n")
    pair = _changed_pair(store, ids)
    if sql:
        problem = java_problem()
        if problem is not None:
            out.write(f"Spark SQL skipped: {problem}; answering with pyarrow instead\n\n")
        else:
            answer = _sql_answerer()
            if answer is None:
                out.write("Spark SQL needs PySpark and the connector (pip install 'flinkstate[spark]'): answering with pyarrow instead\n\n")
            else:
                answered = answer(path, cp, pair, watermark, clock(), out)
    if not answered:
        _answer_with_pyarrow(store, cp, pair, watermark, clock(), out)
    out.write(f"\ncheckpoints are in {path}: Parquet files under shared/, Delta tables under _flinkstate/\n")
    return 0


def queries(watermark: int, pair: tuple[int, int] | None) -> list[tuple[str, str]]:
    window = SESSION_GAP_MS // 2
    return [
        ("open sessions per country",
         "SELECT value.country AS country, count(*) AS open_sessions, sum(value.clicks) AS clicks "
         "FROM session GROUP BY value.country ORDER BY open_sessions DESC"),
        (f"keys with a timer due in the next {window // 60000} minutes after the watermark ({utc(watermark)})",
         f"SELECT key, timestamp_millis(timestamp) AS due_at, timestamp - {watermark} AS due_in_ms FROM timers "
         f"WHERE timestamp <= {watermark + window} ORDER BY timestamp LIMIT 10"),
        ("state size per checkpoint",
         "SELECT checkpoint_id, count(*) AS files, sum(rows) AS rows, sum(bytes) AS bytes, "
         "sum(CASE WHEN created_by_checkpoint_id = checkpoint_id THEN bytes ELSE 0 END) AS new_bytes "
         "FROM files GROUP BY checkpoint_id ORDER BY checkpoint_id"),
        ("users with the most finished sessions",
         "SELECT key AS user, value AS sessions FROM totals ORDER BY sessions DESC, user LIMIT 5"),
    ] + ([] if pair is None else [
        (f"what changed in the open sessions between checkpoints {pair[0]} and {pair[1]}",
         "SELECT change_type, count(*) AS entries FROM changes GROUP BY change_type ORDER BY change_type"),
    ])


def _sql_answerer() -> Any:
    """The Spark SQL half of the demo, which the connector package provides (entry point `flinkstate.demo` `sql`).

    The core never imports PySpark or the connector: an installed connector registers itself here.
    """
    from importlib.metadata import entry_points

    for ep in entry_points(group="flinkstate.demo"):
        if ep.name == "sql":
            try:
                return ep.load()
            except ImportError:
                return None  # its dependencies (PySpark) are missing
    return None


def result_table(columns: list[str], rows: list[dict[str, Any]]) -> pa.Table:
    """A query's rows as a table that keeps its column names when there are no rows."""
    return pa.Table.from_pylist(rows) if rows else pa.table({c: pa.array([], pa.string()) for c in columns})


def _answer_with_pyarrow(store: CheckpointStore, cp: int, pair: tuple[int, int] | None, watermark: int, now: int, out: TextIO) -> None:
    import pyarrow.compute as pc

    out.write(f"answers over checkpoint {cp} with flinkstate.open(path) and pyarrow:\n")
    sess = store.read_state(OPERATOR, "session", cp, ttl_reference=now)  # sessions whose TTL ran out by now are hidden
    country = pc.struct_field(sess.column("value"), "country")
    clicks = pc.struct_field(sess.column("value"), "clicks")
    t = pa.table({"country": country, "clicks": clicks}).group_by("country").aggregate([("country", "count"), ("clicks", "sum")])
    t = t.rename_columns(["country", "open_sessions", "clicks"]).sort_by([("open_sessions", "descending")])
    out.write("\n-- open sessions per country\n")
    print_table(t, out)
    window = SESSION_GAP_MS // 2
    timers = store.read_timers(OPERATOR, "event-timers", cp)
    due = timers.filter(pc.less_equal(timers.column("timestamp"), watermark + window)).sort_by("timestamp").slice(0, 10)
    due = pa.table({"key": due.column("key"), "due_at": [utc(t) for t in due.column("timestamp").to_pylist()],
                    "due_in_ms": pc.subtract(due.column("timestamp"), watermark)})
    out.write(f"\n-- keys with a timer due in the next {window // 60000} minutes after the watermark ({utc(watermark)})\n")
    print_table(due, out)
    rows = []
    for info in store.checkpoints():
        files = store.files(info.checkpoint_id)
        rows.append({"checkpoint_id": info.checkpoint_id, "files": len(files), "rows": sum(f.rows for f in files),
                     "bytes": sum(f.bytes for f in files),
                     "new_bytes": sum(f.bytes for f in files if f.created_by_checkpoint_id == info.checkpoint_id)})
    out.write("\n-- state size per checkpoint\n")
    print_table(pa.Table.from_pylist(rows), out)
    tot = store.read_state(OPERATOR, "sessions_total", cp).sort_by([("value", "descending"), ("key", "ascending")]).slice(0, 5)
    out.write("\n-- users with the most finished sessions\n")
    print_table(pa.table({"user": tot.column("key"), "sessions": tot.column("value")}), out)
    if pair is not None:
        out.write(f"\n-- what changed in the open sessions between checkpoints {pair[0]} and {pair[1]}\n")
        from flinkstate.read.changes import state_changes

        ch = state_changes(store, OPERATOR, "session", pair[0], pair[1])
        print_table(ch.group_by("change_type").aggregate([("change_type", "count")])
                     .rename_columns(["change_type", "entries"]).sort_by("change_type"), out)
