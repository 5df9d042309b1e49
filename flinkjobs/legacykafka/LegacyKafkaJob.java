import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.connectors.kafka.internals.KafkaTopicPartition;

/**
 * The legacy FlinkKafkaConsumer's state without a broker (Flink 1.x): an operator (uid "kafka-legacy", parallelism 2) with
 * the union list state "topic-partition-offset-states" of FlinkKafkaConsumerBase.createStateSerializer's serializer
 * (TupleSerializer of KryoSerializer&lt;KafkaTopicPartition&gt; and LongSerializer), holding per subtask its partitions'
 * offsets as the consumer snapshots them.
 *
 * write SAVEPOINT_PARENT OUT_FILE: takes a CANONICAL savepoint, writes its path to OUT_FILE.
 * restore SAVEPOINT OUT_FILE: restores it and writes the union state as subtask 0 gets it ("TOPIC PARTITION OFFSET HASH" lines,
 * sorted; HASH the restored KafkaTopicPartition's cachedHash).
 * decode HEX_FILE: deserializes each line's element bytes with that serializer (a fresh ExecutionConfig, as the job's) and
 * prints "TOPIC PARTITION OFFSET HASH".
 */
public class LegacyKafkaJob {
    static final String STATE = "topic-partition-offset-states";
    static final AtomicInteger READY = new AtomicInteger();
    static final ConcurrentLinkedQueue<String> RESTORED = new ConcurrentLinkedQueue<>();

    static final class Offsets extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        transient ListState<Tuple2<KafkaTopicPartition, Long>> state;

        @SuppressWarnings("unchecked")
        static TupleSerializer<Tuple2<KafkaTopicPartition, Long>> serializer(org.apache.flink.api.common.ExecutionConfig config) {
            TypeSerializer<?>[] fields = {new KryoSerializer<>(KafkaTopicPartition.class, config), LongSerializer.INSTANCE};
            return new TupleSerializer<>((Class<Tuple2<KafkaTopicPartition, Long>>) (Class<?>) Tuple2.class, fields);
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            state = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>(STATE, serializer(getRuntimeContext().getExecutionConfig())));
            int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            if (ctx.isRestored() && subtask == 0) {
                for (Tuple2<KafkaTopicPartition, Long> t : state.get()) {
                    RESTORED.add(t.f0.getTopic() + " " + t.f0.getPartition() + " " + t.f1 + " " + t.f0.cachedHash());
                }
            }
            READY.incrementAndGet();
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            state.clear();
            if (subtask == 0) {
                state.add(Tuple2.of(new KafkaTopicPartition("orders", 0), 42L));
                state.add(Tuple2.of(new KafkaTopicPartition("orders", 2), -915623761775L));  // EARLIEST_OFFSET sentinel
            } else {
                state.add(Tuple2.of(new KafkaTopicPartition("orders", 1), 7L));
                state.add(Tuple2.of(new KafkaTopicPartition("pay\u00e9\u20ac", 3), 123456789012L));
            }
        }

        @Override
        public Long map(Long v) { return v; }
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("decode")) {
            TupleSerializer<Tuple2<KafkaTopicPartition, Long>> ser = Offsets.serializer(new org.apache.flink.api.common.ExecutionConfig());
            for (String line : Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8)) {
                if (line.isBlank()) continue;
                Tuple2<KafkaTopicPartition, Long> t = ser.deserialize(new DataInputDeserializer(java.util.HexFormat.of().parseHex(line.trim())));
                System.out.println(t.f0.getTopic() + " " + t.f0.getPartition() + " " + t.f1 + " " + t.f0.cachedHash());
            }
            return;
        }
        Configuration conf = new Configuration();
        if (args[0].equals("restore")) {
            conf.setString("execution.savepoint.path", args[1]);
            conf.setString("execution.state-recovery.path", args[1]);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.fromSequence(0, Long.MAX_VALUE).setParallelism(1).uid("numbers").filter(v -> false).setParallelism(1).uid("none")
            .map(new Offsets()).uid("kafka-legacy").name("kafka-legacy").sinkTo(new DiscardingSink<>()).uid("sink");
        JobClient client = env.executeAsync("legacy-kafka-" + args[0]);
        long deadline = System.currentTimeMillis() + 120_000;
        while (READY.get() < 2) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("the operator never started");
            Thread.sleep(50);
        }
        if (args[0].equals("write")) {
            Thread.sleep(500);
            String sp = client.triggerSavepoint(args[1], SavepointFormatType.CANONICAL).get();
            Files.writeString(Paths.get(args[2]), sp);
        } else {
            List<String> lines = new ArrayList<>(RESTORED);
            Collections.sort(lines);
            Files.write(Paths.get(args[2]), lines, StandardCharsets.UTF_8);
        }
        client.cancel().get();
        System.exit(0);
    }
}
