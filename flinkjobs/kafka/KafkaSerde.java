import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.connector.base.source.utils.SerdeUtils;
import org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumStateSerializer;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplitSerializer;
import org.apache.flink.core.io.SimpleVersionedSerialization;
import org.apache.kafka.common.TopicPartition;

/**
 * The Kafka connector's own serializers, for the tests: no broker, only the bytes KafkaSource keeps in a savepoint.
 *
 * write DIR: prints "owner TOPIC PARTITION READERS SUBTASK" (KafkaSourceEnumerator.getSplitOwner) for a few partitions; writes splits.txt ("subtask hex" per SourceReaderState element: SimpleVersionedSerialization of
 * KafkaPartitionSplitSerializer, the way SourceOperator stores them) and enum-V.hex, the coordinator state of an
 * enumerator checkpoint of version V (SourceCoordinator's framing: int 1, int V, int length, bytes): v0 by
 * SerdeUtils.serializeSplitAssignments (what connectors up to 3.0 wrote), v1 by serializeTopicPartitions, v2 by
 * KafkaSourceEnumStateSerializer.serialize of connector 4.x, v3 by that of connector 5.x (only when its classes are on the
 * class path: `v3 missing` is printed otherwise).
 * read DIR: deserializes splits.txt and every enum-V.hex with the connector's classes and prints one line per split
 * ("split SUBTASK TOPIC PARTITION START STOP"), per enumerator entry ("enum V STATUS TOPIC PARTITION [START STOP]") and
 * "enum V initial BOOL"; a v0 state also as SerdeUtils reads it ("enum0 SUBTASK TOPIC PARTITION START STOP").
 */
public class KafkaSerde {
    static final KafkaPartitionSplitSerializer SPLITS = new KafkaPartitionSplitSerializer();

    static KafkaPartitionSplit split(String topic, int partition, long start, long stop) {
        return new KafkaPartitionSplit(new TopicPartition(topic, partition), start, stop);
    }

    static byte[] frame(int version, byte[] body) throws Exception {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(b);
        out.writeInt(1);
        out.writeInt(version);
        out.writeInt(body.length);
        out.write(body);
        out.flush();
        return b.toByteArray();
    }

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[1]);
        if (args[0].equals("write")) write(dir); else read(dir);
    }

    static void write(Path dir) throws Exception {
        long none = KafkaPartitionSplit.NO_STOPPING_OFFSET;
        Map<Integer, List<KafkaPartitionSplit>> readers = new LinkedHashMap<>();
        readers.put(0, List.of(split("orders", 0, 42, none), split("orders", 2, KafkaPartitionSplit.COMMITTED_OFFSET, 5000)));
        readers.put(1, List.of(split("orders", 1, KafkaPartitionSplit.EARLIEST_OFFSET, none), split("payments", 0, 7, KafkaPartitionSplit.LATEST_OFFSET)));
        readers.put(2, List.of(split("pay\u00e9\u20ac", 3, KafkaPartitionSplit.LATEST_OFFSET, KafkaPartitionSplit.COMMITTED_OFFSET)));
        List<String> lines = new ArrayList<>();
        for (Map.Entry<Integer, List<KafkaPartitionSplit>> e : readers.entrySet()) {
            for (KafkaPartitionSplit s : e.getValue()) {
                lines.add(e.getKey() + " " + HexFormat.of().formatHex(SimpleVersionedSerialization.writeVersionAndSerialize(SPLITS, s)));
            }
        }
        Files.write(dir.resolve("splits.txt"), lines, StandardCharsets.UTF_8);

        Method owner = hidden(Class.forName("org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumerator"), "getSplitOwner",
                              TopicPartition.class, int.class);
        for (String topic : List.of("orders", "payments", "pay\u00e9\u20ac", "a-much-longer-topic-name.v2")) {
            for (int n : new int[] {1, 3, 7, 128}) {
                for (int partition : new int[] {0, 5, 1000}) {
                    System.out.println("owner " + topic + " " + partition + " " + n + " " + owner.invoke(null, new TopicPartition(topic, partition), n));
                }
            }
        }
        Map<Integer, Set<KafkaPartitionSplit>> assignments = new LinkedHashMap<>();
        readers.forEach((k, v) -> assignments.put(k, new LinkedHashSet<>(v)));
        write(dir, 0, SerdeUtils.serializeSplitAssignments(assignments, SPLITS));
        List<TopicPartition> tps = new ArrayList<>();
        readers.values().forEach(v -> v.forEach(s -> tps.add(s.getTopicPartition())));
        KafkaSourceEnumStateSerializer enums = new KafkaSourceEnumStateSerializer();
        Class<?> status = Class.forName("org.apache.flink.connector.kafka.source.enumerator.AssignmentStatus");
        Object assigned = status.getEnumConstants()[0];
        Object unassigned = status.getEnumConstants()[1];
        Class<?> state = Class.forName("org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumState");
        Set<Object> entries = new LinkedHashSet<>();
        Class<?> v3Entry = find("org.apache.flink.connector.kafka.source.enumerator.SplitAndAssignmentStatus");
        if (v3Entry == null) {  // connector 4.x: KafkaSourceEnumState(Set<TopicPartitionAndAssignmentStatus>, boolean): version 2
            write(dir, 1, KafkaSourceEnumStateSerializer.serializeTopicPartitions(tps));
            Class<?> tpStatus = Class.forName("org.apache.flink.connector.kafka.source.enumerator.TopicPartitionAndAssignmentStatus");
            Constructor<?> c = tpStatus.getConstructor(TopicPartition.class, status);
            for (TopicPartition tp : tps) entries.add(c.newInstance(tp, assigned));
            entries.add(c.newInstance(new TopicPartition("orders", 9), unassigned));
            Object st = state.getConstructor(Set.class, boolean.class).newInstance(entries, true);
            write(dir, enums.getVersion(), enums.serialize(cast(st)));
            System.out.println("v3 missing");
        } else {  // connector 5.x: KafkaSourceEnumState(Set<SplitAndAssignmentStatus>, boolean): versions 1 and 2 by its
            // serializeV1/serializeV2 (kept for its tests), 3 by serialize
            List<KafkaPartitionSplit> all = new ArrayList<>();
            readers.values().forEach(all::addAll);
            write(dir, 1, (byte[]) hidden(KafkaSourceEnumStateSerializer.class, "serializeV1", Collection.class).invoke(null, all));
            Constructor<?> c = v3Entry.getConstructor(KafkaPartitionSplit.class, status);
            for (KafkaPartitionSplit s : all) entries.add(c.newInstance(s, assigned));
            entries.add(c.newInstance(split("orders", 9, KafkaPartitionSplit.EARLIEST_OFFSET, none), unassigned));
            write(dir, 2, (byte[]) hidden(KafkaSourceEnumStateSerializer.class, "serializeV2", Collection.class, boolean.class)
                .invoke(null, entries, true));
            Object st = state.getConstructor(Set.class, boolean.class).newInstance(entries, false);
            write(dir, enums.getVersion(), enums.serialize(cast(st)));
        }
    }

    static Method hidden(Class<?> c, String name, Class<?>... types) throws Exception {
        Method m = c.getDeclaredMethod(name, types);
        m.setAccessible(true);
        return m;
    }

    @SuppressWarnings("unchecked")
    static <T> T cast(Object o) { return (T) o; }

    static Class<?> find(String name) {
        try { return Class.forName(name); } catch (ClassNotFoundException e) { return null; }
    }

    static void write(Path dir, int version, byte[] body) throws Exception {
        Files.writeString(dir.resolve("enum-" + version + ".hex"), HexFormat.of().formatHex(frame(version, body)));
    }

    static String describe(KafkaPartitionSplit s) {
        return s.getTopic() + " " + s.getPartition() + " " + s.getStartingOffset() + " "
            + s.getStoppingOffset().orElse(KafkaPartitionSplit.NO_STOPPING_OFFSET);
    }

    static void read(Path dir) throws Exception {
        List<String> out = new ArrayList<>();
        Path splits = dir.resolve("splits.txt");
        if (Files.exists(splits)) {
            for (String line : Files.readAllLines(splits, StandardCharsets.UTF_8)) {
                if (line.isBlank()) continue;
                String[] p = line.trim().split(" ");
                KafkaPartitionSplit s = SimpleVersionedSerialization.readVersionAndDeSerialize(SPLITS, HexFormat.of().parseHex(p[1]));
                out.add("split " + p[0] + " " + describe(s));
            }
        }
        KafkaSourceEnumStateSerializer enums = new KafkaSourceEnumStateSerializer();
        try (var files = Files.list(dir)) {
            for (Path f : files.sorted().toList()) {
                String name = f.getFileName().toString();
                if (!name.startsWith("enum-") || !name.endsWith(".hex")) continue;
                DataInputStream in = new DataInputStream(new ByteArrayInputStream(HexFormat.of().parseHex(Files.readString(f).trim())));
                int coordinator = in.readInt();
                int version = in.readInt();
                byte[] body = new byte[in.readInt()];
                in.readFully(body);
                if (coordinator != 1 || in.available() > 0) throw new IllegalStateException(name + ": bad coordinator framing");
                Object state = enums.deserialize(version, body);
                List<String> rows = new ArrayList<>();
                Method splitsOf = find(state.getClass(), "splits");
                if (splitsOf != null) {
                    for (Object e : (Collection<?>) splitsOf.invoke(state)) {
                        KafkaPartitionSplit s = (KafkaPartitionSplit) e.getClass().getMethod("split").invoke(e);
                        Object st = e.getClass().getMethod("assignmentStatus").invoke(e);
                        rows.add("enum " + version + " " + st.toString().toLowerCase() + " " + describe(s));
                    }
                } else {
                    for (Object e : (Collection<?>) state.getClass().getMethod("partitions").invoke(state)) {
                        TopicPartition tp = (TopicPartition) e.getClass().getMethod("topicPartition").invoke(e);
                        Object st = e.getClass().getMethod("assignmentStatus").invoke(e);
                        rows.add("enum " + version + " " + st.toString().toLowerCase() + " " + tp.topic() + " " + tp.partition());
                    }
                }
                Collections.sort(rows);
                out.addAll(rows);
                out.add("enum " + version + " initial " + state.getClass().getMethod("initialDiscoveryFinished").invoke(state));
                if (version == 0) {
                    Map<Integer, Set<KafkaPartitionSplit>> a = SerdeUtils.deserializeSplitAssignments(body, SPLITS, n -> new LinkedHashSet<>());
                    List<String> v0 = new ArrayList<>();
                    a.forEach((k, v) -> v.forEach(s -> v0.add("enum0 " + k + " " + describe(s))));
                    Collections.sort(v0);
                    out.addAll(v0);
                }
            }
        }
        out.forEach(System.out::println);
    }

    static Method find(Class<?> c, String name) {
        try { return c.getMethod(name); } catch (NoSuchMethodException e) { return null; }
    }
}
