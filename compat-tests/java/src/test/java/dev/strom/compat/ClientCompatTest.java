package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The Java client against the broker at STROM_COMPAT_BOOTSTRAP (Strom or Apache Kafka; the
 * same tests run against both). No consumer groups: consumers use assign() and never commit.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClientCompatTest {
    static final String BOOTSTRAP = System.getenv("STROM_COMPAT_BOOTSTRAP");
    static final int RECORDS = Integer.parseInt(envOr("STROM_COMPAT_CLIENT_RECORDS", "2000"));
    static final int PARTITIONS = 3;
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    /** acks and idempotence: idempotence needs acks=all, so it is off for acks 0 and 1. */
    static final String[] MODES = {"acks0", "acks1", "acksall", "acksall-idempotent"};

    static Admin admin;

    static String envOr(String k, String d) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? d : v;
    }

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

    static String topicName(String what) {
        return "java-" + what + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static void createTopic(String topic, int partitions, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)))
                .all().get(30, TimeUnit.SECONDS);
        // Wait until every partition answers ListOffsets: Kafka answers CreateTopics before the
        // broker has created the partitions, and drops acks=0 records sent in between (FINDINGS.md).
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (int p = 0; p < partitions; p++) latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
        while (true) {
            try {
                admin.listOffsets(latest).all().get(10, TimeUnit.SECONDS);
                return;
            } catch (ExecutionException e) {
                if (System.nanoTime() > deadline) throw e;
                Thread.sleep(50);
            }
        }
    }

    /** One record as sent: what the consumer must give back byte for byte. */
    record Sent(int partition, byte[] key, byte[] value, long timestamp, List<Header> headers) {}

    /** The records every produce test sends; the shapes are the same in every language's suite. */
    static List<Sent> makeRecords(int n, long base) {
        List<Sent> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            byte[] key = i % 7 == 0 ? null : i % 7 == 1 ? new byte[0] : ("key-" + i).getBytes(StandardCharsets.UTF_8);
            byte[] value;
            if (i % 11 == 0) value = null;
            else if (i % 11 == 1) value = new byte[0];
            else if (i % 13 == 5) value = "compressible ".repeat(150).getBytes(StandardCharsets.UTF_8);
            else if (i == 17) value = pseudoRandom(i, 100_000);
            else value = pseudoRandom(i, 1 + (i * 37) % 300);
            List<Header> headers = new ArrayList<>();
            switch (i % 5) {
                case 1 -> headers.add(new RecordHeader("h", ("v-" + i).getBytes(StandardCharsets.UTF_8)));
                case 2 -> {
                    headers.add(new RecordHeader("dup", "a".getBytes(StandardCharsets.UTF_8)));
                    headers.add(new RecordHeader("dup", "b".getBytes(StandardCharsets.UTF_8)));
                }
                case 3 -> headers.add(new RecordHeader("empty", new byte[0]));
                case 4 -> headers.add(new RecordHeader("null-value", (byte[]) null));
                default -> {}
            }
            out.add(new Sent(i % PARTITIONS, key, value, base + i, headers));
        }
        return out;
    }

    static byte[] pseudoRandom(int seed, int len) {
        byte[] b = new byte[len];
        long x = 0x9E3779B97F4A7C15L ^ seed;
        for (int i = 0; i < len; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            b[i] = (byte) x;
        }
        return b;
    }

    /** Timestamps ten minutes in the past: recent enough for retention, old enough to be explicit. */
    static long baseTimestamp() {
        return System.currentTimeMillis() - 600_000L;
    }

    static KafkaProducer<byte[], byte[]> producer(String codec, String mode) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        switch (mode) {
            case "acks0" -> { p.put(ProducerConfig.ACKS_CONFIG, "0"); p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false"); }
            case "acks1" -> { p.put(ProducerConfig.ACKS_CONFIG, "1"); p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false"); }
            case "acksall" -> { p.put(ProducerConfig.ACKS_CONFIG, "all"); p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false"); }
            case "acksall-idempotent" -> { p.put(ProducerConfig.ACKS_CONFIG, "all"); p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true"); }
            default -> throw new IllegalArgumentException(mode);
        }
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        // No group.id: assign() only, no commits (Strom has no consumer groups yet).
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        return new KafkaConsumer<>(p);
    }

    /** Sends every record, then returns the offsets the acks reported (-1 under acks=0). */
    static long[] produce(KafkaProducer<byte[], byte[]> producer, String topic, List<Sent> records) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>(records.size());
        for (Sent s : records) {
            futures.add(producer.send(new ProducerRecord<>(topic, s.partition(), s.timestamp(), s.key(), s.value(), s.headers())));
        }
        producer.flush();
        long[] offsets = new long[records.size()];
        for (int i = 0; i < futures.size(); i++) {
            RecordMetadata md = futures.get(i).get(60, TimeUnit.SECONDS);
            assertEquals(records.get(i).partition(), md.partition(), "ack partition of record " + i);
            offsets[i] = md.hasOffset() ? md.offset() : -1;
        }
        return offsets;
    }

    /** Reads every partition from offset 0 until it holds `want[p]` records, or fails at the deadline. */
    static Map<Integer, List<ConsumerRecord<byte[], byte[]>>> consumeAll(String topic, int[] want) {
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = new HashMap<>();
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < want.length; p++) {
            tps.add(new TopicPartition(topic, p));
            got.put(p, new ArrayList<>());
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) {
                boolean done = true;
                for (int p = 0; p < want.length; p++) done &= got.get(p).size() >= want[p];
                if (done) break;
                if (System.nanoTime() > deadline) {
                    StringBuilder sb = new StringBuilder("consume timed out:");
                    for (int p = 0; p < want.length; p++) sb.append(" p").append(p).append(" ").append(got.get(p).size()).append("/").append(want[p]);
                    fail(sb.toString());
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) got.get(r.partition()).add(r);
            }
            // Nothing past what was produced: the end offsets equal the counts.
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(30));
            for (int p = 0; p < want.length; p++) {
                assertEquals(want[p], ends.get(new TopicPartition(topic, p)), "end offset of partition " + p);
            }
        }
        return got;
    }

    static void assertSameRecord(Sent s, ConsumerRecord<byte[], byte[]> r, String where) {
        assertArrayEquals(s.key(), r.key(), where + ": key");
        assertArrayEquals(s.value(), r.value(), where + ": value");
        assertEquals(s.timestamp(), r.timestamp(), where + ": timestamp");
        assertEquals(TimestampType.CREATE_TIME, r.timestampType(), where + ": timestamp type");
        Header[] got = r.headers().toArray();
        assertEquals(s.headers().size(), got.length, where + ": header count");
        for (int h = 0; h < got.length; h++) {
            assertEquals(s.headers().get(h).key(), got[h].key(), where + ": header key " + h);
            assertArrayEquals(s.headers().get(h).value(), got[h].value(), where + ": header value " + h);
        }
    }

    static Stream<Arguments> codecsAndModes() {
        return Arrays.stream(CODECS).flatMap(c -> Arrays.stream(MODES).map(m -> Arguments.of(c, m)));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("codecsAndModes")
    void produceConsumeByteForByte(String codec, String mode) throws Exception {
        String topic = topicName(codec + "-" + mode);
        createTopic(topic, PARTITIONS, Map.of());
        List<Sent> records = makeRecords(RECORDS, baseTimestamp());
        long[] acked;
        try (KafkaProducer<byte[], byte[]> p = producer(codec, mode)) {
            acked = produce(p, topic, records);
        }
        // Per partition, the records in the order they were sent; their offsets must be 0, 1, 2, ...
        Map<Integer, List<Integer>> order = new HashMap<>();
        for (int i = 0; i < records.size(); i++) order.computeIfAbsent(records.get(i).partition(), k -> new ArrayList<>()).add(i);
        int[] want = new int[PARTITIONS];
        for (int p = 0; p < PARTITIONS; p++) want[p] = order.getOrDefault(p, List.of()).size();
        if (!mode.equals("acks0")) {
            for (int p = 0; p < PARTITIONS; p++) {
                List<Integer> idx = order.get(p);
                for (int j = 0; j < idx.size(); j++) assertEquals(j, acked[idx.get(j)], "acked offset of record " + idx.get(j));
            }
        }
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = consumeAll(topic, want);
        for (int p = 0; p < PARTITIONS; p++) {
            List<ConsumerRecord<byte[], byte[]>> rs = got.get(p);
            assertEquals(want[p], rs.size(), "records in partition " + p);
            for (int j = 0; j < rs.size(); j++) {
                assertEquals(j, rs.get(j).offset(), "offset in partition " + p);
                assertSameRecord(records.get(order.get(p).get(j)), rs.get(j), "partition " + p + " offset " + j);
            }
        }
    }

    @Test
    void adminCreateDescribeTopicAndConfigs() throws Exception {
        String topic = topicName("admin");
        createTopic(topic, PARTITIONS, Map.of("max.message.bytes", "2000000"));
        ExecutionException again = assertThrows(ExecutionException.class, () -> createTopic(topic, PARTITIONS, Map.of()));
        assertInstanceOf(TopicExistsException.class, again.getCause());

        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
        assertEquals(PARTITIONS, d.partitions().size());
        for (var p : d.partitions()) {
            assertNotNull(p.leader(), "leader of partition " + p.partition());
            assertEquals(List.of(p.leader()), p.replicas());
            assertEquals(List.of(p.leader()), p.isr());
        }
        assertNotNull(d.topicId());
        assertFalse(d.topicId().toString().isEmpty());

        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config cfg = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
        assertTrue(cfg.entries().size() >= 20, "DescribeConfigs has " + cfg.entries().size() + " entries");
        ConfigEntry mmb = cfg.get("max.message.bytes");
        assertNotNull(mmb, "max.message.bytes missing");
        assertEquals("2000000", mmb.value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, mmb.source());
        ConfigEntry cp = cfg.get("cleanup.policy");
        assertNotNull(cp, "cleanup.policy missing");
        assertEquals("delete", cp.value());
        assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, cp.source());
        assertEquals("604800000", cfg.get("retention.ms").value());

        admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
    }

    @Test
    void listOffsetsByTimestamp() throws Exception {
        String topic = topicName("list-offsets");
        createTopic(topic, 1, Map.of());
        int n = 200;
        long base = baseTimestamp();
        List<Sent> records = new ArrayList<>();
        for (int i = 0; i < n; i++) records.add(new Sent(0, ("k" + i).getBytes(StandardCharsets.UTF_8), ("v" + i).getBytes(StandardCharsets.UTF_8), base + 10L * i, List.of()));
        try (KafkaProducer<byte[], byte[]> p = producer("none", "acksall-idempotent")) {
            produce(p, topic, records);
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        // target timestamp -> expected offset (-1: none at or after it)
        long[][] cases = {{base - 1000, 0}, {base, 0}, {base + 1, 1}, {base + 10L * 57, 57}, {base + 10L * 57 + 5, 58}, {base + 10L * (n - 1), n - 1}, {base + 10L * n, -1}};
        for (long[] c : cases) {
            ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(c[0]))).partitionResult(tp).get(30, TimeUnit.SECONDS);
            assertEquals(c[1], info.offset(), "admin ListOffsets at timestamp base+" + (c[0] - base));
            if (c[1] >= 0) assertEquals(records.get((int) c[1]).timestamp(), info.timestamp(), "timestamp of the found offset");
        }
        assertEquals(0, admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset());
        assertEquals(n, admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset());
        ListOffsetsResult.ListOffsetsResultInfo max = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
        assertEquals(n - 1, max.offset());
        assertEquals(base + 10L * (n - 1), max.timestamp());
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            Map<TopicPartition, OffsetAndTimestamp> r = c.offsetsForTimes(Map.of(tp, base + 10L * 99 + 1), Duration.ofSeconds(30));
            assertEquals(100, r.get(tp).offset());
            assertEquals(base + 1000, r.get(tp).timestamp());
            Map<TopicPartition, OffsetAndTimestamp> none = c.offsetsForTimes(Map.of(tp, base + 10L * n + 1), Duration.ofSeconds(30));
            assertEquals(null, none.get(tp));
        }
    }
}
