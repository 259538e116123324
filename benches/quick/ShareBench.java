import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The share group benchmark's client side (benches/quick/share_groups.py runs it from source
 * with kafka-clients 4.4 on the class path, against Strom and Apache Kafka alike).
 *
 *   java ShareBench.java throughput BOOTSTRAP TOPIC GROUP CONSUMERS RECORDS
 *       CONSUMERS KafkaShareConsumers (explicit acks, ACCEPT each record, commitSync per poll)
 *       share one partition until RECORDS distinct offsets are accepted; prints
 *       {"consumers":N,"records":R,"seconds":S,"first_record_s":F,"deliveries":D}, S from the
 *       first delivery to the last acceptance, F from the consumers' start to it.
 *   java ShareBench.java redelivery BOOTSTRAP TOPIC GROUP LOCK_MS ROUNDS
 *       Each round: one record is produced, a holder acquires it and stops polling, a second
 *       member polls until the record comes back to it; prints how long after the lock ran
 *       out (from the holder's poll) it came back, per round: {"lock_ms":L,"late_ms":[...]}.
 */
public class ShareBench {
    static KafkaShareConsumer<byte[], byte[]> consumer(String bootstrap, String group, String topic) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "throughput" -> throughput(a[1], a[2], a[3], Integer.parseInt(a[4]), Long.parseLong(a[5]));
            case "redelivery" -> redelivery(a[1], a[2], a[3], Long.parseLong(a[4]), Integer.parseInt(a[5]));
            default -> throw new IllegalArgumentException(a[0]);
        }
    }

    static void throughput(String bootstrap, String topic, String group, int consumers, long records) throws Exception {
        // Offsets accepted, as a bitmap: a redelivered offset is counted once.
        java.util.BitSet done = new java.util.BitSet();
        AtomicLong deliveries = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(consumers);
        List<KafkaShareConsumer<byte[], byte[]>> cs = new ArrayList<>();
        for (int i = 0; i < consumers; i++) cs.add(consumer(bootstrap, group, topic));
        // The clock starts at the first delivery: joining the group (Kafka's assignment
        // interval, the JVM warming up) is not share consumption.
        AtomicLong first = new AtomicLong();
        long joined = System.nanoTime();
        List<Future<?>> runs = new ArrayList<>();
        for (KafkaShareConsumer<byte[], byte[]> c : cs) {
            runs.add(pool.submit(() -> {
                while (true) {
                    synchronized (done) {
                        if (done.cardinality() >= records) return null;
                    }
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        first.compareAndSet(0, System.nanoTime());
                        deliveries.incrementAndGet();
                        synchronized (done) {
                            done.set((int) r.offset());
                        }
                    }
                    c.commitSync(Duration.ofSeconds(30));
                }
            }));
        }
        for (Future<?> f : runs) f.get(10, TimeUnit.MINUTES);
        long end = System.nanoTime();
        double seconds = (end - first.get()) / 1e9;
        double toFirst = (first.get() - joined) / 1e9;
        pool.shutdownNow();
        for (KafkaShareConsumer<byte[], byte[]> c : cs) c.close(Duration.ofSeconds(5));
        System.out.printf("{\"consumers\":%d,\"records\":%d,\"seconds\":%.3f,\"first_record_s\":%.3f,\"deliveries\":%d}%n",
                consumers, records, seconds, toFirst, deliveries.get());
    }

    static void redelivery(String bootstrap, String topic, String group, long lockMs, int rounds) throws Exception {
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<Long> late = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
             KafkaShareConsumer<byte[], byte[]> other = consumer(bootstrap, group, topic)) {
            // `other` joins the group first, so no round waits for its assignment.
            long warm = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            while (System.nanoTime() < warm) other.poll(Duration.ofMillis(100));
            for (int round = 0; round < rounds; round++) {
                // One record per round, so the holder's is the only one to acquire.
                producer.send(new ProducerRecord<>(topic, ("r" + round).getBytes())).get();
                try (KafkaShareConsumer<byte[], byte[]> holder = consumer(bootstrap, group, topic)) {
                    long acquired = 0;
                    long held = -1;
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                    while (held < 0 && System.nanoTime() < deadline) {
                        for (ConsumerRecord<byte[], byte[]> r : holder.poll(Duration.ofMillis(50))) {
                            held = r.offset();
                            acquired = System.nanoTime();
                        }
                    }
                    if (held < 0) throw new IllegalStateException("round " + round + ": nothing acquired");
                    // The holder stops polling; its lock runs out; `other` gets the record.
                    long back = 0;
                    while (back == 0 && System.nanoTime() < deadline) {
                        for (ConsumerRecord<byte[], byte[]> r : other.poll(Duration.ofMillis(20))) {
                            if (r.offset() == held) back = System.nanoTime();
                            other.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        other.commitSync(Duration.ofSeconds(10));
                    }
                    if (back == 0) throw new IllegalStateException("round " + round + ": not redelivered");
                    late.add(TimeUnit.NANOSECONDS.toMillis(back - acquired) - lockMs);
                }
            }
        }
        System.out.println("{\"lock_ms\":" + lockMs + ",\"late_ms\":" + late + "}");
    }
}
