import static org.apache.flink.table.api.Expressions.$;
import static org.apache.flink.table.api.Expressions.call;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.annotation.FunctionHint;
import org.apache.flink.table.api.CompiledPlan;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.ExplainDetail;
import org.apache.flink.table.api.PlanReference;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.catalog.Column;
import org.apache.flink.table.functions.TableAggregateFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * Every stateful operator of Flink's SQL planner in one job per configuration, run from its compiled plan: each query an
 * INSERT INTO a blackhole sink of its own (s_NAME), compiled together as one statement set (COMPILE PLAN), so the plan
 * names each operator by its node id. Configurations (SET): "plain" (one-phase aggregates, no mini-batch), "minibatch"
 * (mini-batch, two-phase and split distinct aggregates, state TTL 1 h, non-deterministic updates resolved, the VALUE sink
 * materializer on 2.x) and, on Flink 2.x, "multijoin" (every regular join one MultiJoin operator, the MAP sink materializer).
 *
 * <pre>
 * SqlOpsJob savepoint SET OUT ROWS RATE BACKEND PARALLELISM
 *     compile every query of SET that Flink compiles to a plan (OUT/queries.json says which, and why not for the others),
 *     run the plan (OUT/plan.json) until the sources are past ROWS, then: on hashmap stop with a CANONICAL savepoint
 *     (OUT/savepoint-dir); on rocksdb take a CANONICAL savepoint (OUT/canonical-dir, for SqlStateDump) and stop with a
 *     NATIVE one (OUT/savepoint-dir)
 * SqlOpsJob restore SET OUT PLAN BACKEND PARALLELISM SAVEPOINT SECONDS ROWS RATE
 *     run PLAN (of a savepoint run with ROWS and RATE) restored from SAVEPOINT for SECONDS once it runs (its source's rows
 *     reach s_progress), then stop it with a canonical savepoint under OUT/savepoint-dir
 *     (what a restore that failed would not reach)
 * </pre>
 *
 * The input (identical in every run, so every state is a function of it): gen is the sequence id = 0, 1, ... at RATE
 * rows/s from one source subtask (GenSourceFactory's insert mode, a DataGeneratorSource like the datagen connector's:
 * each key sees its rows in id order); src is its first ROWS
 * rows: k = 'k' || id % 4, v = id % 7, event time ts = id seconds (watermark ts - 1 s), pt processing time. The rows
 * after ROWS (fillers: the job must keep running to be stopped with a savepoint) are filtered out and carry ts = ROWS
 * seconds, so the watermark stays at ROWS - 1 s and nothing an event-time operator keeps depends on how long the job
 * ran. l is src where id % 3 = 0, r where it is not. upserts and dim are GenSourceFactory's primary-keyed changelog
 * (pk = i % 5). The job waits until the print sink s_progress saw a filler row 2 s (2 x RATE rows) past ROWS.
 */
public class SqlOpsJob {

    /** One query: its name (sink s_NAME), configurations, SQL (or a Table API pipeline), and its sink's primary key. */
    static final class Q {
        final String name;
        final String sets;
        final String sql;
        final String sinkKey;
        final int minMajor;
        final String onConflict;  // Flink 2.3+: the INSERT's ON CONFLICT clause (a sink keyed by another key needs one)

        Q(String name, String sets, String sql, String sinkKey, int minMajor, String onConflict) {
            this.name = name;
            this.sets = sets;
            this.sql = sql;
            this.sinkKey = sinkKey;
            this.minMajor = minMajor;
            this.onConflict = onConflict;
        }

        String statement(int major) {
            if (sql == null) return "Table API: src.groupBy(k).flatAggregate(Top2(v))";
            return "INSERT INTO s_" + name + " " + sql + (onConflict != null && major >= 2 ? " ON CONFLICT DO " + onConflict : "");
        }
    }

    static final List<Q> QUERIES = new ArrayList<>();

    static void q(String name, String sets, String sql) {
        QUERIES.add(new Q(name, sets, sql, null, 1, null));
    }

    static final String TUMBLE = "TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND))";

    static {
        // group aggregates (plain: GroupAggregate; minibatch: LocalGroupAggregate + GlobalGroupAggregate, distinct split:
        // + IncrementalGroupAggregate)
        q("agg", "plain,minibatch", "SELECT k, COUNT(*) AS cnt, SUM(v) AS total, MAX(v) AS mx, AVG(CAST(v AS DOUBLE)) AS av FROM src GROUP BY k");
        q("agg_distinct", "plain,minibatch", "SELECT k, COUNT(DISTINCT v) AS dv, SUM(DISTINCT v) AS sdv, COUNT(*) AS cnt FROM src GROUP BY k");
        // an aggregate over an updating input: MAX and MIN retract through a MapView (state-backed data views)
        q("agg_retract", "plain,minibatch", "SELECT cnt, MAX(k) AS mk, MIN(k) AS nk, COUNT(*) AS c "
                + "FROM (SELECT k, COUNT(*) AS cnt FROM src WHERE v < 5 GROUP BY k) GROUP BY cnt");
        q("agg_collect", "plain", "SELECT k, LISTAGG(CAST(id AS STRING)) AS ids, COLLECT(v) AS vs FROM src GROUP BY k");
        // regular joins: no unique key on either side (MapState row -> count), a side whose unique key is in the join key
        // (ValueState), a side with a unique key outside the join key (MapState unique key -> row); outer joins keep the
        // number of associations beside each row
        q("join", "plain,minibatch,multijoin", "SELECT l.k, l.id AS lid, r.id AS rid FROM l JOIN r ON l.id + 1 = r.id");
        q("join_uk_in_jk", "plain,minibatch", "SELECT a.k, a.sv, b.id FROM (SELECT k, SUM(v) AS sv FROM src GROUP BY k) a JOIN r b ON a.k = b.k");
        q("join_uk", "plain,minibatch,multijoin", "SELECT a.id, a.k, b.id AS rid FROM (SELECT id, MAX(k) AS k FROM l GROUP BY id) a JOIN r b ON a.k = b.k");
        q("join_pk", "plain,minibatch,multijoin", "SELECT u.pk, u.name, o.id FROM upserts u JOIN l o ON u.k = o.k");
        q("left_join", "plain", "SELECT l.id AS lid, r.id AS rid FROM l LEFT JOIN r ON l.id + 1 = r.id");
        q("left_join_uk", "plain", "SELECT a.id, a.k, b.sv FROM (SELECT id, MAX(k) AS k FROM l GROUP BY id) a "
                + "LEFT JOIN (SELECT k, SUM(v) AS sv FROM r GROUP BY k) b ON a.k = b.k");
        q("full_join_uk", "plain", "SELECT a.id, b.k, b.sv FROM (SELECT id, MAX(k) AS k FROM l GROUP BY id) a "
                + "FULL JOIN (SELECT k, SUM(v) AS sv FROM r GROUP BY k) b ON a.k = b.k");
        // interval joins: event time (row caches + cleanup timers), processing time
        q("interval_join", "plain,minibatch", "SELECT l.id AS lid, r.id AS rid FROM l JOIN r ON l.k = r.k "
                + "AND r.ts BETWEEN l.ts - INTERVAL '8' SECOND AND l.ts + INTERVAL '4' SECOND");
        q("interval_join_pt", "plain", "SELECT l.id AS lid, r.id AS rid FROM l JOIN r ON l.k = r.k "
                + "AND r.pt BETWEEN l.pt - INTERVAL '1' HOUR AND l.pt + INTERVAL '1' HOUR");
        // temporal joins: event time against a versioned view (the last row per k of r), processing time against a
        // temporal table function (Table API only), lookup join against the primary-keyed dim (keyed when its input updates)
        q("temporal_join", "plain,minibatch", "SELECT o.id, o.k, ver.v, ver.id AS vid FROM l AS o JOIN versions FOR SYSTEM_TIME AS OF o.ts AS ver ON o.k = ver.k");
        q("temporal_join_pt", "plain", "SELECT o.id, x.v FROM l AS o, LATERAL TABLE (RatesPt(o.pt)) AS x WHERE o.k = x.k");
        q("lookup_join", "plain,minibatch", "SELECT o.id, d.name FROM src AS o JOIN dim FOR SYSTEM_TIME AS OF o.pt AS d ON d.pk = CAST(o.v AS BIGINT)");
        q("lookup_join_async", "plain", "SELECT o.id, d.name FROM src AS o JOIN dim_async FOR SYSTEM_TIME AS OF o.pt AS d ON d.pk = CAST(o.v AS BIGINT)");
        q("lookup_join_upd", "plain,minibatch", "SELECT u.pk, u.id, d.name FROM upserts AS u JOIN dim FOR SYSTEM_TIME AS OF u.pt AS d ON d.pk = u.pk");
        // window TVF aggregates (plain: WindowAggregate; minibatch: LocalWindowAggregate + GlobalWindowAggregate)
        q("window_tumble", "plain,minibatch", "SELECT window_start, window_end, k, COUNT(*) AS cnt, SUM(v) AS total, COUNT(DISTINCT v) AS dv FROM "
                + TUMBLE + " GROUP BY window_start, window_end, k");
        q("window_hop", "plain,minibatch", "SELECT window_start, window_end, k, COUNT(*) AS cnt, MAX(v) AS mx "
                + "FROM TABLE(HOP(TABLE src, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)) GROUP BY window_start, window_end, k");
        q("window_cumulate", "plain,minibatch", "SELECT window_start, window_end, k, COUNT(*) AS cnt, SUM(v) AS total "
                + "FROM TABLE(CUMULATE(TABLE src, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end, k");
        q("window_session", "plain,minibatch", "SELECT window_start, window_end, k, COUNT(*) AS cnt, SUM(v) AS total "
                + "FROM TABLE(SESSION(TABLE src PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end, k");
        q("window_tvf_session", "plain", "SELECT window_start, window_end, k, id FROM TABLE(SESSION(TABLE src PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' SECOND))");
        // legacy group windows (GroupWindowAggregate: TimeWindow namespaces; a session window merges)
        q("gwindow_hop", "plain", "SELECT HOP_START(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) AS ws, k, COUNT(*) AS cnt "
                + "FROM src GROUP BY HOP(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND), k");
        q("gwindow_session", "plain", "SELECT SESSION_START(ts, INTERVAL '5' SECOND) AS ws, k, COUNT(*) AS cnt, SUM(v) AS total "
                + "FROM src GROUP BY SESSION(ts, INTERVAL '5' SECOND), k");
        // window join, window Top-N, window deduplication
        q("window_join", "plain,minibatch", "SELECT L.k, L.window_start, L.window_end, L.id AS lid, R.id AS rid "
                + "FROM (SELECT * FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '10' SECOND))) L "
                + "JOIN (SELECT * FROM TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '10' SECOND))) R "
                + "ON L.k = R.k AND L.window_start = R.window_start AND L.window_end = R.window_end");
        q("window_topn", "plain,minibatch", "SELECT window_start, window_end, k, id, v FROM (SELECT window_start, window_end, k, id, v, "
                + "ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY v DESC, id DESC) AS rn "
                + "FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '20' SECOND))) WHERE rn <= 2");
        q("window_topn_agg", "plain,minibatch", "SELECT window_start, window_end, k, cnt FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY window_start, window_end ORDER BY cnt DESC) AS rn FROM (SELECT window_start, window_end, k, COUNT(*) AS cnt "
                + "FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '20' SECOND)) GROUP BY window_start, window_end, k)) WHERE rn <= 2");
        q("window_dedup", "plain,minibatch", "SELECT window_start, window_end, k, id, v FROM (SELECT window_start, window_end, k, id, v, "
                + "ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY ts DESC) AS rn FROM " + TUMBLE + ") WHERE rn = 1");
        // over aggregates: rows and range, bounded and unbounded, event and processing time
        String over = "SELECT id, k, v, SUM(v) OVER w AS s, COUNT(v) OVER w AS c FROM src WINDOW w AS (PARTITION BY k ORDER BY ";
        q("over_rows", "plain,minibatch", over + "ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)");
        q("over_range", "plain,minibatch", over + "ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW)");
        q("over_rows_unbounded", "plain", over + "ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)");
        q("over_range_unbounded", "plain", over + "ts RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)");
        q("over_rows_pt", "plain", over + "pt ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)");
        q("over_range_pt", "plain", over + "pt RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW)");
        q("over_unbounded_pt", "plain", over + "pt ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)");
        // Top-N: append-only (ROW_NUMBER, RANK), over an updating input (retractable: a sort key that is not monotonic;
        // updatable: COUNT descending), Top-1, first N by processing time, ORDER BY ... LIMIT, LIMIT, ORDER BY event time,
        // ORDER BY another column
        q("topn", "plain,minibatch", "SELECT k, id, v FROM (SELECT k, id, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC, id DESC) AS rn FROM src) WHERE rn <= 3");
        q("topn_rank", "plain", "SELECT k, id, v, rk FROM (SELECT k, id, v, RANK() OVER (PARTITION BY k ORDER BY v DESC) AS rk FROM src) WHERE rk <= 2");
        q("topn_retract", "plain,minibatch", "SELECT g, k, av FROM (SELECT g, k, av, ROW_NUMBER() OVER (PARTITION BY g ORDER BY av DESC) AS rn "
                + "FROM (SELECT MOD(id, 2) AS g, k, AVG(v) AS av FROM src GROUP BY MOD(id, 2), k)) WHERE rn <= 2");
        q("topn_update", "plain,minibatch", "SELECT g, k, cnt FROM (SELECT g, k, cnt, ROW_NUMBER() OVER (PARTITION BY g ORDER BY cnt DESC) AS rn "
                + "FROM (SELECT MOD(id, 3) AS g, k, COUNT(*) AS cnt FROM src GROUP BY MOD(id, 3), k)) WHERE rn <= 2");
        q("top1", "plain,minibatch", "SELECT g, k, cnt FROM (SELECT g, k, cnt, ROW_NUMBER() OVER (PARTITION BY g ORDER BY cnt DESC) AS rn "
                + "FROM (SELECT MOD(id, 5) AS g, k, COUNT(*) AS cnt FROM src GROUP BY MOD(id, 5), k)) WHERE rn = 1");
        q("topn_first", "plain", "SELECT k, id FROM (SELECT k, id, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt ASC) AS rn FROM src) WHERE rn <= 2");
        q("sort_limit", "plain", "SELECT k, id, v FROM src ORDER BY v DESC, id DESC LIMIT 3");
        q("limit", "plain", "SELECT id, k FROM src LIMIT 5");
        q("temporal_sort", "plain", "SELECT id, k, ts FROM src ORDER BY ts, id");
        q("sort", "plain", "SELECT id, k, v FROM src ORDER BY v, id");  // table.exec.sort.non-temporal.enabled: an operator state
        // deduplication: first and last row, processing and event time (minibatch: the mini-batch functions)
        String dedup = "SELECT id, k, v FROM (SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ";
        q("dedup_first_pt", "plain,minibatch", dedup + "pt ASC) AS rn FROM src) WHERE rn = 1");
        q("dedup_last_pt", "plain,minibatch", dedup + "pt DESC) AS rn FROM src) WHERE rn = 1");
        q("dedup_first_rt", "plain,minibatch", dedup + "ts ASC) AS rn FROM src) WHERE rn = 1");
        q("dedup_last_rt", "plain,minibatch", dedup + "ts DESC) AS rn FROM src) WHERE rn = 1");
        // MATCH_RECOGNIZE (the CEP operator: NFA state, shared buffer, event queue)
        q("match", "plain", "SELECT * FROM src MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(A.id) AS aid, "
                + "LAST(A.id) AS alast, B.id AS bid ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A+ B) "
                + "DEFINE A AS A.v < 4, B AS B.v >= 4)");
        // changelog normalize (an upsert source), sink upsert materializer (a sink keyed by a column that is not the
        // input's upsert key)
        q("normalize", "plain,minibatch", "SELECT pk, name, k FROM upserts WHERE id >= 0");
        String upsert = "SELECT b.k, a.mv, b.id FROM (SELECT k, MAX(v) AS mv FROM src GROUP BY k) a JOIN r b ON a.k = b.k";
        QUERIES.add(new Q("upsert_sink", "plain,minibatch,multijoin", upsert, "k", 1, "DEDUPLICATE"));
        QUERIES.add(new Q("upsert_sink_nothing", "plain", upsert, "k", 2, "NOTHING"));
        // a three-way join (Flink 2.x with table.optimizer.multi-join.enabled: one MultiJoin operator)
        QUERIES.add(new Q("multi_join", "multijoin", "SELECT a.id, b.id AS bid, c.id AS cid FROM l a JOIN r b ON a.k = b.k "
                + "JOIN (SELECT * FROM src WHERE v = 0) c ON b.k = c.k", null, 2, null));
        // a table aggregate (Table API flatAggregate: GroupTableAggregate), added as a pipeline
        q("table_agg", "plain", null);
    }

    /** Top2: the two largest values of a group (a table aggregate; its accumulator is the operator's state). */
    @FunctionHint(output = @DataTypeHint("ROW<v INT, rnk INT>"))
    public static class Top2 extends TableAggregateFunction<Row, Top2.Acc> {
        public static class Acc {
            public Integer first = Integer.MIN_VALUE;
            public Integer second = Integer.MIN_VALUE;
        }

        @Override
        public Acc createAccumulator() {
            return new Acc();
        }

        public void accumulate(Acc acc, Integer v) {
            if (v > acc.first) {
                acc.second = acc.first;
                acc.first = v;
            } else if (v > acc.second) {
                acc.second = v;
            }
        }

        public void emitValue(Acc acc, Collector<Row> out) {
            if (acc.first != Integer.MIN_VALUE) out.collect(Row.of(acc.first, 1));
            if (acc.second != Integer.MIN_VALUE) out.collect(Row.of(acc.second, 2));
        }
    }

    static int major() {
        return Integer.parseInt(EnvironmentInformation.getVersion().split("\\.")[0]);
    }

    static TableEnvironment env(String set, String backend, int parallelism, String restore) {
        Configuration conf = new Configuration();
        SqlJob.set(conf, backend, "state.backend.type", "state.backend");
        SqlJob.set(conf, "false", "execution.checkpointing.incremental", "state.backend.incremental");
        SqlJob.set(conf, "0", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        SqlJob.set(conf, String.valueOf(parallelism), "parallelism.default");
        conf.setString("table.exec.sort.non-temporal.enabled", "true");
        if (set.equals("plain")) {
            conf.setString("table.optimizer.agg-phase-strategy", "ONE_PHASE");
        } else if (set.equals("multijoin")) {  // Flink 2.x: every regular join one MultiJoin operator; the MAP sink materializer
            conf.setString("table.optimizer.multi-join.enabled", "true");
            conf.setString("table.exec.sink.upsert-materialize-strategy.type", "MAP");
        } else {
            conf.setString("table.exec.mini-batch.enabled", "true");
            conf.setString("table.exec.mini-batch.allow-latency", "200 ms");
            conf.setString("table.exec.mini-batch.size", "50");
            conf.setString("table.optimizer.agg-phase-strategy", "TWO_PHASE");
            conf.setString("table.optimizer.distinct-agg.split.enabled", "true");
            conf.setString("table.exec.state.ttl", "1 h");
            conf.setString("table.optimizer.non-deterministic-update.strategy", "TRY_RESOLVE");
            conf.setString("table.exec.sink.upsert-materialize-strategy.type", "VALUE");  // 2.3: SinkUpsertMaterializerV2
        }
        if (!restore.isEmpty()) SqlJob.set(conf, restore, "execution.state-recovery.path", "execution.savepoint.path");
        return TableEnvironment.create(EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
    }

    static void declare(TableEnvironment t, long rows, int rate) {
        t.executeSql("CREATE TABLE gen (id BIGINT, pt AS PROCTIME(), ts AS TO_TIMESTAMP_LTZ(LEAST(id, " + rows + ") * 1000, 3), "
                + "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'flinkstate-gen', 'mode' = 'insert', 'rate' = '" + rate + "')");
        t.executeSql("CREATE VIEW src AS SELECT id, CONCAT('k', CAST(MOD(id, 4) AS STRING)) AS k, CAST(MOD(id, 7) AS INT) AS v, pt, ts "
                + "FROM gen WHERE id < " + rows);
        t.executeSql("CREATE VIEW l AS SELECT * FROM src WHERE MOD(id, 3) = 0");
        t.executeSql("CREATE VIEW r AS SELECT * FROM src WHERE MOD(id, 3) <> 0");
        t.executeSql("CREATE VIEW versions AS SELECT k, v, id, ts FROM (SELECT k, v, id, ts, "
                + "ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM r) WHERE rn = 1");
        for (String name : new String[] {"upserts", "dim", "dim_async"}) {
            t.executeSql("CREATE TABLE " + name + " (pk BIGINT NOT NULL, name STRING, k STRING, id BIGINT, pt AS PROCTIME(), "
                    + "PRIMARY KEY (pk) NOT ENFORCED) WITH ('connector' = 'flinkstate-gen', 'mode' = 'upsert', 'rows' = '" + rows + "', 'rate' = '"
                    + rate + "', 'async' = '" + name.equals("dim_async") + "')");
        }
        t.createTemporarySystemFunction("RatesPt", t.from("r").createTemporalTableFunction($("pt"), $("k")));
        t.createTemporarySystemFunction("Top2", Top2.class);
        t.executeSql("CREATE TABLE s_progress (id BIGINT) WITH ('connector' = 'print', 'print-identifier' = '" + SqlJob.IDENTIFIER + "')");
    }

    static Table table(TableEnvironment t, Q q) {
        if (q.sql != null) return t.sqlQuery(q.sql);
        return t.from("src").groupBy($("k")).flatAggregate(call("Top2", $("v")).as("v", "rnk")).select($("k"), $("v"), $("rnk"));
    }

    /** The sink s_NAME shaped like the query's result (its key columns NOT NULL and the PRIMARY KEY when it has one). */
    static void sink(TableEnvironment t, Q q) {
        StringJoiner columns = new StringJoiner(", ");
        for (Column c : table(t, q).getResolvedSchema().getColumns()) {
            boolean key = c.getName().equals(q.sinkKey);
            columns.add("`" + c.getName() + "` " + c.getDataType().getLogicalType().copy(!key).asSerializableString());
        }
        if (q.sinkKey != null) columns.add("PRIMARY KEY (`" + q.sinkKey + "`) NOT ENFORCED");
        t.executeSql("CREATE TABLE s_" + q.name + " (" + columns + ") WITH ('connector' = 'blackhole')");
    }

    static void add(TableEnvironment t, StatementSet set, Q q) {
        if (q.sql != null) set.addInsertSql(q.statement(major()));
        else set.add(table(t, q).insertInto("s_" + q.name));
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static Throwable root(Throwable e) {
        while (e.getCause() != null && e.getCause() != e) e = e.getCause();
        return e;
    }

    /** Compile the set's queries (each alone first: the ones Flink refuses are recorded with its reason); the plan. */
    static String compile(TableEnvironment t, String set, Path out) throws Exception {
        StatementSet all = t.createStatementSet();
        all.addInsertSql("INSERT INTO s_progress SELECT id FROM gen WHERE id >= 0 AND MOD(id, 10) = 0");
        StringJoiner doc = new StringJoiner(",\n", "{\n", "\n}\n");
        int major = major();
        for (Q q : QUERIES) {
            if (!java.util.Arrays.asList(q.sets.split(",")).contains(set) || major < q.minMajor) continue;
            String status;
            try {
                sink(t, q);
                StatementSet one = t.createStatementSet();
                add(t, one, q);
                CompiledPlan compiled = one.compilePlan();
                compiled.asJsonString();  // a node without JSON serialization fails only here
                compiled.explain(ExplainDetail.JSON_EXECUTION_PLAN);  // and one the planner cannot translate only here
                add(t, all, q);
                status = "\"compiled\": true";
            } catch (Exception e) {
                Throwable r = root(e);
                status = "\"compiled\": false, \"refused\": " + json(r.getClass().getName() + ": " + String.valueOf(r.getMessage()).split("\n")[0]);
            }
            String statement = q.statement(major);
            doc.add("  " + json(q.name) + ": {\"sink\": " + json("s_" + q.name) + ", \"statement\": " + json(statement) + ", " + status + "}");
        }
        Files.write(out.resolve("queries.json"), doc.toString().getBytes(StandardCharsets.UTF_8));
        Path plan = out.resolve("plan.json");
        Files.deleteIfExists(plan);
        all.compilePlan().writeToFile(plan.toString());
        return plan.toString();
    }

    public static void main(String[] a) {
        try {
            run(a);
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(1);  // the MiniCluster's threads would keep the JVM alive
        }
        System.exit(0);
    }

    static void run(String[] a) throws Exception {
        String mode = a[0];
        String set = a[1];
        if (!set.equals("plain") && !set.equals("minibatch") && !(set.equals("multijoin") && major() >= 2)) {
            throw new IllegalArgumentException("SET is plain, minibatch or (Flink 2.x) multijoin, not " + set);
        }
        Path out = Paths.get(a[2]).toAbsolutePath();
        Files.createDirectories(out);
        System.setOut(new java.io.PrintStream(new SqlJob.Capture(System.out), true, "UTF-8"));
        if (mode.equals("savepoint")) {
            long rows = Long.parseLong(a[3]);
            int rate = Integer.parseInt(a[4]);
            String backend = a[5];
            int parallelism = Integer.parseInt(a[6]);
            TableEnvironment t = env(set, backend, parallelism, "");
            declare(t, rows, rate);
            String plan = compile(t, set, out);
            JobClient client = t.loadPlan(PlanReference.fromFile(plan)).execute().getJobClient().orElseThrow(IllegalStateException::new);
            long past = rows + 2L * rate;
            while (true) {
                if (client.getJobStatus().get().isGloballyTerminalState()) throw new IllegalStateException("the job ended before its savepoint");
                boolean done;
                synchronized (SqlJob.CHANGELOG) {
                    done = SqlJob.CHANGELOG.stream().anyMatch(s -> s.startsWith("+I[") && Long.parseLong(s.substring(3, s.length() - 1)) >= past);
                }
                if (done) break;
                Thread.sleep(50);
            }
            if (backend.equals("rocksdb")) {
                // the dump is of a canonical savepoint, the fixture the native one taken right after: nothing may change
                // between the two. A first savepoint makes sure every operator processed every data row (a lagging one
                // may get its last rows just before a barrier); then the processing-time timers those rows registered
                // (a processing-time RANGE OVER's, due 1 ms later) fire before the two savepoints are taken
                client.triggerSavepoint(out.resolve("flush-dir").toUri().toString(), SavepointFormatType.CANONICAL).get();
                Thread.sleep(3000);
                String canonical = client.triggerSavepoint(out.resolve("canonical-dir").toUri().toString(), SavepointFormatType.CANONICAL).get();
                Files.write(out.resolve("canonical.txt"), canonical.getBytes(StandardCharsets.UTF_8));
            }
            SavepointFormatType type = backend.equals("rocksdb") ? SavepointFormatType.NATIVE : SavepointFormatType.CANONICAL;
            String path = client.stopWithSavepoint(false, out.resolve("savepoint-dir").toUri().toString(), type).get();
            Files.write(out.resolve("savepoint.txt"), path.getBytes(StandardCharsets.UTF_8));
            client.getJobExecutionResult().get();
            return;
        }
        if (!mode.equals("restore")) throw new IllegalArgumentException("mode is savepoint or restore, not " + mode);
        String plan = Paths.get(a[3]).toAbsolutePath().toString();
        String backend = a[4];
        int parallelism = Integer.parseInt(a[5]);
        String savepoint = Paths.get(a[6]).toAbsolutePath().toUri().toString();
        long seconds = Long.parseLong(a[7]);
        TableEnvironment t = env(set, backend, parallelism, savepoint);
        declare(t, Long.parseLong(a[8]), Integer.parseInt(a[9]));  // the functions the plan calls
        JobClient client = t.loadPlan(PlanReference.fromFile(plan)).execute().getJobClient().orElseThrow(IllegalStateException::new);
        long end = Long.MAX_VALUE;
        while (System.currentTimeMillis() < end) {
            if (end == Long.MAX_VALUE && !SqlJob.CHANGELOG.isEmpty()) {  // running: its source's rows reach the progress sink
                end = System.currentTimeMillis() + seconds * 1000;
            }
            if (client.getJobStatus().get().isGloballyTerminalState()) {
                client.getJobExecutionResult().get();  // the failure's cause
                throw new IllegalStateException("the restored job ended: " + client.getJobStatus().get());
            }
            Thread.sleep(100);
        }
        String path = client.stopWithSavepoint(false, out.resolve("savepoint-dir").toUri().toString(), SavepointFormatType.CANONICAL).get();
        Files.write(out.resolve("savepoint.txt"), path.getBytes(StandardCharsets.UTF_8));
        client.getJobExecutionResult().get();
        System.err.println("restored and ran " + seconds + " s: " + path);
    }
}
