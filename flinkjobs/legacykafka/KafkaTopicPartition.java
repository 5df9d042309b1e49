package org.apache.flink.streaming.connectors.kafka.internals;

import java.io.Serializable;

/**
 * A stand-in with the name, fields and modifiers of flink-connector-kafka 3.x's KafkaTopicPartition (its jar is not to be
 * had here): Flink's KryoSerializer writes an object from the class name and the fields alone, so the legacy
 * FlinkKafkaConsumer's union state written with this class is byte for byte the connector's.
 */
public final class KafkaTopicPartition implements Serializable {
    private static final long serialVersionUID = 722083576322742325L;

    private final String topic;
    private final int partition;
    private final int cachedHash;

    public KafkaTopicPartition(String topic, int partition) {
        this.topic = topic;
        this.partition = partition;
        this.cachedHash = 31 * topic.hashCode() + partition;
    }

    public String getTopic() { return topic; }

    public int getPartition() { return partition; }

    public int cachedHash() { return cachedHash; }
}
