package dev.strom.compat;

import java.nio.file.Files;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams application run as its own JVM by StreamsGroupsCompatTest (so it can be
 * killed -9): `StreamsApp <bootstrap> <app id> <kind> <in> <out> [table]` with kind
 * `wordcount` (lines of `in` split into words, counted, counts to `out`) or `join` (the
 * records of `in` joined with the table `table` by key, "value|tableValue" to `out`). It uses
 * the KIP-1071 streams rebalance protocol (group.protocol=streams) and exactly_once_v2, and
 * prints RUNNING once the instance processes, so the test knows it joined.
 */
public final class StreamsApp {
    static Topology wordCount(String in, String out) {
        StreamsBuilder b = new StreamsBuilder();
        KStream<String, String> lines = b.stream(in, Consumed.with(Serdes.String(), Serdes.String()));
        lines.flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((k, w) -> !w.isEmpty())
                .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        return b.build();
    }

    static Topology join(String in, String table, String out) {
        StreamsBuilder b = new StreamsBuilder();
        KTable<String, String> t = b.table(table, Consumed.with(Serdes.String(), Serdes.String()));
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .join(t, (v, tv) -> v + "|" + tv)
                .to(out, Produced.with(Serdes.String(), Serdes.String()));
        return b.build();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], kind = args[2], in = args[3], out = args[4];
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("strom-streams").toString());
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        Topology topology = kind.equals("wordcount") ? wordCount(in, out) : join(in, args[5], out);
        KafkaStreams streams = new KafkaStreams(topology, p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("RUNNING");
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("ERROR " + e);
            e.printStackTrace(System.out);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        done.await();
        System.out.println("STOPPED");
    }
}
