package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * KIP-1071 streams groups against the broker at STROM_COMPAT_BOOTSTRAP (Strom or Apache Kafka
 * 4.4, the same test against both): Kafka Streams 4.4 applications with
 * group.protocol=streams and exactly_once_v2 (StreamsApp, each instance its own JVM). A word
 * count split over two instances, one of them killed -9 and started again, counts every word
 * exactly; a stream-table join joins every record.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class StreamsGroupsCompatTest {
    static final String BOOTSTRAP = System.getenv("STROM_COMPAT_BOOTSTRAP");
    static final String[] WORDS = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"};

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        return Admin.create(p);
    }

    static KafkaProducer<String, String> producer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        return new KafkaProducer<>(p);
    }

    /** An instance of StreamsApp in its own JVM, its output in a file. */
    static final class Instance {
        final Process process;
        final Path log;

        Instance(String name, String... args) throws Exception {
            log = Files.createTempFile("strom-streams-" + name + "-", ".log");
            List<String> cmd = new ArrayList<>(List.of(
                    Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Xmx256m", "-cp", System.getProperty("java.class.path"),
                    StreamsApp.class.getName()));
            cmd.addAll(List.of(args));
            process = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(log.toFile()).start();
        }

        /** Waits until the instance says RUNNING (it joined the group and got its tasks). */
        Instance running() throws Exception {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (System.nanoTime() < deadline) {
                if (Files.readString(log).contains("RUNNING")) {
                    return this;
                }
                assertTrue(process.isAlive(), "instance exited:\n" + Files.readString(log));
                Thread.sleep(200);
            }
            throw new AssertionError("instance not RUNNING after 90 s:\n" + Files.readString(log));
        }

        void kill() throws Exception {
            process.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }

        void stop() throws Exception {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                kill();
            }
            new File(log.toString()).delete();
        }
    }

    static void createTopics(String... names) throws Exception {
        try (Admin admin = admin()) {
            List<NewTopic> topics = new ArrayList<>();
            for (String n : names) {
                topics.add(new NewTopic(n, 3, (short) 1));
            }
            admin.createTopics(topics).all().get(30, TimeUnit.SECONDS);
        }
    }

    /** Sends `lines` lines of words, adding each word's count to `expected`. */
    static void sendLines(String topic, int from, int lines, Map<String, Long> expected) throws Exception {
        try (KafkaProducer<String, String> p = producer()) {
            for (int i = from; i < from + lines; i++) {
                String a = WORDS[i % WORDS.length], b = WORDS[(i * 3 + 1) % WORDS.length];
                expected.merge(a, 1L, Long::sum);
                expected.merge(b, 1L, Long::sum);
                p.send(new ProducerRecord<>(topic, "line-" + i, a + " " + b.toUpperCase()));
            }
            p.flush();
        }
    }

    /** The latest committed value of each key of `topic`, read until `done` holds of it. */
    static <V> Map<String, V> latest(String topic, Class<?> valueDeserializer,
                                     java.util.function.Predicate<Map<String, V>> done) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, "reader-" + UUID.randomUUID());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, valueDeserializer.getName());
        Map<String, V> latest = new HashMap<>();
        try (KafkaConsumer<String, V> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (!done.test(latest) && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, V> r : c.poll(Duration.ofMillis(300))) {
                    latest.put(r.key(), r.value());
                }
            }
            // A little longer: a count past the expected one (a duplicate) would show now.
            long quiet = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (System.nanoTime() < quiet) {
                for (ConsumerRecord<String, V> r : c.poll(Duration.ofMillis(300))) {
                    latest.put(r.key(), r.value());
                }
            }
        }
        return latest;
    }

    /**
     * StreamsGroupDescribe: the word count's two subtopologies, `members` members, and their
     * target assignments together hold every one of the `tasks` active tasks exactly once
     * (polled: the target of a member that just joined may still be computed).
     */
    static void assertTargetCoversEveryTaskOnce(Admin admin, String app, int members, int tasks)
            throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        String last = "";
        while (System.nanoTime() < deadline) {
            StreamsGroupDescription d = admin.describeStreamsGroups(List.of(app)).all()
                    .get(30, TimeUnit.SECONDS).get(app);
            assertEquals(2, d.subtopologies().size(), "word count's subtopologies: " + d);
            List<String> targets = new ArrayList<>();
            for (StreamsGroupMemberDescription m : d.members()) {
                for (StreamsGroupMemberAssignment.TaskIds t : m.targetAssignment().activeTasks()) {
                    for (int p : t.partitions()) {
                        targets.add(t.subtopologyId() + "-" + p);
                    }
                }
            }
            if (d.members().size() == members && targets.size() == tasks
                    && new java.util.HashSet<>(targets).size() == tasks) {
                return;
            }
            last = d.toString();
            Thread.sleep(500);
        }
        throw new AssertionError("target assignment never covered every task once: " + last);
    }

    @Test
    void wordCountIsExactThroughAnInstanceKilledAndRestarted() throws Exception {
        String id = UUID.randomUUID().toString().substring(0, 8);
        String app = "wc-" + id, in = "wc-in-" + id, out = "wc-out-" + id;
        createTopics(in, out);
        Map<String, Long> expected = new HashMap<>();
        Instance a = new Instance("a", BOOTSTRAP, app, "wordcount", in, out).running();
        Instance b = null;
        Instance a2 = null;
        try {
            sendLines(in, 0, 300, expected);
            b = new Instance("b", BOOTSTRAP, app, "wordcount", in, out).running();
            try (Admin admin = admin()) {
                boolean listed = false;
                for (GroupListing g : admin.listGroups(ListGroupsOptions.forStreamsGroups()).all()
                        .get(30, TimeUnit.SECONDS)) {
                    listed |= g.groupId().equals(app) && g.type().orElse(null) == GroupType.STREAMS;
                }
                assertTrue(listed, "the application is listed as a streams group");
                assertTargetCoversEveryTaskOnce(admin, app, 2, 6);
            }
            sendLines(in, 300, 300, expected);
            a.kill();
            sendLines(in, 600, 300, expected);
            a2 = new Instance("a2", BOOTSTRAP, app, "wordcount", in, out).running();
            sendLines(in, 900, 300, expected);
            Map<String, Long> counts = latest(out, LongDeserializer.class,
                    m -> expected.entrySet().stream().allMatch(e -> e.getValue().equals(m.get(e.getKey()))));
            assertEquals(expected, counts, "word counts (exactly once through the kill)");
        } finally {
            for (Instance i : new Instance[] {a, b, a2}) {
                if (i != null) {
                    i.stop();
                }
            }
        }
    }

    @Test
    void streamTableJoinJoinsEveryRecord() throws Exception {
        String id = UUID.randomUUID().toString().substring(0, 8);
        String app = "join-" + id, in = "join-in-" + id, table = "join-table-" + id, out = "join-out-" + id;
        createTopics(in, table, out);
        try (KafkaProducer<String, String> p = producer()) {
            for (int k = 0; k < 20; k++) {
                p.send(new ProducerRecord<>(table, "k" + k, "t" + k));
            }
            p.flush();
        }
        Instance i = new Instance("join", BOOTSTRAP, app, "join", in, out, table).running();
        try {
            Map<String, String> expected = new HashMap<>();
            try (KafkaProducer<String, String> p = producer()) {
                for (int k = 0; k < 20; k++) {
                    p.send(new ProducerRecord<>(in, "k" + k, "v" + k));
                    expected.put("k" + k, "v" + k + "|t" + k);
                }
                p.flush();
            }
            Map<String, String> joined = latest(out, StringDeserializer.class,
                    m -> m.size() >= expected.size());
            assertEquals(expected, joined, "every record joined with its table row");
        } finally {
            i.stop();
        }
    }
}
