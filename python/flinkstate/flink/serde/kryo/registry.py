"""Which class each Kryo registration id means, as Flink configures Kryo, and the job's registrations from a snapshot.

Flink 1.x (Kryo 2.24) and 2.x (Kryo 5.6) alike: Kryo's own primitives and String (ids 0-8; Kryo 2 also `void` at 9),
then Flink's `FlinkChillPackageRegistrar` (ids 73-84: chill-java's serializers in 1.x, Kryo 5's equivalents in 2.x), then
the job's registrations from 85 in the order the `KryoSerializerSnapshot` lists them: the serializer's own type first,
the classes registered with `registerKryoType` / `registerTypeWithKryoSerializer`, and Avro's `GenericData$Array` (a
dummy class without Avro). Every other class is written by name. Checked against `Kryo.getRegistration` of the
KryoSerializer of Flink 1.20.5 and 2.3.0 (`flinkjobs/kryo/KryoWire.java`).
"""

from __future__ import annotations

from dataclasses import dataclass

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.serde._snapshots import optional_map as _optional_map  # LinkedOptionalMapSerializer, as POJO snapshots use it

__all__ = ["FIRST_JOB_ID", "KryoRegistrations", "default_ids", "parse_kryo_snapshot"]

_PRIMITIVES = ("java.lang.Integer", "java.lang.String", "java.lang.Float", "java.lang.Boolean", "java.lang.Byte",
               "java.lang.Character", "java.lang.Short", "java.lang.Long", "java.lang.Double")
_FLINK_CHILL = ("java.util.Arrays$ArrayList", "java.util.BitSet", "java.util.PriorityQueue", "java.util.regex.Pattern",
                "java.sql.Date", "java.sql.Time", "java.sql.Timestamp", "java.net.URI", "java.net.InetSocketAddress",
                "java.util.UUID", "java.util.Locale", "java.text.SimpleDateFormat")
FIRST_JOB_ID = 85
# Flink's registration for Avro's GenericData.Array (without Avro on the class path: a dummy class and serializer)
_FLINK_AVRO = ("Serializers$DummyAvroKryoSerializerClass", "Serializers$SpecificInstanceCollectionSerializerForArrayList")
_SERIALIZER_KINDS = ("UNSPECIFIED", "CLASS", "INSTANCE")


def default_ids(gen: int) -> dict[int, str]:
    """Registration id -> class of Flink's Kryo before the job's registrations (gen 2: Flink 1.x, gen 5: Flink 2.x)."""
    out = dict(enumerate(_PRIMITIVES))
    if gen == 2:
        out[9] = "void"
    out.update({73 + i: c for i, c in enumerate(_FLINK_CHILL)})
    return out


@dataclass(frozen=True)
class KryoRegistrations:
    """A KryoSerializerSnapshot's contents: the type it serializes, the job's registrations (class -> "UNSPECIFIED" or the
    custom serializer registered for it), and the default serializers the job added (class -> serializer)."""

    type_class: str
    registered: tuple[tuple[str, str], ...]
    defaults: tuple[tuple[str, str], ...] = ()

    def ids(self, gen: int) -> dict[int, str]:
        """Registration id -> class name: Flink's defaults, then the job's in order (a class Kryo already had keeps its id)."""
        out = default_ids(gen)
        known = {c: i for i, c in out.items()}
        nxt = FIRST_JOB_ID
        for cls, _ in self.registered:
            if cls in known:
                nxt = known[cls] + 1
                continue
            out[nxt] = cls
            known[cls] = nxt
            nxt += 1
        return out

    def custom(self) -> dict[str, str]:
        """Classes the job gave its own Kryo serializer (registered or default): class -> serializer. Flink's own
        registration of Avro's GenericData$Array (a dummy class when Avro is absent) is not the job's."""
        out = {c: s for c, s in self.defaults}
        out.update({c: s for c, s in self.registered if s != "UNSPECIFIED" and not s.endswith(_FLINK_AVRO)})
        return out


def parse_kryo_snapshot(payload: bytes, where: str) -> KryoRegistrations:
    """The payload of a `KryoSerializerSnapshot` (version 2, `KryoSerializerSnapshotData`): UTF type class, then three
    LinkedOptionalMaps: registrations (class -> KryoRegistration: UTF class, i32 kind, UTF serializer class or a
    Java-serialized instance), default serializers (class -> instance) and default serializer classes (class -> class)."""
    r = DataReader(payload, where=where)
    type_class = r.utf()
    registered: list[tuple[str, str]] = []
    for name, value in _optional_map(r, where):
        kind = "UNSPECIFIED"
        if value is not None:
            vr = DataReader(value, where=where)
            name = vr.utf()  # the class registered (Avro's GenericData$Array without Avro: Flink's dummy class)
            k = vr.i32()
            if not 0 <= k < len(_SERIALIZER_KINDS):
                raise CorruptFileError(f"{where}: Kryo registration of {name} has serializer kind {k}")
            kind = _SERIALIZER_KINDS[k]
            if kind == "CLASS":
                kind = vr.utf()
            elif kind == "INSTANCE":
                kind = "a serializer instance"
        registered.append((name, kind))
    defaults = [(name, "a default serializer instance") for name, _ in _optional_map(r, where)]
    for name, value in _optional_map(r, where):
        defaults.append((name, DataReader(value, where=where).utf() if value else "a default serializer class"))
    return KryoRegistrations(type_class, tuple(registered), tuple(defaults))
