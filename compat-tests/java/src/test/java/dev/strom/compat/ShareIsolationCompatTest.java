package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A share group's isolation level (group config share.isolation.level) against the broker at
 * STROM_COMPAT_BOOTSTRAP (Strom or Apache Kafka 4.4, the same test against both): with a
 * committed, an aborted and an open transaction on one partition, a read_committed group gets
 * the committed records only, and the open transaction's once it commits; a read_uncommitted
 * group gets the open transaction's records before the commit.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShareIsolationCompatTest {
    static final String BOOTSTRAP = System.getenv("STROM_COMPAT_BOOTSTRAP");

    static KafkaShareConsumer<String, String> consumer(String group, String topic) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    /** Values `c` gets (accepting each) until `want` of them arrived, or for `quietMs` after. */
    static List<String> take(KafkaShareConsumer<String, String> c, int want, long quietMs) {
        List<String> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (got.size() < want && System.nanoTime() < deadline) {
            drain(c, got);
        }
        long quiet = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(quietMs);
        while (System.nanoTime() < quiet) {
            drain(c, got);
        }
        return got;
    }

    static void drain(KafkaShareConsumer<String, String> c, List<String> got) {
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
            got.add(r.value());
            c.acknowledge(r, AcknowledgeType.ACCEPT);
        }
        c.commitSync(Duration.ofSeconds(10));
    }

    @Test
    void readCommittedGroupGetsOnlyCommittedTransactionsAndReadUncommittedGetsAll() throws Exception {
        String id = UUID.randomUUID().toString();
        String topic = "share-iso-" + id;
        String committed = "sg-rc-" + id;
        String uncommitted = "sg-ru-" + id;
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            for (Map.Entry<String, String> g : Map.of(committed, "read_committed", uncommitted, "read_uncommitted").entrySet()) {
                Collection<AlterConfigOp> ops = List.of(
                        new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("share.isolation.level", g.getValue()), AlterConfigOp.OpType.SET));
                admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, g.getKey()), ops))
                        .all().get(30, TimeUnit.SECONDS);
            }
        }
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "share-iso-" + id);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
             KafkaShareConsumer<String, String> rc = consumer(committed, topic);
             KafkaShareConsumer<String, String> ru = consumer(uncommitted, topic)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (String v : List.of("c1", "c2", "c3")) producer.send(new ProducerRecord<>(topic, v));
            producer.commitTransaction();
            producer.beginTransaction();
            for (String v : List.of("a1", "a2")) producer.send(new ProducerRecord<>(topic, v));
            producer.abortTransaction();
            producer.beginTransaction();
            for (String v : List.of("o1", "o2")) producer.send(new ProducerRecord<>(topic, v));
            producer.flush();

            assertEquals(List.of("c1", "c2", "c3"), take(rc, 3, 2000),
                    "read_committed: the committed transaction only while the next is open");
            // read_uncommitted gets the open transaction's records before it commits; the
            // aborted ones the Java client leaves out on both brokers (seen on Kafka 4.4).
            assertEquals(List.of("c1", "c2", "c3", "o1", "o2"), take(ru, 5, 1000),
                    "read_uncommitted: the open transaction too");
            producer.commitTransaction();
            assertEquals(List.of("o1", "o2"), take(rc, 2, 1000), "then the open one once committed");
        }
    }
}
