import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.PlanReference;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.catalog.Column;

/**
 * Flink SQL jobs whose state the tests read: one query of a kind over a deterministic datagen sequence, run from its
 * compiled plan (so the operators' names and uids carry the plan's node ids) into a print sink whose changelog the job
 * captures from its own standard output (the MiniCluster runs in this JVM).
 *
 * <pre>
 * SqlJob savepoint QUERY OUT ROWS RATE BACKEND FORMAT PARALLELISM WAIT
 *     compile INSERT INTO sink QUERY to OUT/plan.json, run that plan until WAIT changelog rows came, then stop it with a
 *     savepoint (FORMAT canonical|native, no drain) under OUT/savepoint-dir (its path in OUT/savepoint.txt); the
 *     INSERT statement in OUT/statement.sql
 * SqlJob restore QUERY OUT PLAN BACKEND PARALLELISM SAVEPOINT [INITIAL]
 *     run the plan PLAN restored from SAVEPOINT to the end of its bounded input; INITIAL (an emitted.txt) is what the
 *     changelog is folded onto (the rows the job had emitted before the savepoint)
 * </pre>
 *
 * Either mode writes OUT/changelog.txt (every row the sink got, with its kind, in the order printed: "+I[k2, 11, 33]")
 * and OUT/emitted.txt (INITIAL plus the changelog folded to its current rows, sorted, one per line: "k2, 11, 33").
 * Stopping with a savepoint and no drain, the sources emit nothing after the savepoint's barrier, so the savepoint's
 * state holds exactly what produced the savepoint mode's changelog.
 *
 * The input: ids 0..ROWS-1 (a datagen sequence at RATE rows/s; its position is part of the savepoint), k = 'k' || id %
 * 10, v = id % 7, event time ts = id seconds (watermark ts - 1 s), pt processing time. QUERY is agg (GROUP BY k with
 * COUNT, SUM, MAX, AVG), agg_ttl (the same with table.exec.state.ttl = 1 h: TTL-wrapped values), dedup (first row per
 * k), dedup_last (last row per k), join (regular inner join), window (TUMBLE window TVF aggregate), gwindow (legacy
 * GROUP BY TUMBLE(ts, ...) group window: TimeWindow namespaces) or topn (top 3 per k).
 */
public class SqlJob {

    static final String IDENTIFIER = "flinkstate-sql";
    static final Map<String, String> QUERIES = new LinkedHashMap<>();

    static {
        String agg = "SELECT k, COUNT(*) AS cnt, SUM(v) AS total, MAX(v) AS mx, AVG(CAST(v AS DOUBLE)) AS av FROM src GROUP BY k";
        QUERIES.put("agg", agg);
        QUERIES.put("agg_ttl", agg);
        QUERIES.put("dedup", "SELECT id, k, v FROM (SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt ASC) AS rn FROM src) WHERE rn = 1");
        QUERIES.put("dedup_last", "SELECT id, k, v FROM (SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt DESC) AS rn FROM src) WHERE rn = 1");
        QUERIES.put("join", "SELECT l.k, l.id AS lid, r.id AS rid FROM (SELECT * FROM src WHERE MOD(id, 2) = 0) l "
                + "JOIN (SELECT * FROM src WHERE MOD(id, 2) = 1) r ON l.id + 1 = r.id");
        QUERIES.put("window", "SELECT window_start, window_end, k, COUNT(*) AS cnt, SUM(v) AS total "
                + "FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k");
        QUERIES.put("gwindow", "SELECT TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, TUMBLE_END(ts, INTERVAL '10' SECOND) AS we, k, "
                + "COUNT(*) AS cnt, SUM(v) AS total FROM src GROUP BY TUMBLE(ts, INTERVAL '10' SECOND), k");
        QUERIES.put("topn", "SELECT k, id, v FROM (SELECT k, id, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC, id DESC) AS rn FROM src) "
                + "WHERE rn <= 3");
    }

    /** The sink's lines, captured from System.out (the print sink's writers open it after main replaced it). */
    static final List<String> CHANGELOG = Collections.synchronizedList(new ArrayList<>());

    /** An OutputStream splitting what is printed into lines: the print sink's go to CHANGELOG, the others through. */
    static final class Capture extends OutputStream {
        private final PrintStream through;
        private final java.io.ByteArrayOutputStream line = new java.io.ByteArrayOutputStream();

        Capture(PrintStream through) {
            this.through = through;
        }

        @Override
        public synchronized void write(int b) {
            if (b != '\n') {
                line.write(b);
                return;
            }
            String s = new String(line.toByteArray(), StandardCharsets.UTF_8);
            line.reset();
            if (s.startsWith(IDENTIFIER)) {
                CHANGELOG.add(s.substring(s.indexOf("> ") + 2));  // "flinkstate-sql:2> +I[a, b]" -> "+I[a, b]"
            } else {
                through.println(s);
            }
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) {
            for (int i = off; i < off + len; i++) write(b[i]);
        }
    }

    static void set(Configuration conf, String value, String... keys) {
        for (String k : keys) conf.setString(k, value);
    }

    static TableEnvironment env(String query, String backend, int parallelism, String restore) {
        Configuration conf = new Configuration();
        set(conf, backend, "state.backend.type", "state.backend");
        set(conf, "false", "execution.checkpointing.incremental", "state.backend.incremental");
        set(conf, "0", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        set(conf, String.valueOf(parallelism), "parallelism.default");
        if (query.equals("agg_ttl")) conf.setString("table.exec.state.ttl", "1 h");
        if (!restore.isEmpty()) set(conf, restore, "execution.state-recovery.path", "execution.savepoint.path");
        return TableEnvironment.create(EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
    }

    /** Declare the input and a print sink shaped like the query's result; the INSERT statement. */
    static String declare(TableEnvironment t, String sql, long rows, int rate) {
        t.executeSql("CREATE TABLE gen (id BIGINT, pt AS PROCTIME(), ts AS TO_TIMESTAMP_LTZ(id * 1000, 3), "
                + "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen', 'fields.id.kind' = 'sequence', "
                + "'fields.id.start' = '0', 'fields.id.end' = '" + (rows - 1) + "', 'rows-per-second' = '" + rate + "')");
        t.executeSql("CREATE VIEW src AS SELECT id, CONCAT('k', CAST(MOD(id, 10) AS STRING)) AS k, CAST(MOD(id, 7) AS INT) AS v, pt, ts FROM gen");
        StringJoiner columns = new StringJoiner(", ");
        for (Column c : t.sqlQuery(sql).getResolvedSchema().getColumns()) {
            columns.add("`" + c.getName() + "` " + c.getDataType().getLogicalType().copy(true).asSerializableString());
        }
        t.executeSql("CREATE TABLE sink (" + columns + ") WITH ('connector' = 'print', 'print-identifier' = '" + IDENTIFIER + "')");
        return "INSERT INTO sink " + sql;
    }

    /** Folds changelog rows into current (insert/update-after add a row, update-before/delete remove one); unmatched retractions. */
    static int fold(List<String> current, List<String> changelog) {
        int unmatched = 0;
        for (String r : changelog) {
            String kind = r.substring(0, 2);
            String line = r.substring(3, r.length() - 1);  // "+I[a, b]" -> "a, b"
            if (kind.equals("+I") || kind.equals("+U")) current.add(line);
            else if (!current.remove(line)) unmatched++;
        }
        return unmatched;
    }

    static void finish(JobClient client, Path out, List<String> initial) throws Exception {
        client.getJobExecutionResult().get();
        List<String> changelog;
        synchronized (CHANGELOG) {
            changelog = new ArrayList<>(CHANGELOG);
        }
        Files.write(out.resolve("changelog.txt"), changelog, StandardCharsets.UTF_8);
        List<String> current = new ArrayList<>(initial);
        int unmatched = fold(current, changelog);
        Collections.sort(current);
        Files.write(out.resolve("emitted.txt"), current, StandardCharsets.UTF_8);
        System.out.println("changelog rows " + changelog.size() + ", current rows " + current.size() + ", unmatched retractions " + unmatched);
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0];
        String query = a[1];
        String sql = QUERIES.get(query);
        if (sql == null) throw new IllegalArgumentException("unknown query " + query + "; known: " + QUERIES.keySet());
        Path out = Paths.get(a[2]).toAbsolutePath();
        Files.createDirectories(out);
        System.setOut(new PrintStream(new Capture(System.out), true, "UTF-8"));
        if (mode.equals("savepoint")) {
            long rows = Long.parseLong(a[3]);
            int rate = Integer.parseInt(a[4]);
            String backend = a[5];
            SavepointFormatType type = a[6].equals("native") ? SavepointFormatType.NATIVE : SavepointFormatType.CANONICAL;
            int parallelism = Integer.parseInt(a[7]);
            int wait = Integer.parseInt(a[8]);
            TableEnvironment t = env(query, backend, parallelism, "");
            Path plan = out.resolve("plan.json");
            Files.deleteIfExists(plan);
            String insert = declare(t, sql, rows, rate);
            Files.write(out.resolve("statement.sql"), Collections.singletonList(insert), StandardCharsets.UTF_8);
            t.compilePlanSql(insert).writeToFile(plan.toString());
            JobClient client = t.loadPlan(PlanReference.fromFile(plan.toString())).execute().getJobClient().orElseThrow(IllegalStateException::new);
            while (CHANGELOG.size() < wait) {
                if (client.getJobStatus().get().isGloballyTerminalState()) {
                    throw new IllegalStateException("the job ended after " + CHANGELOG.size() + " of " + wait + " rows: raise ROWS or lower RATE");
                }
                Thread.sleep(20);
            }
            String path = client.stopWithSavepoint(false, out.resolve("savepoint-dir").toUri().toString(), type).get();
            Files.write(out.resolve("savepoint.txt"), Collections.singletonList(path), StandardCharsets.UTF_8);
            finish(client, out, Collections.emptyList());
            return;
        }
        if (!mode.equals("restore")) throw new IllegalArgumentException("mode is savepoint or restore, not " + mode);
        String plan = Paths.get(a[3]).toAbsolutePath().toString();
        String backend = a[4];
        int parallelism = Integer.parseInt(a[5]);
        String savepoint = Paths.get(a[6]).toAbsolutePath().toUri().toString();
        List<String> initial = a.length > 7 ? Files.readAllLines(Paths.get(a[7]), StandardCharsets.UTF_8) : Collections.emptyList();
        TableEnvironment t = env(query, backend, parallelism, savepoint);
        JobClient client = t.loadPlan(PlanReference.fromFile(plan)).execute().getJobClient().orElseThrow(IllegalStateException::new);
        finish(client, out, initial);
    }
}
