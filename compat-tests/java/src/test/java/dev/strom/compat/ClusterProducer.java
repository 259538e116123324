package dev.strom.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's idempotent acks=all producer for python/test_cluster.py's leader kill -9
 * cycles (a main, not a JUnit test): `ClusterProducer <bootstrap> <topic> <partitions>
 * <records per second>` sends `p<partition>-<seq, 7 digits>` to each partition in turn and
 * prints `ACK <partition> <offset> <value>` for every acknowledged record, `ERR <partition>
 * <value> <exception>` for every failed one, until its stdin closes; then it flushes,
 * closes and prints `DONE <records sent>`.
 *
 * The producer runs with the client's defaults (idempotence on, 5 requests in flight per
 * connection, retries unbounded) except a delivery timeout long enough to outlast any
 * failover of the test: a record the client gives up on is an ERR line, which the test
 * refuses. The rate is bounded so that the read-back stays small.
 */
public final class ClusterProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        long perSecond = Long.parseLong(args[3]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "300000");
        // A killed node's address is retried every half second at most, not every second.
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        // Lines come from the producer's I/O thread; one writer, flushed by the main loop so
        // that the test sees acks within ~50 ms without a write per line.
        PrintWriter out = new PrintWriter(System.out, false, StandardCharsets.UTF_8);
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                while (r.readLine() != null) {
                    // Anything written to stdin is ignored: only its end stops the producer.
                }
            } catch (Exception e) {
                // An unreadable stdin is a closed one.
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        // At most this many records unacknowledged: what a failover holds back stays bounded.
        Semaphore window = new Semaphore(1000);
        long[] next = new long[partitions];
        long sent = 0;
        long start = System.nanoTime(), lastFlush = start;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            while (!stop.get()) {
                long due = start + sent * TimeUnit.SECONDS.toNanos(1) / perSecond;
                long now = System.nanoTime();
                if (now - lastFlush > TimeUnit.MILLISECONDS.toNanos(50)) {
                    synchronized (out) {
                        out.flush();
                    }
                    lastFlush = now;
                }
                if (now < due) {
                    Thread.sleep(Math.min(TimeUnit.NANOSECONDS.toMillis(due - now) + 1, 50));
                    continue;
                }
                if (!window.tryAcquire(50, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                int partition = (int) (sent % partitions);
                String value = String.format("p%d-%07d", partition, next[partition]++);
                producer.send(new ProducerRecord<>(topic, partition, null, value), (md, e) -> {
                    window.release();
                    synchronized (out) {
                        if (e == null) {
                            out.println("ACK " + md.partition() + " " + md.offset() + " " + value);
                        } else {
                            out.println("ERR " + partition + " " + value + " " + e);
                        }
                    }
                });
                sent++;
            }
            producer.flush();
            producer.close(Duration.ofSeconds(60));
        }
        synchronized (out) {
            out.println("DONE " + sent);
            out.flush();
        }
    }
}
