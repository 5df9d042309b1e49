import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.KeyedStateFunction;
import org.apache.flink.streaming.api.datastream.BroadcastStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.util.Collector;

/**
 * Three keyed operators whose max parallelism Flink gives them differently, as in production jobs:
 * "derived" (parallelism 2, nothing set: Flink derives 128), "derived256" (parallelism 86, nothing set: Flink
 * derives roundUpToPowerOfTwo(86 + 86/2) = 256) and "explicit" (parallelism 2, setMaxParallelism(4096)).
 *
 * gen OUT N: records 0..N-1 update each operator's state ("derived": Long key v % 37, value "count" and an
 * event-time timer per key that never fires while the job runs; "derived256": String key "k" + v % 23, value
 * "count" and map "seen"; "explicit": Long key v % 41, value "count"), then a CANONICAL savepoint is written to
 * OUT/savepoint and the job is cancelled.
 *
 * restore SAVEPOINT OUT_FILE BACKEND P_DERIVED P_DERIVED256 P_EXPLICIT: restores the savepoint at those
 * parallelisms ("explicit" again with setMaxParallelism(4096), the others without, so Flink takes theirs from the
 * savepoint) and writes every key's state, the timers (they fire at the final watermark) and each operator's max
 * parallelism as seen by its subtasks, as sorted distinct lines.
 */
public class MaxParallelismJob {
    static final int RATE = 2000;
    static final String[] OPS = {"derived", "derived256", "explicit"};
    static final AtomicLong[] DONE = {new AtomicLong(), new AtomicLong(), new AtomicLong()};
    static final ConcurrentSkipListSet<String> DUMP = new ConcurrentSkipListSet<>();
    static final MapStateDescriptor<String, Long> TRIGGER = new MapStateDescriptor<>("dump-trigger", Types.STRING, Types.LONG);

    static ValueStateDescriptor<Long> count() { return new ValueStateDescriptor<>("count", Types.LONG); }

    static MapStateDescriptor<String, Long> seen() { return new MapStateDescriptor<>("seen", Types.STRING, Types.LONG); }

    static KeySelector<Long, ?> keyOf(int op) {
        if (op == 0) return (KeySelector<Long, Long>) v -> v % 37;
        if (op == 1) return (KeySelector<Long, String>) v -> "k" + (v % 23);
        return (KeySelector<Long, Long>) v -> v % 41;
    }

    /** Sums the records of a key; "derived" also registers a timer per key, "derived256" keeps a map of residues. */
    public static class Gen<K> extends KeyedProcessFunction<K, Long, Long> {
        final int op;
        transient ValueState<Long> count;
        transient MapState<String, Long> seen;

        Gen(int op) { this.op = op; }

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (count == null) {  // declared on the first record (open(OpenContext) exists from 1.19 only)
                count = getRuntimeContext().getState(count());
                if (op == 1) seen = getRuntimeContext().getMapState(seen());
            }
            Long c = count.value();
            count.update((c == null ? 0 : c) + v);
            if (op == 0) ctx.timerService().registerEventTimeTimer(1_000_000L + (Long) ctx.getCurrentKey());
            if (op == 1) seen.put("r" + (v % 5), v);
            DONE[op].incrementAndGet();
        }
    }

    /** After restore: every key's state on the broadcast trigger, the timers when they fire, the max parallelism. */
    public static class Dump<K> extends KeyedBroadcastProcessFunction<K, Long, Long, Long> {
        final int op;

        Dump(int op) { this.op = op; }

        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {}

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            DUMP.add(OPS[op] + " maxParallelism " + getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks());
            ctx.applyToKeyedState(count(), (KeyedStateFunction<K, ValueState<Long>>) (key, st) -> {
                if (st.value() != null) DUMP.add(OPS[op] + " count " + key + " " + st.value());
            });
            if (op == 1) {
                ctx.applyToKeyedState(seen(), (KeyedStateFunction<K, MapState<String, Long>>) (key, st) -> {
                    for (Map.Entry<String, Long> e : st.entries()) DUMP.add(OPS[op] + " seen " + key + " " + e.getKey() + "=" + e.getValue());
                });
            }
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<Long> out) {
            DUMP.add(OPS[op] + " timer " + ctx.getCurrentKey() + " " + ts);
        }
    }

    static Configuration conf(String backend) {
        Configuration conf = new Configuration();
        Compat.set(conf, backend, "state.backend.type", "state.backend");
        Compat.set(conf, "0b", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        conf.setString("rest.bind-port", "0");
        conf.setString("taskmanager.memory.network.min", "256mb");  // 86 subtasks need more buffers than the default
        conf.setString("taskmanager.memory.network.max", "256mb");
        return conf;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void gen(Path out, long n) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf("hashmap"));
        env.setParallelism(2);
        DataStream<Long> real = Compat.generator(env, n, RATE).filter(v -> v >= 0).setParallelism(1).uid("real").name("real");
        int[] parallelism = {2, 86, 2};
        for (int op = 0; op < 3; op++) {
            SingleOutputStreamOperator<Long> s = real.keyBy((KeySelector) keyOf(op)).process(new Gen(op)).uid(OPS[op]).name(OPS[op])
                .setParallelism(parallelism[op]);
            if (op == 2) s.setMaxParallelism(4096);
            Compat.discard(s);
        }
        JobClient client = env.executeAsync("flinkstate-max-parallelism");
        long deadline = System.currentTimeMillis() + 180_000 + 1000 * n / RATE;
        while (DONE[0].get() < n || DONE[1].get() < n || DONE[2].get() < n) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("records not processed in time");
            Thread.sleep(50);
        }
        Path tmp = out.resolve("savepoint-tmp");
        String sp = client.triggerSavepoint(tmp.toUri().toString(), SavepointFormatType.CANONICAL).get();
        client.cancel().get();
        Files.move(Paths.get(new java.net.URI(sp)), out.resolve("savepoint"), StandardCopyOption.REPLACE_EXISTING);
        Files.delete(tmp);
        System.out.println("wrote " + out.resolve("savepoint"));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void restore(String savepoint, Path outFile, String backend, int[] parallelism) throws Exception {
        Configuration conf = conf(backend);
        Compat.set(conf, savepoint, "execution.state-recovery.path", "execution.savepoint.path");
        Compat.set(conf, "true", "execution.state-recovery.ignore-unclaimed-state", "execution.savepoint.ignore-unclaimed-state");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        DataStream<Long> none = Compat.one(env, -1L).filter(v -> v >= 0);
        for (int op = 0; op < 3; op++) {
            BroadcastStream<Long> trigger = Compat.one(env, 1L).broadcast(TRIGGER);
            SingleOutputStreamOperator<Long> s = none.keyBy((KeySelector) keyOf(op)).connect(trigger).process(new Dump(op)).uid(OPS[op])
                .setParallelism(parallelism[op]);
            if (op == 2) s.setMaxParallelism(4096);  // set explicitly in the job: Flink checks it against the savepoint's
            Compat.discard(s);
        }
        env.execute("flinkstate-max-parallelism-restore");
        try (PrintWriter w = new PrintWriter(outFile.toFile(), StandardCharsets.UTF_8)) {
            for (String line : DUMP) w.println(line);
        }
        System.out.println("dumped " + DUMP.size() + " lines");
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("gen")) {
            gen(Paths.get(args[1]).toAbsolutePath(), Long.parseLong(args[2]));
        } else {
            int[] p = {Integer.parseInt(args[4]), Integer.parseInt(args[5]), Integer.parseInt(args[6])};
            restore(Paths.get(args[1]).toAbsolutePath().toUri().toString(), Paths.get(args[2]).toAbsolutePath(), args[3], p);
        }
        System.exit(0);
    }
}
