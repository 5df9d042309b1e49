import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiter;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/** The API the test jobs use where Flink moved it: this one for Flink 1.19 to 2.x (compat/v1_18 for 1.18). */
public final class Compat {
    private Compat() {}

    /** A TTL config of this length (Duration builder; 1.18 only has Time). */
    public static StateTtlConfig ttl(Duration d) {
        return StateTtlConfig.newBuilder(d).build();
    }

    /** The subtask index (RuntimeContext.getTaskInfo() since 1.19; 2.0 removed the 1.x accessor). */
    public static int subtask(RuntimeContext rc) {
        return rc.getTaskInfo().getIndexOfThisSubtask();
    }

    /** Ends s in a sink that drops everything (Sink V2 DiscardingSink). */
    public static <T> void discard(DataStream<T> s) {
        s.sinkTo(new DiscardingSink<>());
    }

    /** Records 0..n-1 then -1 fillers forever, at rate per second: a FLIP-27 DataGeneratorSource, uid "source". */
    public static DataStream<Long> generator(StreamExecutionEnvironment env, long n, long rate) {
        GeneratorFunction<Long, Long> gen = i -> i < n ? i : -1L;
        DataGeneratorSource<Long> source = new DataGeneratorSource<>(gen, Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate), Types.LONG);
        return env.fromSource(source, WatermarkStrategy.noWatermarks(), "gen").setParallelism(1).uid("source").name("gen");
    }

    /** A rate limiter that never grants a record (raw type: 2.3 made it generic and its abstract method acquire(int)). */
    @SuppressWarnings("rawtypes")
    static final class Never implements RateLimiter {
        public CompletionStage<Void> acquire() { return new CompletableFuture<>(); }
        public CompletionStage<Void> acquire(int records) { return new CompletableFuture<>(); }
    }

    /**
     * generator()'s source (uid "source", the same DataGeneratorSource splits) held still: its rate limiter never grants
     * a record, so a job restored from a snapshot runs (and takes snapshots) with its state as restored, the source's
     * split position included.
     */
    @SuppressWarnings({"rawtypes", "unchecked"})
    public static DataStream<Long> idle(StreamExecutionEnvironment env) {
        GeneratorFunction<Long, Long> gen = i -> -1L;
        RateLimiterStrategy never = parallelism -> new Never();
        DataGeneratorSource<Long> source = new DataGeneratorSource<>(gen, Long.MAX_VALUE, never, Types.LONG);
        return env.fromSource(source, WatermarkStrategy.noWatermarks(), "gen").setParallelism(1).uid("source").name("gen");
    }

    /** A bounded stream of one element (fromData: a FLIP-27 source without operator state of its own). */
    public static DataStream<Long> one(StreamExecutionEnvironment env, long v) {
        return env.fromData(v);
    }

    /** Sets value under every given key (Flink renamed configuration keys between 1.x and 2.x; unknown keys are ignored). */
    public static void set(Configuration conf, String value, String... keys) {
        for (String k : keys) conf.setString(k, value);
    }

    /** Tumbling event-time windows of ms milliseconds (Duration since 1.19; 1.18 only has Time). */
    public static TumblingEventTimeWindows tumbling(long ms) {
        return TumblingEventTimeWindows.of(Duration.ofMillis(ms));
    }
}
