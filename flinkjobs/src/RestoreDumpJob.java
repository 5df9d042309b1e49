import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListSet;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReadOnlyBroadcastState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.KeyedStateFunction;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.BroadcastStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.util.Collector;

/**
 * Restores a savepoint with StateGenJob's uids and state declarations and dumps, after restore, every
 * key's keyed state (via applyToKeyedState), the event-time timers (they fire at the final watermark),
 * the operator list/union state and the broadcast state, as sorted distinct text lines (union and
 * broadcast state without subtask index, so dumps at different parallelisms compare equal).
 *
 * Args: SAVEPOINT OUT_FILE BACKEND(hashmap|rocksdb) PARALLELISM [LONG_UID [STRING_UID [+arrow] [+kryo]]]
 * (LONG_UID --arrow: only the operator "arrow" with arrowStates(); +arrow and +kryo add the operators "arrow" and
 * "kryo" (StateGenJob's Kryo state) to the others).
 */
public class RestoreDumpJob {
    static final ConcurrentSkipListSet<String> DUMP = new ConcurrentSkipListSet<>();
    static final MapStateDescriptor<String, Long> TRIGGER = new MapStateDescriptor<>("dump-trigger", Types.STRING, Types.LONG);
    static final MapStateDescriptor<String, Long> BCAST = new MapStateDescriptor<>("bcast", Types.STRING, Types.LONG);

    static String show(Object v) {
        if (v instanceof byte[]) return Arrays.toString((byte[]) v);
        if (v instanceof StateGenJob.Opaque) {  // the Kryo-serialized generic type: its private fields, read reflectively
            try {
                java.lang.reflect.Field id = v.getClass().getDeclaredField("id"), text = v.getClass().getDeclaredField("text");
                id.setAccessible(true);
                text.setAccessible(true);
                return "Opaque(" + id.get(v) + "," + text.get(v) + ")";
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }
        if (v instanceof StateGenJob.Pojo) {
            StateGenJob.Pojo p = (StateGenJob.Pojo) v;
            return "Pojo(" + p.id + "," + p.name + "," + p.score + ")";
        }
        return String.valueOf(v);
    }

    static <T> ValueStateDescriptor<T> ttl(ValueStateDescriptor<T> d) {
        d.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
        return d;
    }

    static List<StateDescriptor<?, ?>> longStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new ValueStateDescriptor<>("count", Types.LONG));
        l.add(new ValueStateDescriptor<>("row", Types.ROW(Types.LONG, Types.STRING)));
        l.add(new ValueStateDescriptor<>("tuple", Types.TUPLE(Types.LONG, Types.STRING)));
        l.add(new ValueStateDescriptor<>("pojo", Types.POJO(StateGenJob.Pojo.class)));
        l.add(new ListStateDescriptor<>("list", Types.LONG));
        l.add(ttl(new ValueStateDescriptor<>("ttl", Types.LONG)));
        l.add(new ValueStateDescriptor<>("ints", Types.INT));
        l.add(new ValueStateDescriptor<>("double", Types.DOUBLE));
        l.add(new ValueStateDescriptor<>("bool", Types.BOOLEAN));
        l.add(new ValueStateDescriptor<>("shorts", Types.SHORT));
        l.add(new ValueStateDescriptor<>("bytes1", Types.BYTE));
        l.add(new ValueStateDescriptor<>("floats", Types.FLOAT));
        l.add(new ValueStateDescriptor<>("chars", Types.CHAR));
        l.add(new ValueStateDescriptor<>("blob", byte[].class));
        ListStateDescriptor<Long> tl = new ListStateDescriptor<>("ttl_list", Types.LONG);
        tl.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
        l.add(tl);
        return l;
    }

    static List<StateDescriptor<?, ?>> stringStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new ValueStateDescriptor<>("last", Types.STRING));
        l.add(new MapStateDescriptor<>("map", Types.STRING, Types.LONG));
        MapStateDescriptor<String, String> tm = new MapStateDescriptor<>("ttl_map", Types.STRING, Types.STRING);
        tm.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
        l.add(tm);
        return l;
    }

    /** StateGenJob's Kryo operator (uid "kryo", Long key): a generic type Flink serializes with Kryo, and a Long. */
    static List<StateDescriptor<?, ?>> kryoStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new ValueStateDescriptor<>("opaque", new org.apache.flink.api.java.typeutils.GenericTypeInfo<>(StateGenJob.Opaque.class)));
        l.add(new ValueStateDescriptor<>("seen", Types.LONG));
        return l;
    }

    /** The states of the savepoint test_flink_restore writes wholly from Arrow tables (uid "arrow", String key). */
    static List<StateDescriptor<?, ?>> arrowStates() {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        l.add(new ValueStateDescriptor<>("profile", Types.ROW(Types.LONG, Types.STRING, Types.DOUBLE)));
        l.add(new ListStateDescriptor<>("events", Types.LONG));
        l.add(new MapStateDescriptor<>("counts", Types.STRING, Types.INT));
        l.add(new ValueStateDescriptor<>("blob", byte[].class));
        // BigDecimal, BigInteger and java.time values (export of Arrow decimal, date32, time64, timestamp)
        l.add(new ValueStateDescriptor<>("dec", Types.BIG_DEC));
        l.add(new ValueStateDescriptor<>("bigint", Types.BIG_INT));
        l.add(new ValueStateDescriptor<>("date", Types.LOCAL_DATE));
        l.add(new ValueStateDescriptor<>("time", Types.LOCAL_TIME));
        l.add(new ValueStateDescriptor<>("dt", Types.LOCAL_DATE_TIME));
        l.add(new ValueStateDescriptor<>("inst", Types.INSTANT));
        l.add(new ValueStateDescriptor<>("drow", Types.ROW(Types.BIG_DEC, Types.LOCAL_DATE)));
        l.add(new ListStateDescriptor<>("dates", Types.LOCAL_DATE));
        return l;
    }

    /** Dumps every key of every declared state when the trigger arrives; timers when they fire. */
    public static class Dumper<K> extends KeyedBroadcastProcessFunction<K, Long, Long, Long> {
        final String op;
        final int mode;  // 0 long-keyed, 1 string-keyed, 2 arrow, 3 kryo

        Dumper(String op, int mode) { this.op = op; this.mode = mode; }

        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {}

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            for (StateDescriptor<?, ?> d : mode == 0 ? longStates() : mode == 1 ? stringStates() : mode == 2 ? arrowStates() : kryoStates()) {
                String name = d.getName();
                KeyedStateFunction<Object, State> fn = (key, state) -> {
                    String p = op + " " + name + " " + show(key) + " ";
                    if (state instanceof ValueState) {
                        Object x = ((ValueState<?>) state).value();
                        if (x != null) DUMP.add(p + show(x));
                    } else if (state instanceof ListState) {
                        List<String> els = new ArrayList<>();
                        Iterable<?> it = ((ListState<?>) state).get();
                        if (it != null) for (Object e : it) els.add(show(e));
                        if (!els.isEmpty()) DUMP.add(p + els);
                    } else if (state instanceof MapState) {
                        for (Map.Entry<?, ?> e : ((MapState<?, ?>) state).entries()) DUMP.add(p + show(e.getKey()) + "=" + show(e.getValue()));
                    }
                };
                ctx.applyToKeyedState((StateDescriptor) d, (KeyedStateFunction) fn);
            }
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<Long> out) {
            DUMP.add(op + " timer " + ctx.timeDomain() + " " + show(ctx.getCurrentKey()) + " " + ts);
        }
    }

    /** Dumps the restored split and union operator list states. */
    public static class OpState extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        @Override
        public Long map(Long v) { return v; }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) {}

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            ListState<Long> split = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("split", Types.LONG));
            ListState<String> union = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union", Types.STRING));
            for (Long v : split.get()) DUMP.add("opstate split " + v);
            for (String v : union.get()) DUMP.add("opstate union " + v);
        }
    }

    /** Dumps the restored broadcast state on each subtask. */
    public static class Bcast extends BroadcastProcessFunction<Long, Long, Long> {
        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {}

        @Override
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            BroadcastState<String, Long> st = ctx.getBroadcastState(BCAST);
            for (Map.Entry<String, Long> e : st.entries()) DUMP.add("bcast " + e.getKey() + "=" + e.getValue());
        }
    }

    public static void main(String[] args) throws Exception {
        String savepoint = Paths.get(args[0]).toAbsolutePath().toUri().toString();
        Path out = Paths.get(args[1]).toAbsolutePath();
        int p = Integer.parseInt(args[3]);
        String longUid = args.length > 4 ? args[4] : "long-keyed";
        String stringUid = args.length > 5 ? args[5] : "string-keyed";
        Configuration conf = new Configuration();
        // Under 2.x and 1.x keys (renamed in 1.20 and 2.0; unknown keys are ignored).
        Compat.set(conf, args[2], "state.backend.type", "state.backend");
        Compat.set(conf, savepoint, "execution.state-recovery.path", "execution.savepoint.path");
        Compat.set(conf, "true", "execution.state-recovery.ignore-unclaimed-state", "execution.savepoint.ignore-unclaimed-state");
        conf.setString("rest.bind-port", "0");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(p);
        DataStream<Long> none = Compat.one(env, -1L).filter(v -> v >= 0);
        if (longUid.equals("--arrow")) {
            BroadcastStream<Long> t = Compat.one(env, 1L).broadcast(TRIGGER);
            Compat.discard(none.keyBy(v -> "k" + v, Types.STRING).connect(t).process(new Dumper<String>("arrow", 2)).uid("arrow"));
            env.execute("flinkstate-restore-dump-arrow");
            try (PrintWriter w = new PrintWriter(out.toFile(), StandardCharsets.UTF_8)) {
                for (String line : DUMP) w.println(line);
            }
            System.exit(0);
        }
        BroadcastStream<Long> trigger = Compat.one(env, 1L).broadcast(TRIGGER);
        Compat.discard(none.keyBy(v -> v, Types.LONG).connect(trigger).process(new Dumper<Long>(longUid, 0)).uid(longUid));
        BroadcastStream<Long> trigger2 = Compat.one(env, 1L).broadcast(TRIGGER);
        Compat.discard(none.keyBy(v -> "k" + v, Types.STRING).connect(trigger2).process(new Dumper<String>(stringUid, 1)).uid(stringUid));
        Compat.discard(none.map(new OpState()).uid("opstate"));
        BroadcastStream<Long> b = Compat.one(env, 1L).broadcast(BCAST);
        Compat.discard(none.connect(b).process(new Bcast()).uid("bcast"));
        List<String> extras = Arrays.asList(args).subList(Math.min(args.length, 6), args.length);
        if (extras.contains("+arrow")) {  // also the operator "arrow" bootstrapped from Arrow/Spark
            BroadcastStream<Long> t3 = Compat.one(env, 1L).broadcast(TRIGGER);
            Compat.discard(none.keyBy(v -> "k" + v, Types.STRING).connect(t3).process(new Dumper<String>("arrow", 2)).uid("arrow"));
        }
        if (extras.contains("+kryo")) {  // also StateGenJob's Kryo operator
            BroadcastStream<Long> t4 = Compat.one(env, 1L).broadcast(TRIGGER);
            Compat.discard(none.keyBy(v -> v, Types.LONG).connect(t4).process(new Dumper<Long>("kryo", 3)).uid("kryo"));
        }
        env.execute("flinkstate-restore-dump");
        try (PrintWriter w = new PrintWriter(out.toFile(), StandardCharsets.UTF_8)) {
            for (String line : DUMP) w.println(line);
        }
        System.out.println("dumped " + DUMP.size() + " lines");
        System.exit(0);
    }
}
