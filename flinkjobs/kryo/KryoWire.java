import java.io.PrintWriter;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;

/**
 * Every Kryo wire form flinkstate decodes, written by this Flink version's own KryoSerializer (Kryo 2.24 in Flink 1.x,
 * Kryo 5.6 in 2.x, as Flink configures it: references on, its default registrations, the job's registrations).
 *
 * gen OUT: one JSON line per sample: {"group", "name", "hex": the serialized bytes, "value": the value rendered as tagged
 * JSON ({"c": class, "v": ...})}, and per group one line {"group", "snapshot": the KryoSerializer's versioned snapshot}.
 * read IN OUT: IN has lines "group<TAB>name<TAB>hex" (bytes flinkstate encoded); OUT gets, per line, the value this Flink's
 * KryoSerializer of that group reads from them, rendered the same way (or "ERROR: ..."), and whether all bytes were read.
 */
public class KryoWire {
    public enum Color { RED, GREEN, BLUE }

    /** An enum whose constants have bodies: each constant is its own subclass. */
    public enum Op {
        PLUS { int apply(int a, int b) { return a + b; } },
        MINUS { int apply(int a, int b) { return a - b; } };
        abstract int apply(int a, int b);
    }

    /** A user class as Kryo's FieldSerializer writes it: fields of every kind, sorted by name on the wire. */
    public static class Order {
        public String id;
        public long amount;
        public int qty;
        public double price;
        public float ratio;
        public short small;
        public byte tiny;
        public char letter;
        public boolean paid;
        public Long boxed;
        public Integer count;
        public List<String> tags;
        public Map<String, Long> counts;
        public Set<Integer> codes;
        public Color color;
        public Line line;
        public LocalDate day;
        public int[] ints;
        public String[] names;
        public Object any;
        public transient String skipped = "transient";
        public static String STATIC = "static";
        public Order() {}
    }

    /** A nested user class (not final: its class is written before it). */
    public static class Line {
        public String sku;
        public long n;
        public Line() {}
        public Line(String sku, long n) { this.sku = sku; this.n = n; }
    }

    /** A final user class: a field of this type is written without its class. */
    public static final class Point {
        public int x;
        public int y;
        public Point() {}
        Point(int x, int y) { this.x = x; this.y = y; }
    }

    /** A subclass: the superclass's fields too, all sorted by name together. */
    public static class Special extends Line {
        public String note;
        public Point at;
        public Special() {}
    }

    /** Generic fields nested two deep: Kryo 2 knows the first level's element classes, Kryo 5 every level's. */
    public static class Deep {
        public Map<String, List<String>> byKey;
        public List<List<Long>> rows;
        public List<Line> lines;
        public Map<Color, Long> byColor;
        public Set<String> names;
        public Deep() {}
    }

    /** Not a POJO (no default constructor, private final fields): what Flink hands to Kryo; registered by id in group "reg". */
    public static class Item {
        private final String sku;
        private final int qty;
        private final double price;
        private final List<Long> history;
        Item(String sku, int qty, double price, List<Long> history) { this.sku = sku; this.qty = qty; this.price = price; this.history = history; }
    }

    static Order order(int i) {
        Order o = new Order();
        o.id = "order-" + i;
        o.amount = i == 0 ? Long.MIN_VALUE : 1234567890123L * i;
        o.qty = -i;
        o.price = 9.75 * i;
        o.ratio = 0.5f;
        o.small = (short) -300;
        o.tiny = (byte) 7;
        o.letter = 'é';
        o.paid = i % 2 == 0;
        o.boxed = i == 1 ? null : (long) i;
        o.count = 42;
        o.tags = i == 2 ? null : new ArrayList<>(Arrays.asList("a", "bé", "c" + i));
        o.counts = new HashMap<>();
        o.counts.put("x", 1L);
        o.counts.put("y", (long) i);
        o.codes = new HashSet<>(Arrays.asList(3, 1, i));
        o.color = Color.values()[i % 3];
        o.line = i == 1 ? new Special() : new Line("sku" + i, i);
        if (o.line instanceof Special) { ((Special) o.line).note = "special"; ((Special) o.line).sku = "s"; ((Special) o.line).at = new Point(1, -1); }
        o.day = LocalDate.of(2024, 2, 29).plusDays(i);
        o.ints = new int[] {i, -i, 300};
        o.names = new String[] {"n", null};
        o.any = i == 0 ? (Object) 5L : "anything";
        return o;
    }

    /** The samples of each group: group -> (type the KryoSerializer is made for, classes registered with Kryo, values). */
    static Map<String, Object[]> groups() {
        Map<String, Object[]> g = new LinkedHashMap<>();
        Map<String, Object> v = new LinkedHashMap<>();
        // boxed primitives
        for (int x : new int[] {0, 1, -1, 63, 64, -65, 300, Integer.MAX_VALUE, Integer.MIN_VALUE}) v.put("int " + x, x);
        for (long x : new long[] {0L, -1L, 1L << 40, Long.MAX_VALUE, Long.MIN_VALUE}) v.put("long " + x, x);
        v.put("short", (short) -300);
        v.put("byte", (byte) -128);
        v.put("char a", 'a');
        v.put("char e-acute", 'é');
        v.put("char ffff", '\uffff');
        v.put("boolean true", true);
        v.put("boolean false", false);
        v.put("float", 1.5f);
        v.put("float -0", -0.0f);
        v.put("double", 3.25);
        v.put("double -1e300", -1e300);
        // strings
        v.put("string empty", "");
        v.put("string one char", "a");
        v.put("string one non-ascii", "é");
        v.put("string ascii", "hello");
        v.put("string ascii 32", "abcdefghijklmnopqrstuvwxyz012345");
        v.put("string ascii 33", "abcdefghijklmnopqrstuvwxyz0123456");
        v.put("string ascii 63", "x".repeat(63));
        v.put("string ascii 64", "y".repeat(64));
        v.put("string ascii 300", "z".repeat(300));
        v.put("string latin1", "naïve café");
        v.put("string cjk", "日本語");
        v.put("string surrogates", "\ud83d\ude00x");
        v.put("string nul", "a\u0000b");
        // big numbers
        v.put("biginteger 0", BigInteger.ZERO);
        v.put("biginteger -1", BigInteger.ONE.negate());
        v.put("biginteger 2^100", BigInteger.ONE.shiftLeft(100));
        v.put("biginteger -2^70", BigInteger.ONE.shiftLeft(70).negate());
        v.put("bigdecimal 0", BigDecimal.ZERO);
        v.put("bigdecimal 1.50", new BigDecimal("1.50"));
        v.put("bigdecimal negative", new BigDecimal("-123456789.123456789"));
        v.put("bigdecimal 1E+10", new BigDecimal("1E+10"));
        v.put("bigdecimal wide", new BigDecimal(BigInteger.ONE.shiftLeft(100), -3));
        // dates and times
        v.put("date 0", new java.util.Date(0));
        v.put("date", new java.util.Date(1700000000123L));
        v.put("date negative", new java.util.Date(-86400000L * 400));
        v.put("sql date", new java.sql.Date(1700000000000L));
        v.put("sql timestamp", sqlTimestamp());
        v.put("localdate", LocalDate.of(2024, 2, 29));
        v.put("localdate old", LocalDate.of(-44, 3, 15));
        v.put("localtime", LocalTime.of(13, 45, 30, 123456789));
        v.put("localtime midnight", LocalTime.MIDNIGHT);
        v.put("localtime minutes", LocalTime.of(7, 5));
        v.put("localtime seconds", LocalTime.of(7, 5, 9));
        v.put("localdatetime", LocalDateTime.of(2023, 12, 31, 23, 59, 59, 999));
        v.put("instant", Instant.ofEpochSecond(1700000000L, 123456789));
        v.put("instant negative", Instant.ofEpochSecond(-1L));
        v.put("duration", Duration.ofMillis(1500));
        v.put("duration negative", Duration.ofSeconds(-90, 5));
        // enums
        v.put("enum", Color.GREEN);
        v.put("enum with body", Op.MINUS);
        // arrays
        v.put("int[]", new int[] {1, -2, 300});
        v.put("long[]", new long[] {1L, -2L, Long.MIN_VALUE});
        v.put("byte[]", new byte[] {0, -1, 127});
        v.put("short[]", new short[] {1, -2});
        v.put("char[]", new char[] {'a', 'é'});
        v.put("boolean[]", new boolean[] {true, false});
        v.put("float[]", new float[] {1.5f, -2f});
        v.put("double[]", new double[] {0.1, -2.5});
        v.put("int[] empty", new int[0]);
        v.put("String[]", new String[] {"a", null, "bé"});
        v.put("Long[]", new Long[] {1L, null, 3L});
        v.put("Object[]", new Object[] {1, "x", null, 2L});
        v.put("int[][]", new int[][] {{1}, {2, 3}});
        v.put("Color[]", new Color[] {Color.BLUE, null});
        // collections and maps
        v.put("ArrayList<Long>", new ArrayList<>(Arrays.asList(1L, 2L, 3L)));
        v.put("ArrayList empty", new ArrayList<>());
        v.put("ArrayList mixed", new ArrayList<>(Arrays.asList("a", 1, null, 2.5)));
        v.put("ArrayList nulls", new ArrayList<>(Arrays.asList(null, null)));
        v.put("ArrayList with null", new ArrayList<>(Arrays.asList("a", null)));
        v.put("LinkedList<String>", new LinkedList<>(Arrays.asList("x", "y")));
        v.put("HashMap<String,Long>", new HashMap<>(Map.of("a", 1L, "b", 2L)));
        v.put("HashMap empty", new HashMap<>());
        Map<String, Long> withNull = new HashMap<>();
        withNull.put("k", null);
        withNull.put(null, 3L);
        v.put("HashMap nulls", withNull);
        LinkedHashMap<Integer, String> lhm = new LinkedHashMap<>();
        lhm.put(3, "c");
        lhm.put(1, "a");
        v.put("LinkedHashMap<Integer,String>", lhm);
        v.put("TreeMap<String,Double>", new TreeMap<>(Map.of("b", 2.0, "a", 1.0)));
        v.put("HashSet<Integer>", new HashSet<>(Arrays.asList(3, 1, 2)));
        v.put("LinkedHashSet<String>", new LinkedHashSet<>(Arrays.asList("z", "a")));
        v.put("TreeSet<Long>", new TreeSet<>(Arrays.asList(5L, -1L)));
        v.put("Arrays.asList", Arrays.asList("x", "y"));
        v.put("Arrays.asList Long", Arrays.asList(1L, null));
        v.put("emptyList", Collections.emptyList());
        v.put("emptyMap", Collections.emptyMap());
        v.put("emptySet", Collections.emptySet());
        v.put("singletonList", Collections.singletonList("s"));
        v.put("singletonMap", Collections.singletonMap("k", 1L));
        v.put("singleton", Collections.singleton(7));
        List<Map<String, List<Long>>> nested = new ArrayList<>();
        Map<String, List<Long>> inner = new HashMap<>();
        inner.put("xs", new ArrayList<>(Arrays.asList(1L, 2L)));
        inner.put("none", new ArrayList<>());
        nested.add(inner);
        nested.add(new HashMap<>());
        v.put("nested", nested);
        String shared = new String("shared");
        List<Object> refs = new ArrayList<>();
        List<Long> sub = new ArrayList<>(Arrays.asList(9L));
        refs.add(shared);
        refs.add(shared);
        refs.add(sub);
        refs.add(sub);
        refs.add(Color.RED);
        refs.add(Color.RED);
        v.put("references", refs);
        // user classes by their fields
        v.put("Order 0", order(0));
        v.put("Order 1", order(1));
        v.put("Order 2", order(2));
        v.put("Line", new Line("l", 5));
        v.put("Point", new Point(3, 4));
        v.put("List<Order>", new ArrayList<>(Arrays.asList(order(3), order(4))));
        Deep deep = new Deep();
        deep.byKey = new LinkedHashMap<>();
        deep.byKey.put("a", new ArrayList<>(Arrays.asList("x", "y")));
        deep.byKey.put("b", new LinkedList<>());
        deep.rows = new ArrayList<>(Arrays.asList(new ArrayList<>(Arrays.asList(1L, 2L)), new LinkedList<>(Arrays.asList(3L))));
        deep.lines = new ArrayList<>(Arrays.asList(new Line("l1", 1), null, new Line("l2", 2)));
        deep.byColor = new TreeMap<>(Map.of(Color.RED, 1L, Color.BLUE, 3L));
        deep.names = new TreeSet<>(Arrays.asList("b", "a"));
        v.put("Deep", deep);
        v.put("Deep empty", new Deep());
        v.put("List.of", List.of("a", "b", "c"));
        v.put("List.of one", List.of(1L));
        v.put("Set.of one", Set.of(5));
        v.put("Map.of", Map.of("k", 1L));
        v.put("UUID", new java.util.UUID(0x0123456789abcdefL, -2L));
        v.put("Item", new Item("i", 2, 0.25, new ArrayList<>(Arrays.asList(1L, 2L))));
        g.put("object", new Object[] {Object.class, new Class<?>[0], v});

        // the job's registrations: classes written by registration id
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("Item", new Item("reg", 1, 1.5, new LinkedList<>(Arrays.asList(7L))));
        r.put("Item null history", new Item("reg2", -1, -0.5, null));
        r.put("List<Item>", new ArrayList<>(Arrays.asList(new Item("a", 1, 1, null), new Item("b", 2, 2, null))));
        r.put("Color", Color.BLUE);
        r.put("Line", new Line("by-id", 3));
        g.put("registered", new Object[] {Object.class, new Class<?>[] {Item.class, Color.class, Line.class}, r});

        // a serializer made for ArrayList: ArrayList is registered first
        Map<String, Object> t = new LinkedHashMap<>();
        t.put("ArrayList<Long>", new ArrayList<>(Arrays.asList(10L, 20L)));
        t.put("ArrayList<ArrayList<String>>", new ArrayList<>(Arrays.asList(new ArrayList<>(Arrays.asList("a")), new ArrayList<>())));
        g.put("typed", new Object[] {ArrayList.class, new Class<?>[0], t});
        return g;
    }

    static java.sql.Timestamp sqlTimestamp() {
        java.sql.Timestamp ts = new java.sql.Timestamp(1700000000123L);
        ts.setNanos(123456789);
        return ts;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static KryoSerializer<Object> serializer(Object[] group) {
        SerializerConfigImpl config = new SerializerConfigImpl();
        for (Class<?> c : (Class<?>[]) group[1]) config.registerKryoType(c);
        return new KryoSerializer<>((Class) group[0], config);
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }

    static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return b;
    }

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String tag(Object o, String v) { return "{\"c\":" + q(o.getClass().getName()) + ",\"v\":" + v + "}"; }

    /** The value as tagged JSON: every non-null value is {"c": its class, "v": ...}; numbers exactly (floats as their bits). */
    static String render(Object o) throws Exception {
        if (o == null) return "null";
        if (o instanceof String) return tag(o, q((String) o));
        if (o instanceof Integer || o instanceof Long || o instanceof Short || o instanceof Byte) return tag(o, o.toString());
        if (o instanceof Boolean) return tag(o, o.toString());
        if (o instanceof Character) return tag(o, Integer.toString((Character) o));
        if (o instanceof Float) return tag(o, Integer.toString(Float.floatToRawIntBits((Float) o)));
        if (o instanceof Double) return tag(o, Long.toString(Double.doubleToRawLongBits((Double) o)));
        if (o instanceof BigInteger) return tag(o, q(o.toString()));
        if (o instanceof BigDecimal) return tag(o, "[" + q(((BigDecimal) o).unscaledValue().toString()) + "," + ((BigDecimal) o).scale() + "]");
        if (o instanceof java.sql.Timestamp) return tag(o, "[" + ((java.sql.Timestamp) o).getTime() + "," + ((java.sql.Timestamp) o).getNanos() + "]");
        if (o instanceof java.util.Date) return tag(o, Long.toString(((java.util.Date) o).getTime()));
        if (o instanceof LocalDate) return tag(o, Long.toString(((LocalDate) o).toEpochDay()));
        if (o instanceof LocalTime) return tag(o, Long.toString(((LocalTime) o).toNanoOfDay()));
        if (o instanceof LocalDateTime) return tag(o, "[" + ((LocalDateTime) o).toLocalDate().toEpochDay() + "," + ((LocalDateTime) o).toLocalTime().toNanoOfDay() + "]");
        if (o instanceof Instant) return tag(o, "[" + ((Instant) o).getEpochSecond() + "," + ((Instant) o).getNano() + "]");
        if (o instanceof Duration) return tag(o, "[" + ((Duration) o).getSeconds() + "," + ((Duration) o).getNano() + "]");
        if (o instanceof Enum) return "{\"c\":" + q(((Enum<?>) o).getDeclaringClass().getName()) + ",\"v\":" + q(((Enum<?>) o).name()) + "}";
        if (o.getClass().isArray()) {
            StringBuilder b = new StringBuilder("[");
            for (int i = 0; i < Array.getLength(o); i++) b.append(i > 0 ? "," : "").append(render(Array.get(o, i)));
            return tag(o, b.append("]").toString());
        }
        if (o instanceof Collection) {
            StringBuilder b = new StringBuilder("[");
            for (Object e : (Collection<?>) o) b.append(b.length() > 1 ? "," : "").append(render(e));
            return tag(o, b.append("]").toString());
        }
        if (o instanceof Map) {
            StringBuilder b = new StringBuilder("[");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                b.append(b.length() > 1 ? "," : "").append("[").append(render(e.getKey())).append(",").append(render(e.getValue())).append("]");
            }
            return tag(o, b.append("]").toString());
        }
        StringBuilder b = new StringBuilder("{");
        for (Class<?> c = o.getClass(); c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) || Modifier.isTransient(f.getModifiers())) continue;
                f.setAccessible(true);
                b.append(b.length() > 1 ? "," : "").append(q(f.getName())).append(":").append(render(f.get(o)));
            }
        }
        return tag(o, b.append("}").toString());
    }

    public static void main(String[] args) throws Exception {
        Map<String, Object[]> groups = groups();
        if (args[0].equals("gen")) {
            try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(Paths.get(args[1]), StandardCharsets.UTF_8))) {
                for (Map.Entry<String, Object[]> g : groups.entrySet()) {
                    KryoSerializer<Object> s = serializer(g.getValue());
                    DataOutputSerializer snap = new DataOutputSerializer(256);
                    TypeSerializerSnapshot.writeVersionedSnapshot(snap, s.snapshotConfiguration());
                    w.println("{\"group\":" + q(g.getKey()) + ",\"snapshot\":" + q(hex(snap.getCopyOfBuffer())) + "}");
                    for (Map.Entry<String, Object> e : ((Map<String, Object>) g.getValue()[2]).entrySet()) {
                        DataOutputSerializer out = new DataOutputSerializer(64);
                        s.serialize(e.getValue(), out);
                        w.println("{\"group\":" + q(g.getKey()) + ",\"name\":" + q(e.getKey()) + ",\"hex\":" + q(hex(out.getCopyOfBuffer()))
                            + ",\"value\":" + render(e.getValue()) + "}");
                    }
                }
            }
        } else {
            List<String> lines = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
            try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(Paths.get(args[2]), StandardCharsets.UTF_8))) {
                for (String line : lines) {
                    String[] p = line.split("\t");
                    KryoSerializer<Object> s = serializer(groups.get(p[0]));
                    DataInputDeserializer in = new DataInputDeserializer(unhex(p[2]));
                    String out;
                    try {
                        Object o = s.deserialize(in);
                        out = render(o) + (in.available() == 0 ? "" : " LEFT " + in.available());
                    } catch (Exception e) {
                        out = "ERROR: " + e;
                    }
                    w.println(p[0] + "\t" + p[1] + "\t" + out);
                }
            }
        }
        System.exit(0);
    }
}
