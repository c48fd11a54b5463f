package kgate.e2e;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * kgate end-to-end client: Java kafka-clients.
 *
 * <pre>
 * java -jar kgate-e2e-java.jar BOOTSTRAP TOPIC create PARTITIONS
 * java -jar kgate-e2e-java.jar BOOTSTRAP TOPIC produce FROM TO CODEC
 * java -jar kgate-e2e-java.jar BOOTSTRAP TOPIC verify FROM TO -
 * </pre>
 *
 * See test/clients/README.md for the record convention.
 */
public final class Main {
    static final int PARTITIONS = 3;
    static final long BASE_TS = 1700000000000L;
    static final long VERIFY_TIMEOUT_MS = 90_000;

    static final class Failure extends Exception {
        Failure(String message) {
            super(message);
        }
    }

    record Rec(int partition, byte[] key, byte[] value, List<Header> headers, long timestamp) {
    }

    static Rec record(int i) {
        String unit = "value-" + i + "-";
        int n = 10 + (i * 37) % 491;
        String value = unit.repeat(n / unit.length() + 1).substring(0, n);
        List<Header> headers = List.of(
                new RecordHeader("h1", ("v" + i).getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("h2", new byte[0]));
        return new Rec(i % PARTITIONS, ("key-" + i).getBytes(StandardCharsets.UTF_8),
                value.getBytes(StandardCharsets.UTF_8), headers, BASE_TS + i);
    }

    public static void main(String[] args) {
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("client", "java");
        result.put("version", AppInfoParser.getVersion());
        long start = System.nanoTime();
        boolean ok;
        try {
            run(args, result);
            ok = true;
        } catch (Throwable e) {
            ok = false;
            Throwable root = e;
            while (root.getCause() != null && root != root.getCause()) {
                root = root.getCause();
            }
            String msg = e.getClass().getSimpleName() + ": " + e.getMessage();
            if (root != e) {
                msg += " (cause " + root.getClass().getSimpleName() + ": " + root.getMessage() + ")";
            }
            result.put("error", msg);
        }
        result.put("ok", ok);
        result.put("elapsed_ms", (System.nanoTime() - start) / 1_000_000);
        System.out.println(toJson(result));
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    static void run(String[] args, Map<String, Object> result) throws Exception {
        if (args.length < 3) {
            throw new Failure("usage: BOOTSTRAP TOPIC create|produce|verify ...");
        }
        String bootstrap = args[0];
        String topic = args[1];
        String mode = args[2];
        result.put("mode", mode);
        switch (mode) {
            case "create" -> create(bootstrap, topic, Integer.parseInt(args[3]));
            case "produce", "verify" -> {
                int from = Integer.parseInt(args[3]);
                int to = Integer.parseInt(args[4]);
                result.put("from", from);
                result.put("to", to);
                if (mode.equals("produce")) {
                    result.put("codec", args[5]);
                    result.put("records", produce(bootstrap, topic, from, to, args[5]));
                } else {
                    result.put("records", verify(bootstrap, topic, from, to));
                }
            }
            default -> throw new Failure("unknown mode " + mode);
        }
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "kgate-e2e-java");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 30000);
        return p;
    }

    static void create(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(common(bootstrap))) {
            // The records' timestamps are in 2023: ask for unlimited retention
            // so that a time-based retention check does not delete them.
            NewTopic nt = new NewTopic(topic, partitions, (short) 1).configs(Map.of("retention.ms", "-1"));
            admin.createTopics(List.of(nt)).all().get(60, TimeUnit.SECONDS);
        }
    }

    static int produce(String bootstrap, String topic, int from, int to, String codec) throws Exception {
        Properties p = common(bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 90000);
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = from; i < to; i++) {
                Rec r = record(i);
                futures.add(producer.send(new ProducerRecord<>(topic, r.partition(), r.timestamp(), r.key(), r.value(), r.headers())));
            }
            producer.flush();
            for (int k = 0; k < futures.size(); k++) {
                RecordMetadata md = futures.get(k).get(30, TimeUnit.SECONDS);
                int i = from + k;
                if (md.partition() != i % PARTITIONS) {
                    throw new Failure("record " + i + " acknowledged on partition " + md.partition());
                }
            }
        }
        return futures.size();
    }

    static int verify(String bootstrap, String topic, int from, int to) throws Exception {
        List<List<Integer>> want = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            want.add(new ArrayList<>());
        }
        for (int i = from; i < to; i++) {
            want.get(i % PARTITIONS).add(i);
        }
        int[] got = new int[PARTITIONS];

        Properties props = common(bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 500);
        // No group.id: partitions are assigned directly.
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(tps);
            for (TopicPartition tp : tps) {
                consumer.seek(tp, 0);
            }
            long deadline = System.currentTimeMillis() + VERIFY_TIMEOUT_MS;
            while (!complete(got, want)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new Failure("incomplete after " + VERIFY_TIMEOUT_MS / 1000 + "s: " + progress(got, want));
                }
                for (ConsumerRecord<byte[], byte[]> m : consumer.poll(Duration.ofSeconds(1))) {
                    int p = m.partition();
                    int n = got[p];
                    if (n >= want.get(p).size()) {
                        throw new Failure("partition " + p + ": unexpected extra record at offset " + m.offset()
                                + " (key " + str(m.key()) + "): want exactly " + want.get(p).size());
                    }
                    check(m, n, want.get(p).get(n));
                    got[p]++;
                }
            }
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
            for (TopicPartition tp : tps) {
                long high = ends.get(tp);
                if (high != want.get(tp.partition()).size()) {
                    throw new Failure("partition " + tp.partition() + ": high watermark " + high + ", want "
                            + want.get(tp.partition()).size());
                }
            }
        }
        return Arrays.stream(got).sum();
    }

    static void check(ConsumerRecord<byte[], byte[]> m, int n, int i) throws Failure {
        Rec want = record(i);
        String where = "partition " + m.partition() + " offset " + m.offset() + " (record #" + n
                + " there, expected index " + i + ")";
        if (m.offset() != n) {
            throw new Failure(where + ": got offset " + m.offset() + ", want " + n);
        }
        if (!Arrays.equals(m.key(), want.key())) {
            throw new Failure(where + ": key " + str(m.key()) + ", want " + str(want.key()));
        }
        if (!Arrays.equals(m.value(), want.value())) {
            throw new Failure(where + ": value " + abbrev(m.value()) + " (" + len(m.value()) + " bytes), want "
                    + abbrev(want.value()) + " (" + want.value().length + " bytes)");
        }
        List<String> gotHeaders = new ArrayList<>();
        for (Header h : m.headers()) {
            gotHeaders.add(h.key() + "=" + str(h.value()));
        }
        List<String> wantHeaders = new ArrayList<>();
        for (Header h : want.headers()) {
            wantHeaders.add(h.key() + "=" + str(h.value()));
        }
        if (!gotHeaders.equals(wantHeaders)) {
            throw new Failure(where + ": headers " + gotHeaders + ", want " + wantHeaders);
        }
        if (m.timestampType() != TimestampType.CREATE_TIME || m.timestamp() != want.timestamp()) {
            throw new Failure(where + ": timestamp " + m.timestamp() + " (" + m.timestampType() + "), want "
                    + want.timestamp() + " (CreateTime)");
        }
    }

    static boolean complete(int[] got, List<List<Integer>> want) {
        for (int p = 0; p < PARTITIONS; p++) {
            if (got[p] < want.get(p).size()) {
                return false;
            }
        }
        return true;
    }

    static String progress(int[] got, List<List<Integer>> want) {
        List<String> parts = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            parts.add("p" + p + " " + got[p] + "/" + want.get(p).size());
        }
        return String.join(", ", parts);
    }

    static int len(byte[] b) {
        return b == null ? -1 : b.length;
    }

    static String str(byte[] b) {
        return b == null ? "null" : "\"" + new String(b, StandardCharsets.UTF_8) + "\"";
    }

    static String abbrev(byte[] b) {
        if (b == null || b.length <= 40) {
            return str(b);
        }
        return str(Arrays.copyOf(b, 37)) + "...";
    }

    static String toJson(Map<String, Object> m) {
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<String, Object> e : m.entrySet()) {
            if (sb.length() > 1) {
                sb.append(", ");
            }
            sb.append(quote(e.getKey())).append(": ");
            Object v = e.getValue();
            sb.append(v instanceof Number || v instanceof Boolean ? v.toString() : quote(String.valueOf(v)));
        }
        return sb.append("}").toString();
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"').toString();
    }
}
