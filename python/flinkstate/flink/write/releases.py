"""Serializer bytes a target Flink release would read differently than the release that wrote them: the one place an
export checks for them, before anything is written.

Kryo: Flink 1.x writes a generic type's values with Kryo 2, Flink 2.x with Kryo 5 (FLIP-317), under the same snapshot
class (`...typeutils.runtime.kryo.KryoSerializerSnapshot`) and the same snapshot bytes, and reads the other's bytes as
its own: ShapesJob's Kryo `Profile` (a java.time field: Kryo 5 has serializers of its own for them) exported from 1.20
for 2.3 fails the HashMap restore (`DateTimeException`) and, on RocksDB, restores and then fails where a value is read;
from 2.3 for 1.20 the HashMap restore fails (`IndexOutOfBoundsException`); issue 42 saw a job whose 1.20 Kryo states
Flink 2.3 restored without an error and with wrong values on every key. Such a
state (a Kryo serializer anywhere in its key, namespace or value serializers: a POJO's Kryo field too) is refused by
name for the other major release unless it was migrated for it (`serde.kryo.migrate`, run by export before this check
for a 2.x target: a migrated serializer records the Kryo generation its bytes are written in).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from flinkstate.flink.errors import IncompatibleReleaseError
from flinkstate.flink.serde.kryo.bind import is_kryo
from flinkstate.flink.serde.serializers import TypeNode
from flinkstate.flink.write.savepoint_writer import OperatorExport

__all__ = ["check_target_release", "kryo_conflicts", "kryo_generation"]


def kryo_generation(release: str) -> int:
    """The Kryo major version a Flink release ("1.20", "2.3.0", "<1.18") reads and writes a KryoSerializer's values with."""
    return 2 if release.startswith(("0.", "1.", "<")) else 5


def _kryo(node: TypeNode) -> Iterator[TypeNode]:
    """The Kryo serializers in a serializer tree (read as typed columns, kind "kryo", or kept as their bytes)."""
    if node.kind == "kryo" or is_kryo(node):
        yield node
    for c in node.children:
        yield from _kryo(c)


def _generation(node: TypeNode, wrote: set[int]) -> set[int]:
    """The Kryo generations a Kryo serializer's bytes may be: the one it records (2 as read from Flink 1.x, 5 from 2.x or
    migrated for it, `serde.kryo`), else those of the releases that may have written the operator."""
    if node.kind == "kryo" and node.params[:1] in ((2,), (5,)):
        return {int(node.params[0])}
    return wrote


def _serializers(op: OperatorExport) -> Iterator[tuple[str, str, TypeNode]]:
    """(state, role, serializer) of every state of op: the key, keyed states, timers, operator and broadcast states."""
    if op.keyed is not None:
        yield "(key)", "KEY_SERIALIZER", op.keyed.key_type
        for name, m in op.keyed.meta.items():
            for role, node in m.serializers.items():
                yield name, role, node
    for name, (_, _, m) in op.operator_states.items():
        for role, node in m.serializers.items():
            yield name, role, node


def kryo_conflicts(op: OperatorExport, target: str) -> list[str]:
    """The states of op holding Kryo bytes of another Kryo generation than Flink `target` reads ("state (role: class of
    type)"); a Kryo state whose writing release is not known (op.source_releases empty) conflicts with every target."""
    want = kryo_generation(target)
    wrote = {kryo_generation(r) for r in op.source_releases}
    out = []
    for state, role, node in _serializers(op):
        for k in _kryo(node):
            if _generation(k, wrote) != {want}:
                out.append(f"{state} ({role}: {k.cls} of {k.names[0] if k.names else '?'})")
    return out


def check_target_release(operators: Iterable[OperatorExport], target: str) -> None:
    """Refuse (IncompatibleReleaseError) an export for Flink `target` when a state holds bytes that release reads
    differently than the release that wrote them; names operator, state, serializer and both releases."""
    want = kryo_generation(target)
    problems = []
    for op in operators:
        found = kryo_conflicts(op, target)
        if found:
            wrote = (f"Flink {', '.join(op.source_releases)}, Kryo {kryo_generation(op.source_releases[0])} bytes" if op.source_releases
                     else "an unrecorded Flink release (imported by an earlier flinkstate: import the savepoint again)")
            problems.append(f"operator {op.uid!r} (written by {wrote}): {'; '.join(found)}")
    if problems:
        raise IncompatibleReleaseError(
            f"cannot export for Flink {target}, which reads Kryo values with Kryo {want}: it would read these states' bytes "
            f"differently (wrong values, or a failed restore): {' | '.join(problems)}. Export for the release line that wrote them, or remove "
            "those states (SavepointWriter.remove_state) first; nothing was written")
