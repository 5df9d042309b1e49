import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * A skewed keyed job (the state insight tests' fixture): records 0..N-1, keyed by a String; 80% of them go to three
 * hot keys ("hot0", "hot1", "hot2"), the rest to 200 cold keys ("k0".."k199"). Operator "skewed" (parallelism 2,
 * max parallelism 128) keeps per key: "count" (value: records seen), "events" (list: every record's value, so a hot
 * key's list is long), "seen" (map: residue "r" + v % 400 to v, so a hot key has hundreds of entries) and "last"
 * (value with a 2-hour TTL: the last record's value). Then a CANONICAL savepoint (state in separate files) is
 * written to OUT/savepoint and the job is cancelled.
 *
 * Usage: SkewJob OUT N
 */
public class SkewJob {
    static final int RATE = 4000;
    static final AtomicLong DONE = new AtomicLong();

    static String keyOf(long v) {
        return v % 10 < 8 ? "hot" + (v % 3) : "k" + (v % 200);
    }

    public static class Gen extends KeyedProcessFunction<String, Long, Long> {
        transient ValueState<Long> count;
        transient ListState<Long> events;
        transient MapState<String, Long> seen;
        transient ValueState<Long> last;

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (count == null) {  // declared on the first record (open(OpenContext) exists from 1.19 only)
                count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
                events = getRuntimeContext().getListState(new ListStateDescriptor<>("events", Types.LONG));
                seen = getRuntimeContext().getMapState(new MapStateDescriptor<>("seen", Types.STRING, Types.LONG));
                ValueStateDescriptor<Long> d = new ValueStateDescriptor<>("last", Types.LONG);
                d.enableTimeToLive(Compat.ttl(Duration.ofHours(2)));
                last = getRuntimeContext().getState(d);
            }
            Long c = count.value();
            count.update((c == null ? 0 : c) + 1);
            events.add(v);
            seen.put("r" + (v % 400), v);
            last.update(v);
            DONE.incrementAndGet();
        }
    }

    static void deleteTree(Path p) throws java.io.IOException {
        if (!Files.exists(p)) return;
        try (java.util.stream.Stream<Path> walk = Files.walk(p)) {
            for (Path q : (Iterable<Path>) walk.sorted(java.util.Comparator.reverseOrder())::iterator) Files.delete(q);
        }
    }

    public static void main(String[] args) throws Exception {
        Path out = Paths.get(args[0]).toAbsolutePath();
        long n = Long.parseLong(args[1]);
        Configuration conf = new Configuration();
        Compat.set(conf, "hashmap", "state.backend.type", "state.backend");
        Compat.set(conf, "0b", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        conf.setString("rest.bind-port", "0");
        // File-system checkpoint storage (the JobManager storage would inline everything): state in separate files.
        Compat.set(conf, "filesystem", "execution.checkpointing.storage", "state.checkpoint-storage");
        Compat.set(conf, out.resolve("checkpoints").toUri().toString(), "execution.checkpointing.dir", "state.checkpoints.dir");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        DataStream<Long> src = Compat.generator(env, n, RATE).filter(v -> v >= 0).setParallelism(1).uid("skew-filter").name("skew-filter");
        Compat.discard(src.keyBy((KeySelector<Long, String>) SkewJob::keyOf).process(new Gen()).uid("skewed").name("skewed"));
        JobClient client = env.executeAsync("flinkstate-skew");
        long deadline = System.currentTimeMillis() + 180_000 + 1000 * n / RATE;
        while (DONE.get() < n) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("records not processed in time");
            Thread.sleep(50);
        }
        Path tmp = out.resolve("savepoint-tmp");
        String sp = client.triggerSavepoint(tmp.toUri().toString(), SavepointFormatType.CANONICAL).get();
        client.cancel().get();
        Files.move(Paths.get(new java.net.URI(sp)), out.resolve("savepoint"), StandardCopyOption.REPLACE_EXISTING);
        Files.delete(tmp);
        deleteTree(out.resolve("checkpoints"));
        System.out.println("wrote " + out.resolve("savepoint"));
        System.exit(0);
    }
}
