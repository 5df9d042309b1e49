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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.functions.Partitioner;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.KeyedStateFunction;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.BroadcastStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The serializer shapes an export must write back as they were (flinkjobs/README.md, tests/flinkstate/flink/test_export_shapes.py):
 * Tuple, POJO (nested, with an enum field), enum and Row values, in keyed, operator list, union and broadcast state, next to
 * Kryo values and map values.
 *
 * Operators (uid: parallelism, key, states):
 * - "split" (2, records partitioned by parity): operator list state "pairs" of Tuple2(String, Long) (("sum", s) and
 *   ("max", m) per subtask) and union state "marks" of the POJO Mark(sub, note, color);
 * - "shapes" (2), String key "k" + v % 11: value "pair" Tuple2(Long, String), value "point" POJO Point(x, y, color,
 *   inner POJO Inner(label, weight)), value "color" enum Color, value "row" Row(Long, String, Color), list "history" of
 *   Tuple3(Long, String, Boolean) (the last 3), map "by_color" Color -> Point, map "tags" String -> Row(Integer, String),
 *   value "seen" Long with TTL, value "profile" of a Kryo-serialized type, map "blobs" String -> that type, and an
 *   event-time timer per record;
 * - "rules" (2), Long key v % 7 with a broadcast side: broadcast state "rules" Color (enum key) -> Rule (POJO value) from
 *   records below 8, and keyed value "hits".
 *
 * gen OUT N BACKEND [canonical] [native]: records 0..N-1 on BACKEND (hashmap|rocksdb), then the listed savepoints
 * (OUT/canonical/savepoint, OUT/native/savepoint) and OUT/dump.txt, the state the job held as lines.
 *
 * restore SAVEPOINT OUT_FILE BACKEND P: restores every operator at parallelism P and writes the same lines from the
 * restored state (keyed state by applyToKeyedState, timers as they fire at the final watermark, operator, union and
 * broadcast state as restored, without subtask index).
 */
public class ShapesJob {
    static final int RATE = 2000;
    static final ConcurrentHashMap<String, String> MODEL = new ConcurrentHashMap<>();
    static final ConcurrentSkipListSet<String> DUMP = new ConcurrentSkipListSet<>();
    static final AtomicLong SHAPES = new AtomicLong(), RULES = new AtomicLong(), SPLIT = new AtomicLong(), BCAST = new AtomicLong();

    public enum Color { RED, GREEN, BLUE, BLACK }

    static Color color(long v) { return Color.values()[(int) (v % 4)]; }

    /** A nested POJO. */
    public static class Inner {
        public String label;
        public double weight;
        public Inner() {}
        Inner(String label, double weight) { this.label = label; this.weight = weight; }
        @Override
        public String toString() { return "Inner(" + label + "," + weight + ")"; }
    }

    /** A POJO with an enum field and a nested POJO. */
    public static class Point {
        public long x;
        public long y;
        public Color color;
        public Inner inner;
        public Point() {}
        Point(long x, long y, Color color, Inner inner) { this.x = x; this.y = y; this.color = color; this.inner = inner; }
        @Override
        public String toString() { return "Point(" + x + "," + y + "," + color + "," + inner + ")"; }
    }

    /** The broadcast state's value. */
    public static class Rule {
        public String name;
        public long threshold;
        public Color color;
        public Rule() {}
        Rule(String name, long threshold, Color color) { this.name = name; this.threshold = threshold; this.color = color; }
        @Override
        public String toString() { return "Rule(" + name + "," + threshold + "," + color + ")"; }
    }

    /** The union state's element. */
    public static class Mark {
        public int sub;
        public String note;
        public Color color;
        public Mark() {}
        Mark(int sub, String note, Color color) { this.sub = sub; this.note = note; this.color = color; }
        @Override
        public String toString() { return "Mark(" + sub + "," + note + "," + color + ")"; }
    }

    /**
     * Not a POJO (private fields, no default constructor): serialized with Kryo, its LocalDate too (Kryo 2 in Flink 1.x
     * writes a LocalDate's fields, Kryo 5 in 2.x its own java.time serializer's bytes).
     */
    public static class Profile {
        private long last;
        private String user;
        private java.time.LocalDate day;
        public Profile(long last, String user) { this.last = last; this.user = user; this.day = java.time.LocalDate.ofEpochDay(19000 + last); }
        @Override
        public String toString() { return "Profile(" + last + "," + user + "," + day + ")"; }
    }

    static final TypeInformation<Color> COLOR = Types.ENUM(Color.class);
    static final TypeInformation<Row> ROW = Types.ROW(Types.LONG, Types.STRING, COLOR);
    static final TypeInformation<Row> TAG = Types.ROW(Types.INT, Types.STRING);
    static final MapStateDescriptor<Color, Rule> RULE_STATE = new MapStateDescriptor<>("rules", COLOR, Types.POJO(Rule.class));
    static final MapStateDescriptor<String, Long> TRIGGER = new MapStateDescriptor<>("dump-trigger", Types.STRING, Types.LONG);

    static List<StateDescriptor<?, ?>> shapeStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new ValueStateDescriptor<>("pair", Types.TUPLE(Types.LONG, Types.STRING)));
        l.add(new ValueStateDescriptor<>("point", Types.POJO(Point.class)));
        l.add(new ValueStateDescriptor<>("color", COLOR));
        l.add(new ValueStateDescriptor<>("row", ROW));
        l.add(new ListStateDescriptor<>("history", Types.TUPLE(Types.LONG, Types.STRING, Types.BOOLEAN)));
        l.add(new MapStateDescriptor<>("by_color", COLOR, Types.POJO(Point.class)));
        l.add(new MapStateDescriptor<>("tags", Types.STRING, TAG));
        ValueStateDescriptor<Long> seen = new ValueStateDescriptor<>("seen", Types.LONG);
        seen.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
        l.add(seen);
        l.add(new ValueStateDescriptor<>("profile", new GenericTypeInfo<>(Profile.class)));
        l.add(new MapStateDescriptor<>("blobs", Types.STRING, new GenericTypeInfo<>(Profile.class)));
        return l;
    }

    static List<StateDescriptor<?, ?>> ruleStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new ValueStateDescriptor<>("hits", Types.LONG));
        return l;
    }

    static void model(String line, String value) { MODEL.put(line, line + " " + value); }

    /** "shapes": one state of each shape, updated on every record. */
    public static class Shapes extends KeyedProcessFunction<String, Long, Long> {
        transient ValueState<Tuple2<Long, String>> pair;
        transient ValueState<Point> point;
        transient ValueState<Color> color;
        transient ValueState<Row> row;
        transient ListState<Tuple3<Long, String, Boolean>> history;
        transient MapState<Color, Point> byColor;
        transient MapState<String, Row> tags;
        transient ValueState<Long> seen;
        transient ValueState<Profile> profile;
        transient MapState<String, Profile> blobs;

        @Override
        @SuppressWarnings("unchecked")
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (pair == null) {  // declared on the first record (open(OpenContext) exists from 1.19 only)
                List<StateDescriptor<?, ?>> d = shapeStates();
                pair = getRuntimeContext().getState((ValueStateDescriptor<Tuple2<Long, String>>) d.get(0));
                point = getRuntimeContext().getState((ValueStateDescriptor<Point>) d.get(1));
                color = getRuntimeContext().getState((ValueStateDescriptor<Color>) d.get(2));
                row = getRuntimeContext().getState((ValueStateDescriptor<Row>) d.get(3));
                history = getRuntimeContext().getListState((ListStateDescriptor<Tuple3<Long, String, Boolean>>) d.get(4));
                byColor = getRuntimeContext().getMapState((MapStateDescriptor<Color, Point>) d.get(5));
                tags = getRuntimeContext().getMapState((MapStateDescriptor<String, Row>) d.get(6));
                seen = getRuntimeContext().getState((ValueStateDescriptor<Long>) d.get(7));
                profile = getRuntimeContext().getState((ValueStateDescriptor<Profile>) d.get(8));
                blobs = getRuntimeContext().getMapState((MapStateDescriptor<String, Profile>) d.get(9));
            }
            String k = ctx.getCurrentKey();
            Color c = color(v);
            Point p = new Point(v, v * 2, c, v % 5 == 0 ? null : new Inner(v % 3 == 0 ? null : "i" + v, v / 2.0));
            pair.update(Tuple2.of(v, "p" + v));
            point.update(p);
            color.update(c);
            row.update(Row.of(v, v % 6 == 0 ? null : "r" + v, c));
            List<Tuple3<Long, String, Boolean>> h = new ArrayList<>();
            for (Tuple3<Long, String, Boolean> x : history.get()) h.add(x);
            h.add(Tuple3.of(v, "h" + v, v % 2 == 0));
            if (h.size() > 3) h.remove(0);
            history.update(h);
            byColor.put(c, p);
            tags.put("t" + (v % 3), Row.of((int) (long) v, "tag" + v));
            seen.update(v);
            profile.update(new Profile(v, k));
            blobs.put("b" + (v % 2), new Profile(v * 10, k + "-" + v));
            ctx.timerService().registerEventTimeTimer(1_000_000L + v % 5);
            model("shapes pair " + k, pair.value().toString());
            model("shapes point " + k, p.toString());
            model("shapes color " + k, c.toString());
            model("shapes row " + k, row.value().toString());
            model("shapes history " + k, h.toString());
            model("shapes by_color " + k + " " + c, p.toString());
            model("shapes tags " + k + " t" + (v % 3), tags.get("t" + (v % 3)).toString());
            model("shapes seen " + k, String.valueOf(v));
            model("shapes profile " + k, profile.value().toString());
            model("shapes blobs " + k + " b" + (v % 2), blobs.get("b" + (v % 2)).toString());
            String t = "shapes timer " + k + " " + (1_000_000L + v % 5);
            MODEL.put(t, t);
            out.collect(v);
            SHAPES.incrementAndGet();
        }
    }

    /** "rules": hits per key, and the broadcast rules (enum key, POJO value) every subtask holds. */
    public static class Rules extends KeyedBroadcastProcessFunction<Long, Long, Long, Long> {
        transient ValueState<Long> hits;

        @Override
        @SuppressWarnings("unchecked")
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) throws Exception {
            if (hits == null) hits = getRuntimeContext().getState((ValueStateDescriptor<Long>) ruleStates().get(0));
            Long h = hits.value();
            hits.update((h == null ? 0 : h) + 1);
            model("rules hits " + ctx.getCurrentKey(), String.valueOf(hits.value()));
            RULES.incrementAndGet();
        }

        @Override
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (v < 8) {
                Rule r = new Rule("r" + v, v * 10, color(v + 1));
                ctx.getBroadcastState(RULE_STATE).put(color(v), r);
                MODEL.put("rules bcast " + color(v), "rules bcast " + color(v) + " " + r);
            }
            BCAST.incrementAndGet();
        }
    }

    /** "split": operator list state of Tuple2 and union state of a POJO. */
    public static class Split extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        static final ConcurrentHashMap<Integer, long[]> SEEN = new ConcurrentHashMap<>();
        transient ListState<Tuple2<String, Long>> pairs;
        transient ListState<Mark> marks;
        long sum = 0, max = -1;
        int sub = -1;

        @Override
        public Long map(Long v) {
            sum += v;
            max = Math.max(max, v);
            sub = (int) (v % 2);
            MODEL.put("split pairs sum " + sub, "split pairs " + Tuple2.of("sum", sum));
            MODEL.put("split pairs max " + sub, "split pairs " + Tuple2.of("max", max));
            MODEL.put("split marks " + sub, "split marks " + new Mark(sub, "max=" + max, color(max)));
            SPLIT.incrementAndGet();
            return v;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            if (sub < 0) return;  // a subtask that saw no record holds nothing
            pairs.update(List.of(Tuple2.of("sum", sum), Tuple2.of("max", max)));
            marks.update(List.of(new Mark(sub, "max=" + max, color(max))));
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            pairs = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("pairs", Types.TUPLE(Types.STRING, Types.LONG)));
            marks = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("marks", Types.POJO(Mark.class)));
            if (ctx.isRestored()) {
                for (Tuple2<String, Long> v : pairs.get()) DUMP.add("split pairs " + v);
                for (Mark v : marks.get()) DUMP.add("split marks " + v);
            }
        }
    }

    /** After restore: every key's state of the declared states on the trigger; timers when they fire. */
    public static class Dumper<K> extends KeyedBroadcastProcessFunction<K, Long, Long, Long> {
        final String op;

        Dumper(String op) { this.op = op; }

        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {}

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (op.equals("rules")) {
                for (Map.Entry<Color, Rule> e : ctx.getBroadcastState(RULE_STATE).entries()) DUMP.add("rules bcast " + e.getKey() + " " + e.getValue());
            }
            for (StateDescriptor<?, ?> d : op.equals("shapes") ? shapeStates() : ruleStates()) {
                String name = d.getName();
                KeyedStateFunction<Object, State> fn = (key, state) -> {
                    String p = op + " " + name + " " + key;
                    if (state instanceof ValueState) {
                        Object x = ((ValueState<?>) state).value();
                        if (x != null) DUMP.add(p + " " + x);
                    } else if (state instanceof ListState) {
                        List<Object> els = new ArrayList<>();
                        for (Object e : ((ListState<?>) state).get()) els.add(e);
                        if (!els.isEmpty()) DUMP.add(p + " " + els);
                    } else if (state instanceof MapState) {
                        for (Map.Entry<?, ?> e : ((MapState<?, ?>) state).entries()) DUMP.add(p + " " + e.getKey() + " " + e.getValue());
                    }
                };
                ctx.applyToKeyedState((StateDescriptor) d, (KeyedStateFunction) fn);
            }
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<Long> out) {
            DUMP.add(op + " timer " + ctx.getCurrentKey() + " " + ts);
        }
    }

    static Configuration conf(String backend) {
        Configuration conf = new Configuration();
        Compat.set(conf, backend, "state.backend.type", "state.backend");
        Compat.set(conf, "0b", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        conf.setString("rest.bind-port", "0");
        return conf;
    }

    /** The topology both modes share; functions differ (gen: the real ones; restore: dumpers). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void topology(StreamExecutionEnvironment env, DataStream<Long> in, boolean restore, int p) {
        Partitioner<Long> byParity = (Long key, int n) -> (int) (key % n);
        Compat.discard(in.partitionCustom(byParity, v -> v).map(new Split()).uid("split").name("split").setParallelism(p));
        KeySelector<Long, String> sk = v -> "k" + (v % 11);
        KeySelector<Long, Long> rk = v -> v % 7;
        if (restore) {
            Compat.discard(in.keyBy(sk, Types.STRING).connect(Compat.one(env, 1L).broadcast(TRIGGER)).process(new Dumper<String>("shapes"))
                .uid("shapes").name("shapes").setParallelism(p));
            Compat.discard(in.keyBy(rk, Types.LONG).connect(Compat.one(env, 1L).broadcast(RULE_STATE, TRIGGER)).process(new Dumper<Long>("rules"))
                .uid("rules").name("rules").setParallelism(p));
        } else {
            Compat.discard(in.keyBy(sk, Types.STRING).process(new Shapes()).uid("shapes").name("shapes").setParallelism(p));
            BroadcastStream<Long> rules = in.broadcast(RULE_STATE);
            Compat.discard(in.keyBy(rk, Types.LONG).connect(rules).process(new Rules()).uid("rules").name("rules").setParallelism(p));
        }
    }

    static void gen(Path out, long n, String backend, List<String> snapshots) throws Exception {
        Configuration conf = conf(backend);
        Compat.set(conf, "filesystem", "execution.checkpointing.storage", "state.checkpoint-storage");
        Compat.set(conf, out.resolve("checkpoints").toUri().toString(), "execution.checkpointing.dir", "state.checkpoints.dir");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        DataStream<Long> real = Compat.generator(env, n, RATE).filter(v -> v >= 0).setParallelism(1).uid("real").name("real");
        topology(env, real, false, 2);
        JobClient client = env.executeAsync("flinkstate-shapes-" + backend);
        long deadline = System.currentTimeMillis() + 240_000 + 1000 * n / RATE;
        while (SHAPES.get() < n || RULES.get() < n || SPLIT.get() < n || BCAST.get() < 2 * n) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("records not processed in time");
            Thread.sleep(50);
        }
        Files.createDirectories(out);
        for (String kind : new String[] {"canonical", "native"}) {
            if (!snapshots.contains(kind)) continue;
            Path tmp = out.resolve(kind + "-tmp");
            String sp = client.triggerSavepoint(tmp.toUri().toString(), kind.equals("native") ? SavepointFormatType.NATIVE : SavepointFormatType.CANONICAL).get();
            Files.createDirectories(out.resolve(kind));
            Files.move(Paths.get(new java.net.URI(sp)), out.resolve(kind).resolve("savepoint"), StandardCopyOption.REPLACE_EXISTING);
            Files.delete(tmp);
        }
        client.cancel().get();
        StateGenJob.deleteTree(out.resolve("checkpoints"));
        try (PrintWriter w = new PrintWriter(out.resolve("dump.txt").toFile(), StandardCharsets.UTF_8)) {
            for (String line : new java.util.TreeSet<>(MODEL.values())) w.println(line);
        }
        System.out.println("wrote " + out + " (" + MODEL.size() + " dump lines)");
    }

    static void restore(String savepoint, Path outFile, String backend, int p) throws Exception {
        Configuration conf = conf(backend);
        Compat.set(conf, savepoint, "execution.state-recovery.path", "execution.savepoint.path");
        // the generator source's split and coordinator state have no operator here (the restored input is one bounded element)
        Compat.set(conf, "true", "execution.state-recovery.ignore-unclaimed-state", "execution.savepoint.ignore-unclaimed-state");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(p);
        DataStream<Long> none = Compat.one(env, -1L).filter(v -> v >= 0).uid("real").name("real");
        topology(env, none, true, p);
        env.execute("flinkstate-shapes-restore");
        try (PrintWriter w = new PrintWriter(outFile.toFile(), StandardCharsets.UTF_8)) {
            for (String line : DUMP) w.println(line);
        }
        System.out.println("dumped " + DUMP.size() + " lines");
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("gen")) {
            gen(Paths.get(args[1]).toAbsolutePath(), Long.parseLong(args[2]), args[3], List.of(args).subList(4, args.length));
        } else {
            restore(Paths.get(args[1]).toAbsolutePath().toUri().toString(), Paths.get(args[2]).toAbsolutePath(), args[3], Integer.parseInt(args[4]));
        }
        System.exit(0);
    }
}
