package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Strom's AI flow features (docs/ai-features.md, issue 20) through the Java client: dedup by a
 * message-id header and embedding validation with KIP-467 record errors. Against Apache Kafka
 * the same topic configs are refused as unknown, which is the difference a user sees.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AiFlowCompatTest {
    static final String BOOTSTRAP = System.getenv("STROM_COMPAT_BOOTSTRAP");
    static final boolean STROM = "strom".equals(System.getenv("STROM_COMPAT_BROKER"));

    static Admin admin;

    @BeforeAll
    static void connect() {
        assertNotNull(BOOTSTRAP, "STROM_COMPAT_BOOTSTRAP is not set (run through compat-tests/run-clients.sh)");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        admin = Admin.create(p);
    }

    @AfterAll
    static void close() {
        if (admin != null) admin.close(Duration.ofSeconds(10));
    }

    static void createTopic(String topic, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(configs))).all().get(30, TimeUnit.SECONDS);
    }

    static KafkaProducer<byte[], byte[]> producer(boolean idempotent) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        // Records sent together land in one batch (the embedding test needs a mixed batch).
        p.put(ProducerConfig.LINGER_MS_CONFIG, "200");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static List<ConsumerRecord<byte[], byte[]>> readAll(String topic, int atLeast) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(out::add);
                // Past the wanted count, read on until the log end: a duplicate would follow.
                if (out.size() >= atLeast && c.position(tp) >= c.endOffsets(List.of(tp)).get(tp)) break;
            }
        }
        return out;
    }

    static ProducerRecord<byte[], byte[]> withId(String topic, String id, String value) {
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0, null, value.getBytes(StandardCharsets.UTF_8));
        r.headers().add(new RecordHeader("msg-id", id.getBytes(StandardCharsets.UTF_8)));
        return r;
    }

    static byte[] f32le(float... v) {
        ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (float x : v) b.putFloat(x);
        return b.array();
    }

    @Test
    void kafkaRefusesStromTopicConfigsAsUnknown() {
        assumeTrue(!STROM, "Apache Kafka only");
        ExecutionException e = assertThrows(ExecutionException.class,
                () -> createTopic("java-ai-unknown-" + UUID.randomUUID(), Map.of("strom.dedup.header", "msg-id")));
        assertInstanceOf(InvalidConfigurationException.class, e.getCause());
    }

    @Test
    void duplicateMessageIdIsAnsweredWithTheFirstOffsetAndStoredOnce() throws Exception {
        assumeTrue(STROM, "Strom's topic configs");
        String topic = "java-ai-dedup-" + UUID.randomUUID();
        createTopic(topic, Map.of("strom.dedup.header", "msg-id"));
        // Two producers (a restarted client, or two replicas of a service) send job-1: the second
        // send is answered with the first one's offset and not appended.
        long first;
        try (KafkaProducer<byte[], byte[]> p = producer(false)) {
            first = p.send(withId(topic, "job-1", "run 1")).get(30, TimeUnit.SECONDS).offset();
            p.send(withId(topic, "job-2", "run 2")).get(30, TimeUnit.SECONDS);
        }
        try (KafkaProducer<byte[], byte[]> p = producer(true)) {
            RecordMetadata again = p.send(withId(topic, "job-1", "run 1 again")).get(30, TimeUnit.SECONDS);
            assertEquals(first, again.offset(), "the duplicate is answered with the original offset");
            p.send(withId(topic, "job-3", "run 3")).get(30, TimeUnit.SECONDS);
        }
        List<String> values = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : readAll(topic, 3)) values.add(new String(r.value(), StandardCharsets.UTF_8));
        assertEquals(List.of("run 1", "run 2", "run 3"), values);
    }

    @Test
    void badEmbeddingFailsItsRecordWithInvalidRecordAndTheBatchAsKafkaDoes() throws Exception {
        assumeTrue(STROM, "Strom's topic configs");
        String topic = "java-ai-embedding-" + UUID.randomUUID();
        createTopic(topic, Map.of("strom.embedding.format", "f32le", "strom.embedding.dimension", "4",
                "strom.embedding.normalized", "true"));
        try (KafkaProducer<byte[], byte[]> p = producer(true)) {
            // One batch: a good vector, a NaN, a good one.
            Future<RecordMetadata> good1 = p.send(new ProducerRecord<>(topic, 0, null, f32le(0.5f, 0.5f, 0.5f, 0.5f)));
            Future<RecordMetadata> bad = p.send(new ProducerRecord<>(topic, 0, null, f32le(Float.NaN, 0f, 0f, 1f)));
            Future<RecordMetadata> good2 = p.send(new ProducerRecord<>(topic, 0, null, f32le(1f, 0f, 0f, 0f)));
            p.flush();
            ExecutionException e = assertThrows(ExecutionException.class, () -> bad.get(30, TimeUnit.SECONDS));
            assertInstanceOf(InvalidRecordException.class, e.getCause());
            assertTrue(e.getCause().getMessage().contains("invalid embedding"), e.getCause().getMessage());
            // KIP-467: the others of the batch fail too, named as part of an invalid batch.
            for (Future<RecordMetadata> f : List.of(good1, good2)) {
                ExecutionException o = assertThrows(ExecutionException.class, () -> f.get(30, TimeUnit.SECONDS));
                assertTrue(o.getCause().getMessage().contains("part of a batch"), o.getCause().getMessage());
            }
            // The producer goes on: a good vector alone is appended.
            long offset = p.send(new ProducerRecord<>(topic, 0, null, f32le(0f, 1f, 0f, 0f))).get(30, TimeUnit.SECONDS).offset();
            assertEquals(0, offset, "nothing of the refused batch was appended");
        }
        assertEquals(1, readAll(topic, 1).size());
    }
}
