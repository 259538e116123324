package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Java client's transactions against the broker at STROM_COMPAT_BOOTSTRAP (Strom or
 * Apache Kafka, the same tests against both): commit and abort as read_committed and
 * read_uncommitted consumers see them, with the offsets control records take; a
 * consume-transform-produce loop with sendOffsetsToTransaction whose aborted batches are
 * processed again, exactly once in the output; zombie fencing of a second producer with the
 * same transactional.id.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TransactionsCompatTest {
    static final String BOOTSTRAP = System.getenv("STROM_COMPAT_BOOTSTRAP");

    static Admin admin;

    @BeforeAll
    static void connect() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        admin = Admin.create(p);
        ClientCompatTest.admin = admin;
    }

    @AfterAll
    static void close() {
        if (admin != null) admin.close(Duration.ofSeconds(10));
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static KafkaProducer<byte[], byte[]> txnProducer(String transactionalId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static KafkaConsumer<byte[], byte[]> consumer(String isolation, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        }
        return new KafkaConsumer<>(p);
    }

    /**
     * Every record of `topic`'s partitions from offset 0 up to their end offsets, and at least
     * `expect` of them: the markers of a transaction are written after commitTransaction
     * returns, so right after a commit the read_committed end offset (the LSO) can still be
     * short of it. The end offsets are asked again until `expect` records have arrived.
     */
    static List<ConsumerRecord<byte[], byte[]>> readAll(String topic, int partitions, String isolation, int expect) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(isolation, null)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) done &= c.position(tp, Duration.ofSeconds(30)) >= ends.get(tp);
                if (done && out.size() >= expect) return out;
                if (System.nanoTime() > deadline) {
                    fail("read of " + topic + " (" + isolation + ") timed out at " + out.size() + " of " + expect
                            + " records, end offsets " + ends);
                }
                if (done) ends = c.endOffsets(tps, Duration.ofSeconds(30));
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) out.add(r);
            }
        }
    }

    static List<Long> offsetsOf(List<ConsumerRecord<byte[], byte[]>> records) {
        return records.stream().map(ConsumerRecord::offset).toList();
    }

    static List<Long> range(long from, long toExclusive) {
        List<Long> out = new ArrayList<>();
        for (long o = from; o < toExclusive; o++) out.add(o);
        return out;
    }

    @Test
    void commitAndAbortAsEachIsolationLevelSeesThem() throws Exception {
        String topic = ClientCompatTest.topicName("txn");
        ClientCompatTest.createTopic(topic, 1, Map.of());
        try (KafkaProducer<byte[], byte[]> p = txnProducer("java-tx-" + UUID.randomUUID())) {
            int[] sizes = {10, 5, 7};
            boolean[] commit = {true, false, true};
            for (int t = 0; t < sizes.length; t++) {
                p.beginTransaction();
                for (int i = 0; i < sizes[t]; i++) p.send(new ProducerRecord<>(topic, 0, null, bytes("t" + t + "-" + i)));
                // On the broker before the abort: the client drops unsent records of an aborted
                // transaction, and then there is nothing for the abort to hide.
                p.flush();
                if (commit[t]) p.commitTransaction();
                else p.abortTransaction();
            }
        }
        // Each transaction's control record takes one offset: 0-9 data, 10 commit, 11-15 data,
        // 16 abort, 17-23 data, 24 commit, end 25.
        List<ConsumerRecord<byte[], byte[]>> committed = readAll(topic, 1, "read_committed", 17);
        List<Long> want = new ArrayList<>(range(0, 10));
        want.addAll(range(17, 24));
        assertEquals(want, offsetsOf(committed), "read_committed offsets");
        for (ConsumerRecord<byte[], byte[]> r : committed) {
            assertTrue(!new String(r.value(), StandardCharsets.UTF_8).startsWith("t1-"), "aborted record read at " + r.offset());
        }
        List<ConsumerRecord<byte[], byte[]>> all = readAll(topic, 1, "read_uncommitted", 22);
        List<Long> every = new ArrayList<>(range(0, 10));
        every.addAll(range(11, 16));
        every.addAll(range(17, 24));
        assertEquals(every, offsetsOf(all), "read_uncommitted offsets");
        try (KafkaConsumer<byte[], byte[]> c = consumer("read_committed", null)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            assertEquals(25L, c.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp), "end offset (LSO)");
        }
    }

    @Test
    void consumeTransformProduceWithAbortsIsExactlyOnce() throws Exception {
        final int partitions = 3;
        final int n = 600;
        String in = ClientCompatTest.topicName("ctp-in");
        String out = ClientCompatTest.topicName("ctp-out");
        String group = "java-ctp-" + UUID.randomUUID().toString().substring(0, 8);
        ClientCompatTest.createTopic(in, partitions, Map.of());
        ClientCompatTest.createTopic(out, partitions, Map.of());
        try (KafkaProducer<byte[], byte[]> seed = txnProducer("java-seed-" + UUID.randomUUID())) {
            seed.beginTransaction();
            for (int i = 0; i < n; i++) seed.send(new ProducerRecord<>(in, i % partitions, null, bytes(Integer.toString(i))));
            seed.commitTransaction();
        }
        int batches = 0;
        int aborted = 0;
        Set<TopicPartition> inputs = new HashSet<>();
        for (int p = 0; p < partitions; p++) inputs.add(new TopicPartition(in, p));
        try (KafkaConsumer<byte[], byte[]> c = consumer("read_committed", group);
                KafkaProducer<byte[], byte[]> p = txnProducer("java-ctp-tx-" + group)) {
            c.subscribe(List.of(in));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (true) {
                // Each input partition holds n / partitions records at offsets 0.., then the
                // seed's commit marker, which a position may or may not have passed yet.
                Map<TopicPartition, OffsetAndMetadata> done = c.committed(inputs, Duration.ofSeconds(30));
                if (done.values().stream().allMatch(o -> o != null && o.offset() >= n / partitions)) break;
                if (System.nanoTime() > deadline) fail("input not processed in time: " + done);
                var records = c.poll(Duration.ofMillis(500));
                if (records.isEmpty()) continue;
                p.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    p.send(new ProducerRecord<>(out, r.partition(), null, bytes("out-" + new String(r.value(), StandardCharsets.UTF_8))));
                }
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                for (TopicPartition tp : c.assignment()) positions.put(tp, new OffsetAndMetadata(c.position(tp)));
                p.sendOffsetsToTransaction(positions, c.groupMetadata());
                if (++batches % 3 == 0) {
                    // Abort every third batch and go back to the committed offsets: the batch
                    // is processed again, and its aborted output must never be read.
                    p.abortTransaction();
                    aborted++;
                    Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment(), Duration.ofSeconds(30));
                    for (TopicPartition tp : c.assignment()) {
                        OffsetAndMetadata o = committed.get(tp);
                        if (o == null) c.seekToBeginning(List.of(tp));
                        else c.seek(tp, o.offset());
                    }
                } else {
                    p.commitTransaction();
                }
            }
        }
        assertTrue(aborted > 0, "no batch was aborted: the test did not exercise aborts");
        List<ConsumerRecord<byte[], byte[]>> output = readAll(out, partitions, "read_committed", n);
        Map<String, Integer> counts = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : output) counts.merge(new String(r.value(), StandardCharsets.UTF_8), 1, Integer::sum);
        for (int i = 0; i < n; i++) assertEquals(1, counts.getOrDefault("out-" + i, 0), "output count of input " + i);
        assertEquals(n, output.size(), "output size");
        Map<TopicPartition, OffsetAndMetadata> groupOffsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        for (int q = 0; q < partitions; q++) {
            long o = groupOffsets.get(new TopicPartition(in, q)).offset();
            assertTrue(o == n / partitions || o == n / partitions + 1, "group offset of partition " + q + ": " + o);
        }
    }

    @Test
    void secondProducerWithSameTransactionalIdFencesTheFirst() throws Exception {
        String topic = ClientCompatTest.topicName("fence");
        ClientCompatTest.createTopic(topic, 1, Map.of());
        String id = "java-fence-" + UUID.randomUUID();
        KafkaProducer<byte[], byte[]> zombie = txnProducer(id);
        try {
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(topic, 0, null, bytes("zombie"))).get(30, TimeUnit.SECONDS);
            try (KafkaProducer<byte[], byte[]> successor = txnProducer(id)) {
                // The successor's initTransactions aborted the zombie's open transaction.
                KafkaException e = assertThrows(KafkaException.class, zombie::commitTransaction);
                assertInstanceOf(ProducerFencedException.class, e, "the zombie's commit: " + e);
                successor.beginTransaction();
                successor.send(new ProducerRecord<>(topic, 0, null, bytes("successor")));
                successor.commitTransaction();
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
        List<ConsumerRecord<byte[], byte[]>> seen = readAll(topic, 1, "read_committed", 1);
        assertEquals(List.of("successor"), seen.stream().map(r -> new String(r.value(), StandardCharsets.UTF_8)).toList());
    }
}
