"""The `flinkstate` command: list and describe checkpoints, maintain a root, and run the demo job.

Readable tables by default, `--json` for scripts. Errors print one line naming what is
wrong and exit with status 2; anything else is an internal error, printed as one line naming the
command and its inputs, with status 3 (FLINKSTATE_TRACEBACK=1 adds the traceback): never a raw traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from flinkstate.core.errors import FlinkStateError
from flinkstate.format.filekind import FileKind

if TYPE_CHECKING:
    from flinkstate.store.store import CheckpointStore

__all__ = ["main", "build_parser", "docs_link", "DOCS_URL_ENV"]

DOCS_URL_ENV = "FLINKSTATE_DOCS_URL"  # a built site's address (its pages are <base>/<page>.html); unset: docs paths of the source tree


def docs_link(page: str, anchor: str = "") -> str:
    """Where `page` of the documentation (a path under docs/, e.g. "reference/cli.md") is: `docs/<page>` in a clone, or
    the built page under $FLINKSTATE_DOCS_URL. Every command's --help ends with the link to its section."""
    base = os.environ.get(DOCS_URL_ENV, "").strip()
    where = f"{base.rstrip('/')}/{page.removesuffix('.md')}.html" if base else f"docs/{page}"
    return f"{where}#{anchor}" if anchor else where


def _fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _table(rows: list[list[str]], header: list[str], out: TextIO) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else [len(h) for h in header]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    out.write(line.rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip() + "\n")


def _storage_options(args: argparse.Namespace) -> dict[str, Any] | None:
    opts: dict[str, Any] = {}
    for item in args.storage_option or []:
        if "=" not in item:
            raise FlinkStateError(f"--storage-option {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        opts[k] = v
    return opts or None


def _open_existing(args: argparse.Namespace) -> Any:
    import flinkstate
    from flinkstate.core.errors import CheckpointNotFoundError

    store = flinkstate.open(args.path, _storage_options(args))
    if not hasattr(store, "catalog"):  # a Flink savepoint or checkpoint folder: read only, always "existing"
        return store
    if not store.catalog.exists():
        from flinkstate.format.constants import LOG_TABLE
        from flinkstate.format.integrity import missing_table_error

        damaged = missing_table_error(store.io, LOG_TABLE)  # data without a log: damaged, not "no root"
        if damaged is not None:
            raise damaged
        raise CheckpointNotFoundError(f"{store.root} is not a flinkstate job root: it has no checkpoint log (_flinkstate/log)")
    return store


def cmd_checkpoints(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate checkpoints PATH`: one line per retained checkpoint or savepoint."""
    store = _open_existing(args)
    cps = store.checkpoints(include_discarded=args.all)
    if args.json:
        json.dump([c.to_dict() for c in cps], out, indent=2)
        out.write("\n")
        return 0
    if not cps:
        out.write(f"no checkpoints at {store.root}\n")
        return 0
    rows = [
        [str(c.checkpoint_id), c.kind, c.status, c.created_at.strftime("%Y-%m-%d %H:%M:%S"), str(c.max_parallelism), str(c.files), "-" if c.rows is None else str(c.rows),
         _delta_rows(store, c), _fmt_bytes(c.bytes)]
        for c in cps
    ]
    _table(rows, ["id", "kind", "status", "created (UTC)", "max_par", "files", "full rows", "delta rows", "size"], out)
    out.write("full rows: entries in full files; delta rows: upserts and tombstones in delta files "
              "(incremental checkpoints, Spark appends); size: all files\n")
    return 0


def _delta_rows(store: CheckpointStore, info: Any) -> str:
    """Entries in the delta files a completed checkpoint uses ("-" for a discarded one, or a Flink checkpoint)."""
    if info.status != "completed" or not hasattr(store, "catalog"):
        return "-"
    return str(sum(f.rows for f in store.files(info.checkpoint_id) if FileKind(f.kind).is_delta))


def _no_files() -> dict[str, int]:
    """Per-state file statistics before any file is counted (rows: in full files; delta_rows: in delta files)."""
    return {"files": 0, "bytes": 0, "rows": 0, "deltas": 0, "delta_rows": 0}


def describe(store: CheckpointStore, checkpoint_id: int | None) -> dict[str, Any]:
    """A JSON-able description of one checkpoint: operators, states, types, TTL, sizes."""
    meta = store.metadata(checkpoint_id)
    files = store.files(meta.info.checkpoint_id)
    stats: dict[tuple[str, str | None, str], dict[str, int]] = {}
    for e in files:
        scope = FileKind(e.kind).scope.value
        s = stats.setdefault((e.operator, e.state, scope), _no_files())
        s["files"] += 1
        s["bytes"] += e.bytes
        if FileKind(e.kind).is_delta:
            s["deltas"] += 1
            s["delta_rows"] += e.rows
        else:
            s["rows"] += e.rows
    ops = []
    for uid, op in sorted(meta.operators.items()):
        states = []
        for name, d in op.keyed_states.items():
            s = stats.get((uid, name, "keyed"), _no_files())
            ttl = None if d.ttl is None else {"ttl_ms": d.ttl.ttl_ms, "update_type": d.ttl.update_type, "visibility": d.ttl.state_visibility}
            states.append({
                "name": name, "type": "keyed", "kind": d.kind, "key_type": str(d.key_type),
                "namespace_type": None if d.namespace_type is None else str(d.namespace_type),
                "user_key_type": str(d.user_key_type) if d.kind == "map" else None,  # type: ignore[union-attr]
                "value_type": str(d.value_type), "ttl": ttl, **s,
            })
        for name, t in op.timer_services.items():
            s = stats.get((uid, name, "timers"), _no_files())
            states.append({"name": name, "type": "timers", "kind": f"{t.domain}-time timers", "key_type": str(t.key_type),
                           "namespace_type": None if t.namespace_type is None else str(t.namespace_type), "value_type": "timestamp (int64 ms)", "ttl": None, **s})
        for name, o in op.operator_states.items():
            s = stats.get((uid, name, "operator"), _no_files())
            states.append({"name": name, "type": "operator", "kind": f"{o.mode} operator state", "key_type": None if o.key_type is None else str(o.key_type),
                           "namespace_type": None, "value_type": str(o.value_type), "ttl": None, **s})
        if op.has_coordinator:
            s = stats.get((uid, None, "coordinator"), _no_files())
            states.append({"name": "(coordinator)", "type": "coordinator", "kind": "coordinator", "key_type": None, "namespace_type": None, "value_type": "binary", "ttl": None, **s})
        ops.append({"uid": uid, "parallelism": op.parallelism, "max_parallelism": op.max_parallelism, "states": states})
    return {"checkpoint": meta.info.to_dict(), "properties": meta.properties, "operators": ops}


def _describe_flink(src: Any, args: argparse.Namespace, out: TextIO) -> int:
    """`describe` of a Flink savepoint or checkpoint: operators, their ids and parallelism, and states by kind."""
    from flinkstate.cli_sources import describe_sources

    doc = src.describe(args.checkpoint)
    doc["sources"] = describe_sources(src.checkpoint(args.checkpoint), None)
    if args.json:
        json.dump(doc, out, indent=2, default=str)
        out.write("\n")
        return 0
    c = doc["checkpoint"]
    out.write(f"Flink {c['kind']} {c['checkpoint_id']} at {doc['path']} (_metadata version {doc['metadata_version']})\n"
              f"written by Flink {doc['flink_version']}: {'; '.join(doc['flink_version_evidence'])}\n")
    if any(op["uid"] == op["operator_id"] for op in doc["operators"]) and doc["metadata_version"] < 5:
        out.write("Flink 1.x metadata records no operator uids: operators are listed by id; read them by uid "
                  "(the id is Flink's hash of it), or name them with --uid\n")
    for op in doc["operators"]:
        named = f"{op['name']}, " if op.get("name") and op["name"] != op["uid"] else ""  # the planner's name of a SQL operator
        out.write(f"\noperator {op['uid']} ({named}id {op['operator_id']}, parallelism {op['parallelism']}, max parallelism "
                  f"{op['max_parallelism']}, {op['files']} files, {_fmt_bytes(op['bytes'])})\n")
        if op.get("error"):
            out.write(f"its state headers do not read (its states are refused, the other operators are read): {op['error']}\n")
        keys = sorted({_short_class(s["key_serializer"]) for s in op["states"] if s.get("key_serializer")})
        if keys:
            out.write(f"key serializer {', '.join(keys)}\n")
        rows = [[s["state"], s["state_kind"], _ttl_text(s), "-" if s["rows"] is None else str(s["rows"]), str(s["files"]),
                 "-" if s["bytes"] is None else _fmt_bytes(s["bytes"]), _short_class(s.get("value_serializer"))] for s in op["states"]]
        _table(rows, ["state", "kind", "ttl", "rows", "files", "size", "value serializer"], out)
    if doc.get("upgrade_to_2x"):
        out.write("\nFlink 2.x reads state that Flink 1.x's Kryo 2 serialized differently: `flinkstate import` it, then "
                  "`export --flink-version 2.x` migrates it:\n")
        _upgrade_table(doc["upgrade_to_2x"], out)
    out.write("\n-: not told by the format without decoding (canonical and HashMap files interleave their states; "
              "RocksDB sizes are the column families' SSTs)\n")
    if doc["ttl_unknown"]:
        out.write("TTL states (a savepoint does not hold their TTL duration: ttl unknown): " + ", ".join(doc["ttl_unknown"]) + "\n")
    for state, why in doc.get("refused", {}).items():
        out.write(f"refused when read: {state}: {why}\n")
    describe_sources(src.checkpoint(args.checkpoint), out)
    return 0


def _short_class(cls: str | None) -> str:
    """A serializer snapshot class without its package and snapshot suffix (RowDataSerializer, LongSerializer, KryoSerializer)."""
    if not cls:
        return "-"
    return cls.rsplit(".", 1)[-1].rsplit("$", 1)[-1].removesuffix("Snapshot")


def _ttl_text(state: dict[str, Any]) -> str:
    """A Flink state's TTL for the describe table: its duration, 'unknown' when the savepoint does not hold it, '-' without TTL."""
    if state["ttl_unknown"]:
        return "unknown"
    return "-" if state["ttl"] is None else f"{state['ttl']} ms"


def _upgrade_table(rows: list[dict[str, str]], out: TextIO) -> None:
    """Per Kryo 2 serializer of a state: what a 2.x export writes and what Flink 2.x does with it unmigrated."""
    table = [[f"{r['operator']}/{r['state']}", r["path"] or "-", r["declared"] or "-", r["migrated_to"] or "cannot be migrated",
              r["without_migration"] or r["error"]] for r in rows]
    _table(table, ["state", "serializer", "declared", "migrated to (Flink 2.x)", "without migration"], out)


def cmd_describe(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate describe PATH [--checkpoint ID]`: operators and states of one checkpoint."""
    store = _open_existing(args)
    if not hasattr(store, "catalog"):
        if args.uid or args.kryo_class:
            from flinkstate.flink.bridge.source import FlinkSource

            store = FlinkSource(store.path, uids=args.uid or (), storage_options=_storage_options(args), kryo_classes=args.kryo_class)
        return _describe_flink(store, args, out)
    from flinkstate.cli_sources import describe_sources

    doc = describe(store, args.checkpoint)
    doc["sources"] = describe_sources(store.checkpoint(args.checkpoint), None)
    if args.json:
        json.dump(doc, out, indent=2)
        out.write("\n")
        return 0
    c = doc["checkpoint"]
    out.write(
        f"{c['kind']} {c['checkpoint_id']} at {store.root}\n"
        f"  created {c['created_at']}, default max parallelism {c['max_parallelism']}, {c['files']} files, {_fmt_bytes(c['bytes'])}, format v{c['format_version']}\n"
    )
    for op in doc["operators"]:
        par = "" if op["parallelism"] is None else f"parallelism {op['parallelism']}, "
        out.write(f"\noperator {op['uid']} ({par}max parallelism {op['max_parallelism']})\n")
        rows = []
        for s in op["states"]:
            ttl = "-" if s["ttl"] is None else f"{s['ttl']['ttl_ms']} ms {s['ttl']['update_type']}"
            vt = s["value_type"] if not s.get("user_key_type") else f"map<{s['user_key_type']}, {s['value_type']}>"
            rows.append([s["name"], s["kind"], s["key_type"] or "-", vt, ttl, str(s["rows"]), str(s["delta_rows"]), str(s["files"]),
                         str(s["deltas"]), _fmt_bytes(s["bytes"])])
        _table(rows, ["state", "kind", "key", "value", "ttl", "full rows", "delta rows", "files", "deltas", "size"], out)
    out.write("\nfull rows: entries in full files; delta rows: upserts and tombstones in delta files; size: all files\n")
    describe_sources(store.checkpoint(args.checkpoint), out)
    return 0


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate verify PATH [--checkpoint ID]`: read and check every file, print what is damaged (rc 1 if any)."""
    import flinkstate
    from flinkstate.core.errors import CorruptFileError
    from flinkstate.store.verify import verify_store

    try:
        store = _open_existing(args)
    except CorruptFileError:  # the log itself is damaged: verify_store names it as damage found
        store = flinkstate.open(args.path, _storage_options(args))
    report = verify_store(store, args.checkpoint)
    if args.json:
        json.dump(report.to_dict(), out, indent=2)
        out.write("\n")
    else:
        for d in report.damaged:
            out.write(f"DAMAGED {d.path}: {d.problem}\n")
        for cid, why in report.not_checked.items():
            out.write(f"NOT CHECKED checkpoint {cid}: {why}\n")
        for url in report.stray:
            out.write(f"STRAY {url}: staged by a write killed mid-commit, never part of the table; "
                      "collect_orphans() deletes it once older than its retention\n")
        ids = ", ".join(map(str, report.checkpoints)) or "none readable"
        out.write(f"{'damaged' if report.damaged else 'ok'}: {report.files_checked} files of checkpoints [{ids}] at {report.root}, "
                  f"{len(report.damaged)} damaged\n")
    return 0 if report.ok else 1


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate export ROOT DEST [--checkpoint ID] [--compression snappy]`: write a checkpoint as a Flink savepoint."""
    from flinkstate.core.errors import InvalidArgumentError
    from flinkstate.flink.bridge.store_export import plan_export, run_export
    from flinkstate.flink.serde.kryo.migrate import KryoMigrationError

    store = _open_existing(args)
    cid = store.checkpoint(args.checkpoint).checkpoint_id
    pojo = {}
    for item in args.pojo or []:
        state, sep, cls = item.partition("=")
        if not sep or "/" not in state or not cls.strip():
            raise InvalidArgumentError(f"--pojo {item!r}: expected OPERATOR/STATE=JAVA_CLASS")
        pojo[state.strip()] = cls.strip()
    try:
        plan = plan_export(store, args.dest, checkpoint_id=cid, compression=args.compression == "snappy", pojo_classes=pojo,
                           flink_version=args.flink_version)  # every check before Spark starts
    except KryoMigrationError as e:
        if not args.dry_run or not e.report:
            raise
        return _dry_run(store.root, cid, args, e.report, str(e), out)
    if args.dry_run:
        rows = [{"operator": k.partition("/")[0], "state": k.partition("/")[2], "path": m.path, "declared": m.declared,
                 "migrated_to": m.written, "without_migration": m.without, "error": ""}
                for k, ms in sorted(plan.migrations.items()) for m in ms]
        return _dry_run(store.root, cid, args, rows, None, out)
    dest = run_export(plan) if args.spark is None else run_export(plan, _spark_runner("export", args.spark or None))
    if args.json:
        json.dump({"savepoint": dest, "root": store.root, "checkpoint_id": cid, "flink_version": args.flink_version}, out, indent=2)
        out.write("\n")
    else:
        out.write(f"wrote Flink {args.flink_version} savepoint {dest} from checkpoint {cid}\n"
                  f"restore it with: execution.state-recovery.path: {dest}  (or flink run -s {dest} ...)\n")
    return 0


def _dry_run(root: str, cid: int, args: argparse.Namespace, rows: list[dict[str, str]], refused: str | None, out: TextIO) -> int:
    """`export --dry-run`: what the export would migrate for Flink 2.x (and what it refuses); exit 1 when it would refuse."""
    if args.json:
        json.dump({"dry_run": True, "root": root, "checkpoint_id": cid, "flink_version": args.flink_version, "migrations": rows,
                   "refused": refused}, out, indent=2)
        out.write("\n")
        return 1 if refused else 0
    out.write(f"dry run: nothing written; checkpoint {cid} of {root} for Flink {args.flink_version} at {args.dest}\n")
    if rows:
        out.write("state Flink 1.x's Kryo 2 serialized, as the export writes it for Flink 2.x:\n")
        _upgrade_table(rows, out)
    else:
        out.write("no state to migrate: every state is written with its serializers\n")
    if refused:
        out.write(f"the export would be refused: {refused}\n")
    return 1 if refused else 0


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate import FLINK_DIR ROOT`: write a Flink savepoint or retained checkpoint into ROOT as one savepoint."""
    from flinkstate.flink.bridge.importer import plan_import, run_import
    from flinkstate.flink.bridge.mapping import parse_ttl

    plan = plan_import(args.flink_path, args.path, flink_checkpoint_id=args.flink_checkpoint, ttl=parse_ttl(args.ttl or ()),
                       storage_options=_storage_options(args), uids=args.uid or (), raw_values=args.raw_values,
                       kryo_classes=args.kryo_class)
    report = run_import(plan) if args.spark is None else run_import(plan, _spark_runner("import", args.spark or None))
    if args.json:
        json.dump({"root": args.path, "checkpoint_id": report.checkpoint_id, "flink_checkpoint": os.path.dirname(report.source),
                   "entries": report.entries, "ttl_unknown": report.ttl_unknown, "as_bytes": report.as_bytes,
                   "refused": report.refused}, out, indent=2)
        out.write("\n")
        return 0
    out.write(f"imported {os.path.dirname(report.source)} into {args.path} as savepoint {report.checkpoint_id}: "
              f"{report.total} entries\n")
    rows = [[op, state, str(n)] for op, states in report.entries.items() for state, n in states.items()]
    _table(rows, ["operator", "state", "entries"], out)
    for state, serializers in report.as_bytes.items():
        out.write(f"kept as bytes: {state}: {serializers} (reads give the serialized values; export writes them back as they were, but Kryo 2 bytes for Flink 2.x: it refuses those)\n")
    for state, why in report.refused.items():
        out.write(f"not imported: {state}: {why}\n")
    if report.ttl_unknown:
        out.write("TTL states whose duration a savepoint does not hold (kept with their last-access times, never expiring; "
                  "set with --ttl OPERATOR/STATE=MS): " + ", ".join(report.ttl_unknown) + "\n")
    return 0


def _known_sizes(store: CheckpointStore) -> dict[str, int]:
    """Bytes of every data file any checkpoint attempt listed (what a deletion report can name)."""
    t = store.catalog.manifest_table().select(["path", "bytes"])
    return dict(zip(t.column("path").to_pylist(), t.column("bytes").to_pylist()))


def _report_deleted(store: CheckpointStore, what: str, discarded: list[int], deleted: list[str], sizes: dict[str, int],
                    args: argparse.Namespace, out: TextIO) -> int:
    """Print what the registry deleted: count, bytes of the data files among them, and the paths when asked."""
    known = sum(sizes[p] for p in deleted if p in sizes)
    if args.json:
        json.dump({"root": store.root, "command": what, "discarded": discarded, "deleted": len(deleted), "bytes": known,
                   "paths": deleted}, out, indent=2)
        out.write("\n")
        return 0
    ids = ", ".join(map(str, discarded)) or "none"
    out.write(f"{what}: discarded checkpoints [{ids}] at {store.root}; deleted {len(deleted)} files "
              f"({_fmt_bytes(known)} of data files)\n")
    if args.verbose:
        for p in deleted:
            out.write(f"  {p}" + (f"  {_fmt_bytes(sizes[p])}" if p in sizes else "") + "\n")
    return 0


def cmd_retain(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate retain ROOT N`: keep the newest N checkpoints (never savepoints), delete what nothing retained uses."""
    from flinkstate.core.errors import InvalidArgumentError

    if args.num_retained < 1:
        raise InvalidArgumentError(f"retain: N must be >= 1 (the newest N checkpoints are kept), got {args.num_retained}")
    store = _open_existing(args)
    _writable_root(store, "retain")
    before = {c.checkpoint_id for c in store.checkpoints()}
    sizes = _known_sizes(store)
    deleted = store.retain(args.num_retained)
    gone = sorted(before - {c.checkpoint_id for c in store.checkpoints()})
    return _report_deleted(store, "retain", gone, deleted, sizes, args, out)


def cmd_discard(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate discard ROOT ID...`: discard checkpoints (never savepoints), delete what nothing retained uses."""
    store = _open_existing(args)
    _writable_root(store, "discard")
    ids = list(dict.fromkeys(args.checkpoint_ids))
    for cid in ids:
        store.record(cid)  # CheckpointNotFoundError naming the id and the retained ones
    sizes = _known_sizes(store)
    deleted = store.discard(ids)
    return _report_deleted(store, "discard", ids, deleted, sizes, args, out)


def _spark_runner(*what: str | None) -> Any:
    """The Spark runner of `--spark`, which the connector provides (entry point `flinkstate.maintenance` `spark`):
    of compact/expire, or with what = ("import" | "export", MASTER or None) of `import|export --spark [MASTER]`.

    The core never imports PySpark or the connector: the installed connector registers itself here.
    """
    from importlib.metadata import entry_points

    from flinkstate.core.errors import InvalidArgumentError

    try:
        for ep in entry_points(group="flinkstate.maintenance"):
            if ep.name == "spark":
                return ep.load()(*what)
    except ImportError as e:
        raise InvalidArgumentError(f"--spark needs PySpark and the connector (pip install 'flinkstate[spark]'): {e}") from e
    raise InvalidArgumentError("--spark needs the connector installed (pip install 'flinkstate[spark]'): no 'flinkstate.maintenance' "
                               "entry point named 'spark' is registered")


def _maintenance(args: argparse.Namespace, out: TextIO, what: str) -> int:
    """`compact` and `expire`: one new checkpoint; one progress line per state on stderr, the summary on stdout."""
    store = _open_existing(args)
    _writable_root(store, what)
    run = _spark_runner() if args.spark else None

    def progress(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    if what == "compact":
        res = store.compact(args.operator, args.state, progress=progress, run=run)
    else:
        res = store.expire(args.operator, args.state, at=args.at, progress=progress, run=run)
    if args.json:
        json.dump({"root": store.root, **res.to_dict(), "dropped": res.dropped if what == "expire" else None}, out, indent=2)
        out.write("\n")
        return 0
    done = f"checkpoint {res.checkpoint_id} written" if res.checkpoint_id is not None else "nothing to do, no checkpoint written"
    out.write(f"{what} of checkpoint {res.base_checkpoint_id} at {store.root}: {done}; files {res.files_before} -> {res.files_after} "
              f"({res.seconds:.1f} s)\n")
    if what == "expire":
        _table([[k, str(n)] for k, n in res.dropped.items()], ["state", "dropped"], out)
    return 0


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate compact ROOT [--operator OP --state S] [--spark]`: merge delta chains into full files, one new checkpoint."""
    return _maintenance(args, out, "compact")


def cmd_expire(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate expire ROOT [--operator OP --state S] [--at MS] [--spark]`: drop expired TTL entries, one new checkpoint."""
    return _maintenance(args, out, "expire")


def _writable_root(store: Any, what: str) -> None:
    """A flinkstate root (a Flink savepoint or checkpoint folder is read only here)."""
    from flinkstate.core.errors import ReadOnlyStoreError

    if not hasattr(store, "catalog"):
        raise ReadOnlyStoreError(f"{what}: {store.root} is a Flink savepoint or checkpoint folder; only flinkstate roots are maintained")


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """`flinkstate demo [--path DIR]`: run the sessionization job, then query it with Spark SQL."""
    from flinkstate.demo import run_demo

    return run_demo(args.path, sql=not args.no_sql, out=out)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `flinkstate` command."""
    from flinkstate import __version__

    p = argparse.ArgumentParser(prog="flinkstate", description="Inspect and produce Flink-grade state checkpoints stored as Parquet + Delta Lake.")
    p.add_argument("--version", action="version", version=f"flinkstate {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("path", help="job root: a local path, memory:// or s3:// URL")
        sp.add_argument("--json", action="store_true", help="print JSON for scripts")
        sp.add_argument("--storage-option", action="append", metavar="KEY=VALUE", help="fsspec/s3fs option (repeatable), e.g. endpoint_url=http://127.0.0.1:9000")

    from flinkstate.cli_sources import add_commands as add_source_commands
    from flinkstate.report import add_commands

    add_commands(sub, common)
    add_source_commands(sub, common, _open_existing, _table)

    sp = sub.add_parser("checkpoints", help="list committed checkpoints and savepoints")
    common(sp)
    sp.add_argument("--all", action="store_true", help="include discarded checkpoints")
    sp.set_defaults(func=cmd_checkpoints)

    def kryo_class(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--kryo-class", action="append", metavar="[final ]CLASS=FIELD:TYPE,...",
                        help="the fields of a user class in Kryo values, as its Java declares them (Kryo writes them by "
                             "name order without names or types): com.acme.Order=id:String,qty:int,tags:List<String>; "
                             "'final ' for a final class; com.acme.Color=enum:RED,GREEN for an enum (repeatable)")

    sp = sub.add_parser("describe", help="operators, states, types, TTL, rows, bytes and files of a checkpoint")
    common(sp)
    sp.add_argument("--checkpoint", type=int, default=None, metavar="ID", help="checkpoint id (default: the latest)")
    sp.add_argument("--uid", action="append", metavar="UID", help="(Flink savepoints) an operator uid of the job: names the "
                    "operator that Flink 1.x metadata records only by id (repeatable)")
    kryo_class(sp)
    sp.set_defaults(func=cmd_describe)

    sp = sub.add_parser("verify", help="read and check every file checkpoints use; print what is damaged (exit status 1 if anything is)")
    common(sp)
    sp.add_argument("--checkpoint", type=int, default=None, metavar="ID", help="checkpoint id (default: every retained checkpoint and savepoint)")
    sp.set_defaults(func=cmd_verify)

    from flinkstate.flink.write.savepoint_writer import (
        DEFAULT_FLINK_VERSION,
        TARGET_VERSIONS,
    )

    def spark_job(sp: argparse.ArgumentParser, what: str) -> None:
        sp.add_argument("--spark", nargs="?", const="", default=None, metavar="MASTER",
                        help=f"run as a Spark job, one task per Flink subtask: {what}. MASTER (e.g. local[4], spark://host:7077; "
                             "default the active session or local) needs --spark=MASTER before the positional arguments")

    sp = sub.add_parser("export", help="write a checkpoint as a canonical Flink savepoint that Flink restores",
                        description="Write checkpoint ID (default: the latest) of a flinkstate root as a canonical Flink "
                                    "savepoint in DEST for Flink --flink-version (relative paths, so DEST can be moved). "
                                    "DEST must not hold a savepoint; the savepoint is written to a temporary folder and renamed.")
    common(sp)
    sp.add_argument("dest", help="folder to create for the savepoint (local path)")
    sp.add_argument("--checkpoint", type=int, default=None, metavar="ID", help="checkpoint id (default: the latest)")
    sp.add_argument("--compression", choices=["none", "snappy"], default="none", help="compress keyed-state files with snappy")
    sp.add_argument("--flink-version", default=DEFAULT_FLINK_VERSION, metavar="X.Y",
                    help=f"the Flink release that restores it: {', '.join(TARGET_VERSIONS)} (default {DEFAULT_FLINK_VERSION})")
    sp.add_argument("--pojo", action="append", metavar="OPERATOR/STATE=JAVA_CLASS",
                    help="write that state's struct values as this POJO class (fields by name) instead of a Row (repeatable)")
    sp.add_argument("--dry-run", action="store_true", help="check and plan the export, print what state is migrated for "
                    "Flink 2.x (Flink 1.x's Kryo 2 state) and how, write nothing")
    spark_job(sp, "each task reads one key-group range and writes that subtask's keyed file into DEST's temporary folder "
                  "(DEST on a filesystem every executor sees); the driver writes _metadata")
    sp.set_defaults(func=cmd_export)

    sp = sub.add_parser("import", help="write a real Flink savepoint or retained checkpoint into a root as one savepoint",
                        description="Read a Flink savepoint or checkpoint (canonical, HashMap native, RocksDB native or "
                                    "incremental) and write it into ROOT as one flinkstate savepoint: same key groups, TTL "
                                    "timestamps, timers, operator state; committed once.")
    sp.add_argument("flink_path", help="a folder holding _metadata (savepoint or chk-N), or a job's checkpoint folder")
    common(sp)
    sp.add_argument("--flink-checkpoint", type=int, default=None, metavar="N", help="chk-N of a job's checkpoint folder (default: the latest)")
    sp.add_argument("--ttl", action="append", metavar="OPERATOR/STATE=MS", help="TTL of a state Flink kept with TTL, the operator "
                    "by uid or operator id, or STATE=MS for that state of every operator (repeatable)")
    sp.add_argument("--uid", action="append", metavar="UID", help="an operator uid of the job: names the operator that Flink 1.x "
                    "metadata records only by id (repeatable)")
    sp.add_argument("--raw-values", action="store_true", default=True,
                    help="keep values the decoders cannot type (Kryo, Avro, custom, SQL RowData) as their serialized bytes (the default)")
    sp.add_argument("--refuse-undecodable", dest="raw_values", action="store_false",
                    help="refuse states whose values the decoders cannot type instead of keeping their bytes")
    kryo_class(sp)
    spark_job(sp, "each task decodes one subtask handle and writes that range's files; the driver commits once")
    sp.set_defaults(func=cmd_import)

    sp = sub.add_parser("retain", help="keep the newest N checkpoints (savepoints are never touched); delete the files nothing retained uses",
                        description="Discard every checkpoint but the newest N (savepoints are kept) in one log commit, then "
                                    "delete the shared files no retained checkpoint or savepoint uses; prints what was deleted.")
    common(sp)
    sp.add_argument("num_retained", type=int, metavar="N", help="checkpoints to keep (>= 1)")
    sp.add_argument("--verbose", "-v", action="store_true", help="list the deleted paths")
    sp.set_defaults(func=cmd_retain)

    sp = sub.add_parser("discard", help="discard checkpoints by id; delete the files nothing retained uses",
                        description="Discard the given checkpoints (not savepoints) in one log commit, then delete the shared "
                                    "files no retained checkpoint or savepoint uses; prints what was deleted.")
    common(sp)
    sp.add_argument("checkpoint_ids", type=int, nargs="+", metavar="ID", help="checkpoint ids to discard")
    sp.add_argument("--verbose", "-v", action="store_true", help="list the deleted paths")
    sp.set_defaults(func=cmd_discard)

    def scope(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--operator", default=None, metavar="OP", help="only this operator (default: every operator)")
        sp.add_argument("--state", default=None, metavar="S", help="only this state (default: every state)")
        sp.add_argument("--spark", action="store_true", help="run one Spark task per key-group range (executors write, the driver commits)")

    sp = sub.add_parser("compact", help="merge delta chains into full files per key-group range, as one new checkpoint",
                        description="Merge each state's newest full file and later deltas per key-group range into one new full "
                                    "file, committed as one new checkpoint; every read stays the same. One line per state on stderr.")
    common(sp)
    scope(sp)
    sp.set_defaults(func=cmd_compact)

    sp = sub.add_parser("expire", help="drop the entries of TTL states expired at a time (default now), as one new checkpoint",
                        description="Rewrite the key-group ranges of TTL states that hold entries expired at --at (epoch ms, "
                                    "default now) without them, as one new checkpoint; prints the dropped count per state.")
    common(sp)
    scope(sp)
    sp.add_argument("--at", type=int, default=None, metavar="MS", help="expiry time, epoch milliseconds (default: now)")
    sp.set_defaults(func=cmd_expire)

    sp = sub.add_parser("demo", help="run a stateful sessionization job with checkpoints, then query them with Spark SQL",
                        description="Run a sessionization job with checkpoints, then query them with Spark SQL (needs Java 17; "
                                    "without it the answers come from pyarrow).")
    sp.add_argument("--path", default=None, help="where to write checkpoints (default ./demo-checkpoints): a new or empty folder, "
                    "or one an earlier demo wrote (only its _flinkstate/ and shared/ are replaced); any other non-empty folder is refused")
    sp.add_argument("--no-sql", action="store_true", help="skip the Spark SQL part")
    sp.set_defaults(func=cmd_demo)

    p.epilog = f"docs: {docs_link('index.md')} (every command and flag: {docs_link('reference/cli.md')})"
    for name, cmd in sub.choices.items():  # every command, those other modules add included: its reference section
        cmd.epilog = "\n".join(filter(None, [cmd.epilog, f"docs: {docs_link('reference/cli.md', name)}"]))
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the console script."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        rc = int(args.func(args, out))
        out.flush()
        return rc
    except FlinkStateError as e:
        sys.stderr.write(f"flinkstate: {type(e).__name__}: {e}\n")
        return 2
    except BrokenPipeError:
        # the reader went away (`flinkstate ... | head`): stop quietly, and keep the exit-time flush from failing again
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:  # a defect, not bad input: one line naming the command and its inputs, never a raw traceback
        sys.stderr.write(f"flinkstate: internal error in `{_command_line(args)}`: {type(e).__name__}: {e}\n"
                         "please report it with this line; set FLINKSTATE_TRACEBACK=1 for the traceback\n")
        if os.environ.get("FLINKSTATE_TRACEBACK") == "1":
            import traceback

            traceback.print_exc(file=sys.stderr)
        return 3


def _command_line(args: argparse.Namespace) -> str:
    """The command and its inputs as given (positional paths and the options set), for an internal error's message."""
    parts = [f"flinkstate {args.command}"]
    for name, value in vars(args).items():
        if name in ("command", "func") or value is None or value is False or value == [] or value == ():
            continue
        parts.append(str(value) if name in ("path", "flink_path", "dest", "checkpoint_ids", "num_retained")
                     else f"--{name.replace('_', '-')}" + ("" if value is True else f"={value}"))
    return " ".join(parts)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
