// kgate end-to-end client for the security tests: the Java kafka-clients
// producer and consumer with settings from a client properties file (as
// Kafka's tools take with --command-config). Run as a single source file:
//
//   java -cp 'KAFKA_JARS/*' SecureClient.java PROPS TOPIC roundtrip N
//   java -cp 'KAFKA_JARS/*' SecureClient.java PROPS TOPIC expect-auth-failure
//
// Prints one JSON line {"ok":...,"error":...}; exits non-zero on failure.
import java.io.FileInputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecureClient {
    public static void main(String[] args) {
        boolean ok = false;
        String error = null;
        try {
            Properties base = new Properties();
            try (FileInputStream in = new FileInputStream(args[0])) {
                base.load(in);
            }
            String topic = args[1];
            switch (args[2]) {
                case "roundtrip" -> roundtrip(base, topic, Integer.parseInt(args[3]));
                case "expect-auth-failure" -> expectAuthFailure(base, topic);
                default -> throw new IllegalArgumentException("unknown mode " + args[2]);
            }
            ok = true;
        } catch (Exception e) {
            error = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        System.out.println("{\"ok\":" + ok + (error == null ? "" : ",\"error\":\"" + error.replace("\\", "\\\\").replace("\"", "'").replace("\n", " ") + "\"") + "}");
        System.exit(ok ? 0 : 1);
    }

    static Properties producerProps(Properties base) {
        Properties p = new Properties();
        p.putAll(base);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("max.block.ms", "20000");
        p.put("delivery.timeout.ms", "30000");
        p.put("request.timeout.ms", "10000");
        return p;
    }

    static void roundtrip(Properties base, String topic, int n) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(base))) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get();
            }
        }
        Properties c = new Properties();
        c.putAll(base);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        c.put("auto.offset.reset", "earliest");
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.assign(List.of(new TopicPartition(topic, 0)));
            consumer.seekToBeginning(List.of(new TopicPartition(topic, 0)));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(r.value());
                }
            }
        }
        for (int i = 0; i < n; i++) {
            if (got.size() <= i || !got.get(i).equals("v" + i)) {
                throw new IllegalStateException("read back " + got + ", want v0..v" + (n - 1));
            }
        }
    }

    static void expectAuthFailure(Properties base, String topic) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(base))) {
            producer.send(new ProducerRecord<>(topic, "k", "v")).get();
        } catch (Exception e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof AuthenticationException) {
                    System.err.println("refused as expected: " + t.getMessage());
                    return;
                }
            }
            throw e;
        }
        throw new IllegalStateException("the producer was not refused");
    }
}
