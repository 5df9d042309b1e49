"""`flinkstate insight` and `flinkstate report`: the state insight tables (`read.insight`) as text/JSON and as one HTML page.

The report is one self-contained HTML file (plotly's JavaScript embedded, nothing loaded from the network): size per
operator and state, key-group skew per operator with what each subtask holds at the current and at another
parallelism (Flink's KeyGroupRangeAssignment ranges), the largest keys, the TTL expiry curve and the growth over the
root's checkpoints. plotly is an optional extra (`pip install flinkstate[report]`), imported only here, when a
report is written.
"""

from __future__ import annotations

import argparse
import html
import json
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import FlinkStateError
from flinkstate.read.insight import CheckpointInsight, history_table

__all__ = ["TABLES", "ReportUnavailableError", "insight_table", "render_report", "write_report", "cmd_insight", "cmd_report"]

TABLES = ("key-groups", "subtasks", "top-keys", "ttl-expiry", "history")


class ReportUnavailableError(FlinkStateError, ImportError):
    """The HTML report needs plotly (the `report` extra), which is not installed."""


def _history(source: Any) -> pa.Table:
    """Size per checkpoint of every checkpoint the source retains (a Flink savepoint: itself)."""
    return history_table(source.checkpoint(c.checkpoint_id) for c in source.checkpoints())


def insight_table(source: Any, table: str, checkpoint_id: int | None = None, *, operator: str | None = None, top: int = 10,
                  bucket: str = "hour", parallelism: int | None = None) -> pa.Table:
    """One insight table of an opened root or Flink savepoint (`flinkstate.open`); `table` is one of TABLES."""
    if table == "history":
        return _history(source)
    ins = CheckpointInsight(source.checkpoint(checkpoint_id))
    if table == "key-groups":
        return ins.key_groups(operator)
    if table == "top-keys":
        return ins.top_keys(top, operator)
    if table == "ttl-expiry":
        return ins.ttl_expiry(bucket, operator)
    if table == "subtasks":
        ops = [operator] if operator is not None else sorted(ins.checkpoint.operators)
        parts = [ins.subtasks(op, parallelism) for op in ops if ins.checkpoint.operator(op).keyed_states
                 and (parallelism or ins.checkpoint.operator(op).parallelism)]
        from flinkstate.read.insight import SUBTASKS_SCHEMA

        return pa.concat_tables(parts) if parts else SUBTASKS_SCHEMA.empty_table()
    from flinkstate.core.errors import InvalidArgumentError

    raise InvalidArgumentError(f"insight table {table!r}: choose one of {list(TABLES)}")


# ---------------------------------------------------------------------------------------------- the HTML report
def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
    except ImportError as e:
        raise ReportUnavailableError("the HTML report needs plotly: pip install 'flinkstate[report]'") from e
    return go, pio


def _other_parallelism(current: int, maxp: int, given: int | None) -> int:
    """The parallelism the report compares with: the one given, else twice the current (at most max parallelism)."""
    if given:
        return given
    return min(maxp, current * 2) if current * 2 <= maxp else max(1, current // 2)


def render_report(source: Any, checkpoint_id: int | None = None, *, parallelism: int | None = None, top: int = 10,
                  bucket: str = "hour") -> str:
    """The report of one checkpoint (default the latest) of an opened root or Flink savepoint, as one HTML page."""
    go, pio = _plotly()
    ck = source.checkpoint(checkpoint_id)
    ins = CheckpointInsight(ck)
    kg = ins.key_groups()
    sections: list[tuple[str, Any | str]] = []

    sizes = kg.group_by(["operator", "state"]).aggregate([("bytes", "sum"), ("entries", "sum")]).sort_by([("bytes_sum", "descending")])
    labels = [f"{o}/{s}" for o, s in zip(sizes.column("operator").to_pylist(), sizes.column("state").to_pylist())]
    fig = go.Figure(go.Bar(x=sizes.column("bytes_sum").to_pylist(), y=labels, orientation="h",
                           text=[f"{e} entries" for e in sizes.column("entries_sum").to_pylist()]))
    fig.update_layout(title="Bytes per operator and keyed state", xaxis_title="bytes", yaxis={"autorange": "reversed"})
    sections.append(("Size per operator and state", fig))

    for uid in sorted(set(kg.column("operator").to_pylist())):
        part = kg.filter(pc.equal(kg.column("operator"), uid))
        fig = go.Figure()
        for state in sorted(set(part.column("state").to_pylist())):
            s = part.filter(pc.equal(part.column("state"), state))
            fig.add_trace(go.Bar(x=s.column("key_group").to_pylist(), y=s.column("bytes").to_pylist(), name=state))
        fig.update_layout(barmode="stack", title=f"{uid}: bytes per key group", xaxis_title="key group", yaxis_title="bytes")
        sections.append((f"Key-group skew of {uid}", fig))
        maxp = ck.max_parallelism_of(uid)
        current = ck.operator(uid).parallelism or 1
        other = _other_parallelism(current, maxp, parallelism)
        fig = go.Figure()
        for p in dict.fromkeys((current, other)):
            sub = ins.subtasks(uid, p)
            ranges = [f"{i} [{a}..{b}]" for i, a, b in zip(sub.column("subtask").to_pylist(), sub.column("key_group_start").to_pylist(),
                                                             sub.column("key_group_end").to_pylist())]
            fig.add_trace(go.Bar(x=ranges, y=sub.column("bytes").to_pylist(), name=f"parallelism {p}"))
        fig.update_layout(title=f"{uid}: bytes per subtask (key-group ranges) at parallelism {current} and {other}",
                          xaxis_title="subtask [key groups]", yaxis_title="bytes")
        sections.append((f"Subtasks of {uid}", fig))

    tk = ins.top_keys(top)
    if tk.num_rows:
        cols = ["operator", "state", "ranked_by", "rank", "key", "key_group", "entries", "elements", "bytes"]
        fig = go.Figure(go.Table(header={"values": cols}, cells={"values": [tk.column(c).to_pylist() for c in cols]}))
        fig.update_layout(title=f"Top {top} keys per state", height=max(400, 26 * tk.num_rows + 120))
        sections.append(("Largest keys", fig))

    ttl = ins.ttl_expiry(bucket)
    if ttl.num_rows:
        fig = go.Figure()
        for (uid, state) in sorted(set(zip(ttl.column("operator").to_pylist(), ttl.column("state").to_pylist()))):
            s = ttl.filter(pc.and_(pc.equal(ttl.column("operator"), uid), pc.equal(ttl.column("state"), state))).sort_by("offset")
            fig.add_trace(go.Scatter(x=s.column("offset").to_pylist(), y=s.column("entries").to_pylist(), mode="lines+markers",
                                     name=f"{uid}/{state}"))
        fig.update_layout(title=f"Entries expiring per {bucket} after the checkpoint's time", xaxis_title=f"{bucket}s after the checkpoint",
                          yaxis_title="entries")
        sections.append(("TTL expiry", fig))
    else:
        sections.append(("TTL expiry", "No TTL state whose duration the checkpoint holds (a Flink savepoint's: give it with --ttl)."))

    hist = _history(source)
    per = hist.group_by("checkpoint_id").aggregate([("bytes", "sum"), ("files", "sum")]).sort_by("checkpoint_id")
    fig = go.Figure(go.Scatter(x=per.column("checkpoint_id").to_pylist(), y=per.column("bytes_sum").to_pylist(), mode="lines+markers",
                               name="bytes"))
    fig.update_layout(title="State size per checkpoint", xaxis_title="checkpoint id", yaxis_title="bytes")
    sections.append(("Growth over checkpoints", fig))

    body = []
    first = True
    for title, item in sections:
        body.append(f"<h2>{html.escape(title)}</h2>")
        if isinstance(item, str):
            body.append(f"<p>{html.escape(item)}</p>")
        else:
            body.append(pio.to_html(item, include_plotlyjs=first, full_html=False))
            first = False
    skipped = "".join(f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in sorted(ins.skipped.items()))
    head = (f"<h1>flinkstate report: checkpoint {ck.checkpoint_id}</h1><p>{html.escape(str(getattr(source, 'root', getattr(source, 'path', ''))))}"
            f"; key-group figures measured from: {', '.join(sorted(set(kg.column('measured_from').to_pylist()))) or '-'}</p>")
    if skipped:
        head += f"<p>Left out (values not readable):</p><ul>{skipped}</ul>"
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>flinkstate report</title></head><body>"
            + head + "\n".join(body) + "</body></html>\n")


def write_report(source: Any, out: str | Path, checkpoint_id: int | None = None, **kw: Any) -> Path:
    """Write `render_report` to out; return its path."""
    path = Path(out)
    path.write_text(render_report(source, checkpoint_id, **kw), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- the commands
def _open(args: argparse.Namespace) -> Any:
    import flinkstate

    opts = {k: v for k, v in (i.split("=", 1) for i in args.storage_option or [] if "=" in i)} or None
    if args.ttl:
        return flinkstate.open(args.path, opts, ttl=";".join(args.ttl))
    return flinkstate.open(args.path, opts)


def cmd_insight(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate insight PATH TABLE`: one insight table, as text or --json."""
    t = insight_table(_open(args), args.table, args.checkpoint, operator=args.operator, top=args.top, bucket=args.bucket,
                      parallelism=args.parallelism)
    if args.json:
        json.dump(t.to_pylist(), out, indent=2, default=str)
        out.write("\n")
        return 0
    names = t.column_names
    rows = [[("-" if v is None else str(v)) for v in r.values()] for r in t.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    out.write("  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip() + "\n")
    for r in rows:
        out.write("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() + "\n")
    return 0


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate report PATH -o report.html`: the HTML report of one checkpoint."""
    path = write_report(_open(args), args.output, args.checkpoint, parallelism=args.parallelism, top=args.top, bucket=args.bucket)
    out.write(f"wrote {path}\n")
    return 0


def add_commands(sub: Any, common: Any) -> None:
    """Register `insight` and `report` on the CLI's subparsers (common adds path, --json, --storage-option)."""
    def shared(sp: argparse.ArgumentParser) -> None:
        common(sp)
        sp.add_argument("--checkpoint", type=int, default=None, metavar="ID", help="checkpoint id (default: the latest)")
        sp.add_argument("--top", type=int, default=10, metavar="N", help="largest keys per state (default 10)")
        sp.add_argument("--bucket", choices=("hour", "day"), default="hour", help="TTL expiry per hour or day after the checkpoint")
        sp.add_argument("--parallelism", type=int, default=None, metavar="P",
                        help="the parallelism subtasks are shown at (the report: compared with the current; default twice it)")
        sp.add_argument("--ttl", action="append", metavar="OP/STATE=MS", help="(Flink savepoints) a state's TTL duration (repeatable)")

    sp = sub.add_parser("insight", help="where the bytes are: per key group, subtasks, largest keys, TTL expiry, size history")
    shared(sp)
    sp.add_argument("table", choices=TABLES, help="which table")
    sp.add_argument("--operator", default=None, help="one operator (default: all)")
    sp.set_defaults(func=cmd_insight)
    sp = sub.add_parser("report", help="one self-contained HTML page of the insight tables (needs the 'report' extra: plotly)")
    sp.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    shared(sp)
    sp.set_defaults(func=cmd_report)
