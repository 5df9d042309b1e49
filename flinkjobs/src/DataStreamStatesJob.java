import java.io.ByteArrayOutputStream;
import java.io.PrintWriter;
import java.io.Serializable;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.JoinFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.AggregatingState;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.api.java.tuple.Tuple0;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.tuple.Tuple25;
import org.apache.flink.api.java.typeutils.EitherTypeInfo;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.api.java.typeutils.ListTypeInfo;
import org.apache.flink.api.java.typeutils.MapTypeInfo;
import org.apache.flink.api.java.typeutils.ObjectArrayTypeInfo;
import org.apache.flink.api.java.typeutils.runtime.NullableSerializer;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.cep.CEP;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.memory.DataOutputViewStreamWrapper;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.JavaSerializer;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredOperatorStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredPriorityQueueStateBackendMetaInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.BroadcastStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.TimerSerializer;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingProcessingTimeWindows;
import org.apache.flink.streaming.api.windowing.evictors.CountEvictor;
import org.apache.flink.streaming.api.windowing.evictors.TimeEvictor;
import org.apache.flink.streaming.api.windowing.triggers.Trigger;
import org.apache.flink.streaming.api.windowing.triggers.TriggerResult;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.BooleanValue;
import org.apache.flink.types.CharValue;
import org.apache.flink.types.DoubleValue;
import org.apache.flink.types.Either;
import org.apache.flink.types.IntValue;
import org.apache.flink.types.LongValue;
import org.apache.flink.types.NullValue;
import org.apache.flink.types.Row;
import org.apache.flink.types.StringValue;
import org.apache.flink.types.Value;
import org.apache.flink.util.Collector;

/**
 * One state per serializer category that Flink's own DataStream operators and users' functions put in state, written by
 * real Flink, and a restore that dumps every state as real Flink reads it back.
 *
 * gen OUT N BACKEND P FORMAT...: processes records 0..N-1 (event time = record x 100 ms, no watermarks: no event-time
 * window, timer or CEP buffer fires) through the operators below at parallelism P on BACKEND (hashmap | rocksdb) and writes
 * a savepoint per FORMAT (canonical | native) to OUT/FORMAT/savepoint.
 *
 * dump SAVEPOINT OUT_FILE BACKEND P: restores every operator of the table below as a generic dump operator with the same
 * uid and key type. It finds each restored state in the keyed and operator state backends (their registered meta infos:
 * the serializers restored from the savepoint's snapshots), registers it with exactly those serializers, and writes
 * every key, namespace, user key, value, timer and operator-state element as JSON lines (sorted): the state as Flink's
 * own serializers read it. Values whose serializer tree holds one flinkstate keeps as bytes (Kryo, a user Value, Java
 * serialization) are written as the hex of their serialized bytes, re-serialized by the restored serializer.
 *
 * enumkey: tries to key a stream by an enum and prints Flink's answer (it refuses: Enum.hashCode is identity based).
 */
public class DataStreamStatesJob {
    static final AtomicLong EMITTED = new AtomicLong();
    static final ConcurrentLinkedQueue<String> DUMP = new ConcurrentLinkedQueue<>();

    public enum Color { RED, GREEN, BLUE }
    public enum Tier { BASIC, GOLD }

    /** A POJO with a nested POJO, an enum, a list, a map and an Instant. */
    public static class Customer {
        public String name;
        public Tier tier;
        public Customer() {}
        public Customer(String name, Tier tier) { this.name = name; this.tier = tier; }
    }

    public static class Order {
        public long id;
        public Customer customer;
        public Color color;
        public List<String> tags;
        public Map<String, Integer> counts;
        public Instant created;
        public Double amount;
        public Order() {}
    }

    /** A POJO key (hashCode overridden, as Flink requires of POJO keys). */
    public static class Account {
        public String bank;
        public int number;
        public Account() {}
        public Account(String bank, int number) { this.bank = bank; this.number = number; }
        @Override public int hashCode() { return bank.hashCode() * 31 + number; }
        @Override public boolean equals(Object o) {
            return o instanceof Account && ((Account) o).bank.equals(bank) && ((Account) o).number == number;
        }
    }

    /** A user Value type (ValueSerializer: its own write/read). */
    public static class Money implements Value {
        public long cents;
        public String currency = "EUR";
        public Money() {}
        public Money(long cents) { this.cents = cents; }
        @Override public void write(org.apache.flink.core.memory.DataOutputView out) throws java.io.IOException {
            out.writeLong(cents);
            out.writeUTF(currency);
        }
        @Override public void read(org.apache.flink.core.memory.DataInputView in) throws java.io.IOException {
            cents = in.readLong();
            currency = in.readUTF();
        }
    }

    /** A Serializable type kept with Java serialization (JavaSerializer). */
    public static class Note implements Serializable {
        private static final long serialVersionUID = 1L;
        public final String text;
        public final long at;
        public Note(String text, long at) { this.text = text; this.at = at; }
    }

    static Order order(long v) {
        Order o = new Order();
        o.id = v;
        o.customer = v % 4 == 0 ? null : new Customer("c" + v % 5 + (v % 3 == 0 ? "é😀" : ""), v % 2 == 0 ? Tier.GOLD : Tier.BASIC);
        o.color = Color.values()[(int) (v % 3)];
        o.tags = Arrays.asList("t" + v, "u" + (v % 3));
        o.counts = new HashMap<>();
        o.counts.put("k" + v % 2, (int) v);
        o.created = Instant.ofEpochSecond(1_700_000_000L + v, v * 1000);
        o.amount = v % 5 == 0 ? null : v * 1.5;
        return o;
    }

    static String str(long v) { return v % 6 == 0 ? "ü" + v : v % 6 == 1 ? "😀" + v : "s" + v; }

    // ---------------------------------------------------------------- user functions that hold state of every type

    public static class Sum implements ReduceFunction<Long> {
        @Override public Long reduce(Long a, Long b) { return a + b; }
    }

    public static class Avg implements AggregateFunction<Long, Tuple2<Long, Long>, String> {
        @Override public Tuple2<Long, Long> createAccumulator() { return Tuple2.of(0L, 0L); }
        @Override public Tuple2<Long, Long> add(Long v, Tuple2<Long, Long> a) { return Tuple2.of(a.f0 + v, a.f1 + 1); }
        @Override public String getResult(Tuple2<Long, Long> a) { return a.f0 + "/" + a.f1; }
        @Override public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) { return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1); }
    }

    public static class RowAgg implements AggregateFunction<Long, Row, Long> {
        @Override public Row createAccumulator() { return Row.of(0L, "", null); }
        @Override public Row add(Long v, Row a) { return Row.of((Long) a.getField(0) + v, a.getField(1) + "" + v % 10, null); }
        @Override public Long getResult(Row a) { return (Long) a.getField(0); }
        @Override public Row merge(Row a, Row b) { return a; }
    }

    static final Map<String, TypeInformation<?>> VALUE_TYPES = new LinkedHashMap<>();
    static {
        VALUE_TYPES.put("tuple0", TypeInformation.of(Tuple0.class));
        VALUE_TYPES.put("tuple3", Types.TUPLE(Types.INT, Types.STRING, Types.DOUBLE));
        VALUE_TYPES.put("either", new EitherTypeInfo<>(Types.LONG, Types.STRING));
        VALUE_TYPES.put("optional", new GenericTypeInfo<>(Optional.class));
        VALUE_TYPES.put("color", TypeInformation.of(Color.class));
        VALUE_TYPES.put("row", Types.ROW(Types.LONG, Types.STRING, Types.BOOLEAN));
        VALUE_TYPES.put("row_named", Types.ROW_NAMED(new String[] {"id", "label", "when"}, Types.INT, Types.STRING, Types.LOCAL_DATE));
        VALUE_TYPES.put("order", TypeInformation.of(Order.class));
        VALUE_TYPES.put("int_value", TypeInformation.of(IntValue.class));
        VALUE_TYPES.put("long_value", TypeInformation.of(LongValue.class));
        VALUE_TYPES.put("string_value", TypeInformation.of(StringValue.class));
        VALUE_TYPES.put("bool_value", TypeInformation.of(BooleanValue.class));
        VALUE_TYPES.put("double_value", TypeInformation.of(DoubleValue.class));
        VALUE_TYPES.put("char_value", TypeInformation.of(CharValue.class));
        VALUE_TYPES.put("null_value", TypeInformation.of(NullValue.class));
        VALUE_TYPES.put("money", TypeInformation.of(Money.class));
        VALUE_TYPES.put("ints", Types.PRIMITIVE_ARRAY(Types.INT));
        VALUE_TYPES.put("bools", Types.PRIMITIVE_ARRAY(Types.BOOLEAN));
        VALUE_TYPES.put("chars", Types.PRIMITIVE_ARRAY(Types.CHAR));
        VALUE_TYPES.put("shorts", Types.PRIMITIVE_ARRAY(Types.SHORT));
        VALUE_TYPES.put("floats", Types.PRIMITIVE_ARRAY(Types.FLOAT));
        VALUE_TYPES.put("bytes", Types.PRIMITIVE_ARRAY(Types.BYTE));
        VALUE_TYPES.put("boxed", Types.OBJECT_ARRAY(Types.LONG));
        VALUE_TYPES.put("customers", ObjectArrayTypeInfo.getInfoFor(Customer[].class, TypeInformation.of(Customer.class)));
        VALUE_TYPES.put("instant", Types.INSTANT);
        VALUE_TYPES.put("local_date", Types.LOCAL_DATE);
        VALUE_TYPES.put("local_time", Types.LOCAL_TIME);
        VALUE_TYPES.put("local_date_time", Types.LOCAL_DATE_TIME);
        VALUE_TYPES.put("sql_date", Types.SQL_DATE);
        VALUE_TYPES.put("sql_time", Types.SQL_TIME);
        VALUE_TYPES.put("sql_timestamp", Types.SQL_TIMESTAMP);
        VALUE_TYPES.put("util_date", TypeInformation.of(java.util.Date.class));
        VALUE_TYPES.put("big_dec", Types.BIG_DEC);
        VALUE_TYPES.put("big_int", Types.BIG_INT);
        VALUE_TYPES.put("with_void", Types.TUPLE(Types.LONG, Types.VOID));
        VALUE_TYPES.put("nested", new ListTypeInfo<>(new MapTypeInfo<>(Types.STRING, new ListTypeInfo<>(Types.LONG))));
        VALUE_TYPES.put("tuple25", tuple25());
        VALUE_TYPES.put("short", Types.SHORT);
        VALUE_TYPES.put("byte", Types.BYTE);
        VALUE_TYPES.put("float", Types.FLOAT);
        VALUE_TYPES.put("char", Types.CHAR);
        VALUE_TYPES.put("short_value", TypeInformation.of(org.apache.flink.types.ShortValue.class));
        VALUE_TYPES.put("byte_value", TypeInformation.of(org.apache.flink.types.ByteValue.class));
        VALUE_TYPES.put("float_value", TypeInformation.of(org.apache.flink.types.FloatValue.class));
        VALUE_TYPES.put("longs", Types.PRIMITIVE_ARRAY(Types.LONG));
        VALUE_TYPES.put("doubles", Types.PRIMITIVE_ARRAY(Types.DOUBLE));
        VALUE_TYPES.put("strings", org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO);
        TypeInformation<?> set = setOf(Types.STRING);
        if (set != null) VALUE_TYPES.put("set", set);  // SetSerializer: Flink 2.x only
    }

    /** Flink 2.x's SetTypeInfo of elements (null before 2.0, which has none). */
    static TypeInformation<?> setOf(TypeInformation<?> element) {
        try {
            return (TypeInformation<?>) Class.forName("org.apache.flink.api.java.typeutils.SetTypeInfo")
                .getConstructor(TypeInformation.class).newInstance(element);
        } catch (ClassNotFoundException e) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static TypeInformation<?> tuple25() {
        TypeInformation[] f = new TypeInformation[25];
        Arrays.fill(f, Types.INT);
        return Types.TUPLE(f);
    }

    static Object valueFor(String name, long v) {
        switch (name) {
            case "tuple0": return Tuple0.INSTANCE;
            case "tuple3": return Tuple3.of((int) v, str(v), v / 4.0);
            case "either": return v % 2 == 0 ? Either.Left(v) : Either.Right(str(v));
            case "optional": return v % 3 == 0 ? Optional.empty() : Optional.of(str(v));
            case "color": return Color.values()[(int) (v % 3)];
            case "row": return Row.of(v, v % 4 == 0 ? null : str(v), v % 2 == 0);
            case "row_named":  // a named RowTypeInfo; its state serializer writes rows by position (Row.withNames() values fail
                // Flink's snapshot: "Serializer does not support named field positions")
                return Row.of((int) v, v % 3 == 0 ? null : "l" + v, LocalDate.of(2024, 1, 1).plusDays(v));
            case "order": return order(v);
            case "int_value": return new IntValue((int) v);
            case "long_value": return new LongValue(v * 1_000_000_007L);
            case "string_value": return new StringValue(str(v));
            case "bool_value": return new BooleanValue(v % 2 == 0);
            case "double_value": return new DoubleValue(v / 3.0);
            case "char_value": return new CharValue((char) ('a' + v % 26));
            case "null_value": return NullValue.getInstance();
            case "money": return new Money(v * 100);
            case "ints": return new int[] {(int) v, -1, Integer.MAX_VALUE};
            case "bools": return new boolean[] {v % 2 == 0, true};
            case "chars": return new char[] {'x', (char) ('a' + v % 26), 'é'};
            case "shorts": return new short[] {(short) v, Short.MIN_VALUE};
            case "floats": return new float[] {v / 8f, -0.5f};
            case "bytes": return new byte[] {(byte) v, -1, 0};
            case "boxed": return new Long[] {v, null, -v};
            case "customers": return new Customer[] {new Customer("x" + v, Tier.GOLD), null};
            case "instant": return Instant.ofEpochSecond(1_600_000_000L + v * 86_400, v * 7);
            case "local_date": return LocalDate.of(1999, 12, 31).plusDays(v);
            case "local_time": return LocalTime.of((int) (v % 24), (int) (v % 60), 5, (int) v * 1000);
            case "local_date_time": return LocalDateTime.of(2020, 2, 29, (int) (v % 24), 0, 0, (int) v);
            case "sql_date": return new java.sql.Date(86_400_000L * (18_000 + v));
            case "sql_time": return new java.sql.Time(1000L * (v % 86_400));
            case "sql_timestamp": {
                java.sql.Timestamp t = new java.sql.Timestamp(1_500_000_000_000L + v);
                t.setNanos((int) ((v % 1000) * 1_000_000 + v));
                return t;
            }
            case "util_date": return new java.util.Date(1_234_567_890_000L + v);
            case "big_dec": return new BigDecimal(BigInteger.valueOf(v * 12345 - 7), (int) (v % 5));
            case "big_int": return BigInteger.valueOf(v).pow(5).negate();
            case "with_void": return Tuple2.of(v, (Void) null);
            case "nested": {
                Map<String, List<Long>> m = new HashMap<>();
                m.put("a" + v % 2, Arrays.asList(v, v + 1));
                return Arrays.asList(m, new HashMap<String, List<Long>>());
            }
            case "short": return (short) (v * 100 - 3000);
            case "byte": return (byte) (v * 5);
            case "float": return v / 8f - 2.5f;
            case "char": return (char) ('é' + v);
            case "short_value": return new org.apache.flink.types.ShortValue((short) -v);
            case "byte_value": return new org.apache.flink.types.ByteValue((byte) (v - 30));
            case "float_value": return new org.apache.flink.types.FloatValue(v * 0.25f);
            case "longs": return new long[] {v, Long.MIN_VALUE, -v * 1_000_000_000_000L};
            case "doubles": return new double[] {v / 3.0, 0.5, 1e300};
            case "strings": return new String[] {str(v), null, ""};
            case "set": return new java.util.HashSet<>(Arrays.asList(str(v), "x" + v % 3, "all"));
            case "tuple25": {
                Tuple25<Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer,
                    Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer, Integer> t =
                    new Tuple25<>();
                for (int i = 0; i < 25; i++) t.setField((int) v + i, i);
                return t;
            }
            default: throw new IllegalArgumentException(name);
        }
    }

    /** "values": a value state of every type above, plus list, map, reducing and aggregating states of composite types,
     * TTL on a POJO, a Java-serialized value, a Nullable-wrapped tuple field, and an event-time timer per key. */
    public static class Values extends KeyedProcessFunction<Long, Long, Long> {
        transient Map<String, ValueState<Object>> values;
        transient ListState<Order> orders;
        transient MapState<Color, Customer> byColor;
        transient MapState<Integer, Row> rows;
        transient ReducingState<Long> total;
        transient AggregatingState<Long, String> avg;
        transient AggregatingState<Long, Long> rowAgg;
        transient ValueState<Order> ttlOrder;
        transient ValueState<Note> note;
        transient ValueState<Tuple2<Long, Long>> nullable;
        transient ListState<Either<Long, String>> eithers;
        transient ListState<Tuple2<String, Long>> ttlPairs;
        transient MapState<String, Customer> ttlCustomers;

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (values == null) {
                values = new LinkedHashMap<>();
                for (Map.Entry<String, TypeInformation<?>> e : VALUE_TYPES.entrySet()) {
                    values.put(e.getKey(), getRuntimeContext().getState(new ValueStateDescriptor<>(e.getKey(), (TypeInformation) e.getValue())));
                }
                orders = getRuntimeContext().getListState(new ListStateDescriptor<>("orders", Order.class));
                byColor = getRuntimeContext().getMapState(new MapStateDescriptor<>("by_color", Color.class, Customer.class));
                rows = getRuntimeContext().getMapState(new MapStateDescriptor<>("rows", Types.INT, Types.ROW(Types.STRING, Types.LONG)));
                total = getRuntimeContext().getReducingState(new ReducingStateDescriptor<>("total", new Sum(), Types.LONG));
                avg = getRuntimeContext().getAggregatingState(new AggregatingStateDescriptor<>("avg", new Avg(), Types.TUPLE(Types.LONG, Types.LONG)));
                rowAgg = getRuntimeContext().getAggregatingState(new AggregatingStateDescriptor<>("row_acc", new RowAgg(),
                    Types.ROW(Types.LONG, Types.STRING, Types.INT)));
                ValueStateDescriptor<Order> ttl = new ValueStateDescriptor<>("ttl_order", Order.class);
                ttl.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
                ttlOrder = getRuntimeContext().getState(ttl);
                note = getRuntimeContext().getState(new ValueStateDescriptor<>("java_serialized", new JavaSerializer<Note>()));
                nullable = getRuntimeContext().getState(new ValueStateDescriptor<>("nullable_field", new TupleSerializer<>(
                    (Class<Tuple2<Long, Long>>) (Class) Tuple2.class,
                    new TypeSerializer[] {LongSerializer.INSTANCE, NullableSerializer.wrap(LongSerializer.INSTANCE, true)})));
                eithers = getRuntimeContext().getListState(new ListStateDescriptor<>("eithers", new EitherTypeInfo<>(Types.LONG, Types.STRING)));
                ListStateDescriptor<Tuple2<String, Long>> tl = new ListStateDescriptor<>("ttl_pairs", Types.TUPLE(Types.STRING, Types.LONG));
                tl.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
                ttlPairs = getRuntimeContext().getListState(tl);
                MapStateDescriptor<String, Customer> tm = new MapStateDescriptor<>("ttl_customers", Types.STRING, TypeInformation.of(Customer.class));
                tm.enableTimeToLive(Compat.ttl(Duration.ofDays(3650)));
                ttlCustomers = getRuntimeContext().getMapState(tm);
            }
            for (Map.Entry<String, ValueState<Object>> e : values.entrySet()) e.getValue().update(valueFor(e.getKey(), v));
            orders.add(order(v));
            byColor.put(Color.values()[(int) (v % 3)], new Customer("b" + v, Tier.values()[(int) (v % 2)]));
            rows.put((int) (v % 4), Row.of(str(v), v));
            total.add(v);
            avg.add(v);
            rowAgg.add(v);
            ttlOrder.update(order(v + 1000));
            note.update(new Note("note " + str(v), v));
            nullable.update(Tuple2.of(v, v % 2 == 0 ? null : v * 10));
            eithers.add(v % 2 == 0 ? Either.Left(v) : Either.Right(str(v)));
            ttlPairs.add(Tuple2.of(str(v), v));
            ttlCustomers.put("c" + v % 3, new Customer(str(v), Tier.values()[(int) (v % 2)]));
            ctx.timerService().registerEventTimeTimer(5_000_000L + v);
            out.collect(v);
        }
    }

    /** "tuple-keyed" (Tuple2 key), "pojo-keyed" (a POJO key), "row-keyed" (Row key): a value and a map state each. */
    public static class Keyed<K> extends KeyedProcessFunction<K, Long, Long> {
        transient ValueState<String> last;
        transient MapState<String, Long> seen;

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (last == null) {
                last = getRuntimeContext().getState(new ValueStateDescriptor<>("last", Types.STRING));
                seen = getRuntimeContext().getMapState(new MapStateDescriptor<>("seen", Types.STRING, Types.LONG));
            }
            last.update(str(v));
            seen.put("m" + v % 3, v);
            ctx.timerService().registerProcessingTimeTimer(4_000_000_000_000L + v);
        }
    }

    /** "coprocess": a keyed co-process function with state from both sides and event-time timers. */
    public static class CoProcess extends KeyedCoProcessFunction<Long, Long, String, String> {
        transient ValueState<Long> left;
        transient ListState<String> right;

        void init() {
            if (left == null) {
                left = getRuntimeContext().getState(new ValueStateDescriptor<>("left_sum", Types.LONG));
                right = getRuntimeContext().getListState(new ListStateDescriptor<>("right_seen", Types.STRING));
            }
        }

        @Override
        public void processElement1(Long v, Context ctx, Collector<String> out) throws Exception {
            init();
            Long s = left.value();
            left.update((s == null ? 0 : s) + v);
            ctx.timerService().registerEventTimeTimer(9_000_000L + v);
        }

        @Override
        public void processElement2(String v, Context ctx, Collector<String> out) throws Exception {
            init();
            right.add(v);
        }
    }

    /** "bcast": keyed broadcast state (enum -> POJO) with keyed state on the keyed side. */
    static final MapStateDescriptor<Color, Customer> RULES = new MapStateDescriptor<>("rules", TypeInformation.of(Color.class),
        TypeInformation.of(Customer.class));
    static final MapStateDescriptor<Tuple2<String, Integer>, Long> LIMITS = new MapStateDescriptor<>("limits",
        Types.TUPLE(Types.STRING, Types.INT), Types.LONG);

    public static class Bcast extends KeyedBroadcastProcessFunction<Long, Long, Long, Long> {
        transient ValueState<Long> hits;

        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) throws Exception {
            if (hits == null) hits = getRuntimeContext().getState(new ValueStateDescriptor<>("hits", Types.LONG));
            Long h = hits.value();
            hits.update((h == null ? 0 : h) + 1);
        }

        @Override
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            ctx.getBroadcastState(RULES).put(Color.values()[(int) (v % 3)], new Customer("r" + v, Tier.values()[(int) (v % 2)]));
            ctx.getBroadcastState(LIMITS).put(Tuple2.of("l" + v % 4, (int) (v % 2)), v);
        }
    }

    /** "opstate": split list state of Tuple2, union list state of a POJO, split list state of an enum. */
    public static class OpState extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        transient ListState<Tuple2<String, Long>> pairs;
        transient ListState<Customer> customers;
        transient ListState<Color> colors;
        final List<Long> seen = new ArrayList<>();

        @Override
        public Long map(Long v) {
            seen.add(v);
            EMITTED.incrementAndGet();
            return v;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            List<Tuple2<String, Long>> p = new ArrayList<>();
            List<Customer> c = new ArrayList<>();
            List<Color> k = new ArrayList<>();
            for (Long v : seen) {
                if (v % 7 == 0) p.add(Tuple2.of(str(v), v));
                if (v % 11 == 0) c.add(new Customer("u" + v, Tier.GOLD));
                if (v % 5 == 0) k.add(Color.values()[(int) (v % 3)]);
            }
            pairs.update(p);
            customers.update(c);
            colors.update(k);
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            pairs = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("pairs", Types.TUPLE(Types.STRING, Types.LONG)));
            customers = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("customers", Customer.class));
            colors = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("colors", Color.class));
        }
    }

    /** A merging trigger with its own state (a count per window, merged with the windows): fires every 4 elements. */
    public static class CountingTrigger extends Trigger<Object, TimeWindow> {
        final ReducingStateDescriptor<Long> count = new ReducingStateDescriptor<>("trigger-count", new Sum(), Types.LONG);

        @Override
        public TriggerResult onElement(Object e, long ts, TimeWindow w, TriggerContext ctx) throws Exception {
            ReducingState<Long> c = ctx.getPartitionedState(count);
            c.add(1L);
            ctx.registerEventTimeTimer(w.maxTimestamp());
            if (c.get() >= 4) {
                c.clear();
                return TriggerResult.FIRE;
            }
            return TriggerResult.CONTINUE;
        }

        @Override public TriggerResult onProcessingTime(long t, TimeWindow w, TriggerContext ctx) { return TriggerResult.CONTINUE; }
        @Override public TriggerResult onEventTime(long t, TimeWindow w, TriggerContext ctx) {
            return t == w.maxTimestamp() ? TriggerResult.FIRE : TriggerResult.CONTINUE;
        }
        @Override public boolean canMerge() { return true; }
        @Override public void onMerge(TimeWindow w, OnMergeContext ctx) throws Exception {
            ctx.mergePartitionedState(count);
            ctx.registerEventTimeTimer(w.maxTimestamp());
        }
        @Override public void clear(TimeWindow w, TriggerContext ctx) throws Exception {
            ctx.getPartitionedState(count).clear();
            ctx.deleteEventTimeTimer(w.maxTimestamp());
        }
    }

    /** Counts a window's elements when it fires, keeping global state and (merging windows have none) per-window state. */
    public static class Collect<W extends org.apache.flink.streaming.api.windowing.windows.Window>
            extends ProcessWindowFunction<Long, String, Long, W> {
        final boolean perWindow;

        Collect() { this(true); }
        Collect(boolean perWindow) { this.perWindow = perWindow; }

        @Override
        public void process(Long key, Context ctx, Iterable<Long> in, Collector<String> out) throws Exception {
            long n = 0;
            for (Long x : in) n++;
            if (perWindow) {  // "Per-window state is not allowed when using merging windows"
                ValueState<Long> fired = ctx.windowState().getState(new ValueStateDescriptor<>("fired-in-window", Types.LONG));
                fired.update((fired.value() == null ? 0 : fired.value()) + 1);
            }
            ListState<Long> sizes = ctx.globalState().getListState(new ListStateDescriptor<>("fired-sizes", Types.LONG));
            sizes.add(n);
            out.collect(key + ":" + n);
        }
    }

    /** Strips the timestamps of records (a processing-time window then holds StreamRecords without one). */
    public static class StripTimestamps extends AbstractStreamOperator<Long> implements OneInputStreamOperator<Long, Long> {
        @Override
        public void processElement(StreamRecord<Long> r) {
            output.collect(new StreamRecord<>(r.getValue()));
        }
    }

    /** The operators whose state the job writes and the dump reads: uid, key type (null: not keyed), key selector. */
    static final class Op {
        final String uid;
        final TypeInformation<?> keyType;
        final KeySelector<Long, ?> key;
        Op(String uid, TypeInformation<?> keyType, KeySelector<Long, ?> key) { this.uid = uid; this.keyType = keyType; this.key = key; }
    }

    static Row rowKey(long v) { return Row.of("r" + v % 3, v % 2 == 0); }

    static final List<Op> OPS = Arrays.asList(
        new Op("values", Types.LONG, v -> v % 11),
        new Op("tuple-keyed", Types.TUPLE(Types.STRING, Types.INT), v -> Tuple2.of("k" + v % 3, (int) (v % 2))),
        new Op("pojo-keyed", TypeInformation.of(Account.class), v -> new Account("b" + v % 2, (int) (v % 3))),
        new Op("row-keyed", Types.ROW(Types.STRING, Types.BOOLEAN), DataStreamStatesJob::rowKey),
        new Op("win-tumble-reduce", Types.LONG, v -> v % 5),
        new Op("win-tumble-evict", Types.LONG, v -> v % 5),
        new Op("win-slide-agg", Types.LONG, v -> v % 3),
        new Op("win-slide-evict", Types.LONG, v -> v % 3),
        new Op("win-session-trigger", Types.LONG, v -> v % 4),
        new Op("win-session-evict", Types.LONG, v -> v % 4),
        new Op("win-count", Types.LONG, v -> v % 5),
        new Op("win-count-slide", Types.LONG, v -> v % 5),
        new Op("win-global-trigger", Types.STRING, v -> "g" + v % 3),
        new Op("win-proc-evict", Types.LONG, v -> v % 3),
        new Op("win-join", Types.LONG, v -> v % 5),
        new Op("interval-join", Types.LONG, v -> v % 7),
        new Op("cep", Types.LONG, v -> v % 3),
        new Op("cep-event", Types.LONG, v -> v % 3),
        new Op("coprocess", Types.LONG, v -> v % 4),
        new Op("bcast", Types.LONG, v -> v % 4),
        new Op("opstate", null, null));

    static Configuration conf(String backend) {
        Configuration conf = new Configuration();
        Compat.set(conf, backend, "state.backend.type", "state.backend");
        Compat.set(conf, "false", "execution.checkpointing.incremental", "state.backend.incremental");
        conf.setString("rest.bind-port", "0");
        conf.setString("taskmanager.memory.network.min", "128mb");
        conf.setString("taskmanager.memory.network.max", "128mb");
        return conf;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void gen(Path out, long n, String backend, int p, List<String> formats) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf(backend));
        env.setParallelism(p);
        env.setMaxParallelism(128);
        DataStream<Long> raw = Compat.generator(env, n, 2000).filter(v -> v >= 0).setParallelism(1).uid("real").name("real");
        DataStream<Long> in = raw.map(new OpState()).setParallelism(1).uid("opstate").name("opstate");
        DataStream<Long> timed = in.assignTimestampsAndWatermarks(WatermarkStrategy.<Long>noWatermarks().withTimestampAssigner((v, t) -> v * 100))
            .setParallelism(1).uid("timed").name("timed");
        Map<String, Op> ops = OPS.stream().collect(Collectors.toMap(o -> o.uid, o -> o));
        KeyedStream<Long, Long> byValues = timed.keyBy((KeySelector<Long, Long>) ops.get("values").key, Types.LONG);
        Compat.discard(byValues.process(new Values()).uid("values").name("values"));
        for (String uid : new String[] {"tuple-keyed", "pojo-keyed", "row-keyed"}) {
            Op o = ops.get(uid);
            Compat.discard(timed.keyBy((KeySelector) o.key, o.keyType).process(new Keyed()).uid(uid).name(uid));
        }
        Duration second = Duration.ofMillis(1000);
        Compat.discard(timed.keyBy(v -> v % 5, Types.LONG).window(TumblingEventTimeWindows.of(second)).reduce(new Sum())
            .uid("win-tumble-reduce").name("win-tumble-reduce"));
        Compat.discard(timed.keyBy(v -> v % 5, Types.LONG).window(TumblingEventTimeWindows.of(second)).evictor(CountEvictor.of(3))
            .process(new Collect<TimeWindow>()).uid("win-tumble-evict").name("win-tumble-evict"));
        Compat.discard(timed.keyBy(v -> v % 3, Types.LONG).window(SlidingEventTimeWindows.of(Duration.ofMillis(2000), second))
            .aggregate(new Avg()).uid("win-slide-agg").name("win-slide-agg"));
        Compat.discard(timed.keyBy(v -> v % 3, Types.LONG).window(SlidingEventTimeWindows.of(Duration.ofMillis(2000), second))
            .evictor(TimeEvictor.of(Duration.ofMillis(500))).process(new Collect<TimeWindow>()).uid("win-slide-evict").name("win-slide-evict"));
        Compat.discard(timed.keyBy(v -> v % 4, Types.LONG).window(EventTimeSessionWindows.withGap(Duration.ofMillis(450)))
            .trigger(new CountingTrigger()).process(new Collect<TimeWindow>(false)).uid("win-session-trigger").name("win-session-trigger"));
        Compat.discard(timed.keyBy(v -> v % 4, Types.LONG).window(EventTimeSessionWindows.withGap(Duration.ofMillis(450)))
            .evictor(CountEvictor.of(2)).process(new Collect<TimeWindow>(false)).uid("win-session-evict").name("win-session-evict"));
        Compat.discard(timed.keyBy(v -> v % 5, Types.LONG).countWindow(5).reduce(new Sum()).uid("win-count").name("win-count"));
        Compat.discard(timed.keyBy(v -> v % 5, Types.LONG).countWindow(4, 3).process(new Collect<GlobalWindow>())
            .uid("win-count-slide").name("win-count-slide"));
        Compat.discard(timed.keyBy(v -> "g" + v % 3, Types.STRING).window(org.apache.flink.streaming.api.windowing.assigners.GlobalWindows.create())
            .trigger(org.apache.flink.streaming.api.windowing.triggers.CountTrigger.of(7)).aggregate(new Avg())
            .uid("win-global-trigger").name("win-global-trigger"));
        DataStream<Long> untimed = in.transform("strip", Types.LONG, new StripTimestamps()).setParallelism(1).uid("strip");
        Compat.discard(untimed.keyBy(v -> v % 3, Types.LONG).window(TumblingProcessingTimeWindows.of(Duration.ofHours(6)))
            .evictor(CountEvictor.of(4)).process(new Collect<TimeWindow>()).uid("win-proc-evict").name("win-proc-evict"));
        DataStream<String> strings = timed.map(DataStreamStatesJob::str).setParallelism(1).uid("strings").name("strings");
        DataStream<String> joined = timed.join(strings).where(v -> v % 5, Types.LONG).equalTo(s -> (long) s.length() % 5, Types.LONG)
            .window(TumblingEventTimeWindows.of(second)).apply((JoinFunction<Long, String, String>) (a, b) -> a + b, Types.STRING);
        // 1.x declares a DataStream, 2.x a SingleOutputStreamOperator: the object is one either way
        Compat.discard(((org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator<String>) joined).uid("win-join").name("win-join"));
        Compat.discard(timed.keyBy(v -> v % 7, Types.LONG).intervalJoin(strings.keyBy(s -> (long) s.length() % 7, Types.LONG))
            .between(Duration.ofMillis(-300), Duration.ofMillis(300))
            .process(new ProcessJoinFunction<Long, String, String>() {
                @Override public void processElement(Long a, String b, Context ctx, Collector<String> out) { out.collect(a + b); }
            }, Types.STRING).uid("interval-join").name("interval-join"));
        Pattern<Long, Long> pattern = Pattern.<Long>begin("even").where(SimpleCondition.of(v -> v % 2 == 0))
            .followedBy("big").where(SimpleCondition.of(v -> v % 10 == 9)).followedBy("end").where(SimpleCondition.of(v -> v % 10 == 7));
        Compat.discard(CEP.pattern(timed.keyBy(v -> v % 3, Types.LONG), pattern).inProcessingTime()
            .process(new PatternProcessFunction<Long, String>() {
                @Override public void processMatch(Map<String, List<Long>> m, Context ctx, Collector<String> out) { out.collect(m.toString()); }
            }, Types.STRING).uid("cep").name("cep"));
        Compat.discard(CEP.pattern(timed.keyBy(v -> v % 3, Types.LONG), pattern)
            .process(new PatternProcessFunction<Long, String>() {
                @Override public void processMatch(Map<String, List<Long>> m, Context ctx, Collector<String> out) { out.collect(m.toString()); }
            }, Types.STRING).uid("cep-event").name("cep-event"));
        Compat.discard(timed.keyBy(v -> v % 4, Types.LONG).connect(strings.keyBy(s -> (long) s.length() % 4, Types.LONG))
            .process(new CoProcess(), Types.STRING).uid("coprocess").name("coprocess"));
        BroadcastStream<Long> rules = timed.broadcast(RULES, LIMITS);
        Compat.discard(timed.keyBy(v -> v % 4, Types.LONG).connect(rules).process(new Bcast(), Types.LONG).uid("bcast").name("bcast"));

        JobClient client = env.executeAsync("flinkstate-datastream-states-" + backend);
        long deadline = System.currentTimeMillis() + 300_000;
        while (EMITTED.get() < n) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("records not processed in time");
            Thread.sleep(50);
        }
        Thread.sleep(1500);  // the records are in flight behind the source; a savepoint barrier follows them anyway
        Files.createDirectories(out);
        for (String f : formats) {
            Path tmp = out.resolve(f + "-tmp");
            String sp = client.triggerSavepoint(tmp.toUri().toString(), f.equals("native") ? SavepointFormatType.NATIVE : SavepointFormatType.CANONICAL).get();
            Files.createDirectories(out.resolve(f));
            Files.move(Paths.get(new java.net.URI(sp)), out.resolve(f).resolve("savepoint"), StandardCopyOption.REPLACE_EXISTING);
            Files.delete(tmp);
        }
        client.cancel().get();
        System.out.println("wrote " + out);
    }

    // ---------------------------------------------------------------- the dump: every restored state, as Flink reads it

    /** Every Map reachable from obj (its fields, and their fields, to a small depth) whose values carry a meta info. */
    static void metas(Object obj, int depth, IdentityHashMap<Object, Boolean> seen, List<Object> out) throws Exception {
        if (obj == null || depth < 0 || seen.containsKey(obj)) return;
        seen.put(obj, true);
        if (obj instanceof Map) {
            for (Object v : ((Map<?, ?>) obj).values()) {
                Object meta = metaOf(v);
                if (meta != null) out.add(meta);
            }
            return;
        }
        String pkg = obj.getClass().getName();
        if (!pkg.startsWith("org.apache.flink.")) return;
        for (Class<?> c = obj.getClass(); c != null && c.getName().startsWith("org.apache.flink."); c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) || f.getType().isPrimitive()) continue;
                try {
                    f.setAccessible(true);
                } catch (RuntimeException e) {
                    continue;  // a field of a module that is not opened: no state holder
                }
                metas(f.get(obj), depth - 1, seen, out);
            }
        }
    }

    /** The meta info a restored state holder carries (getMetaInfo, getStateMetaInfo, or a metaInfo field), else null. */
    static Object metaOf(Object v) {
        if (v == null) return null;
        for (Class<?> c = v.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            for (String name : new String[] {"getMetaInfo", "getStateMetaInfo"}) {
                try {
                    Method m = c.getDeclaredMethod(name);
                    m.setAccessible(true);
                    return m.invoke(v);
                } catch (NoSuchMethodException e) {
                    continue;
                } catch (ReflectiveOperationException | RuntimeException e) {
                    return null;
                }
            }
            try {
                Field f = c.getDeclaredField("metaInfo");
                f.setAccessible(true);
                return f.get(v);
            } catch (NoSuchFieldException e) {
                continue;
            } catch (ReflectiveOperationException | RuntimeException e) {
                return null;
            }
        }
        return null;
    }

    static final class IdentityAgg implements AggregateFunction<Object, Object, Object> {
        @Override public Object createAccumulator() { return null; }
        @Override public Object add(Object v, Object a) { return a; }
        @Override public Object getResult(Object a) { return a; }
        @Override public Object merge(Object a, Object b) { return a; }
    }

    /** Restores an operator's state with the serializers of its savepoint and dumps it (in open: before any record). */
    public static class Dump extends AbstractStreamOperator<Long> implements OneInputStreamOperator<Long, Long>, Triggerable<Object, Object> {
        final String uid;
        final boolean keyed;
        transient StateInitializationContext context;

        Dump(String uid, boolean keyed) { this.uid = uid; this.keyed = keyed; }

        @Override public void processElement(StreamRecord<Long> r) {}
        @Override public void onEventTime(InternalTimer<Object, Object> t) {}
        @Override public void onProcessingTime(InternalTimer<Object, Object> t) {}

        @Override
        public void initializeState(StateInitializationContext ctx) throws Exception {
            super.initializeState(ctx);
            this.context = ctx;
        }

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public void open() throws Exception {
            super.open();
            int subtask = Compat.subtask(getRuntimeContext());
            List<Object> ops = new ArrayList<>();
            metas(context.getOperatorStateStore(), 2, new IdentityHashMap<>(), ops);
            for (Object m : ops) {
                if (!(m instanceof RegisteredOperatorStateBackendMetaInfo)) continue;
                RegisteredOperatorStateBackendMetaInfo meta = (RegisteredOperatorStateBackendMetaInfo) m;
                String mode = meta.getAssignmentMode().toString();
                if (!mode.equals("SPLIT_DISTRIBUTE") && subtask != 0) continue;  // union and broadcast: every subtask holds all
                if (mode.equals("BROADCAST")) continue;
                ListState<Object> st = mode.equals("UNION")
                    ? context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>(meta.getName(), meta.getPartitionStateSerializer()))
                    : context.getOperatorStateStore().getListState(new ListStateDescriptor<>(meta.getName(), meta.getPartitionStateSerializer()));
                for (Object e : st.get()) {
                    DUMP.add(obj("op", q(uid), "state", q(meta.getName()), "mode", q(mode.equals("UNION") ? "union" : "split"),
                        "value", json(e, meta.getPartitionStateSerializer())));
                }
            }
            List<Object> bcast = new ArrayList<>();
            metas(context.getOperatorStateStore(), 2, new IdentityHashMap<>(), bcast);
            if (subtask == 0) {
                for (Object m : bcast) {
                    if (!(m instanceof org.apache.flink.runtime.state.RegisteredBroadcastStateBackendMetaInfo)) continue;
                    org.apache.flink.runtime.state.RegisteredBroadcastStateBackendMetaInfo meta = (org.apache.flink.runtime.state.RegisteredBroadcastStateBackendMetaInfo) m;
                    BroadcastState<Object, Object> st = context.getOperatorStateStore().getBroadcastState(
                        new MapStateDescriptor<>(meta.getName(), meta.getKeySerializer(), meta.getValueSerializer()));
                    for (Map.Entry<Object, Object> e : st.entries()) {
                        DUMP.add(obj("op", q(uid), "state", q(meta.getName()), "mode", q("broadcast"), "key", json(e.getKey(), meta.getKeySerializer()),
                            "value", json(e.getValue(), meta.getValueSerializer())));
                    }
                }
            }
            if (!keyed) return;
            List<Object> kv = new ArrayList<>();
            metas(getKeyedStateBackend(), 3, new IdentityHashMap<>(), kv);
            Set<String> done = new TreeSet<>();
            int maxp = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
            for (Object m : kv) {
                if (m instanceof RegisteredPriorityQueueStateBackendMetaInfo) {
                    RegisteredPriorityQueueStateBackendMetaInfo meta = (RegisteredPriorityQueueStateBackendMetaInfo) m;
                    String name = meta.getName();
                    if (!name.startsWith("_timer_state/") || !done.add(name)) continue;
                    String service = name.substring("_timer_state/".length()).replaceFirst("^(event|processing)_", "");
                    if (!done.add("service " + service)) continue;
                    TimerSerializer ts = (TimerSerializer) meta.getElementSerializer();
                    TypeSerializer nsSer = ts.getNamespaceSerializer();
                    InternalTimerService<Object> svc = getInternalTimerService(service, nsSer, this);
                    svc.forEachEventTimeTimer((ns, t) -> timer("event_" + service, ns, nsSer, t, maxp));
                    svc.forEachProcessingTimeTimer((ns, t) -> timer("processing_" + service, ns, nsSer, t, maxp));
                    continue;
                }
                if (!(m instanceof RegisteredKeyValueStateBackendMetaInfo)) continue;
                RegisteredKeyValueStateBackendMetaInfo meta = (RegisteredKeyValueStateBackendMetaInfo) m;
                if (!done.add(meta.getName())) continue;
                dumpKeyed(meta, maxp);
            }
        }

        void timer(String service, Object ns, TypeSerializer<?> nsSer, long t, int maxp) {
            Object key = getCurrentKey();
            DUMP.add(obj("op", q(uid), "timer", q(service), "kg", KeyGroupRangeAssignment.assignToKeyGroup(key, maxp),
                "key", json(key, getKeyedStateBackend().getKeySerializer()), "ns", namespace(ns, nsSer), "ts", t));
        }

        String namespace(Object ns, TypeSerializer<?> nsSer) {
            return ns instanceof VoidNamespace || ns instanceof GlobalWindow ? "null" : json(ns, nsSer);
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        void dumpKeyed(RegisteredKeyValueStateBackendMetaInfo meta, int maxp) throws Exception {
            String name = meta.getName();
            TypeSerializer ser = meta.getStateSerializer();
            TypeSerializer nsSer = meta.getNamespaceSerializer();
            StateDescriptor d;
            switch (meta.getStateType()) {
                case VALUE: d = new ValueStateDescriptor<>(name, ser); break;
                case LIST: d = new ListStateDescriptor<>(name, ((ListSerializer) ser).getElementSerializer()); break;
                case MAP: d = new MapStateDescriptor<>(name, ((MapSerializer) ser).getKeySerializer(), ((MapSerializer) ser).getValueSerializer()); break;
                case REDUCING: d = new ReducingStateDescriptor<>(name, (ReduceFunction) (a, b) -> a, ser); break;
                case AGGREGATING: d = new AggregatingStateDescriptor<>(name, new IdentityAgg(), ser); break;
                default: throw new IllegalStateException(name + ": " + meta.getStateType());
            }
            TypeSerializer keySer = getKeyedStateBackend().getKeySerializer();
            List<org.apache.flink.api.java.tuple.Tuple2<Object, Object>> pairs = new ArrayList<>();
            getKeyedStateBackend().getOrCreateKeyedState(nsSer, d);  // registered with the restored serializers first
            try (java.util.stream.Stream<org.apache.flink.api.java.tuple.Tuple2<Object, Object>> s = getKeyedStateBackend().getKeysAndNamespaces(name)) {
                s.forEach(pairs::add);
            }
            for (org.apache.flink.api.java.tuple.Tuple2<Object, Object> kn : pairs) {
                setCurrentKey(kn.f0);
                State st = getPartitionedState(kn.f1, nsSer, d);
                String head = "\"op\":" + q(uid) + ",\"state\":" + q(name) + ",\"kg\":" + KeyGroupRangeAssignment.assignToKeyGroup(kn.f0, maxp)
                    + ",\"key\":" + json(kn.f0, keySer) + ",\"ns\":" + namespace(kn.f1, nsSer);
                if (st instanceof MapState) {
                    MapSerializer ms = (MapSerializer) ser;
                    for (Map.Entry<?, ?> e : ((MapState<?, ?>) st).entries()) {
                        DUMP.add("{" + head + ",\"uk\":" + json(e.getKey(), ms.getKeySerializer()) + ",\"value\":" + json(e.getValue(), ms.getValueSerializer()) + "}");
                    }
                } else if (st instanceof ListState) {
                    TypeSerializer es = ((ListSerializer) ser).getElementSerializer();
                    List<String> els = new ArrayList<>();
                    Iterable<?> it = ((ListState<?>) st).get();
                    if (it != null) for (Object e : it) els.add(json(e, es));
                    if (!els.isEmpty()) DUMP.add("{" + head + ",\"value\":[" + String.join(",", els) + "]}");
                } else {
                    Object v = st instanceof ValueState ? ((ValueState<?>) st).value()
                        : st instanceof ReducingState ? ((ReducingState<?>) st).get() : ((AggregatingState<?, ?>) st).get();
                    if (v != null) DUMP.add("{" + head + ",\"value\":" + json(v, ser) + "}");
                }
            }
        }
    }

    // ---------------------------------------------------------------- JSON as flinkstate's Arrow columns hold the values

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    /** A JSON object of (name, value) pairs: a value is JSON text already, or a number. */
    static String obj(Object... kv) {
        StringBuilder b = new StringBuilder("{");
        for (int i = 0; i < kv.length; i += 2) {
            if (i > 0) b.append(',');
            b.append(q((String) kv[i])).append(':').append(kv[i + 1]);
        }
        return b.append('}').toString();
    }

    /** Serializer classes whose values flinkstate keeps as their serialized bytes (and the dump as their hex). */
    static boolean keptAsBytes(TypeSerializer<?> s) {
        String c = s.getClass().getName();
        return c.contains(".kryo") || c.endsWith(".ValueSerializer") || c.endsWith(".CopyableValueSerializer")
            || c.endsWith("runtime.state.JavaSerializer") || c.contains("Avro");
    }

    /** Whether a serializer tree holds one kept as bytes (a POJO field, a tuple field, an element...). */
    static boolean holdsBytes(TypeSerializer<?> s, int depth) {
        if (s == null || depth > 8) return false;
        if (keptAsBytes(s)) return true;
        for (Class<?> c = s.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers())) continue;
                try {
                    f.setAccessible(true);
                    Object v = f.get(s);
                    if (v instanceof TypeSerializer && v != s && holdsBytes((TypeSerializer<?>) v, depth + 1)) return true;
                    if (v instanceof TypeSerializer[]) for (TypeSerializer<?> x : (TypeSerializer<?>[]) v) if (holdsBytes(x, depth + 1)) return true;
                } catch (ReflectiveOperationException | RuntimeException e) {
                    // a field this JVM does not open: not a serializer field
                }
            }
        }
        return false;
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }

    /** v as JSON; ser: its serializer (values of a serializer tree holding a bytes-kept one: the hex of their bytes). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static String json(Object v, TypeSerializer ser) {
        if (v != null && ser != null && holdsBytes(ser, 0) && !(v instanceof org.apache.flink.runtime.state.ttl.TtlValue)) {
            try {
                ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                ser.serialize(v, new DataOutputViewStreamWrapper(bytes));
                return q(hex(bytes.toByteArray()));
            } catch (java.io.IOException e) {
                throw new IllegalStateException(e);
            }
        }
        if (v instanceof org.apache.flink.runtime.state.ttl.TtlValue && ser != null) {
            TypeSerializer user = field(ser, "userValueSerializer") instanceof TypeSerializer ? (TypeSerializer) field(ser, "userValueSerializer") : null;
            if (user == null) {
                Object fields = field(ser, "fieldSerializers");
                if (fields instanceof TypeSerializer[]) user = ((TypeSerializer[]) fields)[1];
            }
            org.apache.flink.runtime.state.ttl.TtlValue t = (org.apache.flink.runtime.state.ttl.TtlValue) v;
            return "{\"ttl\":" + t.getLastAccessTimestamp() + ",\"value\":" + json(t.getUserValue(), user) + "}";
        }
        return json(v);
    }

    static Object field(Object o, String name) {
        for (Class<?> c = o.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException e) {
                continue;
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }
        return null;
    }

    static Object call(Object o, String method) {
        try {
            Method m = o.getClass().getMethod(method);
            m.setAccessible(true);
            return m.invoke(o);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(o.getClass() + "." + method, e);
        }
    }

    static String jsonDouble(double d) {
        if (d == Math.rint(d) && Math.abs(d) < 1e15) return String.valueOf((long) d) + ".0";
        return Double.toString(d);
    }

    static String json(Object v) {
        if (v == null || v instanceof Tuple0 || v instanceof NullValue || v instanceof VoidNamespace || v instanceof GlobalWindow) return "null";
        if (v instanceof String) return q((String) v);
        if (v instanceof Character) return q(String.valueOf(v));
        if (v instanceof Boolean || v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) return String.valueOf(v);
        if (v instanceof Double) return jsonDouble((Double) v);
        if (v instanceof Float) return jsonDouble((double) (Float) v);
        if (v instanceof BigDecimal || v instanceof BigInteger) return q(v.toString());
        if (v instanceof Instant) return String.valueOf(((Instant) v).getEpochSecond() * 1_000_000_000L + ((Instant) v).getNano());
        if (v instanceof LocalDate) return String.valueOf(((LocalDate) v).toEpochDay());
        if (v instanceof LocalTime) return String.valueOf(((LocalTime) v).toNanoOfDay());
        if (v instanceof LocalDateTime) {
            Instant i = ((LocalDateTime) v).toInstant(ZoneOffset.UTC);
            return String.valueOf(i.getEpochSecond() * 1_000_000_000L + i.getNano());
        }
        if (v instanceof java.sql.Timestamp) {
            java.sql.Timestamp t = (java.sql.Timestamp) v;
            return String.valueOf(Math.floorDiv(t.getTime(), 1000) * 1_000_000_000L + t.getNanos());
        }
        if (v instanceof java.util.Date) return String.valueOf(((java.util.Date) v).getTime());
        if (v instanceof Enum) return q(((Enum<?>) v).name());
        if (v instanceof byte[]) return q(hex((byte[]) v));
        if (v instanceof IntValue) return String.valueOf(((IntValue) v).getValue());
        if (v instanceof LongValue) return String.valueOf(((LongValue) v).getValue());
        if (v instanceof StringValue) return q(v.toString());
        if (v instanceof BooleanValue) return String.valueOf(((BooleanValue) v).getValue());
        if (v instanceof DoubleValue) return jsonDouble(((DoubleValue) v).getValue());
        if (v instanceof CharValue) return q(String.valueOf(((CharValue) v).getValue()));
        if (v instanceof org.apache.flink.types.ShortValue) return String.valueOf(((org.apache.flink.types.ShortValue) v).getValue());
        if (v instanceof org.apache.flink.types.ByteValue) return String.valueOf(((org.apache.flink.types.ByteValue) v).getValue());
        if (v instanceof org.apache.flink.types.FloatValue) return jsonDouble((double) ((org.apache.flink.types.FloatValue) v).getValue());
        if (v.getClass().isArray()) {
            List<String> els = new ArrayList<>();
            int n = java.lang.reflect.Array.getLength(v);
            for (int i = 0; i < n; i++) els.add(json(java.lang.reflect.Array.get(v, i)));
            return "[" + String.join(",", els) + "]";
        }
        if (v instanceof Set) {
            return "[" + ((Set<?>) v).stream().map(DataStreamStatesJob::json).sorted().collect(Collectors.joining(",")) + "]";
        }
        if (v instanceof Map) {  // as [key, value] pairs, sorted by the key's JSON
            TreeMap<String, String> m = new TreeMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) m.put(json(e.getKey()), json(e.getValue()));
            return "[" + m.entrySet().stream().map(e -> "[" + e.getKey() + "," + e.getValue() + "]").collect(Collectors.joining(",")) + "]";
        }
        if (v instanceof Collection) {
            return "[" + ((Collection<?>) v).stream().map(DataStreamStatesJob::json).collect(Collectors.joining(",")) + "]";
        }
        if (v instanceof Tuple) {
            Tuple t = (Tuple) v;
            List<Object> kv = new ArrayList<>();
            for (int i = 0; i < t.getArity(); i++) { kv.add("f" + i); kv.add(json(t.getField(i))); }
            return jsonObject(kv);
        }
        if (v instanceof Row) {
            Row r = (Row) v;
            List<Object> kv = new ArrayList<>();
            for (int i = 0; i < r.getArity(); i++) { kv.add("f" + i); kv.add(json(r.getField(i))); }
            return jsonObject(kv);
        }
        if (v instanceof Either) {
            Either<?, ?> e = (Either<?, ?>) v;
            return jsonObject(Arrays.asList("is_left", String.valueOf(e.isLeft()), "left", e.isLeft() ? json(e.left()) : "null",
                "right", e.isLeft() ? "null" : json(e.right())));
        }
        if (v instanceof TimeWindow) {
            return jsonObject(Arrays.asList("start", String.valueOf(((TimeWindow) v).getStart()), "end", String.valueOf(((TimeWindow) v).getEnd())));
        }
        if (v instanceof StreamRecord) {
            StreamRecord<?> r = (StreamRecord<?>) v;
            return jsonObject(Arrays.asList("timestamp", r.hasTimestamp() ? String.valueOf(r.getTimestamp()) : "null", "value", json(r.getValue())));
        }
        String cls = v.getClass().getName();
        if (cls.endsWith("TaggedUnion")) {
            boolean one = (Boolean) call(v, "isOne");
            return jsonObject(Arrays.asList("is_one", String.valueOf(one), "one", one ? json(call(v, "getOne")) : "null",
                "two", one ? "null" : json(call(v, "getTwo"))));
        }
        if (cls.endsWith("IntervalJoinOperator$BufferEntry")) {
            return jsonObject(Arrays.asList("element", json(field(v, "element")), "has_been_joined", String.valueOf(field(v, "hasBeenJoined"))));
        }
        if (cls.startsWith("org.apache.flink.cep.")) return cep(v, cls);
        List<Object> kv = new ArrayList<>();  // a POJO: its fields (public or private, up its class hierarchy)
        for (Class<?> c = v.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) || Modifier.isTransient(f.getModifiers())) continue;
                f.setAccessible(true);
                try {
                    kv.add(f.getName());
                    kv.add(json(f.get(v)));
                } catch (IllegalAccessException e) {
                    throw new IllegalStateException(e);
                }
            }
        }
        return jsonObject(kv);
    }

    static String jsonObject(List<Object> kv) {
        StringBuilder b = new StringBuilder("{");
        for (int i = 0; i < kv.size(); i += 2) {
            if (i > 0) b.append(',');
            b.append(q((String) kv.get(i))).append(':').append(kv.get(i + 1));
        }
        return b.append('}').toString();
    }

    static String cep(Object v, String cls) {
        if (cls.endsWith(".Lockable")) {
            return jsonObject(Arrays.asList("ref_counter", String.valueOf(field(v, "refCounter")), "element", json(call(v, "getElement"))));
        }
        if (cls.endsWith(".EventId")) {
            return jsonObject(Arrays.asList("id", String.valueOf(call(v, "getId")), "timestamp", String.valueOf(call(v, "getTimestamp"))));
        }
        if (cls.endsWith(".NodeId")) {
            return jsonObject(Arrays.asList("event_id", json(call(v, "getEventId")), "page_name", json(call(v, "getPageName"))));
        }
        if (cls.endsWith(".DeweyNumber")) return json(field(v, "deweyNumber"));
        if (cls.endsWith(".SharedBufferEdge")) {
            return jsonObject(Arrays.asList("target", json(field(v, "target")), "dewey_number", json(field(v, "deweyNumber"))));
        }
        if (cls.endsWith(".SharedBufferNode")) {
            List<String> edges = new ArrayList<>();
            for (Object l : (List<?>) call(v, "getEdges")) {
                edges.add(jsonObject(Arrays.asList("ref_counter", String.valueOf(field(l, "refCounter")), "edge", json(call(l, "getElement")))));
            }
            return jsonObject(Arrays.asList("edges", "[" + String.join(",", edges) + "]"));
        }
        if (cls.endsWith(".NFAState")) {
            return jsonObject(Arrays.asList("partial_matches", states(call(v, "getPartialMatches")), "completed_matches", states(call(v, "getCompletedMatches"))));
        }
        throw new IllegalStateException("no JSON form for " + cls);
    }

    static String states(Object queue) {
        List<String> out = new ArrayList<>();
        for (Object cs : (Collection<?>) queue) {
            out.add(jsonObject(Arrays.asList("current_state_name", json(call(cs, "getCurrentStateName")),
                "previous_buffer_entry", json(call(cs, "getPreviousBufferEntry")), "version", json(call(cs, "getVersion")),
                "start_timestamp", String.valueOf(call(cs, "getStartTimestamp")), "previous_timestamp", String.valueOf(call(cs, "getPreviousTimestamp")),
                "start_event_id", json(call(cs, "getStartEventID")))));
        }
        return "[" + String.join(",", out) + "]";
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void dump(String savepoint, Path outFile, String backend, int p) throws Exception {
        Configuration conf = conf(backend);
        Compat.set(conf, savepoint, "execution.state-recovery.path", "execution.savepoint.path");
        Compat.set(conf, "true", "execution.state-recovery.ignore-unclaimed-state", "execution.savepoint.ignore-unclaimed-state");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(p);
        env.setMaxParallelism(128);
        DataStream<Long> none = Compat.one(env, -1L).filter(v -> v >= 0);
        for (Op o : OPS) {
            DataStream<Long> s = o.keyType == null
                ? none.transform("dump-" + o.uid, Types.LONG, new Dump(o.uid, false))
                : none.keyBy((KeySelector) o.key, o.keyType).transform("dump-" + o.uid, Types.LONG, new Dump(o.uid, true));
            Compat.discard(((org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator<Long>) s).uid(o.uid).name(o.uid)
                .setParallelism(o.uid.equals("opstate") ? 1 : p));
        }
        env.execute("flinkstate-datastream-states-dump");
        List<String> lines = new ArrayList<>(DUMP);
        lines.sort(null);
        try (PrintWriter w = new PrintWriter(outFile.toFile(), StandardCharsets.UTF_8)) {
            for (String line : lines) w.println(line);
        }
        System.out.println("dumped " + lines.size() + " lines");
    }

    static void enumKey() {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        try {
            env.fromData(Color.RED, Color.GREEN).keyBy(c -> c, TypeInformation.of(Color.class));
            System.out.println("ACCEPTED");
        } catch (RuntimeException e) {
            System.out.println("REFUSED " + e.getClass().getName() + ": " + e.getMessage().replace('\n', ' '));
        }
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "gen":
                gen(Paths.get(args[1]).toAbsolutePath(), Long.parseLong(args[2]), args[3], Integer.parseInt(args[4]),
                    Arrays.asList(args).subList(5, args.length));
                break;
            case "dump":
                dump(Paths.get(args[1]).toAbsolutePath().toUri().toString(), Paths.get(args[2]).toAbsolutePath(), args[3], Integer.parseInt(args[4]));
                break;
            case "enumkey":
                enumKey();
                break;
            default:
                throw new IllegalArgumentException(args[0]);
        }
        System.exit(0);
    }
}
