"""The column types of a savepoint's Kryo values, learnt when it is opened: one type per state for every read of it.

A Kryo serializer snapshot names only the declared class (`java.util.ArrayList`, `java.util.List` for a POJO field):
what the values hold (`ArrayList<Long>`) is in the bytes, each element with its class. Opening a savepoint reads the
first values of each state with Kryo parts (up to `SAMPLE_VALUES` entries, a few key groups at a time, every subtask
until then) and keeps their shapes per operator, state and serializer (`KryoOptions.shapes`), so descriptors, Spark
schemas and every task agree. A class without a schema (or a custom Kryo serializer) among those values keeps the
state's Kryo values as their bytes (named; where framed) instead. A later value that does not fit is an error naming it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from flinkstate.core.errors import FlinkStateError
from flinkstate.flink.bridge.mapping import decode_subtask, subtask_range, subtask_states
from flinkstate.flink.errors import KryoDecodeError
from flinkstate.flink.meta.metadata import CheckpointMetadata, OperatorState
from flinkstate.flink.serde.kryo.bind import KryoOptions, generation_for, kryo_paths
from flinkstate.flink.serde.kryo.migrate import KryoMigrationError, migrate_state, needs_migration
from flinkstate.flink.serde.kryo.schema import Schemas
from flinkstate.flink.serde.kryo.shapes import NULL_SHAPE, ShapeError, merge
from flinkstate.flink.serde.serializers import TypeNode

__all__ = ["SAMPLE_VALUES", "upgrade_report", "with_kryo_types"]

SAMPLE_VALUES = 10_000


def _kryo_parts(dec: Any) -> dict[str, str]:
    """Paths of the Kryo serializers a decoder's state has that no type is known for yet -> the class each declares."""
    return {path: n.names[0] if n.names else "?" for role, node in dec.meta.serializers.items()
            for path, n in kryo_paths(node, role) if n.kind == "kryo" and not n.children}


def _windows(rng: tuple[int, int]) -> list[list[int]]:
    """A subtask's key groups in growing windows (8, 16, 32, ...): a sample reads few when the first hold enough values."""
    out, start, size = [], rng[0], 8
    while start <= rng[1]:
        out.append(list(range(start, min(rng[1], start + size - 1) + 1)))
        start += size
        size *= 2
    return out


def _learn(meta: CheckpointMetadata, op: OperatorState, state: str, paths: list[str],
           declared: dict[str, str]) -> tuple[dict[str, TypeNode], dict[str, str], set[str]]:
    """The shapes of a state's Kryo parts from its first values, the parts whose values stay bytes (why), and those of
    them whose class has a schema the user gave that the bytes do not fit: a part whose values cannot be read (a class
    without a schema) is set aside and the others learnt again without it."""
    failed: dict[str, str] = {}
    misfits: set[str] = set()
    while True:
        live = [p for p in paths if p not in failed]
        if not live:
            return {}, failed, misfits
        assert op.kryo is not None
        trial = dataclasses.replace(op, kryo=dataclasses.replace(op.kryo, as_bytes={**op.kryo.as_bytes, **{
            (op.operator_id, state, p): why for p, why in failed.items()}}))
        try:
            return _sample(meta, trial, state, live), failed, misfits
        except KryoDecodeError as e:
            why = re.sub(r"^operator .*?, state '.*?': ", "", str(e))  # said again wherever the reason is shown
            hit = [p for p in live if declared[p] == e.declared] or live
            failed.update(dict.fromkeys(hit, why))
            if "user" in (op.kryo.schemas.origin.get(e.cls), op.kryo.schemas.origin.get(e.declared)):
                misfits.update(hit)
        except ShapeError as e:
            failed.update(dict.fromkeys(live, f"its Kryo values do not make one column type: {e}"))


def _sample(meta: CheckpointMetadata, op: OperatorState, state: str, paths: list[str]) -> dict[str, TypeNode]:
    """The merged shapes of a state's Kryo parts over its first values (up to SAMPLE_VALUES entries)."""
    shapes: dict[str, TypeNode] = dict.fromkeys(paths, NULL_SHAPE)
    seen = 0
    for sub in op.subtasks:
        rng = subtask_range(sub)
        if rng is None:
            continue
        for kgs in _windows(rng):
            try:
                dec = decode_subtask(meta, op, sub, key_groups=kgs, states=[state]).get(state)
                if dec is None or not hasattr(dec, "kryo_shapes"):
                    return shapes
                if isinstance(getattr(dec, "failed", None), KryoDecodeError):
                    raise dec.failed  # the state's own failure is kept with it: here it says which part stays bytes
                for path, shape in dec.kryo_shapes().items():
                    if path in shapes:
                        shapes[path] = merge(shapes[path], shape)
                seen += dec.row_count()
            except KryoDecodeError:
                raise
            except FlinkStateError:
                return shapes  # not a Kryo matter: the read of the state says what (the types stay as learnt)
            if seen >= SAMPLE_VALUES:
                return shapes
    return shapes


def with_kryo_types(meta: CheckpointMetadata, schemas: Schemas) -> CheckpointMetadata:
    """meta whose operators read Kryo values with these class schemas and the types their first values have."""
    ops = []
    for op in meta.operators:
        op = dataclasses.replace(op, kryo=KryoOptions(gen=generation_for(meta.version), schemas=schemas))
        first = next((s for s in op.subtasks if subtask_range(s) is not None), None)
        if first is None:
            ops.append(op)
            continue
        shapes: dict[tuple[str, str, str], TypeNode] = {}
        as_bytes: dict[tuple[str, str, str], str] = {}
        misfit: set[tuple[str, str, str]] = set()
        for name, dec in subtask_states(meta, op, first).items():
            parts = _kryo_parts(dec)
            if not parts:
                continue
            learnt, failed, misfits = _learn(meta, op, name, list(parts), parts)
            misfit.update((op.operator_id, name, path) for path in misfits)
            for path in parts:
                if path in failed:
                    as_bytes[(op.operator_id, name, path)] = failed[path]
                else:
                    shapes[(op.operator_id, name, path)] = learnt.get(path, NULL_SHAPE)
        assert op.kryo is not None
        ops.append(dataclasses.replace(op, kryo=dataclasses.replace(op.kryo, shapes=shapes, as_bytes=as_bytes,
                                                                    misfits=frozenset(misfit))))
    if any(o.kryo is not None and o.kryo.as_bytes for o in ops):
        ops = _with_pojo_hints(meta, ops)
    return dataclasses.replace(meta, operators=type(meta.operators)(ops))


def _pojos(meta: CheckpointMetadata, ops: list[OperatorState]) -> dict[str, TypeNode]:
    """The POJO serializer snapshots in the savepoint's keyed-state headers, by class."""
    out: dict[str, TypeNode] = {}

    def walk(n: TypeNode) -> None:
        if n.kind == "pojo":
            out.setdefault(n.cls, n)
        for c in n.children:
            walk(c)

    for op in ops:
        first = next((s for s in op.subtasks if subtask_range(s) is not None), None)
        if first is not None:
            for dec in subtask_states(meta, op, first).values():
                for n in dec.meta.serializers.values():
                    walk(n)
    return out


def _with_pojo_hints(meta: CheckpointMetadata, ops: list[OperatorState]) -> list[OperatorState]:
    """Where a Kryo class without a schema is one the savepoint also has a POJO snapshot of, the reason its values stay
    bytes names that snapshot's fields: a schema's start (the snapshot keeps neither whether a number field is primitive
    nor a collection field's type arguments, which Kryo's bytes depend on, so it is not used as one)."""
    pojos = _pojos(meta, ops)
    if not pojos:
        return ops
    out = []
    for op in ops:
        assert op.kryo is not None
        hinted = {}
        for key, why in op.kryo.as_bytes.items():
            found = re.search(r"^(?:.*?cannot be read: )?([\w.$]+): no schema", why)
            pojo = pojos.get(found.group(1)) if found else None
            if pojo is not None:
                fields = ", ".join(f"{n} ({c.names[0] if c.kind == 'opaque' and c.names else c.kind})"
                                   for n, c in zip(pojo.names, pojo.children, strict=True))
                why += (f"; the savepoint's POJO snapshot of {pojo.cls} has fields {fields}: declare each as its Java does "
                        "(long or Long, List<String>...)")
            hinted[key] = why
        out.append(dataclasses.replace(op, kryo=dataclasses.replace(op.kryo, as_bytes=hinted)))
    return out


def upgrade_report(meta: CheckpointMetadata, names: dict[str, str]) -> list[dict[str, str]]:
    """Per Kryo 2 serializer of every keyed state (a Flink 1.x savepoint's), what a Flink 2.x export writes for it and
    what Flink 2.x does with the state unmigrated; a part that cannot be migrated with the reason (`serde.kryo.migrate`).
    names: flinkstate operator name -> uid or operator id (the operators to report)."""
    out: list[dict[str, str]] = []
    for name, uid in sorted(names.items()):
        op = meta.operator(uid)
        first = next((s for s in op.subtasks if subtask_range(s) is not None), None)
        if first is None:
            continue
        for state, dec in subtask_states(meta, op, first).items():
            if not hasattr(dec, "header_meta") or not needs_migration_of(dec):
                continue
            try:
                _, _, done = migrate_state(dec.meta, dec.key_node, f"operator {name!r}, state {state!r}")
            except KryoMigrationError as e:
                out.append({"operator": name, "state": state, "path": "", "declared": "", "migrated_to": "",
                            "without_migration": "", "error": str(e)})
                continue
            for m in done:
                out.append({"operator": name, "state": state, "path": m.path, "declared": m.declared, "migrated_to": m.written,
                            "without_migration": m.without, "error": ""})
    return out


def needs_migration_of(dec: Any) -> bool:
    """Whether a decoder's state holds Kryo 2 serializers (its key's included)."""
    return needs_migration(dec.key_node) or any(needs_migration(n) for n in dec.meta.serializers.values())
