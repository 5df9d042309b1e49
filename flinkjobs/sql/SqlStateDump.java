import java.io.BufferedWriter;
import java.io.DataInputStream;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializerBase;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.CompositeKeySerializationUtils;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.ListDelimitedSerializer;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.ttl.TtlValue;
import org.apache.flink.streaming.api.operators.TimerHeapInternalTimer;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.MapData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.LogicalType;

/**
 * What real Flink holds in a canonical savepoint, read with Flink's own classes (no job, no state processor API):
 * `_metadata` by `Checkpoints.loadCheckpointMetadata`, each keyed state handle's header by
 * `KeyedBackendSerializationProxy` (serializers restored from their snapshots), its key groups as
 * `FullSnapshotRestoreOperation` and `HeapSavepointRestoreOperation` read them, every key, namespace, map key, value and
 * timer deserialized by the restored serializers. The reference the tests compare flinkstate's reads with.
 *
 * <pre>
 * SqlStateDump SAVEPOINT OUT
 * </pre>
 *
 * OUT gets one JSON object per line: per state {"op", "state", "kind", "serializers"} (the classes: "header": true), then
 * per entry {"op", "state", "kind", "kg", "key", "ns", "uk" (map), "value"} and per timer {"op", "state", "kind": "TIMER",
 * "kg", "ts", "key", "ns"}. op is the operator id (hex). Values are rendered by their serializers: a RowData as the list
 * of its fields (by its logical types: strings, numbers, booleans, timestamps as [epoch ms, nanos of the ms], decimals
 * as plain strings, bytes and RAW values as base64, nested rows and structured types/arrays as lists, maps as sorted
 * [key, value] lists), lists as lists,
 * maps as [key, value] lists sorted by key text, tuples as lists, a TTL value as {"ttl": last access, "v": value}, a
 * window as [start, end], anything else {"class": ..., "string": toString()}.
 */
public class SqlStateDump {

    static Object invoke(Object o, String method) throws Exception {
        if (o == null) return null;
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            for (Method m : c.getDeclaredMethods()) {
                if (m.getName().equals(method) && m.getParameterCount() == 0) {
                    m.setAccessible(true);
                    return m.invoke(o);
                }
            }
        }
        throw new NoSuchMethodException(o.getClass().getName() + "." + method);
    }

    static Object field(Object o, String name) throws Exception {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException e) {
                // the superclass's
            }
        }
        throw new NoSuchFieldException(o.getClass().getName() + "." + name);
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff)) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String num(double d) {
        if (Double.isNaN(d) || Double.isInfinite(d)) return str(Double.toString(d));
        return Double.toString(d);
    }

    /** A field of a RowData (or an element of an ArrayData) by its logical type. */
    static String logical(Object v, LogicalType t) throws Exception {
        if (v == null) return "null";
        switch (t.getTypeRoot()) {
            case CHAR:
            case VARCHAR:
                return str(((StringData) v).toString());
            case BOOLEAN:
            case TINYINT:
            case SMALLINT:
            case INTEGER:
            case DATE:
            case TIME_WITHOUT_TIME_ZONE:
            case BIGINT:
            case INTERVAL_YEAR_MONTH:
            case INTERVAL_DAY_TIME:
                return v.toString();
            case FLOAT:
                return num(((Float) v).doubleValue());
            case DOUBLE:
                return num((Double) v);
            case DECIMAL:
                return str(((DecimalData) v).toBigDecimal().toPlainString());
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                TimestampData ts = (TimestampData) v;
                return "[" + ts.getMillisecond() + ", " + ts.getNanoOfMillisecond() + "]";
            case BINARY:
            case VARBINARY:
                return str(Base64.getEncoder().encodeToString((byte[]) v));
            case ROW:
            case STRUCTURED_TYPE:  // a structured type's internal form is a RowData of its attributes
                return row((RowData) v, t.getChildren().toArray(new LogicalType[0]));
            case DISTINCT_TYPE:
                return logical(v, ((org.apache.flink.table.types.logical.DistinctType) t).getSourceType());
            case RAW:
                return str(Base64.getEncoder().encodeToString(raw(v, t)));
            case ARRAY:
                return array((ArrayData) v, t.getChildren().get(0));
            case MAP:
            case MULTISET: {
                MapData m = (MapData) v;
                LogicalType kt = t.getChildren().get(0);
                LogicalType vt = t.getTypeRoot().name().equals("MAP") ? t.getChildren().get(1) : new org.apache.flink.table.types.logical.IntType();
                ArrayData ks = m.keyArray();
                ArrayData vs = m.valueArray();
                ArrayData.ElementGetter kg = ArrayData.createElementGetter(kt);
                ArrayData.ElementGetter vg = ArrayData.createElementGetter(vt);
                List<String> pairs = new ArrayList<>();
                for (int i = 0; i < m.size(); i++) pairs.add("[" + logical(kg.getElementOrNull(ks, i), kt) + ", " + logical(vg.getElementOrNull(vs, i), vt) + "]");
                Collections.sort(pairs);
                return "[" + String.join(", ", pairs) + "]";
            }
            default:
                return "{\"class\": " + str(v.getClass().getName()) + ", \"string\": " + str(String.valueOf(v)) + "}";
        }
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static byte[] raw(Object v, LogicalType t) {
        TypeSerializer ser = ((org.apache.flink.table.types.logical.RawType) t).getTypeSerializer();
        return ((org.apache.flink.table.data.RawValueData) v).toBytes(ser);
    }

    static String array(ArrayData a, LogicalType t) throws Exception {
        ArrayData.ElementGetter g = ArrayData.createElementGetter(t);
        List<String> out = new ArrayList<>();
        for (int i = 0; i < a.size(); i++) out.add(logical(g.getElementOrNull(a, i), t));
        return "[" + String.join(", ", out) + "]";
    }

    static String row(RowData r, LogicalType[] types) throws Exception {
        List<String> out = new ArrayList<>();
        // isNullAt first: Flink 1.x's FieldGetter of a NOT NULL field skips it (and reads a processing-time field's
        // placeholder, written with its null bit set, as epoch 0), Flink 2.x's does not
        for (int i = 0; i < types.length; i++) {
            out.add(r.isNullAt(i) ? "null" : logical(RowData.createFieldGetter(types[i], i).getFieldOrNull(r), types[i]));
        }
        return "[" + String.join(", ", out) + "]";
    }

    /** A value as its serializer wrote it (see the class comment). */
    @SuppressWarnings({"rawtypes", "unchecked"})
    static String render(Object v, TypeSerializer<?> s) throws Exception {
        if (v == null) return "null";
        if (s instanceof RowDataSerializer) return row((RowData) v, (LogicalType[]) field(s, "types"));
        if (v instanceof TtlValue) {
            TypeSerializer<?>[] fs = (TypeSerializer<?>[]) field(s, "fieldSerializers");
            TtlValue<?> t = (TtlValue<?>) v;
            return "{\"ttl\": " + t.getLastAccessTimestamp() + ", \"v\": " + render(t.getUserValue(), fs[1]) + "}";
        }
        if (s instanceof ListSerializer) {
            List<String> out = new ArrayList<>();
            for (Object e : (List<?>) v) out.add(render(e, ((ListSerializer<?>) s).getElementSerializer()));
            return "[" + String.join(", ", out) + "]";
        }
        if (v instanceof Map) {
            TypeSerializer ks = (TypeSerializer) invoke(s, "getKeySerializer");
            TypeSerializer vs = (TypeSerializer) invoke(s, "getValueSerializer");
            List<String> pairs = new ArrayList<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) pairs.add("[" + render(e.getKey(), ks) + ", " + render(e.getValue(), vs) + "]");
            Collections.sort(pairs);
            return "[" + String.join(", ", pairs) + "]";
        }
        if (v instanceof Tuple && s instanceof TupleSerializerBase) {
            TypeSerializer<?>[] fs = ((TupleSerializerBase<?>) s).getFieldSerializers();
            List<String> out = new ArrayList<>();
            for (int i = 0; i < fs.length; i++) out.add(render(((Tuple) v).getField(i), fs[i]));
            return "[" + String.join(", ", out) + "]";
        }
        if (v instanceof VoidNamespace) return "null";
        if (v instanceof Boolean || v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) return v.toString();
        if (v instanceof Double || v instanceof Float) return num(((Number) v).doubleValue());
        if (v instanceof String) return str((String) v);
        if (v instanceof byte[]) return str(Base64.getEncoder().encodeToString((byte[]) v));
        if (v instanceof StringData) return str(v.toString());
        String cls = v.getClass().getName();
        if (cls.endsWith("sharedbuffer.EventId")) return "[" + invoke(v, "getId") + ", " + invoke(v, "getTimestamp") + "]";
        if (cls.endsWith("sharedbuffer.NodeId")) return "[" + render(invoke(v, "getEventId"), null) + ", " + str((String) invoke(v, "getPageName")) + "]";
        // the CEP operator's NFA state and shared buffer (MATCH_RECOGNIZE), field by field as their serializers write them
        if (cls.endsWith("nfa.DeweyNumber")) return java.util.Arrays.toString((int[]) field(v, "deweyNumber"));
        if (cls.endsWith("nfa.ComputationState")) {
            return "[" + str((String) invoke(v, "getCurrentStateName")) + ", " + render(invoke(v, "getPreviousBufferEntry"), null) + ", "
                    + render(invoke(v, "getVersion"), null) + ", " + invoke(v, "getStartTimestamp") + ", " + invoke(v, "getPreviousTimestamp")
                    + ", " + render(invoke(v, "getStartEventID"), null) + "]";
        }
        if (cls.endsWith("nfa.NFAState")) {
            List<String> parts = new ArrayList<>();
            for (String getter : new String[] {"getPartialMatches", "getCompletedMatches"}) {
                List<String> states = new ArrayList<>();
                for (Object c : (Collection<?>) invoke(v, getter)) states.add(render(c, null));
                parts.add("[" + String.join(", ", states) + "]");
            }
            return "[" + String.join(", ", parts) + "]";
        }
        if (cls.endsWith("sharedbuffer.SharedBufferEdge")) {
            return "[" + render(invoke(v, "getTarget"), null) + ", " + render(invoke(v, "getDeweyNumber"), null) + "]";
        }
        if (cls.endsWith("sharedbuffer.SharedBufferNode")) {
            List<String> edges = new ArrayList<>();
            for (Object e : (Collection<?>) invoke(v, "getEdges")) edges.add(render(e, null));
            return "[[" + String.join(", ", edges) + "]]";
        }
        if (cls.endsWith("sharedbuffer.Lockable") && s == null) return "[" + invoke(v, "getRefCounter") + ", " + render(invoke(v, "getElement"), null) + "]";
        if (cls.endsWith("sharedbuffer.Lockable")) {
            return "[" + invoke(v, "getRefCounter") + ", " + render(invoke(v, "getElement"), (TypeSerializer<?>) field(s, "elementSerializer")) + "]";
        }
        if (cls.endsWith(".TimeWindow")) return "[" + invoke(v, "getStart") + ", " + invoke(v, "getEnd") + "]";
        if (cls.endsWith(".CountWindow")) return invoke(v, "getId").toString();
        return "{\"class\": " + str(cls) + ", \"string\": " + str(String.valueOf(v)) + "}";
    }

    static String rendered(Object v, TypeSerializer<?> s) {
        try {
            return render(v, s);
        } catch (Exception e) {
            return "{\"error\": " + str(e.toString()) + "}";
        }
    }

    /** One state of a handle's header: its kind, serializers restored from their snapshots. */
    static final class StateInfo {
        final String name;
        final String kind;
        final TypeSerializer<Object> namespace;
        final TypeSerializer<Object> value;
        final String error;

        @SuppressWarnings("unchecked")
        StateInfo(StateMetaInfoSnapshot s) {
            name = s.getName();
            boolean timer = s.getBackendStateType() == StateMetaInfoSnapshot.BackendStateType.PRIORITY_QUEUE;
            kind = timer ? "TIMER" : s.getOption(StateMetaInfoSnapshot.CommonOptionsKeys.KEYED_STATE_TYPE);
            TypeSerializer<Object> ns = null;
            TypeSerializer<Object> val = null;
            String err = null;
            try {
                if (!timer) ns = (TypeSerializer<Object>) s.getTypeSerializerSnapshot(StateMetaInfoSnapshot.CommonSerializerKeys.NAMESPACE_SERIALIZER).restoreSerializer();
                val = (TypeSerializer<Object>) s.getTypeSerializerSnapshot(StateMetaInfoSnapshot.CommonSerializerKeys.VALUE_SERIALIZER).restoreSerializer();
            } catch (Throwable e) {
                err = e.toString();
            }
            namespace = ns;
            value = val;
            error = err;
        }
    }

    @SuppressWarnings("unchecked")
    static void dumpHandle(String op, int maxParallelism, KeyGroupsStateHandle h, BufferedWriter out, java.util.Set<String> headers) throws Exception {
        ClassLoader cl = SqlStateDump.class.getClassLoader();
        int prefix = CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix(maxParallelism);
        try (FSDataInputStream in = h.openInputStream()) {
            KeyedBackendSerializationProxy<Object> proxy = new KeyedBackendSerializationProxy<>(cl);
            proxy.read(new DataInputViewStreamWrapper(in));
            TypeSerializer<Object> keySer = proxy.getKeySerializerSnapshot().restoreSerializer();
            List<StateInfo> states = new ArrayList<>();
            for (StateMetaInfoSnapshot s : proxy.getStateMetaInfoSnapshots()) {
                StateInfo info = new StateInfo(s);
                states.add(info);
                if (headers.add(op + "/" + info.name)) {
                    StringBuilder sers = new StringBuilder("{\"KEY\": " + str(keySer.getClass().getName()));
                    for (Map.Entry<String, ?> e : s.getSerializerSnapshotsImmutable().entrySet()) {
                        sers.append(", ").append(str(e.getKey())).append(": ").append(str(e.getValue().getClass().getName()));
                    }
                    out.write("{\"header\": true, \"op\": " + str(op) + ", \"state\": " + str(info.name) + ", \"kind\": " + str(String.valueOf(info.kind))
                            + ", \"serializers\": " + sers + "}" + (info.error != null ? ", \"error\": " + str(info.error) : "") + "}\n");
                }
            }
            DataInputDeserializer keyIn = new DataInputDeserializer();
            DataInputDeserializer valueIn = new DataInputDeserializer();
            ListDelimitedSerializer lists = new ListDelimitedSerializer();
            for (org.apache.flink.api.java.tuple.Tuple2<Integer, Long> kgo : h.getGroupRangeOffsets()) {
                if (kgo.f1 == 0L) continue;
                in.seek(kgo.f1);
                InputStream kgIn = proxy.isUsingKeyGroupCompression() ? SnappyStreamCompressionDecorator.INSTANCE.decorateWithCompression(in) : in;
                DataInputViewStreamWrapper view = new DataInputViewStreamWrapper(kgIn);
                int stateId = 0xFFFF & view.readShort();
                while (stateId != 0xFFFF) {
                    byte[] key = org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer.INSTANCE.deserialize(view);
                    byte[] value = org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer.INSTANCE.deserialize(view);
                    int entryState = stateId;
                    if ((key[0] & 0x80) != 0) {  // the metadata-follows flag: the next state id (or the end) comes after
                        key[0] &= 0x7F;
                        stateId = 0xFFFF & view.readShort();
                    }
                    StateInfo s = states.get(entryState);
                    String head = "{\"op\": " + str(op) + ", \"state\": " + str(s.name) + ", \"kind\": " + str(String.valueOf(s.kind));
                    if (s.error != null || s.value == null) {
                        out.write(head + ", \"kg\": " + kgo.f0 + ", \"error\": " + str(String.valueOf(s.error)) + "}\n");
                        continue;
                    }
                    keyIn.setBuffer(key);
                    int kg = CompositeKeySerializationUtils.readKeyGroup(prefix, keyIn);
                    if (s.kind.equals("TIMER")) {
                        TimerHeapInternalTimer<Object, Object> t = (TimerHeapInternalTimer<Object, Object>) s.value.deserialize(keyIn);
                        TypeSerializer<?> tk = (TypeSerializer<?>) invoke(s.value, "getKeySerializer");
                        TypeSerializer<?> tn = (TypeSerializer<?>) invoke(s.value, "getNamespaceSerializer");
                        out.write(head + ", \"kg\": " + kg + ", \"ts\": " + t.getTimestamp() + ", \"key\": " + rendered(t.getKey(), tk)
                                + ", \"ns\": " + rendered(t.getNamespace(), tn) + "}\n");
                        continue;
                    }
                    boolean ambiguous = keySer.getLength() < 0 && s.namespace.getLength() < 0;
                    Object k = CompositeKeySerializationUtils.readKey(keySer, keyIn, ambiguous);
                    Object ns = CompositeKeySerializationUtils.readNamespace(s.namespace, keyIn, ambiguous);
                    String line = head + ", \"kg\": " + kg + ", \"key\": " + rendered(k, keySer) + ", \"ns\": " + rendered(ns, s.namespace);
                    valueIn.setBuffer(value);
                    if (s.kind.equals("MAP")) {
                        MapSerializer<Object, Object> ms = (MapSerializer<Object, Object>) (TypeSerializer<?>) s.value;
                        Object uk = ms.getKeySerializer().deserialize(keyIn);
                        Object uv = valueIn.readBoolean() ? null : ms.getValueSerializer().deserialize(valueIn);
                        line += ", \"uk\": " + rendered(uk, ms.getKeySerializer()) + ", \"value\": " + rendered(uv, ms.getValueSerializer());
                    } else if (s.kind.equals("LIST")) {
                        TypeSerializer<Object> es = ((ListSerializer<Object>) (TypeSerializer<?>) s.value).getElementSerializer();
                        List<Object> elements = lists.deserializeList(value, es);
                        List<String> rendered = new ArrayList<>();
                        for (Object e : elements) rendered.add(rendered(e, es));
                        line += ", \"value\": [" + String.join(", ", rendered) + "]";
                    } else {
                        line += ", \"value\": " + rendered(s.value.deserialize(valueIn), s.value);
                    }
                    out.write(line + "}\n");
                }
            }
        }
    }

    public static void main(String[] a) throws Exception {
        Path dir = Paths.get(a[0]).toAbsolutePath();
        Path meta = Files.isDirectory(dir) ? dir.resolve("_metadata") : dir;
        CheckpointMetadata md;
        try (DataInputStream in = new DataInputStream(Files.newInputStream(meta))) {
            md = Checkpoints.loadCheckpointMetadata(in, SqlStateDump.class.getClassLoader(), meta.getParent().toUri().toString());
        }
        java.util.Set<String> headers = new java.util.HashSet<>();
        try (BufferedWriter out = Files.newBufferedWriter(Paths.get(a[1]), StandardCharsets.UTF_8)) {
            for (OperatorState os : md.getOperatorStates()) {
                String op = os.getOperatorID().toHexString();
                for (OperatorSubtaskState sub : os.getStates()) {
                    Collection<KeyedStateHandle> handles = sub.getManagedKeyedState();
                    for (KeyedStateHandle h : handles) {
                        if (!(h instanceof KeyGroupsStateHandle)) throw new IllegalArgumentException(op + ": " + h.getClass().getName() + " is not a canonical savepoint's");
                        dumpHandle(op, os.getMaxParallelism(), (KeyGroupsStateHandle) h, out, headers);
                    }
                }
            }
        }
    }
}
