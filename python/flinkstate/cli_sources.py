"""`flinkstate sources` and `flinkstate rewind`: where a job's sources were, and moving them (one command in an incident).

    flinkstate sources PATH [--operator OP]                      # splits per reader subtask, then the enumerator
    flinkstate rewind ROOT --operator OP --offset orders:0:1200  # a new checkpoint of a flinkstate root
    flinkstate rewind SAVEPOINT DEST --operator OP --reread-file /data/in/f3.txt   # a new Flink savepoint at DEST
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

from flinkstate.core.errors import InvalidArgumentError

__all__ = ["add_commands", "cmd_rewind", "cmd_sources", "describe_sources"]

_SPLIT_COLUMNS = {
    "kafka": ["subtask", "split_id", "starting_offset", "starting_marker", "stopping_offset", "stopping_marker"],
    "file": ["subtask", "split_id", "path", "offset", "length", "reader_offset", "records_to_skip"],
    "number_sequence": ["subtask", "split_id", "number_from", "number_to"],
    "kafka_legacy": ["subtask", "split_id", "starting_offset", "starting_marker"],
    "unknown": ["subtask", "split_version", "split_bytes"],
}
_ENUM_COLUMNS = {
    "kafka": ["entry", "status", "subtask", "split_id", "starting_offset", "starting_marker"],
    "file": ["entry", "status", "split_id", "path", "reader_offset", "records_to_skip"],
    "number_sequence": ["entry", "status", "split_id", "number_from", "number_to"],
}


def _kinds(items: list[str] | None, operator: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        op, sep, kind = item.rpartition("=")
        if not sep and operator is not None:
            op, kind = operator, item
        if not op:
            raise InvalidArgumentError(f"--source-kind {item!r}: expected OPERATOR=KIND (kafka, file, number_sequence)")
        out[op] = kind
    return out


def _text(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, list):
        return ",".join(v) or "-"
    return str(v)


def _print_sources(ck: Any, operator: str | None, kinds: dict[str, Any], out: TextIO, table: Callable[..., None]) -> None:
    from flinkstate.flink.bridge.source_positions import source_enumerator, source_operators, source_splits

    splits = source_splits(ck, operator, kinds).to_pylist()
    enum = source_enumerator(ck, operator, kinds).to_pylist()
    for op in [operator] if operator else source_operators(ck):
        mine = [r for r in splits if r["operator"] == (ck.name_of(op) if hasattr(ck, "name_of") else op)]
        kind = mine[0]["source_kind"] if mine else next((r["source_kind"] for r in enum if r["operator"] == op), "unknown")
        out.write(f"\nsource {op} ({kind}): {len(mine)} splits\n")
        cols = _SPLIT_COLUMNS[kind]
        table([[_text(r[c]) for c in cols] for r in mine], cols, out)
        rows = [r for r in enum if r["operator"] == op]
        if rows:
            e = rows[0]
            flag = "" if e["initial_discovery_finished"] is None else f", initial discovery finished {e['initial_discovery_finished']}"
            out.write(f"enumerator (coordinator v{e['coordinator_version']}, state v{e['enumerator_version']}{flag}): {len(rows)} entries\n")
            cols = _ENUM_COLUMNS[kind]
            table([[_text(r[c]) for c in cols] for r in rows], cols, out)


def cmd_sources(args: argparse.Namespace, out: TextIO, open_existing: Callable[[argparse.Namespace], Any],
                table: Callable[..., None]) -> int:
    """`flinkstate sources PATH`: every source's splits per reader subtask and its enumerator's entries."""
    from flinkstate.flink.bridge.source_positions import source_enumerator, source_splits

    store = open_existing(args)
    if args.uid and not hasattr(store, "catalog"):
        from flinkstate.flink.bridge.source import FlinkSource

        store = FlinkSource(store.path, uids=args.uid)
    ck = store.checkpoint(args.checkpoint)
    kinds = _kinds(args.source_kind)
    if args.json:
        doc = {"splits": source_splits(ck, args.operator, kinds).drop_columns(["split_bytes"]).to_pylist(),
               "enumerator": source_enumerator(ck, args.operator, kinds).to_pylist()}
        json.dump(doc, out, indent=2, default=str)
        out.write("\n")
        return 0
    out.write(f"{getattr(ck, 'kind', 'checkpoint')} {ck.checkpoint_id} at {store.root}\n")
    _print_sources(ck, args.operator, kinds, out, table)
    return 0


def describe_sources(ck: Any, out: TextIO | None) -> list[dict[str, Any]]:
    """The sources' summary `describe` adds (and prints one line each unless out is None)."""
    from flinkstate.flink.bridge.source_positions import source_summary

    docs = source_summary(ck)
    for d in docs if out is not None else []:
        if d["kind"] == "unknown":
            out.write(f"source {d['operator']}: unknown kind ({d['why']})\n")
            continue
        line = f"source {d['operator']}: {d['kind']}, {d['splits']} splits in {d['subtasks']} reader subtasks"
        e = d.get("enumerator")
        if e is not None:
            parts = [f"{n} {k}" for k, n in sorted(e["splits"].items())] + ([f"{e['processed_paths']} processed paths"] if d["kind"] == "file" else [])
            line += f"; enumerator v{e['version']}: {', '.join(parts) or 'empty'}"
        out.write(line + " (flinkstate sources PATH)\n")
    return docs


def _edits(args: argparse.Namespace) -> list[Any]:
    from flinkstate.flink.sources import DropTopic, ForgetPath, MarkProcessed, RereadFile, parse_edit

    edits: list[Any] = [parse_edit(f"offset:{x}") for x in args.offset or []]
    edits += [DropTopic(x) for x in args.drop_topic or []]
    edits += [parse_edit(f"drop-partition:{x}") for x in args.drop_partition or []]
    edits += [parse_edit(f"add-partition:{x}") for x in args.add_partition or []]
    edits += [parse_edit(f"sequence:{x}") for x in args.sequence or []]
    for x in args.reread_file or []:
        path, sep, offset = x.rpartition("@")
        if sep and offset.isdigit():
            edits.append(RereadFile(path, offset=int(offset)))
        else:
            edits.append(RereadFile(x))
    edits += [ForgetPath(x) for x in args.forget_path or []]
    edits += [MarkProcessed(x) for x in args.skip_file or []]
    if not edits:
        raise InvalidArgumentError("rewind: give at least one change (--offset, --drop-topic, --drop-partition, --add-partition, "
                                   "--reread-file, --forget-path, --skip-file, --sequence)")
    return edits


def cmd_rewind(args: argparse.Namespace, out: TextIO, open_existing: Callable[[argparse.Namespace], Any],
               table: Callable[..., None]) -> int:
    """`flinkstate rewind PATH [DEST] --operator OP ...`: move a source's positions (readers and enumerator together)."""
    from flinkstate.flink.bridge.source_positions import rewind_root, rewind_savepoint

    edits = {args.operator: _edits(args)}
    kinds = _kinds(args.source_kind, args.operator)
    store = open_existing(args)
    if not hasattr(store, "catalog"):  # a Flink savepoint: a new savepoint at DEST
        if not args.dest:
            raise InvalidArgumentError(f"{args.path} is a Flink savepoint: give DEST, the folder of the rewound savepoint to write")
        dest = rewind_savepoint(store.path, args.dest, edits, kinds=kinds, flink_version=args.flink_version, uids=args.uid or ())
        result: dict[str, Any] = {"savepoint": dest}
        reread = _open_dest(dest, args)
    else:
        if args.dest:
            raise InvalidArgumentError(f"{args.path} is a flinkstate root: the rewind is a new checkpoint there (no DEST); "
                                       f"`flinkstate export` it for Flink")
        info = rewind_root(store, edits, kinds=kinds)
        result = {"root": store.root, "checkpoint_id": info.checkpoint_id}
        reread = store
    if args.json:
        json.dump(result, out, indent=2)
        out.write("\n")
        return 0
    where = result.get("savepoint") or f"checkpoint {result['checkpoint_id']} of {result['root']}"
    out.write(f"rewound source {args.operator} ({len(edits[args.operator])} changes): wrote {where}\n")
    _print_sources(reread.checkpoint(), args.operator if not hasattr(reread, "name_of") else None, kinds, out, table)
    return 0


def _open_dest(dest: str, args: argparse.Namespace) -> Any:
    from flinkstate.flink.bridge.source import FlinkSource

    return FlinkSource(dest, uids=args.uid or ())


def add_commands(sub: Any, common: Callable[[argparse.ArgumentParser], None], open_existing: Callable[[argparse.Namespace], Any],
                 table: Callable[..., None]) -> None:
    """Add `sources` and `rewind` to the CLI's subcommands."""
    def bind(f: Callable[..., int]) -> Callable[[argparse.Namespace, TextIO], int]:
        return lambda args, out: f(args, out, open_existing, table)

    sp = sub.add_parser("sources", help="where the job's sources were: splits per reader subtask (Kafka offsets, file positions, "
                                        "sequence positions) and each enumerator's entries",
                        description="The FLIP-27 sources of a Flink savepoint or flinkstate root: one line per split per reader "
                                    "subtask, then the enumerator's assigned/unassigned/pending splits and processed paths.")
    common(sp)
    sp.add_argument("--checkpoint", type=int, default=None, metavar="ID", help="checkpoint id (default: the latest)")
    sp.add_argument("--operator", default=None, metavar="OP", help="only this source operator (uid or operator id)")
    sp.add_argument("--uid", action="append", metavar="UID", help="an operator uid Flink 1.x records only by id (repeatable)")
    sp.add_argument("--source-kind", action="append", metavar="OP=KIND", help="declare a source's kind (kafka, file, "
                    "number_sequence) where its bytes fit more than one (repeatable)")
    sp.set_defaults(func=bind(cmd_sources))

    sp = sub.add_parser("rewind", help="rewind or skip a source: set Kafka offsets, drop/add partitions, re-read or skip files",
                        description="Change a source's positions in its readers' state and its enumerator's state together. "
                                    "PATH a flinkstate root: one new checkpoint there. PATH a Flink savepoint: a new savepoint at "
                                    "DEST (PATH unchanged) for the release that wrote it (--flink-version to choose). A partition "
                                    "or file the state does not hold, an offset below zero or an unknown source kind is an "
                                    "error naming it, and nothing is written.")
    common(sp)
    sp.add_argument("dest", nargs="?", default=None, help="(Flink savepoint PATH) the folder of the rewound savepoint")
    sp.add_argument("--operator", required=True, metavar="OP", help="the source operator (uid or operator id)")
    sp.add_argument("--offset", action="append", metavar="TOPIC:PARTITION:OFFSET",
                    help="Kafka: start the partition at OFFSET (>= 0, or earliest, latest, committed)")
    sp.add_argument("--drop-topic", action="append", metavar="TOPIC", help="Kafka: forget every partition of TOPIC")
    sp.add_argument("--drop-partition", action="append", metavar="TOPIC:PARTITION", help="Kafka: forget one partition")
    sp.add_argument("--add-partition", action="append", metavar="TOPIC:PARTITION:OFFSET[:SUBTASK]",
                    help="Kafka: a partition the state does not hold, read from OFFSET (by SUBTASK, default the connector's owner)")
    sp.add_argument("--reread-file", action="append", metavar="PATH[@OFFSET]",
                    help="files: read PATH again from its start (or byte OFFSET); a file read to its end is forgotten (read again)")
    sp.add_argument("--forget-path", action="append", metavar="PATH", help="files: forget PATH was enumerated (a monitoring source reads it again)")
    sp.add_argument("--skip-file", action="append", metavar="PATH", help="files: record PATH as enumerated (never read)")
    sp.add_argument("--sequence", action="append", metavar="SPLIT:NEXT", help="number sequence / datagen: split SPLIT goes on from NEXT")
    sp.add_argument("--source-kind", action="append", metavar="[OP=]KIND", help="declare the source's kind where its bytes fit more than one")
    sp.add_argument("--uid", action="append", metavar="UID", help="an operator uid Flink 1.x records only by id (repeatable)")
    sp.add_argument("--flink-version", default=None, metavar="X.Y", help="(Flink savepoint PATH) the release that restores DEST "
                    "(default: the newest that could have written PATH)")
    sp.set_defaults(func=bind(cmd_rewind))
