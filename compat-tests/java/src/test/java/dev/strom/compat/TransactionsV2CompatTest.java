package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every scenario of TransactionsCompatTest again with transaction.version 2 finalized
 * (KIP-890 part 2, "transactions v2"), which the Java client then uses: transactional Produce
 * v12+ and TxnOffsetCommit v5 add their partitions themselves (no AddPartitionsToTxn or
 * AddOffsetsToTxn), and every EndTxn bumps the producer epoch. A fresh Kafka 4.4 cluster
 * finalizes 2 already; on Strom it is upgraded here with the Admin API (kafka-features.sh's
 * call) and put back afterwards, so the other classes keep the broker's default.
 */
class TransactionsV2CompatTest extends TransactionsCompatTest {
    static short before = -1;

    @BeforeAll
    static void transactionsV2() throws Exception {
        FeatureMetadata features = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS);
        FinalizedVersionRange tv = features.finalizedFeatures().get("transaction.version");
        before = tv == null ? 0 : tv.maxVersionLevel();
        System.out.println("transaction.version finalized " + tv + ", supported "
                + features.supportedFeatures().get("transaction.version"));
        if (before < 2) {
            admin.updateFeatures(Map.of("transaction.version",
                    new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE))).all().get(30, TimeUnit.SECONDS);
        }
    }

    @AfterAll
    static void putBack() throws Exception {
        if (before >= 0 && before < 2) {
            admin.updateFeatures(Map.of("transaction.version",
                    new FeatureUpdate(before, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE))).all().get(30, TimeUnit.SECONDS);
        }
    }

    /**
     * The proof that the client ran transactions v2: each EndTxn moved the producer epoch on,
     * so after three transactions (commit, abort, commit) of a new transactional id the
     * partition's producer state is at epoch 3 (it stays at 0 without v2).
     */
    @Test
    void everyTransactionBumpsTheProducerEpoch() throws Exception {
        String topic = ClientCompatTest.topicName("tv2");
        ClientCompatTest.createTopic(topic, 1, Map.of());
        try (KafkaProducer<byte[], byte[]> p = txnProducer("java-tv2-" + UUID.randomUUID())) {
            boolean[] commit = {true, false, true};
            for (boolean c : commit) {
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 0, null, bytes("x")));
                p.flush();
                if (c) p.commitTransaction();
                else p.abortTransaction();
            }
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        List<ProducerState> states;
        // The last commit's marker is written after commitTransaction returns.
        do {
            states = admin.describeProducers(List.of(tp)).partitionResult(tp).get(30, TimeUnit.SECONDS).activeProducers();
            if (!states.isEmpty() && states.get(0).producerEpoch() == 3) break;
            Thread.sleep(200);
        } while (System.nanoTime() < deadline);
        assertEquals(1, states.size(), "one producer: " + states);
        assertEquals(3, states.get(0).producerEpoch(), "epoch after three transactions: " + states);
        List<Long> committed = offsetsOf(readAll(topic, 1, "read_committed", 2));
        // 0 data, 1 commit, 2 data, 3 abort, 4 data, 5 commit.
        assertEquals(List.of(0L, 4L), committed);
    }
}
