package dev.strom.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The Java client over TLS with a client certificate (the broker's SSL listener requires
 * one; PEM key store and trust store, Kafka's {@code ssl.keystore.type=PEM}) and over
 * SASL_SSL with SCRAM-SHA-512, against the listeners run-clients.sh starts on Strom and on
 * Apache Kafka alike (certificates made per run): each produces and reads back; a wrong
 * password is refused with SaslAuthenticationException.
 */
class SecurityCompatTest {
    static String env(String name) {
        String v = System.getenv(name);
        assertNotNull(v, name + " is not set (run through compat-tests/run-clients.sh)");
        return v;
    }

    static Properties props(String way, String password) {
        Properties p = new Properties();
        p.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
        p.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, env("STROM_COMPAT_CA"));
        if (way.equals("ssl")) {
            p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, env("STROM_COMPAT_SSL_BOOTSTRAP"));
            p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SSL");
            p.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PEM");
            p.put(SslConfigs.SSL_KEYSTORE_LOCATION_CONFIG, env("STROM_COMPAT_CLIENT_KEYSTORE"));
        } else {
            p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, env("STROM_COMPAT_SASL_SSL_BOOTSTRAP"));
            p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_SSL");
            p.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-512");
            p.put(SaslConfigs.SASL_JAAS_CONFIG, String.format(
                    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"%s\" password=\"%s\";",
                    env("STROM_COMPAT_SASL_USER"), password));
        }
        return p;
    }

    @ParameterizedTest
    @ValueSource(strings = {"ssl", "sasl-ssl"})
    void producesAndConsumes(String way) throws Exception {
        Properties base = props(way, env("STROM_COMPAT_SASL_PASSWORD"));
        String topic = "java-" + way + "-" + UUID.randomUUID().toString().substring(0, 8);
        try (Admin admin = Admin.create(base)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(60, TimeUnit.SECONDS);
        }
        List<String> sent = new ArrayList<>();
        Properties pp = new Properties();
        pp.putAll(base);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < 50; i++) {
                String v = "v" + i + "-" + UUID.randomUUID();
                sent.add("k" + i + "=" + v);
                p.send(new ProducerRecord<>(topic, 0, ("k" + i).getBytes(StandardCharsets.UTF_8), v.getBytes(StandardCharsets.UTF_8)));
            }
            p.flush();
        }
        Properties cp = new Properties();
        cp.putAll(base);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (got.size() < sent.size() && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    got.add(new String(r.key(), StandardCharsets.UTF_8) + "=" + new String(r.value(), StandardCharsets.UTF_8));
                }
            }
        }
        assertEquals(sent, got);
    }

    @Test
    void wrongPasswordIsRefused() {
        Properties p = props("sasl-ssl", "not-the-password");
        try (Admin admin = Admin.create(p)) {
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.describeCluster().clusterId().get(60, TimeUnit.SECONDS));
            assertInstanceOf(SaslAuthenticationException.class, e.getCause(), e.toString());
        }
    }
}
