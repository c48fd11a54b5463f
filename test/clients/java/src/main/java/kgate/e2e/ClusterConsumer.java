package kgate.e2e;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * kgate cluster end-to-end client: a Java kafka-clients group consumer.
 *
 * <pre>
 * java -cp kgate-e2e-java.jar kgate.e2e.ClusterConsumer BOOTSTRAP TOPIC group-consume GROUP CLIENT_ID [key=value ...]
 * </pre>
 *
 * Options: session=MS (session.timeout.ms), heartbeat=MS
 * (heartbeat.interval.ms), commit=MS (how often offsets are committed,
 * default 500), assignor=cooperative-sticky (default: the client's).
 *
 * Joins GROUP with client.id CLIENT_ID (classic protocol, default assignors),
 * subscribes to TOPIC from the earliest offset, commits asynchronously every
 * 500 ms and reports on stdout one JSON object per line, the same protocol as
 * test/clients/confluent-kafka-python/cluster_consumer.py:
 *
 * <pre>
 * {"event":"assigned"|"revoked"|"lost","partitions":[...],"generation":g}   g: the member's generation in the callback
 * {"event":"records","records":[{"p":..,"o":..,"v":"..","t":..},...]}   t: the record's timestamp (ms)
 * {"event":"error","where":"poll"|"commit","code":n,"name":"..","retriable":b,"fatal":false,"message":".."}
 * {"event":"closing"}   stdin reached EOF; the consumer closes (and leaves the group)
 * {"ok":true} or {"ok":false,"error":".."}   last line
 * </pre>
 *
 * "code" is the Kafka error code of the exception (-1 when it has none) and
 * "retriable" whether it is a RetriableException.
 */
public final class ClusterConsumer {
    private static final Object OUT = new Object();
    private static volatile boolean stop;

    private ClusterConsumer() {
    }

    static void emit(String json) {
        synchronized (OUT) {
            System.out.println(json);
            System.out.flush();
        }
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (ch < 0x20) {
                        b.append(String.format("\\u%04x", (int) ch));
                    } else {
                        b.append(ch);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    static void partitions(String event, Collection<TopicPartition> tps, int generation) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : tps) {
            ps.add(tp.partition());
        }
        ps.sort(null);
        emit("{\"event\":\"" + event + "\",\"partitions\":" + ps.toString().replace(" ", "")
                + ",\"generation\":" + generation + "}");
    }

    // committed reports offsets the coordinator acknowledged, as the
    // librdkafka program does: an async commit queued while the coordinator
    // was unknown can be sent after a later one, and the fault campaign
    // tells such a step back (the client's) from the cluster's only by the
    // order of the acknowledgements.
    static void committed(Map<TopicPartition, OffsetAndMetadata> offsets) {
        if (offsets.isEmpty()) {
            return;
        }
        StringBuilder b = new StringBuilder("{\"event\":\"committed\",\"offsets\":[");
        boolean first = true;
        for (Map.Entry<TopicPartition, OffsetAndMetadata> o : offsets.entrySet()) {
            if (!first) {
                b.append(',');
            }
            first = false;
            b.append("{\"p\":").append(o.getKey().partition()).append(",\"o\":").append(o.getValue().offset()).append('}');
        }
        emit(b.append("]}").toString());
    }

    static void error(String where, Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root && !(root instanceof RetriableException)) {
            root = root.getCause();
        }
        Errors code = Errors.forException(e);
        emit("{\"event\":\"error\",\"where\":\"" + where + "\",\"code\":" + code.code()
                + ",\"name\":" + quote(e.getClass().getSimpleName())
                + ",\"retriable\":" + (e instanceof RetriableException || root instanceof RetriableException)
                + ",\"fatal\":false,\"message\":" + quote(String.valueOf(e.getMessage())) + "}");
    }

    public static void main(String[] args) {
        if (args.length < 5 || !args[2].equals("group-consume")) {
            emit("{\"ok\":false,\"error\":\"usage: ClusterConsumer BOOTSTRAP TOPIC group-consume GROUP CLIENT_ID [key=value ...]\"}");
            System.exit(2);
        }
        java.util.Map<String, String> opts = new java.util.HashMap<>();
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv.length != 2 || !List.of("session", "heartbeat", "commit", "assignor").contains(kv[0])) {
                emit("{\"ok\":false,\"error\":" + quote("unknown option " + args[i]) + "}");
                System.exit(2);
            }
            opts.put(kv[0], kv[1]);
        }
        try {
            run(args[0], args[1], args[3], args[4], opts);
        } catch (Throwable e) {
            emit("{\"ok\":false,\"error\":" + quote(e.getClass().getName() + ": " + e.getMessage()) + "}");
            System.exit(1);
        }
        emit("{\"ok\":true,\"client\":\"java\",\"version\":" + quote(AppInfoParser.getVersion()) + "}");
        System.exit(0);
    }

    static void run(String bootstrap, String topic, String group, String clientId, java.util.Map<String, String> opts) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "500");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (opts.containsKey("session")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, opts.get("session"));
        }
        if (opts.containsKey("heartbeat")) {
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, opts.get("heartbeat"));
        }
        if ("cooperative-sticky".equals(opts.get("assignor"))) {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    org.apache.kafka.clients.consumer.CooperativeStickyAssignor.class.getName());
        }
        long commitNanos = Long.parseLong(opts.getOrDefault("commit", "500")) * 1_000_000L;

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        Thread stdin = new Thread(() -> {
            try {
                byte[] buf = new byte[4096];
                while (System.in.read(buf) >= 0) {
                    // wait for EOF
                }
            } catch (Exception ignored) {
                // treat a broken stdin as EOF
            }
            stop = true;
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();

        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                // The callbacks run in poll(), after the coordinator set the
                // generation they belong to (-1 once it was reset).
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    if (!tps.isEmpty()) {
                        partitions("revoked", tps, consumer.groupMetadata().generationId());
                    }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    partitions("assigned", tps, consumer.groupMetadata().generationId());
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    partitions("lost", tps, consumer.groupMetadata().generationId());
                }
            });
            long lastCommit = System.nanoTime();
            while (!stop) {
                try {
                    ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                    if (!recs.isEmpty()) {
                        StringBuilder b = new StringBuilder("{\"event\":\"records\",\"records\":[");
                        boolean first = true;
                        for (ConsumerRecord<byte[], byte[]> r : recs) {
                            if (!first) {
                                b.append(',');
                            }
                            first = false;
                            String v = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
                            b.append("{\"p\":").append(r.partition()).append(",\"o\":").append(r.offset())
                                    .append(",\"v\":").append(quote(v)).append(",\"t\":").append(r.timestamp()).append('}');
                        }
                        emit(b.append("]}").toString());
                    }
                } catch (WakeupException e) {
                    if (stop) {
                        break;
                    }
                } catch (RuntimeException e) {
                    error("poll", e);
                }
                if (System.nanoTime() - lastCommit >= commitNanos) {
                    lastCommit = System.nanoTime();
                    consumer.commitAsync((offsets, e) -> {
                        if (e != null) {
                            error("commit", e);
                            return;
                        }
                        committed(offsets);
                    });
                }
            }
        } finally {
            emit("{\"event\":\"closing\"}");
            consumer.close(Duration.ofSeconds(20)); // commits nothing more; leaves the group
        }
    }
}
