package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * KIP-1191 (Kafka 4.4, share.version 2): a share group's dead-letter topic, against the broker
 * at STROM_COMPAT_BOOTSTRAP (Strom or Apache Kafka 4.4, the same test against both). A
 * REJECTed record and one released until its delivery count limit land on the group's
 * errors.deadletterqueue.topic.name with Kafka's __dlq.errors.* headers and, with
 * errors.deadletterqueue.copy.record.enable, the original key and value (never its headers);
 * an accepted one does not. A name starting with "__" is refused as a group config. A topic
 * without errors.deadletterqueue.group.enable gets nothing, a missing one is not created (the
 * broker's auto-create is off by default), and the rejected record is archived regardless.
 * With errors.deadletterqueue.auto.create.topics.enable set dynamically, a missing DLQ topic
 * that has the required prefix is created with the opt-in; one without the prefix is not.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShareDeadLetterCompatTest {
    static final String BOOTSTRAP = System.getenv("STROM_COMPAT_BOOTSTRAP");

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static void setGroupConfigs(Admin admin, String group, Map<String, String> configs) throws Exception {
        Collection<AlterConfigOp> ops = configs.entrySet().stream()
                .map(e -> new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET))
                .toList();
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops))
                .all().get(30, TimeUnit.SECONDS);
    }

    static KafkaProducer<String, String> producer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    /** A plain consumer (no group) for reading a dead-letter topic. */
    static KafkaConsumer<String, String> reader() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static String header(ConsumerRecord<String, String> r, String name) {
        Header h = r.headers().lastHeader(name);
        return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
    }

    @Test
    void rejectedAndExhaustedRecordsGoToTheDeadLetterTopicWithKafkasHeaders() throws Exception {
        try (Admin admin = admin()) {
            FinalizedVersionRange share = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS)
                    .finalizedFeatures().get("share.version");
            assertTrue(share != null && share.maxVersionLevel() >= 2, "share.version 2 on a fresh broker: " + share);

            String id = UUID.randomUUID().toString();
            String source = "share-dlq-src-" + id;
            String dlq = "dlq.share-" + id;
            String group = "sg-dlq-" + id;
            admin.createTopics(List.of(
                    new NewTopic(source, 1, (short) 1),
                    new NewTopic(dlq, 1, (short) 1).configs(Map.of("errors.deadletterqueue.group.enable", "true"))))
                    .all().get(30, TimeUnit.SECONDS);
            ExecutionException refused = assertThrows(ExecutionException.class, () -> setGroupConfigs(admin,
                    "sg-internal-" + id, Map.of("errors.deadletterqueue.topic.name", "__dlq")));
            assertTrue(refused.getCause() instanceof InvalidConfigurationException, refused.toString());
            setGroupConfigs(admin, group, Map.of(
                    "share.auto.offset.reset", "earliest",
                    "share.delivery.count.limit", "2",
                    "errors.deadletterqueue.topic.name", dlq,
                    "errors.deadletterqueue.copy.record.enable", "true"));

            try (KafkaProducer<String, String> producer = producer()) {
                for (int i = 0; i < 3; i++) {
                    ProducerRecord<String, String> r = new ProducerRecord<>(source, "k" + i, "v" + i);
                    r.headers().add("original", "h".getBytes(StandardCharsets.UTF_8));
                    producer.send(r);
                }
                producer.flush();
            }

            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
            try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(cp)) {
                c.subscribe(List.of(source));
                // Offset 0 rejected, 1 released (and again at its second delivery, the limit),
                // 2 accepted.
                boolean exhausted = false;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (!exhausted && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                        if (r.offset() == 0) {
                            c.acknowledge(r, AcknowledgeType.REJECT);
                        } else if (r.offset() == 1) {
                            c.acknowledge(r, AcknowledgeType.RELEASE);
                            exhausted = r.deliveryCount().orElse((short) 0) >= 2;
                        } else {
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                    }
                    c.commitSync(Duration.ofSeconds(10));
                }
                assertTrue(exhausted, "offset 1 reached its delivery count limit");
            }

            Map<String, ConsumerRecord<String, String>> dead = new TreeMap<>();
            try (KafkaConsumer<String, String> reader = reader()) {
                TopicPartition tp = new TopicPartition(dlq, 0);
                reader.assign(List.of(tp));
                reader.seekToBeginning(List.of(tp));
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (dead.size() < 2 && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> r : reader.poll(Duration.ofMillis(300))) {
                        dead.put(header(r, "__dlq.errors.offset"), r);
                    }
                }
                // Nothing else arrives: the accepted record is not a dead letter.
                for (ConsumerRecord<String, String> r : reader.poll(Duration.ofSeconds(2))) {
                    dead.put(header(r, "__dlq.errors.offset"), r);
                }
            }
            assertEquals(List.of("0", "1"), List.copyOf(dead.keySet()), "dead letters by source offset");
            ConsumerRecord<String, String> rejected = dead.get("0");
            ConsumerRecord<String, String> exhausted = dead.get("1");
            assertEquals("Offset rejected by client.", header(rejected, "__dlq.errors.message"));
            assertEquals("1", header(rejected, "__dlq.errors.delivery.count"));
            assertEquals("Offset delivery count exceeded the threshold.", header(exhausted, "__dlq.errors.message"));
            assertEquals("2", header(exhausted, "__dlq.errors.delivery.count"));
            for (ConsumerRecord<String, String> r : dead.values()) {
                String offset = header(r, "__dlq.errors.offset");
                assertEquals(source, header(r, "__dlq.errors.topic"));
                assertEquals("0", header(r, "__dlq.errors.partition"));
                assertEquals(group, header(r, "__dlq.errors.group"));
                assertEquals("k" + offset, r.key(), "copied key");
                assertEquals("v" + offset, r.value(), "copied value");
                assertFalse(r.headers().headers("original").iterator().hasNext(), "original headers are not copied");
            }
        }
    }

    /** Rejects offset 0 of a fresh one-record topic in `group`; true when it is never redelivered. */
    static boolean rejectOnce(String source, String group) throws Exception {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        int deliveries = 0;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(cp)) {
            c.subscribe(List.of(source));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (deliveries == 0 && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    c.acknowledge(r, AcknowledgeType.REJECT);
                    deliveries++;
                }
                c.commitSync(Duration.ofSeconds(10));
            }
            long quiet = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (System.nanoTime() < quiet) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    deliveries++;
                }
                c.commitSync(Duration.ofSeconds(10));
            }
        }
        return deliveries == 1;
    }

    @Test
    void aTopicWithoutTheOptInGetsNothingAndAMissingOneIsNotCreated() throws Exception {
        try (Admin admin = admin()) {
            String id = UUID.randomUUID().toString();
            String closed = "dlq.closed-" + id;
            String missing = "dlq.missing-" + id;
            String a = "share-dlq-a-" + id;
            String b = "share-dlq-b-" + id;
            admin.createTopics(List.of(new NewTopic(a, 1, (short) 1), new NewTopic(b, 1, (short) 1),
                    new NewTopic(closed, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            try (KafkaProducer<String, String> producer = producer()) {
                producer.send(new ProducerRecord<>(a, "k", "v"));
                producer.send(new ProducerRecord<>(b, "k", "v"));
                producer.flush();
            }
            String ga = "sg-a-" + id;
            String gb = "sg-b-" + id;
            setGroupConfigs(admin, ga, Map.of("share.auto.offset.reset", "earliest",
                    "errors.deadletterqueue.topic.name", closed));
            setGroupConfigs(admin, gb, Map.of("share.auto.offset.reset", "earliest",
                    "errors.deadletterqueue.topic.name", missing));
            assertTrue(rejectOnce(a, ga), "rejected into a closed DLQ: archived, not redelivered");
            assertTrue(rejectOnce(b, gb), "rejected into a missing DLQ: archived, not redelivered");

            try (KafkaConsumer<String, String> reader = reader()) {
                TopicPartition tp = new TopicPartition(closed, 0);
                reader.assign(List.of(tp));
                reader.seekToBeginning(List.of(tp));
                assertTrue(reader.poll(Duration.ofSeconds(3)).isEmpty(), "nothing in a DLQ topic without the opt-in");
            }
            assertFalse(admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(missing),
                    "a missing DLQ topic is not created without errors.deadletterqueue.auto.create.topics.enable");
        }
    }

    @Test
    void autoCreateMakesAMissingDeadLetterTopicWithThePrefixOnly() throws Exception {
        try (Admin admin = admin()) {
            ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
            String name = "errors.deadletterqueue.auto.create.topics.enable";
            admin.incrementalAlterConfigs(Map.of(cluster, List.of(
                    new AlterConfigOp(new ConfigEntry(name, "true"), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS);
            try {
                String id = UUID.randomUUID().toString();
                String created = "dlq.auto-" + id;
                String unprefixed = "auto-" + id;
                String a = "share-dlq-c-" + id;
                String b = "share-dlq-d-" + id;
                admin.createTopics(List.of(new NewTopic(a, 1, (short) 1), new NewTopic(b, 1, (short) 1)))
                        .all().get(30, TimeUnit.SECONDS);
                try (KafkaProducer<String, String> producer = producer()) {
                    producer.send(new ProducerRecord<>(a, "k", "v"));
                    producer.send(new ProducerRecord<>(b, "k", "v"));
                    producer.flush();
                }
                setGroupConfigs(admin, "sg-c-" + id, Map.of("share.auto.offset.reset", "earliest",
                        "errors.deadletterqueue.topic.name", created));
                setGroupConfigs(admin, "sg-d-" + id, Map.of("share.auto.offset.reset", "earliest",
                        "errors.deadletterqueue.topic.name", unprefixed));
                assertTrue(rejectOnce(a, "sg-c-" + id));
                assertTrue(rejectOnce(b, "sg-d-" + id));
                // Kafka creates and writes asynchronously: wait for the dead letter.
                int got = 0;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(created)
                        && System.nanoTime() < deadline) {
                    Thread.sleep(200);
                }
                try (KafkaConsumer<String, String> reader = reader()) {
                    TopicPartition tp = new TopicPartition(created, 0);
                    reader.assign(List.of(tp));
                    reader.seekToBeginning(List.of(tp));
                    while (got == 0 && System.nanoTime() < deadline) {
                        for (ConsumerRecord<String, String> r : reader.poll(Duration.ofMillis(300))) {
                            assertEquals("Offset rejected by client.", header(r, "__dlq.errors.message"));
                            got++;
                        }
                    }
                }
                assertEquals(1, got, "the dead letter in the created topic");
                String optIn = admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, created)))
                        .all().get(30, TimeUnit.SECONDS).values().iterator().next()
                        .get("errors.deadletterqueue.group.enable").value();
                assertEquals("true", optIn, "created with the opt-in");
                assertFalse(admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(unprefixed),
                        "no topic without the dlq. prefix");
            } finally {
                admin.incrementalAlterConfigs(Map.of(cluster, List.of(
                        new AlterConfigOp(new ConfigEntry(name, ""), AlterConfigOp.OpType.DELETE))))
                        .all().get(30, TimeUnit.SECONDS);
            }
        }
    }
}
