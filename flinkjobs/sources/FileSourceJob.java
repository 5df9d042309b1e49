import java.io.DataInputStream;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.FileSourceSplit;
import org.apache.flink.connector.file.src.FileSourceSplitSerializer;
import org.apache.flink.connector.file.src.PendingSplitsCheckpoint;
import org.apache.flink.connector.file.src.PendingSplitsCheckpointSerializer;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * A job reading a folder of text files with Flink's FileSource, monitoring it continuously (uid "files", parallelism 2).
 * Every line is "fN:j"; the job counts the lines it emitted per file.
 *
 * write INPUT SAVEPOINT_PARENT COUNTS_FILE STOP_AT: reads slowly (a sleep per line) and, once STOP_AT lines were
 * emitted, stops with a CANONICAL savepoint (files half read), then writes the lines emitted per file ("fN count") and
 * the savepoint's path ("savepoint PATH").
 * restore INPUT SAVEPOINT COUNTS_FILE [EXPECTED]: restores the savepoint in the same topology, reads at full speed until
 * EXPECTED lines came and then 2 s more (any extra line is counted too), or without EXPECTED until nothing new came for 3 s
 * after the first line, cancels, and writes the lines emitted per file after the restore.
 * splits HEX_FILE: each line "version hex" is a SourceReaderState element's split (FileSourceSplitSerializer, the
 * connector's own class): prints what the deserializer gives, one line per split.
 * enumerator HEX: the coordinator state bytes (SourceCoordinator framing, then PendingSplitsCheckpointSerializer):
 * prints the pending splits and the already processed paths as the connector's deserializer gives them.
 */
public class FileSourceJob {
    static final Map<String, AtomicLong> COUNTS = new ConcurrentHashMap<>();
    static final AtomicLong TOTAL = new AtomicLong();

    static final class Count implements MapFunction<String, String> {
        final long sleepMs;

        Count(long sleepMs) { this.sleepMs = sleepMs; }

        @Override
        public String map(String line) throws Exception {
            if (sleepMs > 0) Thread.sleep(sleepMs);
            String file = line.substring(0, line.indexOf(':'));
            COUNTS.computeIfAbsent(file, k -> new AtomicLong()).incrementAndGet();
            TOTAL.incrementAndGet();
            return line;
        }
    }

    static StreamExecutionEnvironment env(Configuration conf, String input, long sleepMs) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        FileSource<String> source = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new org.apache.flink.core.fs.Path(input))
            .monitorContinuously(Duration.ofMillis(300)).build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "files").uid("files").name("files")
            .map(new Count(sleepMs)).uid("count").name("count")
            .sinkTo(new DiscardingSink<>()).uid("sink").name("sink");
        return env;
    }

    static void writeCounts(Path out, List<String> extra) throws Exception {
        List<String> lines = new ArrayList<>();
        new TreeMap<>(COUNTS).forEach((k, v) -> lines.add(k + " " + v.get()));
        lines.addAll(extra);
        Files.write(out, lines, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "write": write(args[1], args[2], Paths.get(args[3]), Long.parseLong(args[4])); break;
            case "restore": restore(args[1], args[2], Paths.get(args[3]), args.length > 4 ? Long.parseLong(args[4]) : -1); break;
            case "splits": splits(Paths.get(args[1])); break;
            case "enumerator": enumerator(args[1]); break;
            default: throw new IllegalArgumentException(args[0]);
        }
        System.exit(0);
    }

    static void write(String input, String parent, Path counts, long stopAt) throws Exception {
        JobClient client = env(new Configuration(), input, 4).executeAsync("file-source-write");
        long deadline = System.currentTimeMillis() + 120_000;
        while (TOTAL.get() < stopAt) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("only " + TOTAL.get() + " lines came");
            Thread.sleep(20);
        }
        String savepoint = client.stopWithSavepoint(false, parent, SavepointFormatType.CANONICAL).get();
        writeCounts(counts, List.of("savepoint " + savepoint));
    }

    static void restore(String input, String savepoint, Path counts, long expected) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("execution.state-recovery.path", savepoint);
        conf.setString("execution.savepoint.path", savepoint);
        JobClient client = env(conf, input, 0).executeAsync("file-source-restore");
        long start = System.currentTimeMillis();
        long last = -1;
        long stableSince = System.currentTimeMillis();
        while (true) {
            Thread.sleep(200);
            long now = System.currentTimeMillis();
            long n = TOTAL.get();
            if (n != last) {
                last = n;
                stableSince = now;
            }
            if (expected >= 0 ? n >= expected && now - stableSince > 2_000 : n > 0 && now - stableSince > 3_000) break;
            if (now - start > 180_000) break;  // the counts tell what came
        }
        client.cancel().get();
        writeCounts(counts, List.of());
    }

    static String describe(FileSourceSplit s) {
        String pos = s.getReaderPosition().map(p -> p.getOffset() + " " + p.getRecordsAfterOffset()).orElse("none");
        return s.splitId() + " " + s.path() + " " + s.offset() + " " + s.length() + " " + s.fileModificationTime() + " "
            + s.fileSize() + " hosts=" + String.join(",", s.hostnames()) + " position=" + pos;
    }

    static void splits(Path hexFile) throws Exception {
        for (String line : Files.readAllLines(hexFile, StandardCharsets.UTF_8)) {
            if (line.isBlank()) continue;
            String[] p = line.trim().split(" ");
            FileSourceSplit s = FileSourceSplitSerializer.INSTANCE.deserialize(Integer.parseInt(p[0]), HexFormat.of().parseHex(p[1]));
            System.out.println(describe(s));
        }
    }

    static void enumerator(String hex) throws Exception {
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(HexFormat.of().parseHex(hex.trim())));
        int coordinatorVersion = in.readInt();
        int version = in.readInt();
        byte[] bytes = new byte[in.readInt()];
        in.readFully(bytes);
        PendingSplitsCheckpoint<FileSourceSplit> cp =
            new PendingSplitsCheckpointSerializer<>(FileSourceSplitSerializer.INSTANCE).deserialize(version, bytes);
        System.out.println("coordinator " + coordinatorVersion + " enumerator " + version);
        for (FileSourceSplit s : cp.getSplits()) System.out.println("pending " + describe(s));
        for (org.apache.flink.core.fs.Path p : cp.getAlreadyProcessedPaths()) System.out.println("processed " + p);
    }
}
