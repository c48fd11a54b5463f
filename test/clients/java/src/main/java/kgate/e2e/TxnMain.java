package kgate.e2e;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Java KafkaProducer transactions against kgate.
 *
 * <pre>
 * java -cp kgate-e2e-java.jar kgate.e2e.TxnMain BOOTSTRAP TOPIC
 * </pre>
 *
 * Creates TOPIC (one partition); producer A commits "committed-1", aborts
 * "aborted-1" and leaves "zombie-open" in an open transaction; producer B
 * with the same transactional.id fences A (A's commit must fail) and
 * commits "committed-2". Prints one JSON line with what a read_committed
 * and a read_uncommitted consumer read and how A's commit failed.
 *
 * As in Kafka, commitTransaction() may return before every broker shows the
 * commit: Kafka's coordinator answers EndTxn once PrepareCommit is in its
 * log and writes the markers after; kgate answers once the markers are in,
 * but a node that leads the partition may apply the completion a moment
 * after the coordinator. So the readers start once the partition's last
 * stable offset has reached its high watermark (waiting at most 30 s);
 * "lso_behind" counts the reads that found it short, "lso_short" is the
 * first such read (last stable offset/high watermark).
 */
public final class TxnMain {
    public static void main(String[] args) {
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("client", "java");
        result.put("version", AppInfoParser.getVersion());
        boolean ok;
        try {
            run(args[0], args[1], result);
            ok = true;
        } catch (Throwable e) {
            ok = false;
            result.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        result.put("ok", ok);
        System.out.println(Main.toJson(result));
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-txn");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static ProducerRecord<byte[], byte[]> rec(String topic, String value) {
        return new ProducerRecord<>(topic, 0, null, value.getBytes(StandardCharsets.UTF_8));
    }

    static void run(String bootstrap, String topic, Map<String, Object> result) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        KafkaProducer<byte[], byte[]> a = producer(bootstrap);
        a.initTransactions();
        a.beginTransaction();
        a.send(rec(topic, "committed-1"));
        a.commitTransaction();
        a.beginTransaction();
        a.send(rec(topic, "aborted-1"));
        a.flush();
        a.abortTransaction();
        a.beginTransaction();
        a.send(rec(topic, "zombie-open"));
        a.flush();

        try (KafkaProducer<byte[], byte[]> b = producer(bootstrap)) {
            b.initTransactions(); // fences A and aborts its open transaction
            try {
                a.commitTransaction();
                result.put("zombie_commit", "succeeded");
            } catch (KafkaException e) {
                result.put("zombie_commit", e.getClass().getSimpleName());
            } finally {
                a.close(Duration.ZERO);
            }
            b.beginTransaction();
            b.send(rec(topic, "committed-2"));
            b.commitTransaction();
        }
        awaitStable(bootstrap, new TopicPartition(topic, 0), result);
        result.put("read_committed", read(bootstrap, topic, "read_committed"));
        result.put("read_uncommitted", read(bootstrap, topic, "read_uncommitted"));
    }

    // awaitStable waits until the partition has no undecided record (its
    // last stable offset equals its high watermark, as nothing is left open)
    // and puts in the result how many reads found the last stable offset
    // behind, and the first of them.
    static void awaitStable(String bootstrap, TopicPartition tp, Map<String, Object> result) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            long deadline = System.currentTimeMillis() + 30_000;
            for (int behind = 0; ; behind++) {
                long lso = admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                        new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(tp).get().offset();
                long hw = admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                        new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).partitionResult(tp).get().offset();
                if (lso == hw) {
                    result.put("lso_behind", behind);
                    return;
                }
                if (behind == 0) {
                    result.put("lso_short", lso + "/" + hw);
                }
                if (lso > hw || System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("last stable offset " + lso + ", high watermark " + hw
                            + " after " + behind + " reads");
                }
                Thread.sleep(20);
            }
        }
    }

    // read returns every value up to the end offset at the isolation level
    // (the last stable offset for read_committed).
    static List<Object> read(String bootstrap, String topic, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        List<Object> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 60_000;
            while (c.position(tp) < end) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(isolation + ": position " + c.position(tp) + " short of " + end);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    out.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
        }
        return out;
    }
}
