package dev.strom.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A share consumer for python/test_share_groups.py's broker kill -9 test (a main, not a
 * JUnit test): `ShareWorker <bootstrap> <topic> <group> <records> <seconds>` sets the group
 * to start at the log start with short locks, then accepts every record it gets and prints
 * `GOT <offset> <delivery count>` on receipt and `ACKED <offset>` once commitSync confirmed
 * the acknowledgement, until it has confirmed `records` offsets or `seconds` pass. The
 * broker may die and come back meanwhile: errors are printed and the loop goes on.
 */
public final class ShareWorker {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int records = Integer.parseInt(args[3]);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[4]));
        Properties a = new Properties();
        a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(a)) {
            Collection<AlterConfigOp> ops = List.of(
                    new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", "3000"), AlterConfigOp.OpType.SET));
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops))
                    .all().get(30, TimeUnit.SECONDS);
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");
        int acked = 0;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (acked < records && System.nanoTime() < deadline) {
                List<Long> pending = new ArrayList<>();
                try {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                        System.out.println("GOT " + r.offset() + " " + r.deliveryCount().orElse((short) -1));
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        pending.add(r.offset());
                    }
                    if (pending.isEmpty()) continue;
                    Map<TopicIdPartition, Optional<KafkaException>> result = c.commitSync(Duration.ofSeconds(10));
                    boolean ok = !result.isEmpty() && result.values().stream().allMatch(Optional::isEmpty);
                    if (ok) {
                        for (long o : pending) System.out.println("ACKED " + o);
                        acked += pending.size();
                    } else {
                        System.out.println("COMMIT-FAILED " + result);
                    }
                } catch (KafkaException e) {
                    System.out.println("ERROR " + e);
                }
                System.out.flush();
            }
        }
        System.out.println("DONE " + acked);
    }
}
