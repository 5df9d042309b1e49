import java.time.Duration;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.time.Time;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.DiscardingSink;

/** The API the test jobs use where Flink moved it: this one for Flink 1.18 (compat/current for 1.19 and later). */
public final class Compat {
    private Compat() {}

    /** A TTL config of this length (1.18's builder takes a Time). */
    public static StateTtlConfig ttl(Duration d) {
        return StateTtlConfig.newBuilder(Time.milliseconds(d.toMillis())).build();
    }

    /** The subtask index (1.18 has no TaskInfo on the RuntimeContext). */
    public static int subtask(RuntimeContext rc) {
        return rc.getIndexOfThisSubtask();
    }

    /** Ends s in a sink that drops everything (1.18 has no Sink V2 DiscardingSink). */
    public static <T> void discard(DataStream<T> s) {
        s.addSink(new DiscardingSink<>());
    }

    /** Passes index i on as i (i < n) or -1, sleeping to keep `rate` records per second. */
    static final class Throttle implements MapFunction<Long, Long> {
        final long n;
        final long rate;
        transient long t0;

        Throttle(long n, long rate) { this.n = n; this.rate = rate; }

        @Override
        public Long map(Long i) throws Exception {
            if (t0 == 0) t0 = System.nanoTime();
            long wait = (t0 + i * 1_000_000_000L / rate - System.nanoTime()) / 1_000_000L;
            if (wait > 0) Thread.sleep(wait);
            return i < n ? i : -1L;
        }
    }

    /**
     * Records 0..n-1 then -1 fillers forever, at rate per second. 1.18's flink-dist has no
     * DataGeneratorSource: a FLIP-27 NumberSequenceSource (uid "source") and a chained throttle.
     */
    public static DataStream<Long> generator(StreamExecutionEnvironment env, long n, long rate) {
        return env.fromSource(new NumberSequenceSource(0, Long.MAX_VALUE / 2), WatermarkStrategy.noWatermarks(), "gen")
            .setParallelism(1).uid("source").name("gen")
            .map(new Throttle(n, rate)).setParallelism(1).uid("throttle").name("throttle");
    }

    /** StateGenJob's resave needs a source that emits nothing while it runs (a never-granting rate limiter): 1.19+. */
    public static DataStream<Long> idle(StreamExecutionEnvironment env) {
        throw new UnsupportedOperationException("StateGenJob resave runs on Flink 1.19 and later");
    }

    /** A bounded stream of one element (1.18 has no fromData). */
    public static DataStream<Long> one(StreamExecutionEnvironment env, long v) {
        return env.fromElements(v);
    }

    /** Sets value under every given key (Flink renamed configuration keys between 1.x and 2.x; unknown keys are ignored). */
    public static void set(Configuration conf, String value, String... keys) {
        for (String k : keys) conf.setString(k, value);
    }

    /** Tumbling event-time windows of ms milliseconds (Duration since 1.19; 1.18 only has Time). */
    public static TumblingEventTimeWindows tumbling(long ms) {
        return TumblingEventTimeWindows.of(org.apache.flink.streaming.api.windowing.time.Time.milliseconds(ms));
    }
}
