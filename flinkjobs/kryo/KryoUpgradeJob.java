import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeHint;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.KeyedStateFunction;
import org.apache.flink.streaming.api.datastream.BroadcastStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.util.Collector;

/**
 * A job written against Flink 1.20's API whose state Flink 1.x gives to Kryo (issue 44), compiled as it is for 2.3.
 *
 * Operator "upgrade" (parallelism 2, Long key = record % 11), states declared as 1.x jobs declare them:
 * - "order": ValueState of the POJO Order (List<String> tags, Map<String, Long> counts, Set<Integer> codes, an enum, a long,
 *   a LocalDate, a Note): Flink 1.x serializes the List/Map/Set, LocalDate and Note fields with Kryo 2; Flink 2.x gives
 *   the List/Map/Set fields its List/Map/Set serializers (and still Kryo, 5, to the LocalDate and the Note);
 * - "history": ValueState<ArrayList<Long>> (a TypeHint): Kryo in both (Kryo 2 in 1.x, Kryo 5 in 2.x);
 * - "totals": MapState<String, HashMap<String, Long>>: Kryo map values in both;
 * - "items": ListState<Item>, Item a class with no default constructor (not a POJO), registered with Kryo: Kryo in both,
 *   by registration id;
 * - "note": ValueState<Note>, Note not a POJO and not registered: Kryo in both, its class written by name.
 *
 * gen OUT N BACKEND: records 0..N-1 on BACKEND (hashmap | rocksdb); a CANONICAL savepoint in OUT/savepoint and OUT/dump.txt,
 * the state the job holds (read back from Flink after every update).
 * restore SAVEPOINT OUT_FILE BACKEND [STATE...]: restores the job (only the states named, when any) and writes the same lines
 * from the restored state (applyToKeyedState).
 */
public class KryoUpgradeJob {
    static final int RATE = 2000;
    static final long KEYS = 11;
    static final ConcurrentSkipListMap<String, String> MODEL = new ConcurrentSkipListMap<>();
    static final ConcurrentSkipListSet<String> DUMP = new ConcurrentSkipListSet<>();
    static final AtomicLong DONE = new AtomicLong();
    static final MapStateDescriptor<String, Long> TRIGGER = new MapStateDescriptor<>("dump-trigger", Types.STRING, Types.LONG);

    public enum Color { RED, GREEN, BLUE }

    /** A POJO: public fields and a default constructor. */
    public static class Order {
        public String id;
        public List<String> tags;
        public Map<String, Long> counts;
        public Set<Integer> codes;
        public Color color;
        public long total;
        public LocalDate day;
        public Note last;  // not a POJO: a field Flink gives to Kryo in 1.x and 2.x alike
        public Order() {}

        @Override
        public String toString() {
            return "Order{id=" + id + ", tags=" + tags + ", counts=" + new TreeMap<>(counts) + ", codes=" + new TreeSet<>(codes)
                + ", color=" + color + ", total=" + total + ", day=" + day + ", last=" + last + "}";
        }
    }

    /** Not a POJO: no default constructor, private final fields. Registered with Kryo. */
    public static class Item {
        private final String sku;
        private final int qty;
        private final double price;
        Item(String sku, int qty, double price) { this.sku = sku; this.qty = qty; this.price = price; }

        @Override
        public String toString() { return "Item(" + sku + "," + qty + "," + price + ")"; }
    }

    /** Not a POJO and not registered with Kryo: its values carry its class name. */
    public static class Note {
        private final String text;
        private final long at;
        Note(String text, long at) { this.text = text; this.at = at; }

        @Override
        public String toString() { return "Note(" + text + "," + at + ")"; }
    }

    static ValueStateDescriptor<Note> note() { return new ValueStateDescriptor<>("note", Note.class); }
    static ValueStateDescriptor<Order> order() { return new ValueStateDescriptor<>("order", Order.class); }
    static ValueStateDescriptor<ArrayList<Long>> history() {
        return new ValueStateDescriptor<>("history", TypeInformation.of(new TypeHint<ArrayList<Long>>() {}));
    }
    static MapStateDescriptor<String, HashMap<String, Long>> totals() {
        return new MapStateDescriptor<>("totals", Types.STRING, TypeInformation.of(new TypeHint<HashMap<String, Long>>() {}));
    }
    static ListStateDescriptor<Item> items() { return new ListStateDescriptor<>("items", Item.class); }

    static List<StateDescriptor<?, ?>> states(List<String> only) {
        List<StateDescriptor<?, ?>> l = new ArrayList<>();
        for (StateDescriptor<?, ?> d : List.of(order(), history(), totals(), items(), note())) {
            if (only.isEmpty() || only.contains(d.getName())) l.add(d);
        }
        return l;
    }

    static String line(String state, long key, Object value) { return "upgrade " + state + " " + key + " " + value; }

    static String sorted(Map<String, Long> m) { return new TreeMap<>(m).toString(); }

    public static class Upgrade extends KeyedProcessFunction<Long, Long, Long> {
        transient ValueState<Order> order;
        transient ValueState<ArrayList<Long>> history;
        transient MapState<String, HashMap<String, Long>> totals;
        transient ListState<Item> items;
        transient ValueState<Note> note;

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (order == null) {  // declared on the first record (open(OpenContext) exists from 1.19, open(Configuration) until 1.x)
                order = getRuntimeContext().getState(order());
                history = getRuntimeContext().getState(history());
                totals = getRuntimeContext().getMapState(totals());
                items = getRuntimeContext().getListState(items());
                note = getRuntimeContext().getState(note());
            }
            long key = ctx.getCurrentKey();
            Order o = order.value();
            if (o == null) {
                o = new Order();
                o.id = "o" + key;
                o.tags = new ArrayList<>();
                o.counts = new HashMap<>();
                o.codes = new HashSet<>();
            }
            o.tags.add(v % 5 == 0 ? "tag-é" + v : "t" + (v % 4));
            o.counts.merge("c" + (v % 3), v, Long::sum);
            o.codes.add((int) (v % 7));
            o.color = Color.values()[(int) (v % 3)];
            o.total += v;
            o.day = LocalDate.of(2024, 1, 1).plusDays(v);
            o.last = v % 4 == 0 ? null : new Note("last-" + v, -v);
            order.update(o);
            MODEL.put("order " + key, line("order", key, order.value()));

            ArrayList<Long> h = history.value();
            if (h == null) h = new ArrayList<>();
            h.add(v);
            if (h.size() > 4) h.remove(0);
            history.update(h);
            MODEL.put("history " + key, line("history", key, history.value()));

            String uk = "m" + (v % 2);
            HashMap<String, Long> t = totals.get(uk);
            if (t == null) t = new HashMap<>();
            t.merge("n", 1L, Long::sum);
            t.merge("sum", v, Long::sum);
            totals.put(uk, t);
            MODEL.put("totals " + key + " " + uk, line("totals", key, uk + " " + sorted(totals.get(uk))));

            if (v % 2 == 0) {
                items.add(new Item("sku" + v, (int) (long) v, v * 0.5));
                List<Item> all = new ArrayList<>();
                for (Item i : items.get()) all.add(i);
                MODEL.put("items " + key, line("items", key, all));
            }
            note.update(new Note(v % 3 == 0 ? "note-" + v : "n" + v, v));
            MODEL.put("note " + key, line("note", key, note.value()));
            DONE.incrementAndGet();
        }
    }

    /** After restore: every key's state of the declared states, on the broadcast trigger. */
    public static class Dumper extends KeyedBroadcastProcessFunction<Long, Long, Long, Long> {
        final ArrayList<String> only;

        Dumper(List<String> only) { this.only = new ArrayList<>(only); }

        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {}

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            for (StateDescriptor<?, ?> d : states(only)) {
                String name = d.getName();
                KeyedStateFunction<Object, State> fn = (key, state) -> {
                    long k = (Long) key;
                    if (state instanceof ValueState) {
                        Object x = ((ValueState<?>) state).value();
                        if (x != null) DUMP.add(line(name, k, x));
                    } else if (state instanceof ListState) {
                        List<Object> els = new ArrayList<>();
                        for (Object e : ((ListState<?>) state).get()) els.add(e);
                        if (!els.isEmpty()) DUMP.add(line(name, k, els));
                    } else if (state instanceof MapState) {
                        for (Map.Entry<?, ?> e : ((MapState<?, ?>) state).entries()) {
                            DUMP.add(line(name, k, e.getKey() + " " + sorted((Map<String, Long>) e.getValue())));
                        }
                    }
                };
                ctx.applyToKeyedState((StateDescriptor) d, (KeyedStateFunction) fn);
            }
        }
    }

    static Configuration conf(String backend) {
        Configuration conf = new Configuration();
        Compat.set(conf, backend, "state.backend.type", "state.backend");
        Compat.set(conf, "0b", "execution.checkpointing.data-inline-threshold", "state.storage.fs.memory-threshold");
        conf.setString("rest.bind-port", "0");
        return conf;
    }

    static StreamExecutionEnvironment env(Configuration conf) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        // 1.x jobs call env.getConfig().registerKryoType(Item.class), which 2.0 removed (as it did the SerializerConfig method)
        ((SerializerConfigImpl) env.getConfig().getSerializerConfig()).registerKryoType(Item.class);
        return env;
    }

    static void gen(Path out, long n, String backend) throws Exception {
        StreamExecutionEnvironment env = env(conf(backend));
        DataStream<Long> in = Compat.generator(env, n, RATE).filter(v -> v >= 0).setParallelism(1).uid("real").name("real");
        Compat.discard(in.keyBy(v -> v % KEYS, Types.LONG).process(new Upgrade()).uid("upgrade").name("upgrade"));
        JobClient client = env.executeAsync("flinkstate-kryo-upgrade-" + backend);
        long deadline = System.currentTimeMillis() + 240_000 + 1000 * n / RATE;
        while (DONE.get() < n) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("records not processed in time");
            Thread.sleep(50);
        }
        Files.createDirectories(out);
        Path tmp = out.resolve("savepoint-tmp");
        String sp = client.triggerSavepoint(tmp.toUri().toString(), SavepointFormatType.CANONICAL).get();
        Files.move(Paths.get(new java.net.URI(sp)), out.resolve("savepoint"), StandardCopyOption.REPLACE_EXISTING);
        Files.delete(tmp);
        client.cancel().get();
        try (PrintWriter w = new PrintWriter(out.resolve("dump.txt").toFile(), StandardCharsets.UTF_8)) {
            for (String line : MODEL.values()) w.println(line);
        }
        System.out.println("wrote " + out + " (" + MODEL.size() + " dump lines)");
    }

    static void restore(String savepoint, Path outFile, String backend, List<String> only) throws Exception {
        Configuration conf = conf(backend);
        Compat.set(conf, savepoint, "execution.state-recovery.path", "execution.savepoint.path");
        Compat.set(conf, "true", "execution.state-recovery.ignore-unclaimed-state", "execution.savepoint.ignore-unclaimed-state");
        StreamExecutionEnvironment env = env(conf);
        DataStream<Long> none = Compat.one(env, -1L).filter(v -> v >= 0).uid("real").name("real");
        BroadcastStream<Long> trigger = Compat.one(env, 1L).broadcast(TRIGGER);
        Compat.discard(none.keyBy(v -> v % KEYS, Types.LONG).connect(trigger).process(new Dumper(only)).uid("upgrade").name("upgrade"));
        env.execute("flinkstate-kryo-upgrade-restore");
        try (PrintWriter w = new PrintWriter(outFile.toFile(), StandardCharsets.UTF_8)) {
            for (String line : DUMP) w.println(line);
        }
        System.out.println("dumped " + DUMP.size() + " lines");
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("gen")) {
            gen(Paths.get(args[1]).toAbsolutePath(), Long.parseLong(args[2]), args[3]);
        } else {
            restore(Paths.get(args[1]).toAbsolutePath().toUri().toString(), Paths.get(args[2]).toAbsolutePath(), args[3],
                new ArrayList<>(List.of(args).subList(4, args.length)));
        }
        System.exit(0);
    }
}
