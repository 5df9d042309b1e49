import java.io.File;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.Partitioner;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.CheckpointException;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.BroadcastStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.ExceptionUtils;
import org.apache.flink.util.Collector;

/**
 * flinkstate's generator job: deterministic input, every keyed/operator state kind the
 * decoder must read, a savepoint per variant and a JSON-lines dump of what the job holds.
 *
 * Usage: StateGenJob OUT_DIR N VARIANT... where VARIANT is files | inline | snappy (CANONICAL
 * savepoints), native (a NATIVE savepoint of the HashMap backend, separate files) or checkpoint
 * (a retained HashMap checkpoint, snappy, separate files); rocksdb (a NATIVE savepoint of the
 * RocksDB backend) and rocksdb-checkpoint (a retained incremental RocksDB checkpoint); rocksdb-full and
 * rocksdb-full-checkpoint the same without incremental snapshots (Flink's default: SSTs in the private list).
 * Each savepoint variant writes OUT_DIR/VARIANT/savepoint/, the checkpoint variant the job's
 * checkpoint directory OUT_DIR/checkpoint/checkpoint/ (chk-N/, shared/, taskowned/, moved away
 * from where Flink wrote it), and each OUT_DIR/VARIANT/expected.jsonl.
 * Or: StateGenJob resave SRC OUT_DIR VARIANT... (Flink 1.19+): SRC, a snapshot of this job, restored and snapshotted
 * again as VARIANT with no new record (resave()), e.g. a RocksDB native savepoint of a canonical one.
 */
public class StateGenJob {
    /** maxParallelism (system property flinkstate.maxp): above 128 keys carry a 2-byte key-group prefix. */
    static final int MAX_PARALLELISM = Integer.getInteger("flinkstate.maxp", 128);
    /** maxParallelism of the window operator alone (system property flinkstate.window_maxp): each operator has its own. */
    static final int WINDOW_MAX_PARALLELISM = Integer.getInteger("flinkstate.window_maxp", MAX_PARALLELISM);
    static long n;
    /** Distinct Long keys, String keys and the input rate (records/s): system properties flinkstate.keys, .skeys, .rate. */
    static final long KEYS = Long.getLong("flinkstate.keys", 37L);
    static final long SKEYS = Long.getLong("flinkstate.skeys", 23L);
    static final long RATE = Long.getLong("flinkstate.rate", 2000L);
    /** Parallelism of the stateful operators (system property flinkstate.parallelism). */
    static final int PARALLELISM = Integer.getInteger("flinkstate.parallelism", 2);
    static final AtomicLong LONG_DONE = new AtomicLong();
    static final AtomicLong STRING_DONE = new AtomicLong();
    static final AtomicLong OPSTATE_DONE = new AtomicLong();
    static final AtomicLong BROADCAST_DONE = new AtomicLong();
    static final AtomicLong KRYO_DONE = new AtomicLong();
    static final AtomicLong WINDOW_DONE = new AtomicLong();
    /** Window mirror: "key/start" -> sum of the values the window operator's aggregate added. */
    static final Map<String, Long> WINDOW_SUMS = new ConcurrentHashMap<>();
    /** Distinct keys of the window operator; its event time is value * 100 ms, tumbling windows of 1 s. */
    static final long WKEYS = 5;
    /** line key -> JSON line; the mirror of what each state holds, read back from Flink. */
    static final Map<String, String> DUMP = new ConcurrentSkipListMap<>();

    /** A POJO value: public fields, sorted by name in Flink's PojoSerializer. */
    public static class Pojo {
        public long id;
        public String name;
        public Integer score;
        public Pojo() {}
    }

    /** An enum value: EnumSerializer writes its ordinal, its snapshot the constants' names. */
    public enum Color { RED, GREEN, BLUE }

    /** A generic type (no default constructor, private fields): not a POJO, so Flink serializes it with Kryo. */
    public static class Opaque {
        private long id;
        private String text;
        public Opaque(long id, String text) { this.id = id; this.text = text; }
    }

    static String arr(long[] a) {
        StringBuilder b = new StringBuilder("[");
        for (long x : a) { if (b.length() > 1) b.append(','); b.append(x); }
        return b.append(']').toString();
    }

    static String arr(String[] a) {
        if (a == null) return "null";
        StringBuilder b = new StringBuilder("[");
        for (String x : a) { if (b.length() > 1) b.append(','); b.append(q(x)); }
        return b.append(']').toString();
    }

    static String q(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String str(long i) {
        // ASCII, Latin-1, BMP and a surrogate pair, and one null every 13.
        if (i % 13 == 0) return null;
        String[] tails = {"", "\u00e9", "\u20ac", "\ud83d\ude00", ""};
        return "s" + i + tails[(int) (i % tails.length)];
    }

    /** Set by resave: no record runs, and the split list OpState re-snapshots is not mirrored (800 k lines at 10 M entries). */
    static boolean RESAVE;

    static void put(String id, String json) { if (!RESAVE) DUMP.put(id, json); }

    static String head(String op, String state, String kind, String key, int kg) {
        return "{\"operator\":" + q(op) + ",\"state\":" + q(state) + ",\"kind\":" + q(kind)
            + ",\"key\":" + key + ",\"key_group\":" + kg;
    }

    /** Long-keyed states: value Long, value Row, value Tuple2, value POJO, list Long, TTL value, event timers. */
    public static class LongKeyed extends KeyedProcessFunction<Long, Long, Long> {
        transient ValueState<Long> count;
        transient ValueState<Row> row;
        transient ValueState<Tuple2<Long, String>> tuple;
        transient ValueState<Pojo> pojo;
        transient ListState<Long> list;
        transient ValueState<Long> ttl;
        transient ValueState<Integer> ints;
        transient ValueState<Double> dbl;
        transient ValueState<Boolean> bool;
        transient ValueState<Short> shorts;
        transient ValueState<Byte> bytes1;
        transient ValueState<Float> floats;
        transient ValueState<Character> chars;
        transient ValueState<byte[]> blob;
        transient ListState<Long> ttlList;
        transient ValueState<Color> color;
        transient ValueState<long[]> longs;
        transient ValueState<double[]> doubles;
        transient ValueState<String[]> names;
        transient ValueState<String[]> strs;
        transient ValueState<Integer[]> boxed;
        transient ListState<Color> colors;
        transient ListState<String[]> arrList;
        transient MapState<Color, int[]> byColor;
        transient ValueState<Row> mixed;
        /** key -> {first before, last after} of ttlList.add(), the bracket of its elements' TTL timestamps. */
        static final Map<Long, long[]> TTL_LIST_BOUNDS = new ConcurrentHashMap<>();

        /** Declares the states (lazily on the first record: open()'s signature differs between 1.18 and 1.19+). */
        void init() {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
            row = getRuntimeContext().getState(new ValueStateDescriptor<>("row", Types.ROW(Types.LONG, Types.STRING)));
            tuple = getRuntimeContext().getState(new ValueStateDescriptor<>("tuple", Types.TUPLE(Types.LONG, Types.STRING)));
            pojo = getRuntimeContext().getState(new ValueStateDescriptor<>("pojo", Types.POJO(Pojo.class)));
            list = getRuntimeContext().getListState(new ListStateDescriptor<>("list", Types.LONG));
            ValueStateDescriptor<Long> ttlDesc = new ValueStateDescriptor<>("ttl", Types.LONG);
            ttlDesc.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
            ttl = getRuntimeContext().getState(ttlDesc);
            ints = getRuntimeContext().getState(new ValueStateDescriptor<>("ints", Types.INT));
            dbl = getRuntimeContext().getState(new ValueStateDescriptor<>("double", Types.DOUBLE));
            bool = getRuntimeContext().getState(new ValueStateDescriptor<>("bool", Types.BOOLEAN));
            shorts = getRuntimeContext().getState(new ValueStateDescriptor<>("shorts", Types.SHORT));
            bytes1 = getRuntimeContext().getState(new ValueStateDescriptor<>("bytes1", Types.BYTE));
            floats = getRuntimeContext().getState(new ValueStateDescriptor<>("floats", Types.FLOAT));
            chars = getRuntimeContext().getState(new ValueStateDescriptor<>("chars", Types.CHAR));
            blob = getRuntimeContext().getState(new ValueStateDescriptor<>("blob", byte[].class));
            ListStateDescriptor<Long> ttlListDesc = new ListStateDescriptor<>("ttl_list", Types.LONG);
            ttlListDesc.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
            ttlList = getRuntimeContext().getListState(ttlListDesc);
            color = getRuntimeContext().getState(new ValueStateDescriptor<>("color", Types.ENUM(Color.class)));
            longs = getRuntimeContext().getState(new ValueStateDescriptor<>("longs", PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO));
            doubles = getRuntimeContext().getState(new ValueStateDescriptor<>("doubles", PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO));
            names = getRuntimeContext().getState(new ValueStateDescriptor<>("names", Types.OBJECT_ARRAY(Types.STRING)));
            strs = getRuntimeContext().getState(new ValueStateDescriptor<>("strs", BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO));
            // Integer[]: BasicArrayTypeInfo, serialized by GenericArraySerializer (String[] gets StringArraySerializer)
            boxed = getRuntimeContext().getState(new ValueStateDescriptor<>("boxed", Types.OBJECT_ARRAY(Types.INT)));
            colors = getRuntimeContext().getListState(new ListStateDescriptor<>("colors", Types.ENUM(Color.class)));
            arrList = getRuntimeContext().getListState(new ListStateDescriptor<>("arr_list", Types.OBJECT_ARRAY(Types.STRING)));
            byColor = getRuntimeContext().getMapState(new MapStateDescriptor<>("by_color", Types.ENUM(Color.class), PrimitiveArrayTypeInfo.INT_PRIMITIVE_ARRAY_TYPE_INFO));
            mixed = getRuntimeContext().getState(new ValueStateDescriptor<>("mixed", Types.ROW(Types.ENUM(Color.class), PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO, Types.OBJECT_ARRAY(Types.STRING))));
        }

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (count == null) init();
            long key = ctx.getCurrentKey();
            int kg = KeyGroupRangeAssignment.assignToKeyGroup(key, MAX_PARALLELISM);
            String op = "long-keyed";
            String k = Long.toString(key);
            Long c = count.value();
            count.update(c == null ? v : c + v);
            put(op + "/count/" + k, head(op, "count", "value", k, kg) + ",\"value\":" + count.value() + "}");
            row.update(Row.of(v * 10, str(v)));
            Row r = row.value();
            put(op + "/row/" + k, head(op, "row", "value", k, kg) + ",\"value\":{\"f0\":" + r.getField(0) + ",\"f1\":" + q((String) r.getField(1)) + "}}");
            String ts = str(v + 1) == null ? "t" : str(v + 1);
            tuple.update(Tuple2.of(-v, ts));
            put(op + "/tuple/" + k, head(op, "tuple", "value", k, kg) + ",\"value\":{\"f0\":" + tuple.value().f0 + ",\"f1\":" + q(tuple.value().f1) + "}}");
            if (v % 11 != 3) {
                Pojo p = new Pojo();
                p.id = v;
                p.name = str(v + 2);
                p.score = v % 4 == 0 ? null : (int) (v * 3);
                pojo.update(p);
                put(op + "/pojo/" + k, head(op, "pojo", "value", k, kg) + ",\"value\":{\"id\":" + p.id + ",\"name\":" + q(p.name) + ",\"score\":" + p.score + "}}");
            }
            list.add(v);
            StringBuilder lb = new StringBuilder("[");
            for (Long e : list.get()) { if (lb.length() > 1) lb.append(','); lb.append(e); }
            put(op + "/list/" + k, head(op, "list", "list", k, kg) + ",\"value\":" + lb + "]}");
            long before = System.currentTimeMillis();
            ttl.update(v * 7);
            long after = System.currentTimeMillis();
            put(op + "/ttl/" + k, head(op, "ttl", "value", k, kg) + ",\"value\":" + ttl.value() + ",\"ttl_min\":" + before + ",\"ttl_max\":" + after + "}");
            ints.update((int) (v * 1000003L));
            put(op + "/ints/" + k, head(op, "ints", "value", k, kg) + ",\"value\":" + ints.value() + "}");
            dbl.update(v / 8.0 - 3.25);
            put(op + "/double/" + k, head(op, "double", "value", k, kg) + ",\"value\":" + dbl.value() + "}");
            bool.update(v % 2 == 0);
            put(op + "/bool/" + k, head(op, "bool", "value", k, kg) + ",\"value\":" + bool.value() + "}");
            shorts.update((short) (v * 1000));
            put(op + "/shorts/" + k, head(op, "shorts", "value", k, kg) + ",\"value\":" + shorts.value() + "}");
            bytes1.update((byte) (v * 7));
            put(op + "/bytes1/" + k, head(op, "bytes1", "value", k, kg) + ",\"value\":" + bytes1.value() + "}");
            floats.update(v / 4.0f - 10);
            put(op + "/floats/" + k, head(op, "floats", "value", k, kg) + ",\"value\":" + floats.value() + "}");
            chars.update(v % 5 == 0 ? '\u00e9' : (char) ('A' + v % 26));
            put(op + "/chars/" + k, head(op, "chars", "value", k, kg) + ",\"value\":" + q(String.valueOf(chars.value())) + "}");
            byte[] bl = new byte[(int) (v % 4)];
            for (int i = 0; i < bl.length; i++) bl[i] = (byte) (v + i * 100);
            blob.update(bl);
            StringBuilder hex = new StringBuilder();
            for (byte x : blob.value()) hex.append(String.format("%02x", x));
            put(op + "/blob/" + k, head(op, "blob", "value", k, kg) + ",\"value\":" + q(hex.toString()) + "}");
            if (v % 3 == 0) {
                long b0 = System.currentTimeMillis();
                ttlList.add(v);
                long b1 = System.currentTimeMillis();
                long[] bounds = TTL_LIST_BOUNDS.computeIfAbsent(key, x -> new long[] {b0, b1});
                bounds[1] = b1;
                StringBuilder tl = new StringBuilder("[");
                for (Long e : ttlList.get()) { if (tl.length() > 1) tl.append(','); tl.append(e); }
                put(op + "/ttl_list/" + k, head(op, "ttl_list", "list", k, kg) + ",\"value\":" + tl + "],\"ttl_min\":" + bounds[0] + ",\"ttl_max\":" + bounds[1] + "}");
            }
            Color cv = Color.values()[(int) (v % 3)];
            color.update(cv);
            put(op + "/color/" + k, head(op, "color", "value", k, kg) + ",\"value\":" + q(color.value().name()) + "}");
            long[] la = new long[(int) (v % 4)];
            for (int i = 0; i < la.length; i++) la[i] = v * 1_000_000_007L + i;
            longs.update(la);
            put(op + "/longs/" + k, head(op, "longs", "value", k, kg) + ",\"value\":" + arr(longs.value()) + "}");
            double[] da = {v / 8.0, -v * 0.5};
            doubles.update(da);
            put(op + "/doubles/" + k, head(op, "doubles", "value", k, kg) + ",\"value\":[" + doubles.value()[0] + "," + doubles.value()[1] + "]}");
            String[] na = {str(v), "n" + v, str(v + 13)};
            names.update(na);
            put(op + "/names/" + k, head(op, "names", "value", k, kg) + ",\"value\":" + arr(names.value()) + "}");
            String[] sa = new String[(int) (v % 3)];
            for (int i = 0; i < sa.length; i++) sa[i] = i == 1 ? null : str(v + i + 1) == null ? "x" : str(v + i + 1);
            strs.update(sa);
            put(op + "/strs/" + k, head(op, "strs", "value", k, kg) + ",\"value\":" + arr(strs.value()) + "}");
            Integer[] ba = {(int) (long) v, v % 2 == 0 ? null : (int) (v * 3), -(int) (long) v};
            boxed.update(ba);
            Integer[] bg = boxed.value();
            put(op + "/boxed/" + k, head(op, "boxed", "value", k, kg) + ",\"value\":[" + bg[0] + "," + bg[1] + "," + bg[2] + "]}");
            colors.add(Color.values()[(int) ((v / 2) % 3)]);
            StringBuilder cb = new StringBuilder("[");
            for (Color e : colors.get()) { if (cb.length() > 1) cb.append(','); cb.append(q(e.name())); }
            put(op + "/colors/" + k, head(op, "colors", "list", k, kg) + ",\"value\":" + cb + "]}");
            if (v % 2 == 0) {
                arrList.add(new String[] {"a" + v, str(v)});
                StringBuilder ab = new StringBuilder("[");
                for (String[] e : arrList.get()) { if (ab.length() > 1) ab.append(','); ab.append(arr(e)); }
                put(op + "/arr_list/" + k, head(op, "arr_list", "list", k, kg) + ",\"value\":" + ab + "]}");
            }
            int[] ia = {(int) (long) v, (int) (v * v)};
            byColor.put(cv, ia);
            int[] got = byColor.get(cv);
            put(op + "/by_color/" + k + "/" + cv.name(), head(op, "by_color", "map", k, kg) + ",\"user_key\":" + q(cv.name()) + ",\"value\":[" + got[0] + "," + got[1] + "]}");
            Row mx = Row.of(v % 5 == 0 ? null : cv, la, v % 7 == 0 ? null : na);
            mixed.update(mx);
            Row mr = mixed.value();
            put(op + "/mixed/" + k, head(op, "mixed", "value", k, kg) + ",\"value\":{\"f0\":" + (mr.getField(0) == null ? "null" : q(((Color) mr.getField(0)).name()))
                + ",\"f1\":" + arr((long[]) mr.getField(1)) + ",\"f2\":" + arr((String[]) mr.getField(2)) + "}}");
            long t = 1_000_000_000_000L + v * 1000;
            ctx.timerService().registerEventTimeTimer(t);
            put(op + "/timer/" + k + "/" + t, "{\"operator\":" + q(op) + ",\"service\":\"event_user-timers\",\"kind\":\"timer\",\"key\":" + k + ",\"key_group\":" + kg + ",\"timestamp\":" + t + "}");
            LONG_DONE.incrementAndGet();
        }
    }

    /** String-keyed states: value String, map String -> Long. */
    public static class StringKeyed extends KeyedProcessFunction<String, Long, Long> {
        transient ValueState<String> last;
        transient MapState<String, Long> map;
        transient MapState<String, String> ttlMap;

        /** Declares the states (lazily on the first record: open()'s signature differs between 1.18 and 1.19+). */
        void init() {
            last = getRuntimeContext().getState(new ValueStateDescriptor<>("last", Types.STRING));
            map = getRuntimeContext().getMapState(new MapStateDescriptor<>("map", Types.STRING, Types.LONG));
            MapStateDescriptor<String, String> ttlMapDesc = new MapStateDescriptor<>("ttl_map", Types.STRING, Types.STRING);
            ttlMapDesc.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
            ttlMap = getRuntimeContext().getMapState(ttlMapDesc);
        }

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (last == null) init();
            String key = ctx.getCurrentKey();
            int kg = KeyGroupRangeAssignment.assignToKeyGroup(key, MAX_PARALLELISM);
            String op = "string-keyed";
            String s = str(v);
            if (s != null) {
                last.update(s);
                put(op + "/last/" + key, head(op, "last", "value", q(key), kg) + ",\"value\":" + q(last.value()) + "}");
            }
            String uk = "u" + (v % 3);
            map.put(uk, v * 31 - 500);  // no null values: the heap backend cannot write them to a canonical savepoint
            put(op + "/map/" + key + "/" + uk, head(op, "map", "map", q(key), kg) + ",\"user_key\":" + q(uk) + ",\"value\":" + map.get(uk) + "}");
            String tk = "t" + (v % 2);
            long m0 = System.currentTimeMillis();
            ttlMap.put(tk, "v" + v);
            long m1 = System.currentTimeMillis();
            put(op + "/ttl_map/" + key + "/" + tk, head(op, "ttl_map", "map", q(key), kg) + ",\"user_key\":" + q(tk) + ",\"value\":" + q(ttlMap.get(tk)) + ",\"ttl_min\":" + m0 + ",\"ttl_max\":" + m1 + "}");
            STRING_DONE.incrementAndGet();
        }
    }

    /** A Kryo-serialized value (a generic type) next to a Long value: operator "kryo". */
    public static class KryoKeyed extends KeyedProcessFunction<Long, Long, Long> {
        transient ValueState<Opaque> opaque;
        transient ValueState<Long> seen;

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (opaque == null) {
                opaque = getRuntimeContext().getState(new ValueStateDescriptor<>("opaque", new GenericTypeInfo<>(Opaque.class)));
                seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.LONG));
            }
            long key = ctx.getCurrentKey();
            int kg = KeyGroupRangeAssignment.assignToKeyGroup(key, MAX_PARALLELISM);
            opaque.update(new Opaque(v, "kryo-" + v));
            seen.update(v);
            String k = Long.toString(key);
            put("kryo/opaque/" + k, head("kryo", "opaque", "raw", k, kg) + ",\"value\":{\"id\":" + v + ",\"text\":" + q("kryo-" + v) + "}}");
            put("kryo/seen/" + k, head("kryo", "seen", "value", k, kg) + ",\"value\":" + v + "}");
            KRYO_DONE.incrementAndGet();
        }
    }

    /** The window operator's aggregate: a sum; it records what it adds per key and window (the dump's mirror). */
    public static class WindowSum implements AggregateFunction<Long, Long, Long> {
        @Override public Long createAccumulator() { return 0L; }
        @Override public Long add(Long v, Long acc) {
            long start = v * 100 / 1000 * 1000;
            WINDOW_SUMS.merge((v % WKEYS) + "/" + start, v, Long::sum);
            WINDOW_DONE.incrementAndGet();
            return acc + v;
        }
        @Override public Long getResult(Long acc) { return acc; }
        @Override public Long merge(Long a, Long b) { return a + b; }
    }

    /** Operator state: a split list and a union list, both written in snapshotState. */
    public static class OpState extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        transient ListState<Long> split;
        transient ListState<String> union;
        final List<Long> seen = new ArrayList<>();

        @Override
        public Long map(Long v) {
            seen.add(v);
            OPSTATE_DONE.incrementAndGet();
            return v;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            int sub = Compat.subtask(getRuntimeContext());
            split.update(seen);
            List<String> u = new ArrayList<>();
            for (int i = 0; i < 3; i++) u.add("sub" + sub + "-" + i + "-" + seen.size());
            union.update(u);
            int i = 0;
            for (Long e : split.get()) {
                put(String.format("opstate/split/%d/%06d", sub, i++), "{\"operator\":\"opstate\",\"state\":\"split\",\"kind\":\"split\",\"subtask\":" + sub + ",\"value\":" + e + "}");
            }
            i = 0;
            for (String e : union.get()) {
                put(String.format("opstate/union/%d/%06d", sub, i++), "{\"operator\":\"opstate\",\"state\":\"union\",\"kind\":\"union\",\"subtask\":" + sub + ",\"value\":" + q(e) + "}");
            }
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            split = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("split", Types.LONG));
            union = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union", Types.STRING));
            // Restored (resave): the next snapshot writes the same split list and union entries (they count `seen`).
            if (ctx.isRestored()) for (Long e : split.get()) seen.add(e);
        }
    }

    static final MapStateDescriptor<String, Long> BCAST = new MapStateDescriptor<>("bcast", Types.STRING, Types.LONG);

    /** Broadcast state String -> Long, the same on every subtask. */
    public static class Bcast extends BroadcastProcessFunction<Long, Long, Long> {
        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {}

        @Override
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            int sub = Compat.subtask(getRuntimeContext());
            BroadcastState<String, Long> st = ctx.getBroadcastState(BCAST);
            String k = "b" + (v % 5);
            st.put(k, v);
            put("bcast/" + sub + "/" + k, "{\"operator\":\"bcast\",\"state\":\"bcast\",\"kind\":\"broadcast\",\"subtask\":" + sub + ",\"user_key\":" + q(k) + ",\"value\":" + st.get(k) + "}");
            BROADCAST_DONE.incrementAndGet();
        }
    }

    /** The Flink settings of a variant: state backend, incremental snapshots, inline threshold, compression, periodic
     * retained checkpoints (the checkpoint variants) and file-system checkpoint storage under out/checkpoints. */
    static Configuration config(Path out, String variant) {
        Configuration conf = new Configuration();
        boolean rocks = variant.startsWith("rocksdb");
        // Each setting under its 2.x key and its 1.x key (Flink renamed them in 1.20 and 2.0; unknown keys are ignored).
        Compat.set(conf, rocks ? "rocksdb" : "hashmap", "state.backend.type", "state.backend");
        // rocksdb-full*: Flink's default, non-incremental snapshots (every SST in the handle's private list).
        if (rocks) Compat.set(conf, variant.startsWith("rocksdb-full") ? "false" : "true", "execution.checkpointing.incremental", "state.backend.incremental");
        Compat.set(conf, variant.equals("inline") ? "20kb" : "0b", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        boolean checkpoint = variant.endsWith("checkpoint");
        conf.setString("execution.checkpointing.snapshot-compression", variant.equals("snappy") || checkpoint ? "true" : "false");
        if (checkpoint) {
            conf.setString("execution.checkpointing.interval", "300ms");
            conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
            // Two completed checkpoints are kept (incremental ones then share SST files), not one by chance.
            Compat.set(conf, "2", "execution.checkpointing.num-retained", "state.checkpoints.num-retained");
        }
        conf.setString("rest.bind-port", "0");
        // Extra Flink settings (system property flinkstate.conf, "key=value;key=value"), e.g. file-merging checkpoints.
        for (String kv : System.getProperty("flinkstate.conf", "").split(";")) {
            int eq = kv.indexOf('=');
            if (eq > 0) conf.setString(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
        }
        // File-system checkpoint storage: the JobManager storage would inline everything.
        Compat.set(conf, "filesystem", "execution.checkpointing.storage", "state.checkpoint-storage");
        Compat.set(conf, out.resolve("checkpoints").toUri().toString(), "execution.checkpointing.dir", "state.checkpoints.dir");
        return conf;
    }

    /** The Kryo state: in HashMap native snapshots its values are not length-framed, so nothing of its operator's
     * subtask could be read; there only with system property flinkstate.kryo=true (the test of that error). */
    static boolean withKryo(String variant) {
        return !(variant.equals("native") || variant.equals("checkpoint")) || Boolean.getBoolean("flinkstate.kryo");
    }

    /** The job's operators (uids, parallelism, max parallelism and state declarations) reading `all`, the source. */
    static void topology(StreamExecutionEnvironment env, DataStream<Long> all, boolean kryo) {
        env.setParallelism(PARALLELISM);
        env.setMaxParallelism(MAX_PARALLELISM);
        DataStream<Long> real = all.filter(v -> v >= 0).setParallelism(1).uid("real").name("real");
        Compat.discard(real.keyBy(v -> v % KEYS, Types.LONG).process(new LongKeyed()).uid("long-keyed").name("long-keyed"));
        Compat.discard(real.keyBy(v -> "k" + (v % SKEYS), Types.STRING).process(new StringKeyed()).uid("string-keyed").name("string-keyed"));
        Partitioner<Long> byParity = (Long key, int nPartitions) -> (int) (key % nPartitions);
        Compat.discard(real.partitionCustom(byParity, v -> v).map(new OpState()).uid("opstate").name("opstate"));
        if (kryo) Compat.discard(real.keyBy(v -> v % 7, Types.LONG).process(new KryoKeyed()).uid("kryo").name("kryo"));
        // Event time value * 100 ms and no watermarks: no window fires, so every window's contents and timer stay in state.
        DataStream<Long> timed = real.assignTimestampsAndWatermarks(WatermarkStrategy.<Long>noWatermarks().withTimestampAssigner((v, t) -> v * 100))
            .setParallelism(1).uid("timed").name("timed");
        Compat.discard(timed.keyBy(v -> v % WKEYS, Types.LONG).window(Compat.tumbling(1000)).aggregate(new WindowSum(), Types.LONG, Types.LONG)
            .uid("window").name("window").setMaxParallelism(WINDOW_MAX_PARALLELISM));
        BroadcastStream<Long> b = real.broadcast(BCAST);
        Compat.discard(real.connect(b).process(new Bcast()).uid("bcast").name("bcast"));
    }

    static void runVariant(Path out, String variant) throws Exception {
        DUMP.clear();
        LongKeyed.TTL_LIST_BOUNDS.clear();
        LONG_DONE.set(0); STRING_DONE.set(0); OPSTATE_DONE.set(0); BROADCAST_DONE.set(0); KRYO_DONE.set(0); WINDOW_DONE.set(0);
        WINDOW_SUMS.clear();
        Configuration conf = config(out, variant);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        // Index < n: a real record (its value); later indices: -1 fillers, dropped, so the job never finishes.
        boolean kryo = withKryo(variant);
        topology(env, Compat.generator(env, n, RATE), kryo);

        JobClient client = env.executeAsync("flinkstate-gen-" + variant);
        long deadline = System.currentTimeMillis() + 120_000 + 1000 * n / RATE;
        while (LONG_DONE.get() < n || STRING_DONE.get() < n || OPSTATE_DONE.get() < n || BROADCAST_DONE.get() < PARALLELISM * n
               || (kryo && KRYO_DONE.get() < n) || WINDOW_DONE.get() < n) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("records not processed in time");
            Thread.sleep(50);
        }
        for (Map.Entry<String, Long> e : WINDOW_SUMS.entrySet()) {
            String[] parts = e.getKey().split("/");
            long key = Long.parseLong(parts[0]);
            long start = Long.parseLong(parts[1]);
            int kg = KeyGroupRangeAssignment.assignToKeyGroup(key, WINDOW_MAX_PARALLELISM);
            String ns = ",\"namespace\":{\"start\":" + start + ",\"end\":" + (start + 1000) + "}";
            put("window/contents/" + e.getKey(), head("window", "window-contents", "value", parts[0], kg) + ns + ",\"value\":" + e.getValue() + "}");
            put("window/timer/" + e.getKey(), "{\"operator\":\"window\",\"service\":\"event_window-timers\",\"kind\":\"timer\",\"key\":" + parts[0]
                + ",\"key_group\":" + kg + ns + ",\"timestamp\":" + (start + 999) + "}");
        }
        int want = newestCheckpoint(out.resolve("checkpoints").resolve(client.getJobID().toString()), false) + 2;
        // A checkpoint variant: a checkpoint triggered after the last record (two past the newest chk-N seen now).
        Path target = snapshot(client, out, variant, deadline + 60_000, jobDir -> newestCheckpoint(jobDir, true) >= want);
        try (PrintWriter w = new PrintWriter(out.resolve(variant).resolve("expected.jsonl").toFile(), StandardCharsets.UTF_8)) {
            for (String line : DUMP.values()) w.println(line);
        }
        deleteTree(out.resolve("checkpoints"));
        System.out.println("wrote " + target + " (" + DUMP.size() + " dump lines)");
    }

    /** Whether the job's checkpoint directory holds what a checkpoint variant waits for. */
    interface CheckpointsReady {
        boolean test(Path jobDir) throws Exception;
    }

    /**
     * Takes the variant's snapshot of the running job, then cancels it: OUT/VARIANT/savepoint (CANONICAL; NATIVE for
     * native and rocksdb*), or for a checkpoint variant, once `ready` holds, the job's retained checkpoint directory
     * moved to OUT/VARIANT/checkpoint. A savepoint is retried while the job's tasks are still restoring (Flink declines
     * it until every task runs).
     */
    static Path snapshot(JobClient client, Path out, String variant, long deadline, CheckpointsReady ready) throws Exception {
        Path dir = out.resolve(variant);
        Files.createDirectories(dir);
        Path target;
        if (variant.endsWith("checkpoint")) {
            Path jobDir = out.resolve("checkpoints").resolve(client.getJobID().toString());
            while (!ready.test(jobDir)) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no checkpoint in time");
                Thread.sleep(50);
            }
            client.cancel().get();
            Thread.sleep(1000);  // let a checkpoint cut short by the cancel stop writing
            try (var list = Files.list(jobDir)) {  // a checkpoint in progress at cancel leaves a chk-N without _metadata
                for (Path p : (Iterable<Path>) list::iterator) {
                    if (p.getFileName().toString().startsWith("chk-") && !Files.exists(p.resolve("_metadata"))) deleteTree(p);
                }
            }
            target = dir.resolve("checkpoint");
            Files.move(jobDir, target, StandardCopyOption.REPLACE_EXISTING);
        } else {
            Path tmp = out.resolve(variant + "-tmp");
            SavepointFormatType format = variant.equals("native") || variant.startsWith("rocksdb") ? SavepointFormatType.NATIVE : SavepointFormatType.CANONICAL;
            String sp;
            while (true) {
                try {
                    sp = client.triggerSavepoint(tmp.toUri().toString(), format).get();
                    break;
                } catch (ExecutionException e) {
                    // Declined (a CheckpointException) while tasks restore; anything else, or past the deadline, fails.
                    if (!ExceptionUtils.findThrowable(e, CheckpointException.class).isPresent() || System.currentTimeMillis() > deadline) throw e;
                    Thread.sleep(500);
                }
            }
            client.cancel().get();
            target = dir.resolve("savepoint");
            Files.move(Paths.get(new java.net.URI(sp)), target, StandardCopyOption.REPLACE_EXISTING);
            Files.delete(tmp);
        }
        return target;
    }

    /**
     * resave SRC OUT VARIANT: restores SRC (a savepoint or retained checkpoint of this job with the Kryo operator, any
     * format) on the variant's backend and, with no new record (Compat.idle holds the source still), takes the variant's
     * snapshot (snapshot()) as soon as every task runs: the same state in another format, e.g. a RocksDB native savepoint
     * (rocksdb) or a retained incremental RocksDB checkpoint (rocksdb-checkpoint) of a 10 M-entry canonical savepoint in
     * minutes, where generating it record by record on RocksDB takes over an hour. No expected.jsonl: nothing ran.
     */
    static void resave(Path src, Path out, String variant) throws Exception {
        RESAVE = true;
        long t0 = System.nanoTime();
        Configuration conf = config(out, variant);
        Compat.set(conf, src.toUri().toString(), "execution.state-recovery.path", "execution.savepoint.path");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        topology(env, Compat.idle(env), true);
        JobClient client = env.executeAsync("flinkstate-resave-" + variant);
        long deadline = System.currentTimeMillis() + 1000 * Long.getLong("flinkstate.resave_timeout_s", 3600L);
        // Two completed checkpoints after the restore (ids go on from SRC's), so an incremental second one shares SSTs.
        Path target = snapshot(client, out, variant, deadline, jobDir -> completedCheckpoints(jobDir) >= 2);
        deleteTree(out.resolve("checkpoints"));
        System.out.printf("resaved %s as %s in %.1f s%n", src, target, (System.nanoTime() - t0) / 1e9);
    }

    /** How many chk-N directories of jobDir are completed (hold a _metadata). */
    static int completedCheckpoints(Path jobDir) throws Exception {
        if (!Files.isDirectory(jobDir)) return 0;
        int n = 0;
        try (var list = Files.list(jobDir)) {
            for (Path p : (Iterable<Path>) list::iterator) {
                if (p.getFileName().toString().startsWith("chk-") && Files.exists(p.resolve("_metadata"))) n++;
            }
        }
        return n;
    }

    /** The highest N of the chk-N directories in jobDir (with a _metadata if completed), -1 if none. */
    static int newestCheckpoint(Path jobDir, boolean completed) throws Exception {
        int best = -1;
        if (!Files.isDirectory(jobDir)) return best;
        try (var list = Files.list(jobDir)) {
            for (Path p : (Iterable<Path>) list::iterator) {
                String name = p.getFileName().toString();
                if (!name.startsWith("chk-") || (completed && !Files.exists(p.resolve("_metadata")))) continue;
                best = Math.max(best, Integer.parseInt(name.substring(4)));
            }
        }
        return best;
    }

    static void deleteTree(Path p) throws Exception {
        if (!Files.exists(p)) return;
        try (var walk = Files.walk(p)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(q -> q.toFile().delete());
        }
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("resave")) {
            for (int i = 3; i < args.length; i++) resave(Paths.get(args[1]).toAbsolutePath(), Paths.get(args[2]).toAbsolutePath(), args[i]);
            System.exit(0);
        }
        Path out = Paths.get(args[0]).toAbsolutePath();
        n = Long.parseLong(args[1]);
        for (int i = 2; i < args.length; i++) runVariant(out, args[i]);
        System.exit(0);
    }
}
