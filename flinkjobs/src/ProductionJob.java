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
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.Partitioner;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.AggregatingState;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
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
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * A job shaped like production ones (not the generator of the other fixtures), for the configuration matrix.
 *
 * Operators (uid: parallelism, max parallelism, key, state):
 * - "parse" (2, -): a map with operator split state "offsets" (the sum of the records each subtask saw) and union
 *   state "watermarks" ("max=" the largest record it saw), records partitioned by parity;
 * - "sessions" (2, derived 128), key Tuple2(String user, Integer bucket): value "last" with TTL, list "recent" (the last
 *   4 records), map "by_mod" (String -> Long), reducing "total", aggregating "avg" (accumulator Tuple2(sum, count),
 *   result "sum/count"), value "profile" of a Kryo-serialized generic type, an event-time timer per record; every
 *   tenth record also goes to the side output "audit";
 * - "wide" (86: Flink derives max parallelism 256), Long key, value "count";
 * - "explicit" (2, setMaxParallelism 4096), String key, map "seen" and value "first";
 * - "window" (1), event time = record * 100 ms without watermarks: tumbling 1 s windows that never fire, reduce (sum)
 *   with a ProcessWindowFunction (state "window-contents" in TimeWindow namespaces, window timers);
 * - "rules" (2), keyed by Long with a broadcast side: broadcast state "rules" (records below 5 as r<v> -> v) and
 *   keyed value "hits".
 *
 * gen OUT N BACKEND INCREMENTAL SNAPPY [canonical] [native] [checkpoint]: processes records 0..N-1 on BACKEND
 * (hashmap|rocksdb|forst), takes the listed snapshots (OUT/canonical/savepoint, OUT/native/savepoint, OUT/checkpoint/
 * the job's retained checkpoint folder) and writes OUT/dump.txt: the state the job's functions hold, as lines.
 *
 * restore SAVEPOINT OUT_FILE BACKEND P P_WIDE: restores every operator (at P; "wide" at P_WIDE) and writes the same
 * lines from the restored state: keyed state by applyToKeyedState, timers and windows as they fire at the final
 * watermark, operator and broadcast state as restored (without subtask index).
 */
public class ProductionJob {
    static final int RATE = 2000;
    static final ConcurrentHashMap<String, String> MODEL = new ConcurrentHashMap<>();
    static final ConcurrentSkipListSet<String> DUMP = new ConcurrentSkipListSet<>();
    static final AtomicLong SESSIONS = new AtomicLong(), WIDE = new AtomicLong(), EXPLICIT = new AtomicLong(), WINDOW = new AtomicLong(),
        RULES = new AtomicLong(), PARSE = new AtomicLong(), BCAST = new AtomicLong();
    static final MapStateDescriptor<String, Long> RULE_STATE = new MapStateDescriptor<>("rules", Types.STRING, Types.LONG);
    static final MapStateDescriptor<String, Long> TRIGGER = new MapStateDescriptor<>("dump-trigger", Types.STRING, Types.LONG);
    static final OutputTag<String> AUDIT = new OutputTag<>("audit", Types.STRING);
    static final TypeInformation<Tuple2<String, Integer>> SESSION_KEY = Types.TUPLE(Types.STRING, Types.INT);

    /** A type Flink cannot analyse as a POJO (private fields, no accessors): serialized with Kryo. */
    public static class Profile {
        private long last;
        private String user;
        public Profile(long last, String user) { this.last = last; this.user = user; }
        @Override
        public String toString() { return "Profile(" + last + "," + user + ")"; }
    }

    public static class Sum implements ReduceFunction<Long> {
        @Override
        public Long reduce(Long a, Long b) { return a + b; }
    }

    /** Average as "sum/count" over a Tuple2(sum, count) accumulator. */
    public static class Avg implements AggregateFunction<Long, Tuple2<Long, Long>, String> {
        @Override
        public Tuple2<Long, Long> createAccumulator() { return Tuple2.of(0L, 0L); }
        @Override
        public Tuple2<Long, Long> add(Long v, Tuple2<Long, Long> acc) { return Tuple2.of(acc.f0 + v, acc.f1 + 1); }
        @Override
        public String getResult(Tuple2<Long, Long> acc) { return acc.f0 + "/" + acc.f1; }
        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) { return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1); }
    }

    static ValueStateDescriptor<Long> last() {
        ValueStateDescriptor<Long> d = new ValueStateDescriptor<>("last", Types.LONG);
        d.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
        return d;
    }

    static List<StateDescriptor<?, ?>> sessionStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(last());
        l.add(new ListStateDescriptor<>("recent", Types.LONG));
        l.add(new MapStateDescriptor<>("by_mod", Types.STRING, Types.LONG));
        l.add(new ReducingStateDescriptor<>("total", new Sum(), Types.LONG));
        l.add(new AggregatingStateDescriptor<>("avg", new Avg(), Types.TUPLE(Types.LONG, Types.LONG)));
        l.add(new ValueStateDescriptor<>("profile", new GenericTypeInfo<>(Profile.class)));
        return l;
    }

    static List<StateDescriptor<?, ?>> wideStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new ValueStateDescriptor<>("count", Types.LONG));
        return l;
    }

    static List<StateDescriptor<?, ?>> explicitStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new MapStateDescriptor<>("seen", Types.STRING, Types.LONG));
        l.add(new ValueStateDescriptor<>("first", Types.STRING));
        return l;
    }

    static List<StateDescriptor<?, ?>> ruleStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new ValueStateDescriptor<>("hits", Types.LONG));
        return l;
    }

    static Tuple2<String, Integer> sessionKey(long v) { return Tuple2.of("u" + (v % 13), (int) (v % 3)); }

    static void model(String line, String value) { MODEL.put(line, line + " " + value); }

    /** "sessions": every kind of keyed state, a Kryo value, timers and a side output. */
    public static class Sessions extends KeyedProcessFunction<Tuple2<String, Integer>, Long, Long> {
        transient ValueState<Long> last;
        transient ListState<Long> recent;
        transient MapState<String, Long> byMod;
        transient ReducingState<Long> total;
        transient AggregatingState<Long, String> avg;
        transient ValueState<Profile> profile;

        @Override
        @SuppressWarnings("unchecked")
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (last == null) {  // declared on the first record (open(OpenContext) exists from 1.19 only)
                List<StateDescriptor<?, ?>> d = sessionStates();
                last = getRuntimeContext().getState((ValueStateDescriptor<Long>) d.get(0));
                recent = getRuntimeContext().getListState((ListStateDescriptor<Long>) d.get(1));
                byMod = getRuntimeContext().getMapState((MapStateDescriptor<String, Long>) d.get(2));
                total = getRuntimeContext().getReducingState((ReducingStateDescriptor<Long>) d.get(3));
                avg = getRuntimeContext().getAggregatingState((AggregatingStateDescriptor<Long, Tuple2<Long, Long>, String>) d.get(4));
                profile = getRuntimeContext().getState((ValueStateDescriptor<Profile>) d.get(5));
            }
            String k = String.valueOf(ctx.getCurrentKey());
            last.update(v);
            List<Long> r = new ArrayList<>();
            for (Long x : recent.get()) r.add(x);
            r.add(v);
            if (r.size() > 4) r.remove(0);
            recent.update(r);
            String mod = "m" + (v % 4);
            Long m = byMod.get(mod);
            byMod.put(mod, (m == null ? 0 : m) + 1);
            total.add(v);
            avg.add(v);
            profile.update(new Profile(v, ctx.getCurrentKey().f0));
            ctx.timerService().registerEventTimeTimer(1_000_000L + v % 5);
            model("sessions last " + k, String.valueOf(v));
            model("sessions recent " + k, r.toString());
            model("sessions by_mod " + k + " " + mod, String.valueOf(byMod.get(mod)));
            model("sessions total " + k, String.valueOf(total.get()));
            model("sessions avg " + k, avg.get());
            model("sessions profile " + k, profile.value().toString());
            MODEL.put("sessions timer " + k + " " + (1_000_000L + v % 5), "sessions timer " + k + " " + (1_000_000L + v % 5));
            if (v % 10 == 0) ctx.output(AUDIT, "audit " + v);
            out.collect(v);
            SESSIONS.incrementAndGet();
        }
    }

    /** "wide" and "explicit": a count per Long key; a map and the first record per String key. */
    public static class Counts<K> extends KeyedProcessFunction<K, Long, Long> {
        final boolean wide;
        transient ValueState<Long> count;
        transient MapState<String, Long> seen;
        transient ValueState<String> first;

        Counts(boolean wide) { this.wide = wide; }

        @Override
        @SuppressWarnings("unchecked")
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            String k = String.valueOf(ctx.getCurrentKey());
            if (wide) {
                if (count == null) count = getRuntimeContext().getState((ValueStateDescriptor<Long>) wideStates().get(0));
                Long c = count.value();
                count.update((c == null ? 0 : c) + 1);
                model("wide count " + k, String.valueOf(count.value()));
                WIDE.incrementAndGet();
                return;
            }
            if (seen == null) {
                seen = getRuntimeContext().getMapState((MapStateDescriptor<String, Long>) explicitStates().get(0));
                first = getRuntimeContext().getState((ValueStateDescriptor<String>) explicitStates().get(1));
            }
            seen.put("r" + (v % 3), v);
            if (first.value() == null) first.update("v" + v);
            model("explicit seen " + k + " r" + (v % 3), String.valueOf(v));
            model("explicit first " + k, first.value());
            EXPLICIT.incrementAndGet();
        }
    }

    /** "rules": hits per key, and the broadcast rules every subtask holds. */
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
            if (v < 5) {
                ctx.getBroadcastState(RULE_STATE).put("r" + v, v * 10);
                MODEL.put("rules bcast r" + v, "rules bcast r" + v + "=" + (v * 10));
            }
            BCAST.incrementAndGet();
        }
    }

    /** "parse": operator split state (a sum per subtask) and union state (the largest record per subtask). */
    public static class Parse extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        static final ConcurrentHashMap<Integer, long[]> SEEN = new ConcurrentHashMap<>();
        transient ListState<Long> offsets;
        transient ListState<String> marks;
        long sum = 0, max = -1;

        @Override
        public Long map(Long v) {
            sum += v;
            max = Math.max(max, v);
            int sub = (int) (v % 2);
            SEEN.put(sub, new long[] {sum, max});
            MODEL.put("parse split " + sub, "parse split " + sum);
            MODEL.put("parse union " + sub, "parse union max=" + max);
            PARSE.incrementAndGet();
            return v;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            offsets.update(List.of(sum));
            marks.update(List.of("max=" + max));
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            offsets = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("offsets", Types.LONG));
            marks = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("watermarks", Types.STRING));
            if (ctx.isRestored()) {
                for (Long v : offsets.get()) DUMP.add("parse split " + v);
                for (String v : marks.get()) DUMP.add("parse union " + v);
            }
        }
    }

    /** The window's output: key, window start and sum (written to the dump when a restored window fires). */
    public static class Fired extends ProcessWindowFunction<Long, String, Long, TimeWindow> {
        @Override
        public void process(Long key, Context ctx, Iterable<Long> sums, Collector<String> out) {
            for (Long s : sums) {
                String line = "window fire " + key + " " + ctx.window().getStart() + " " + s;
                DUMP.add(line);
                out.collect(line);
            }
        }
    }

    /** After restore: every key's state of the declared states on the trigger; timers when they fire. */
    public static class Dumper<K> extends KeyedBroadcastProcessFunction<K, Long, Long, Long> {
        final String op;

        Dumper(String op) { this.op = op; }

        List<StateDescriptor<?, ?>> states() {
            return op.equals("sessions") ? sessionStates() : op.equals("wide") ? wideStates() : op.equals("explicit") ? explicitStates() : ruleStates();
        }

        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {}

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (op.equals("rules")) {
                for (Map.Entry<String, Long> e : ctx.getBroadcastState(RULE_STATE).entries()) DUMP.add("rules bcast " + e.getKey() + "=" + e.getValue());
            }
            for (StateDescriptor<?, ?> d : states()) {
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
                    } else if (state instanceof ReducingState) {
                        Object x = ((ReducingState<?>) state).get();
                        if (x != null) DUMP.add(p + " " + x);
                    } else if (state instanceof AggregatingState) {
                        Object x = ((AggregatingState<?, ?>) state).get();
                        if (x != null) DUMP.add(p + " " + x);
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

    static Configuration conf(String backend, boolean incremental, boolean snappy) {
        Configuration conf = new Configuration();
        // Each setting under its 2.x and 1.x key (renamed in 1.20 and 2.0; unknown keys are ignored).
        Compat.set(conf, backend, "state.backend.type", "state.backend");
        Compat.set(conf, String.valueOf(incremental), "execution.checkpointing.incremental", "state.backend.incremental");
        Compat.set(conf, "0b", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        conf.setString("execution.checkpointing.snapshot-compression", String.valueOf(snappy));
        conf.setString("rest.bind-port", "0");
        conf.setString("taskmanager.memory.network.min", "256mb");  // 86 subtasks need more buffers than the default
        conf.setString("taskmanager.memory.network.max", "256mb");
        return conf;
    }

    /** The topology both modes share; sources and functions differ (gen: the real ones; restore: dumpers). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void topology(StreamExecutionEnvironment env, DataStream<Long> in, boolean restore, int p, int pWide) {
        Partitioner<Long> byParity = (Long key, int n) -> (int) (key % n);
        Compat.discard(in.partitionCustom(byParity, v -> v).map(new Parse()).uid("parse").name("parse").setParallelism(p));
        KeySelector<Long, Tuple2<String, Integer>> sk = ProductionJob::sessionKey;
        KeySelector<Long, Long> wk = v -> v % 50;
        KeySelector<Long, String> ek = v -> "k" + (v % 31);
        KeySelector<Long, Long> rk = v -> v % 7;
        if (restore) {
            String[] ops = {"sessions", "wide", "explicit", "rules"};
            KeySelector[] keys = {sk, wk, ek, rk};
            TypeInformation[] types = {SESSION_KEY, Types.LONG, Types.STRING, Types.LONG};
            for (int i = 0; i < ops.length; i++) {
                BroadcastStream<Long> trigger = ops[i].equals("rules") ? Compat.one(env, 1L).broadcast(RULE_STATE, TRIGGER)
                    : Compat.one(env, 1L).broadcast(TRIGGER);
                SingleOutputStreamOperator<Long> s = in.keyBy(keys[i], types[i]).connect(trigger).process(new Dumper(ops[i]))
                    .uid(ops[i]).name(ops[i]).setParallelism(ops[i].equals("wide") ? pWide : p);
                if (ops[i].equals("explicit")) s.setMaxParallelism(4096);
                Compat.discard(s);
            }
        } else {
            SingleOutputStreamOperator<Long> sessions = in.keyBy(sk, SESSION_KEY).process(new Sessions()).uid("sessions").name("sessions").setParallelism(p);
            Compat.discard(sessions);
            Compat.discard(sessions.getSideOutput(AUDIT));
            Compat.discard(in.keyBy(wk, Types.LONG).process(new Counts<Long>(true)).uid("wide").name("wide").setParallelism(pWide));
            Compat.discard(in.keyBy(ek, Types.STRING).process(new Counts<String>(false)).uid("explicit").name("explicit").setParallelism(p)
                .setMaxParallelism(4096));
            BroadcastStream<Long> rules = in.broadcast(RULE_STATE);
            Compat.discard(in.keyBy(rk, Types.LONG).connect(rules).process(new Rules()).uid("rules").name("rules").setParallelism(p));
        }
        // Event time = record * 100 ms and no watermarks: no window fires while the job runs; at restore the bounded input's
        // final watermark fires them all.
        DataStream<Long> timed = in.assignTimestampsAndWatermarks(WatermarkStrategy.<Long>noWatermarks().withTimestampAssigner((v, t) -> v * 100))
            .setParallelism(1).uid("timed").name("timed");
        Compat.discard(timed.keyBy(v -> v % 5, Types.LONG).window(Compat.tumbling(1000)).reduce(new Sum(), new Fired(), Types.STRING)
            .uid("window").name("window").setParallelism(1));
    }

    static void gen(Path out, long n, String backend, boolean incremental, boolean snappy, List<String> snapshots) throws Exception {
        Configuration conf = conf(backend, incremental, snappy);
        boolean checkpoint = snapshots.contains("checkpoint");
        if (checkpoint) {
            conf.setString("execution.checkpointing.interval", "500ms");
            conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
            Compat.set(conf, "1", "execution.checkpointing.num-retained", "state.checkpoints.num-retained");
        }
        Compat.set(conf, "filesystem", "execution.checkpointing.storage", "state.checkpoint-storage");
        Compat.set(conf, out.resolve("checkpoints").toUri().toString(), "execution.checkpointing.dir", "state.checkpoints.dir");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        DataStream<Long> real = Compat.generator(env, n, RATE).filter(v -> v >= 0).setParallelism(1).uid("real").name("real");
        topology(env, real, false, 2, 86);
        // the window's model: every record's window sum (the job holds them all, nothing fires)
        for (long v = 0; v < n; v++) {
            long start = (v * 100) / 1000 * 1000;
            MODEL.merge("window fire " + (v % 5) + " " + start, "window fire " + (v % 5) + " " + start + " " + v,
                (a, b) -> a.substring(0, a.lastIndexOf(' ')) + " " + (Long.parseLong(a.substring(a.lastIndexOf(' ') + 1)) + Long.parseLong(b.substring(b.lastIndexOf(' ') + 1))));
        }
        JobClient client = env.executeAsync("flinkstate-production-" + backend);
        long deadline = System.currentTimeMillis() + 240_000 + 1000 * n / RATE;
        while (SESSIONS.get() < n || WIDE.get() < n || EXPLICIT.get() < n || RULES.get() < n || PARSE.get() < n || BCAST.get() < 2 * n) {
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
        if (checkpoint) {
            Path jobDir = out.resolve("checkpoints").resolve(client.getJobID().toString());
            int want = StateGenJob.newestCheckpoint(jobDir, false) + 2;  // one triggered after the last record
            while (StateGenJob.newestCheckpoint(jobDir, true) < want) {
                if (System.currentTimeMillis() > deadline + 120_000) throw new IllegalStateException("no checkpoint in time");
                Thread.sleep(50);
            }
            client.cancel().get();
            Thread.sleep(1000);  // let a checkpoint cut short by the cancel stop writing
            try (var list = Files.list(jobDir)) {  // one in progress at cancel leaves a chk-N without _metadata
                for (Path q : (Iterable<Path>) list::iterator) {
                    if (q.getFileName().toString().startsWith("chk-") && !Files.exists(q.resolve("_metadata"))) StateGenJob.deleteTree(q);
                }
            }
            Files.move(jobDir, out.resolve("checkpoint"), StandardCopyOption.REPLACE_EXISTING);
        } else {
            client.cancel().get();
        }
        StateGenJob.deleteTree(out.resolve("checkpoints"));
        try (PrintWriter w = new PrintWriter(out.resolve("dump.txt").toFile(), StandardCharsets.UTF_8)) {
            for (String line : new java.util.TreeSet<>(MODEL.values())) w.println(line);
        }
        System.out.println("wrote " + out + " (" + MODEL.size() + " dump lines)");
    }

    static void restore(String savepoint, Path outFile, String backend, int p, int pWide) throws Exception {
        Configuration conf = conf(backend, false, false);
        Compat.set(conf, savepoint, "execution.state-recovery.path", "execution.savepoint.path");
        // the generator source's split state has no operator here (the restored input is one bounded element)
        Compat.set(conf, "true", "execution.state-recovery.ignore-unclaimed-state", "execution.savepoint.ignore-unclaimed-state");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(p);
        DataStream<Long> none = Compat.one(env, -1L).filter(v -> v >= 0).uid("real").name("real");
        topology(env, none, true, p, pWide);
        env.execute("flinkstate-production-restore");
        try (PrintWriter w = new PrintWriter(outFile.toFile(), StandardCharsets.UTF_8)) {
            for (String line : DUMP) w.println(line);
        }
        System.out.println("dumped " + DUMP.size() + " lines");
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("gen")) {
            gen(Paths.get(args[1]).toAbsolutePath(), Long.parseLong(args[2]), args[3], Boolean.parseBoolean(args[4]), Boolean.parseBoolean(args[5]),
                List.of(args).subList(6, args.length));
        } else {
            restore(Paths.get(args[1]).toAbsolutePath().toUri().toString(), Paths.get(args[2]).toAbsolutePath(), args[3],
                Integer.parseInt(args[4]), Integer.parseInt(args[5]));
        }
        System.exit(0);
    }
}
