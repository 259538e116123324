package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * KIP-932 share groups with the Java client's KafkaShareConsumer against the broker at
 * STROM_COMPAT_BOOTSTRAP (Strom or Apache Kafka 4.4, the same tests against both): three
 * consumers on one partition get every record once; RELEASE redelivers and REJECT archives;
 * records a consumer holds without acknowledging come back when their lock runs out; the
 * delivery count limit archives a record released again and again; RENEW (KIP-1222) keeps
 * records with their holder for several lock durations; by_duration (KIP-1106) starts a new
 * share partition inside its time window. Each group gets
 * share.auto.offset.reset=earliest and short locks through the GROUP config resource. The
 * scenarios mostly wait (on locks, on polls that must stay empty), so they all start at once
 * in @BeforeAll, each on its own topic and group, and each @Test awaits and reports its own.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ShareGroupsCompatTest {
    static final String BOOTSTRAP = System.getenv("STROM_COMPAT_BOOTSTRAP");
    static final int LOCK_MS = 2000;
    static final int DELIVERY_LIMIT = 3;

    static Admin admin;

    @BeforeAll
    static void connect() throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        admin = Admin.create(p);
        // Kafka gates share groups behind share.version (a new 4.4 cluster starts above 0).
        FeatureMetadata features = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS);
        FinalizedVersionRange share = features.finalizedFeatures().get("share.version");
        System.out.println("share.version finalized " + share + ", supported "
                + features.supportedFeatures().get("share.version"));
        if (share == null || share.maxVersionLevel() < 1) {
            admin.updateFeatures(Map.of("share.version",
                    new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE))).all().get(30, TimeUnit.SECONDS);
        }
        startScenarios();
    }

    static ExecutorService pool;
    static final Map<String, Future<?>> runs = new ConcurrentHashMap<>();

    static void start(String name, Callable<Void> scenario) {
        runs.put(name, pool.submit(scenario));
    }

    /** The scenario's own outcome: its assertion error or exception, unwrapped. */
    static void await(String name) throws Throwable {
        try {
            runs.get(name).get(150, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw e.getCause();
        }
    }

    /** After `connect`: the scenarios need the admin client. */
    static void startScenarios() {
        pool = Executors.newFixedThreadPool(7);
        start("threeConsumersOnOnePartitionGetEveryRecordOnce", () -> { threeConsumersOnOnePartitionGetEveryRecordOnceScenario(); return null; });
        start("releaseRedeliversAndRejectArchives", () -> { releaseRedeliversAndRejectArchivesScenario(); return null; });
        start("recordsHeldWithoutAcknowledgementComeBackAfterTheLock", () -> { recordsHeldWithoutAcknowledgementComeBackAfterTheLockScenario(); return null; });
        start("deliveryCountLimitArchivesARecordReleasedOverAndOver", () -> { deliveryCountLimitArchivesARecordReleasedOverAndOverScenario(); return null; });
        start("adminAltersReplaysAndDeletesShareGroupOffsets", () -> { adminAltersReplaysAndDeletesShareGroupOffsetsScenario(); return null; });
        start("renewKeepsRecordsWithTheirHolderPastTheLock", () -> { renewKeepsRecordsWithTheirHolderPastTheLockScenario(); return null; });
        start("byDurationStartsAtTheFirstRecordInsideTheWindow", () -> { byDurationStartsAtTheFirstRecordInsideTheWindowScenario(); return null; });
    }

    @Test
    void threeConsumersOnOnePartitionGetEveryRecordOnce() throws Throwable {
        await("threeConsumersOnOnePartitionGetEveryRecordOnce");
    }

    @Test
    void releaseRedeliversAndRejectArchives() throws Throwable {
        await("releaseRedeliversAndRejectArchives");
    }

    @Test
    void recordsHeldWithoutAcknowledgementComeBackAfterTheLock() throws Throwable {
        await("recordsHeldWithoutAcknowledgementComeBackAfterTheLock");
    }

    @Test
    void deliveryCountLimitArchivesARecordReleasedOverAndOver() throws Throwable {
        await("deliveryCountLimitArchivesARecordReleasedOverAndOver");
    }

    @Test
    void adminAltersReplaysAndDeletesShareGroupOffsets() throws Throwable {
        await("adminAltersReplaysAndDeletesShareGroupOffsets");
    }

    @Test
    void renewKeepsRecordsWithTheirHolderPastTheLock() throws Throwable {
        await("renewKeepsRecordsWithTheirHolderPastTheLock");
    }

    @Test
    void byDurationStartsAtTheFirstRecordInsideTheWindow() throws Throwable {
        await("byDurationStartsAtTheFirstRecordInsideTheWindow");
    }

    @AfterAll
    static void close() {
        if (pool != null) pool.shutdownNow();
        if (admin != null) admin.close(Duration.ofSeconds(10));
    }

    static String topicWith(int records) throws Exception {
        String topic = "share-" + UUID.randomUUID();
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            }
            producer.flush();
        }
        return topic;
    }

    /** A group that starts at the log start, with a low delivery limit and Kafka's lock. */
    static String group() throws Exception {
        return group(30_000);
    }

    /**
     * With `lockMs` locks: short ones only where the test waits for one to run out (a short
     * lock elsewhere would make a slow machine's late acknowledgement a redelivery).
     */
    static String group(int lockMs) throws Exception {
        String group = "sg-" + UUID.randomUUID();
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
        Collection<AlterConfigOp> ops = List.of(
                new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", String.valueOf(lockMs)), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("share.delivery.count.limit", String.valueOf(DELIVERY_LIMIT)), AlterConfigOp.OpType.SET));
        admin.incrementalAlterConfigs(Map.of(r, ops)).all().get(30, TimeUnit.SECONDS);
        return group;
    }

    static KafkaShareConsumer<String, String> consumer(String group, String topic, boolean explicit) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, explicit ? "explicit" : "implicit");
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    static short deliveries(ConsumerRecord<String, String> r) {
        return r.deliveryCount().orElse((short) -1);
    }

    static void threeConsumersOnOnePartitionGetEveryRecordOnceScenario() throws Exception {
        int n = 300;
        String topic = topicWith(n);
        String group = group();
        Map<Long, AtomicInteger> seen = new ConcurrentHashMap<>();
        AtomicInteger total = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        Set<Integer> active = ConcurrentHashMap.newKeySet();
        for (int i = 0; i < 3; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(group, topic, true)) {
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
                    while (total.get() < n && System.nanoTime() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                            assertEquals("v" + r.offset(), r.value());
                            seen.computeIfAbsent(r.offset(), o -> new AtomicInteger()).incrementAndGet();
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                            total.incrementAndGet();
                            active.add(id);
                        }
                        c.commitSync(Duration.ofSeconds(10));
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) t.join(120_000);
        assertTrue(failures.isEmpty(), "consumer failures: " + failures);
        assertEquals(n, seen.size(), "every offset delivered");
        seen.forEach((o, c) -> assertEquals(1, c.get(), "offset " + o + " delivered once"));
        // Acknowledged is final: a new member of the group finds nothing.
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, true)) {
            assertTrue(pollFor(c, Duration.ofMillis(2500)).isEmpty(), "no redelivery after ACCEPT");
        }
    }

    /**
     * share.auto.offset.reset=by_duration:PT1H (KIP-1106): a new share partition starts at the
     * first record stamped within the last hour, as ListOffsets by timestamp finds it, and
     * serves everything after it in offset order, an older stamp included. A negative duration
     * is refused as an invalid config.
     */
    static void byDurationStartsAtTheFirstRecordInsideTheWindowScenario() throws Exception {
        String topic = "share-" + UUID.randomUUID();
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        long now = System.currentTimeMillis();
        long hour = 3_600_000L;
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < 4; i++) {
                producer.send(new ProducerRecord<>(topic, 0, now - 2 * hour, "k", "old" + i)).get();
            }
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, 0, now - hour / 6, "k", "recent" + i)).get();
            }
            producer.send(new ProducerRecord<>(topic, 0, now - 3 * hour, "k", "late")).get();
        }
        String group = "sg-" + UUID.randomUUID();
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
        ExecutionException refused = assertThrows(ExecutionException.class, () -> admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "by_duration:-PT1H"), AlterConfigOp.OpType.SET))))
                .all().get(30, TimeUnit.SECONDS));
        assertTrue(refused.getCause() instanceof org.apache.kafka.common.errors.InvalidConfigurationException
                || refused.getCause() instanceof org.apache.kafka.common.errors.InvalidRequestException,
                "negative duration refused: " + refused.getCause());
        System.out.println("by_duration:-PT1H refused: " + refused.getCause());
        admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "by_duration:PT1H"), AlterConfigOp.OpType.SET))))
                .all().get(30, TimeUnit.SECONDS);
        List<String> got = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, true)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (got.size() < 4 && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> rec : c.poll(Duration.ofMillis(300))) {
                    got.add(rec.offset() + ":" + rec.value());
                    c.acknowledge(rec, AcknowledgeType.ACCEPT);
                }
                c.commitSync(Duration.ofSeconds(10));
            }
            // Nothing before the window comes later either.
            got.addAll(pollFor(c, Duration.ofMillis(1500)).stream().map(x -> x.offset() + ":" + x.value()).toList());
        }
        assertEquals(List.of("4:recent0", "5:recent1", "6:recent2", "7:late"), got);

        // Every record older than the window: nothing is served, and a record written later
        // is the first one delivered (Kafka fails the fetches until then, Strom starts at the
        // high watermark; the consumer sees the same).
        String allOld = "share-" + UUID.randomUUID();
        admin.createTopics(List.of(new NewTopic(allOld, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        String group2 = "sg-" + UUID.randomUUID();
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group2), List.of(
                new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "by_duration:PT1H"), AlterConfigOp.OpType.SET))))
                .all().get(30, TimeUnit.SECONDS);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p);
                KafkaShareConsumer<String, String> c = consumer(group2, allOld, true)) {
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(allOld, 0, now - 2 * hour, "k", "old" + i)).get();
            }
            assertEquals(List.of(), pollFor(c, Duration.ofMillis(3000)).stream().map(ConsumerRecord::value).toList());
            producer.send(new ProducerRecord<>(allOld, 0, System.currentTimeMillis(), "k", "fresh")).get();
            List<String> later = new ArrayList<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (later.isEmpty() && System.nanoTime() < deadline) {
                later.addAll(pollFor(c, Duration.ofMillis(500)).stream().map(x -> x.offset() + ":" + x.value()).toList());
            }
            later.addAll(pollFor(c, Duration.ofMillis(1000)).stream().map(x -> x.offset() + ":" + x.value()).toList());
            assertEquals(List.of("3:fresh"), later);
        }
    }

    /** Everything `c` receives within `d`, acknowledged ACCEPT. */
    static List<ConsumerRecord<String, String>> pollFor(KafkaShareConsumer<String, String> c, Duration d) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.nanoTime() + d.toNanos();
        while (System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                out.add(r);
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync(Duration.ofSeconds(10));
        }
        return out;
    }

    static void releaseRedeliversAndRejectArchivesScenario() throws Exception {
        String topic = topicWith(10);
        String group = group();
        Map<Long, List<Short>> deliveries = new TreeMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, true)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            // Even offsets: RELEASE on the first delivery, ACCEPT on the second; odd: REJECT.
            while (System.nanoTime() < deadline && !(deliveries.size() == 10
                    && deliveries.entrySet().stream().allMatch(e -> e.getKey() % 2 == 1 || e.getValue().size() == 2))) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    List<Short> d = deliveries.computeIfAbsent(r.offset(), o -> new ArrayList<>());
                    d.add(deliveries(r));
                    if (r.offset() % 2 == 1) {
                        c.acknowledge(r, AcknowledgeType.REJECT);
                    } else {
                        c.acknowledge(r, d.size() == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    }
                }
                c.commitSync(Duration.ofSeconds(10));
            }
            assertTrue(pollFor(c, Duration.ofMillis(2500)).isEmpty(), "nothing after ACCEPT and REJECT");
        }
        for (long o = 0; o < 10; o++) {
            List<Short> expected = o % 2 == 1 ? List.of((short) 1) : List.of((short) 1, (short) 2);
            assertEquals(expected, deliveries.get(o), "delivery counts of offset " + o);
        }
    }

    static void recordsHeldWithoutAcknowledgementComeBackAfterTheLockScenario() throws Exception {
        String topic = topicWith(5);
        String group = group(LOCK_MS);
        try (KafkaShareConsumer<String, String> holder = consumer(group, topic, true)) {
            List<ConsumerRecord<String, String>> held = new ArrayList<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (held.size() < 5 && System.nanoTime() < deadline) {
                c(holder).forEach(held::add);
            }
            assertEquals(5, held.size());
            // The holder stops polling (a stuck or dead worker); its locks run out.
            long start = System.nanoTime();
            try (KafkaShareConsumer<String, String> other = consumer(group, topic, true)) {
                List<ConsumerRecord<String, String>> again = new ArrayList<>();
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (again.size() < 5 && System.nanoTime() < until) {
                    for (ConsumerRecord<String, String> r : other.poll(Duration.ofMillis(300))) {
                        again.add(r);
                        other.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    other.commitSync(Duration.ofSeconds(10));
                }
                long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertEquals(5, again.size(), "the held records are redelivered");
                // At least the second delivery: the idle holder's client may prefetch a
                // redelivery in the background and let that lock run out too (seen on Kafka).
                for (ConsumerRecord<String, String> r : again) {
                    assertTrue(deliveries(r) >= 2, "redelivery of offset " + r.offset() + ", count " + deliveries(r));
                }
                assertTrue(waitedMs >= LOCK_MS / 2, "redelivered only after the lock, at " + waitedMs + " ms");
            }
        }
    }

    /**
     * A holder renews its records' locks (KIP-1222) for three lock durations while another
     * member polls: nothing is redelivered, each renewed record comes back to the holder at
     * delivery count 1, and the holder's final ACCEPT is taken.
     */
    static void renewKeepsRecordsWithTheirHolderPastTheLockScenario() throws Exception {
        String topic = topicWith(3);
        String group = group(LOCK_MS);
        try (KafkaShareConsumer<String, String> holder = consumer(group, topic, true);
             KafkaShareConsumer<String, String> other = consumer(group, topic, true)) {
            Map<Long, ConsumerRecord<String, String>> held = new TreeMap<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (held.size() < 3 && System.nanoTime() < deadline) {
                c(holder).forEach(r -> held.put(r.offset(), r));
            }
            assertEquals(3, held.size());
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(3L * LOCK_MS);
            int renewals = 0;
            Map<Long, Integer> returned = new TreeMap<>();
            while (System.nanoTime() < until) {
                for (ConsumerRecord<String, String> r : held.values()) {
                    holder.acknowledge(r, AcknowledgeType.RENEW);
                }
                holder.commitSync(Duration.ofSeconds(10)).forEach((tp, e) ->
                        assertTrue(e.isEmpty(), "renew on " + tp + " refused: " + e));
                renewals++;
                for (ConsumerRecord<String, String> r : holder.poll(Duration.ofMillis(LOCK_MS / 4))) {
                    assertEquals(1, deliveries(r), "a renewed offset " + r.offset() + " is not a new delivery");
                    held.put(r.offset(), r);
                    returned.merge(r.offset(), 1, Integer::sum);
                }
                for (ConsumerRecord<String, String> r : other.poll(Duration.ofMillis(LOCK_MS / 4))) {
                    throw new AssertionError("offset " + r.offset() + " redelivered while renewed");
                }
            }
            assertTrue(renewals >= 3, "renewed " + renewals + " times");
            System.out.println("renew: " + renewals + " renewals, returned to the holder " + returned);
            for (ConsumerRecord<String, String> r : held.values()) {
                holder.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            holder.commitSync(Duration.ofSeconds(10)).forEach((tp, e) ->
                    assertTrue(e.isEmpty(), "accept on " + tp + " refused: " + e));
            long quiet = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LOCK_MS + 1000);
            while (System.nanoTime() < quiet) {
                for (ConsumerRecord<String, String> r : other.poll(Duration.ofMillis(300))) {
                    throw new AssertionError("offset " + r.offset() + " redelivered after ACCEPT");
                }
            }
        }
    }

    static Iterable<ConsumerRecord<String, String>> c(KafkaShareConsumer<String, String> c) {
        return c.poll(Duration.ofMillis(300));
    }

    static void deliveryCountLimitArchivesARecordReleasedOverAndOverScenario() throws Exception {
        String topic = topicWith(3);
        String group = group();
        Map<Long, Integer> count = new TreeMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, true)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline
                    && !(count.size() == 3 && count.values().stream().allMatch(v -> v == DELIVERY_LIMIT))) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    count.merge(r.offset(), 1, Integer::sum);
                    assertEquals(count.get(r.offset()).shortValue(), deliveries(r));
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                c.commitSync(Duration.ofSeconds(10));
            }
            assertTrue(pollFor(c, Duration.ofMillis(2500)).isEmpty(), "archived at the delivery limit");
        }
        assertEquals(Map.of(0L, DELIVERY_LIMIT, 1L, DELIVERY_LIMIT, 2L, DELIVERY_LIMIT), count);
    }

    /**
     * Accepts records until `n` came (or 60 s passed): their offsets, in delivery order;
     * `fresh`: each must be a first delivery.
     */
    static List<Long> acceptAll(String group, String topic, int n, boolean fresh) {
        List<Long> got = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, true)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (got.size() < n && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    if (fresh) {
                        assertEquals(1, deliveries(r), "first delivery of offset " + r.offset());
                    }
                    got.add(r.offset());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync(Duration.ofSeconds(10));
            }
        }
        return got;
    }

    /** Whether the share group has a member yet (before the first heartbeat it does not exist). */
    static boolean hasMembers(String group) throws Exception {
        try {
            return !admin.describeShareGroups(List.of(group)).describedGroups().get(group)
                    .get(30, TimeUnit.SECONDS).members().isEmpty();
        } catch (ExecutionException e) {
            if (e.getCause() instanceof GroupIdNotFoundException) {
                return false;
            }
            throw e;
        }
    }

    static SharePartitionOffsetInfo offsetOf(String group, TopicPartition tp) throws Exception {
        return admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(List.of(tp))))
                .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS).get(tp);
    }

    /**
     * The Admin share group calls (what kafka-share-groups.sh uses): an alter is refused while
     * a member is in the group; once it is empty, altering the start offset makes the next
     * member get the records from there afresh, deleting the offsets makes it start from
     * share.auto.offset.reset (earliest) again, and deleting the group drops it.
     */
    static void adminAltersReplaysAndDeletesShareGroupOffsetsScenario() throws Exception {
        String topic = topicWith(20);
        String group = group();
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaShareConsumer<String, String> member = consumer(group, topic, true)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            boolean joined = false;
            while (!joined && System.nanoTime() < deadline) {
                member.poll(Duration.ofMillis(300)).forEach(r -> member.acknowledge(r, AcknowledgeType.RELEASE));
                member.commitSync(Duration.ofSeconds(10));
                joined = hasMembers(group);
            }
            assertTrue(joined, "the member shows in describeShareGroups");
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.alterShareGroupOffsets(group, Map.of(tp, 0L)).all().get(30, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof GroupNotEmptyException, e.toString());
        }
        assertEquals(20, acceptAll(group, topic, 20, false).size(), "every record once (released ones again)");

        admin.alterShareGroupOffsets(group, Map.of(tp, 5L)).all().get(30, TimeUnit.SECONDS);
        assertEquals(5L, offsetOf(group, tp).startOffset());
        List<Long> replayed = acceptAll(group, topic, 15, true);
        assertEquals(15, replayed.size(), "offsets 5..19 again: " + replayed);
        assertEquals(5L, (long) replayed.stream().min(Long::compare).orElseThrow());

        admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get(30, TimeUnit.SECONDS);
        SharePartitionOffsetInfo gone = offsetOf(group, tp);
        assertTrue(gone == null || gone.startOffset() == -1, "no start offset after the delete: " + gone);
        assertEquals(20, acceptAll(group, topic, 20, true).size(), "from the log start again");

        admin.deleteShareGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
        Collection<GroupListing> share = admin.listGroups(ListGroupsOptions.forShareGroups()).all().get(30, TimeUnit.SECONDS);
        assertFalse(share.stream().anyMatch(g -> g.groupId().equals(group)), "deleted: " + share);
    }
}
