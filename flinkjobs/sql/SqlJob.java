import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.CloseableIterator;

/**
 * Flink SQL jobs whose state the tests read: one query of a kind over a deterministic datagen sequence.
 *
 * <pre>
 * SqlJob savepoint QUERY OUT ROWS RATE BACKEND FORMAT PARALLELISM [WAIT]   run until WAIT results (default 40) came,
 *                                                                   write a savepoint
 *                                                                   (FORMAT canonical|native) to OUT/savepoint, its
 *                                                                   results so far to OUT/emitted.txt, cancel
 * SqlJob restore   QUERY OUT ROWS RATE BACKEND -      PARALLELISM SAVEPOINT   the same SQL restored from SAVEPOINT,
 *                                                                   run to the end of the input; the final rows to
 *                                                                   OUT/final.txt
 * </pre>
 *
 * The input: ids 0..ROWS-1 (a datagen sequence; the source's position is part of the savepoint), k = 'k' || id % 10,
 * v = id % 7, event time ts = id seconds. QUERY is agg (GROUP BY with COUNT, SUM, MAX, AVG), dedup (first row per k),
 * dedup_last (last row per k), join (regular inner join), window (TUMBLE window TVF aggregate) or topn (top 3 per k).
 * The results are the changelog folded to its current rows, one line each, sorted.
 */
public class SqlJob {

    static final Map<String, String> QUERIES = new HashMap<>();

    static {
        QUERIES.put("agg", "SELECT k, COUNT(*) AS cnt, SUM(v) AS total, MAX(v) AS mx, AVG(CAST(v AS DOUBLE)) AS av FROM src GROUP BY k");
        QUERIES.put("dedup", "SELECT id, k, v FROM (SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt ASC) AS rn FROM src) WHERE rn = 1");
        QUERIES.put("dedup_last", "SELECT id, k, v FROM (SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt DESC) AS rn FROM src) WHERE rn = 1");
        QUERIES.put("join", "SELECT l.k, l.id AS lid, r.id AS rid FROM (SELECT * FROM src WHERE MOD(id, 2) = 0) l "
                + "JOIN (SELECT * FROM src WHERE MOD(id, 2) = 1) r ON l.id + 1 = r.id");
        QUERIES.put("window", "SELECT window_start, window_end, k, COUNT(*) AS cnt, SUM(v) AS total "
                + "FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k");
        QUERIES.put("topn", "SELECT k, id, v FROM (SELECT k, id, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC, id DESC) AS rn FROM src) "
                + "WHERE rn <= 3");
    }

    static void set(Configuration conf, String value, String... keys) {
        for (String k : keys) conf.setString(k, value);
    }

    static TableEnvironment env(long rows, int rate, String backend, int parallelism, String restore) {
        Configuration conf = new Configuration();
        set(conf, backend, "state.backend.type", "state.backend");
        set(conf, "false", "execution.checkpointing.incremental", "state.backend.incremental");
        set(conf, "0", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        set(conf, String.valueOf(parallelism), "parallelism.default");
        if (!restore.isEmpty()) set(conf, restore, "execution.state-recovery.path", "execution.savepoint.path");
        TableEnvironment t = TableEnvironment.create(EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
        t.executeSql("CREATE TABLE gen (id BIGINT, pt AS PROCTIME(), ts AS TO_TIMESTAMP_LTZ(id * 1000, 3), "
                + "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen', 'fields.id.kind' = 'sequence', "
                + "'fields.id.start' = '0', 'fields.id.end' = '" + (rows - 1) + "', 'rows-per-second' = '" + rate + "')");
        t.executeSql("CREATE VIEW src AS SELECT id, CONCAT('k', CAST(MOD(id, 10) AS STRING)) AS k, CAST(MOD(id, 7) AS INT) AS v, pt, ts FROM gen");
        return t;
    }

    /** Folds a changelog into its current rows (insert/update-after add a row, update-before/delete remove one). */
    static void fold(List<String> current, Row r) {
        Row plain = Row.copy(r);
        plain.setKind(RowKind.INSERT);
        String line = plain.toString().substring(3, plain.toString().length() - 1);  // "+I[a, b]" -> "a, b"
        if (r.getKind() == RowKind.INSERT || r.getKind() == RowKind.UPDATE_AFTER) current.add(line);
        else current.remove(line);
    }

    static void write(Path file, List<String> rows) throws Exception {
        List<String> sorted = new ArrayList<>(rows);
        Collections.sort(sorted);
        Files.write(file, sorted, StandardCharsets.UTF_8);
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0];
        String sql = QUERIES.get(a[1]);
        if (sql == null) throw new IllegalArgumentException("unknown query " + a[1] + "; known: " + QUERIES.keySet());
        Path out = Paths.get(a[2]);
        Files.createDirectories(out);
        long rows = Long.parseLong(a[3]);
        int rate = Integer.parseInt(a[4]);
        String backend = a[5];
        String format = a[6];
        int parallelism = Integer.parseInt(a[7]);
        String restore = a.length > 8 && mode.equals("restore") ? a[8] : "";
        int wait = a.length > 8 && mode.equals("savepoint") ? Integer.parseInt(a[8]) : 40;
        TableEnvironment t = env(rows, rate, backend, parallelism, restore);
        TableResult result = t.executeSql(sql);
        JobClient client = result.getJobClient().orElseThrow(IllegalStateException::new);
        List<String> current = new ArrayList<>();
        if (mode.equals("savepoint")) {
            int seen = 0;
            try (CloseableIterator<Row> it = result.collect()) {
                while (it.hasNext() && seen < wait) {
                    fold(current, it.next());
                    seen++;
                }
                SavepointFormatType type = format.equals("native") ? SavepointFormatType.NATIVE : SavepointFormatType.CANONICAL;
                String path = client.triggerSavepoint(out.resolve("savepoint-dir").toUri().toString(), type).get();
                Files.write(out.resolve("savepoint.txt"), Collections.singletonList(path), StandardCharsets.UTF_8);
                write(out.resolve("emitted.txt"), current);
                client.cancel().get();
            }
            return;
        }
        try (CloseableIterator<Row> it = result.collect()) {
            while (it.hasNext()) fold(current, it.next());
        }
        write(out.resolve("final.txt"), current);
    }
}
