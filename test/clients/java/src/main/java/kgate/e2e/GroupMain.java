package kgate.e2e;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupsOptions;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * kgate end-to-end consumer-group programs for the Java client: a group
 * member and the admin calls kafka-consumer-groups.sh makes.
 *
 * <pre>
 * java -cp kgate-e2e-java.jar kgate.e2e.GroupMain BOOTSTRAP TOPIC group GROUP CLIENT_ID [key=value ...]
 * java -cp kgate-e2e-java.jar kgate.e2e.GroupMain BOOTSTRAP TOPIC admin GROUP[,GROUP...]
 * java -cp kgate-e2e-java.jar kgate.e2e.GroupMain BOOTSTRAP TOPIC delete GROUP[,GROUP...]
 * java -cp kgate-e2e-java.jar kgate.e2e.GroupMain BOOTSTRAP TOPIC delete-offsets GROUP PARTITION[,PARTITION...]
 * </pre>
 *
 * See test/clients/GROUPS.md for the options and the JSON lines printed.
 */
public final class GroupMain {
    static final long MAX_LIFETIME_MS = 180_000;

    static final class Failure extends Exception {
        Failure(String message) {
            super(message);
        }
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
            result.put("error", describe(e));
        }
        result.put("ok", ok);
        result.put("elapsed_ms", (System.nanoTime() - start) / 1_000_000);
        emit(result);
        System.exit(ok ? 0 : 1);
    }

    static String describe(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root != root.getCause()) {
            root = root.getCause();
        }
        String msg = e.getClass().getSimpleName() + ": " + e.getMessage();
        if (root != e) {
            msg += " (cause " + root.getClass().getSimpleName() + ": " + root.getMessage() + ")";
        }
        return msg;
    }

    static void run(String[] args, Map<String, Object> result) throws Exception {
        if (args.length < 4) {
            throw new Failure("usage: BOOTSTRAP TOPIC group|admin|delete|delete-offsets ...");
        }
        String bootstrap = args[0];
        String topic = args[1];
        String mode = args[2];
        result.put("mode", mode);
        switch (mode) {
            case "group" -> {
                if (args.length < 5) {
                    throw new Failure("usage: BOOTSTRAP TOPIC group GROUP CLIENT_ID [key=value ...]");
                }
                Map<String, String> opts = new HashMap<>();
                for (int i = 5; i < args.length; i++) {
                    int eq = args[i].indexOf('=');
                    if (eq < 0) {
                        throw new Failure("option " + args[i] + " is not key=value");
                    }
                    opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
                }
                result.put("records", consume(bootstrap, topic, args[3], args[4], opts));
            }
            case "admin" -> admin(bootstrap, topic, List.of(args[3].split(",")), result);
            case "delete" -> delete(bootstrap, List.of(args[3].split(",")), result);
            case "delete-offsets" -> {
                if (args.length < 5) {
                    throw new Failure("usage: BOOTSTRAP TOPIC delete-offsets GROUP PARTITION[,PARTITION...]");
                }
                deleteOffsets(bootstrap, topic, args[3], args[4], result);
            }
            default -> throw new Failure("unknown mode " + mode);
        }
    }

    // ---- group member -----------------------------------------------------

    static int consume(String bootstrap, String topic, String group, String clientId, Map<String, String> opts)
            throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 500);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 30000);
        long stopAt = -1;
        String session = "6000";
        for (Map.Entry<String, String> e : opts.entrySet()) {
            String v = e.getValue();
            switch (e.getKey()) {
                case "assignor" -> {
                    switch (v) {
                        case "default" -> {
                        }
                        case "range" -> p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
                        case "roundrobin" -> p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RoundRobinAssignor.class.getName());
                        case "cooperative-sticky" -> p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                                CooperativeStickyAssignor.class.getName());
                        default -> throw new Failure("unknown assignor " + v);
                    }
                }
                case "instance" -> p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, v);
                case "session" -> session = v;
                case "stopat" -> stopAt = Long.parseLong(v);
                default -> throw new Failure("unknown option " + e.getKey());
            }
        }
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.parseInt(session));

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        // A "close" line on stdin (or its end) asks for a clean close.
        final boolean[] closeAsked = {false};
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("close")) {
                        break;
                    }
                }
            } catch (Exception ignored) {
                // treated as the end of stdin
            }
            synchronized (closeAsked) {
                closeAsked[0] = true;
            }
            consumer.wakeup();
        });
        reader.setDaemon(true);

        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                ConsumerGroupMetadata md = consumer.groupMetadata();
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("event", "assigned");
                ev.put("partitions", partitionsOf(consumer.assignment(), topic));
                ev.put("generation", md.generationId());
                ev.put("member_id", md.memberId());
                emit(ev);
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                List<Integer> ps = partitionsOf(partitions, topic);
                if (!ps.isEmpty()) {
                    emit(Map.of("event", "revoked", "partitions", ps));
                }
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                List<Integer> ps = partitionsOf(partitions, topic);
                if (!ps.isEmpty()) {
                    emit(Map.of("event", "lost", "partitions", ps));
                }
            }
        };

        int records = 0;
        long deadline = System.currentTimeMillis() + MAX_LIFETIME_MS;
        try {
            consumer.subscribe(List.of(topic), listener);
            reader.start();
            while (true) {
                synchronized (closeAsked) {
                    if (closeAsked[0]) {
                        break;
                    }
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new Failure("no close request within " + MAX_LIFETIME_MS / 1000 + "s");
                }
                ConsumerRecords<byte[], byte[]> batch;
                try {
                    batch = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> m : batch) {
                    if (stopAt >= 0 && m.offset() >= stopAt) {
                        continue;
                    }
                    records++;
                    Map<String, Object> ev = new LinkedHashMap<>();
                    ev.put("event", "record");
                    ev.put("p", m.partition());
                    ev.put("o", m.offset());
                    ev.put("k", m.key() == null ? "" : new String(m.key(), StandardCharsets.UTF_8));
                    emit(ev);
                    commit.put(new TopicPartition(m.topic(), m.partition()), new OffsetAndMetadata(m.offset() + 1));
                }
                if (commit.isEmpty()) {
                    continue;
                }
                try {
                    consumer.commitSync(commit);
                    Map<String, Object> offs = new TreeMap<>();
                    commit.forEach((tp, om) -> offs.put(String.valueOf(tp.partition()), om.offset()));
                    emit(Map.of("event", "commit", "offsets", offs));
                } catch (CommitFailedException | RebalanceInProgressException | WakeupException e) {
                    emit(Map.of("event", "commit_error", "error", describe(e)));
                }
            }
        } finally {
            consumer.close(); // leaves the group unless group.instance.id is set
        }
        return records;
    }

    static List<Integer> partitionsOf(Collection<TopicPartition> tps, String topic) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : tps) {
            if (tp.topic().equals(topic)) {
                out.add(tp.partition());
            }
        }
        out.sort(null);
        return out;
    }

    // ---- admin --------------------------------------------------------------

    static Admin newAdmin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "kgate-e2e-java-admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 30000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 60000);
        return Admin.create(p);
    }

    /**
     * What kafka-consumer-groups.sh --list and --describe --offsets --members
     * --state ask: listConsumerGroups (all, and with a state filter),
     * listGroups for consumer groups, describeConsumerGroups,
     * listConsumerGroupOffsets and the end offsets for the lag.
     */
    @SuppressWarnings("deprecation")
    static void admin(String bootstrap, String topic, List<String> groups, Map<String, Object> result) throws Exception {
        try (Admin admin = newAdmin(bootstrap)) {
            List<Object> listed = new ArrayList<>();
            for (ConsumerGroupListing l : admin.listConsumerGroups().all().get(60, TimeUnit.SECONDS)) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("group", l.groupId());
                m.put("state", l.groupState().map(GroupState::toString).orElse(null));
                m.put("type", l.type().map(Object::toString).orElse(null));
                m.put("simple", l.isSimpleConsumerGroup());
                listed.add(m);
            }
            result.put("list", listed);
            List<Object> stable = new ArrayList<>();
            for (ConsumerGroupListing l : admin.listConsumerGroups(new ListConsumerGroupsOptions()
                    .inGroupStates(Set.of(GroupState.STABLE))).all().get(60, TimeUnit.SECONDS)) {
                stable.add(l.groupId());
            }
            result.put("list_stable", stable);
            List<Object> groupsListed = new ArrayList<>();
            for (GroupListing l : admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get(60, TimeUnit.SECONDS)) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("group", l.groupId());
                m.put("protocol", l.protocol());
                m.put("state", l.groupState().map(GroupState::toString).orElse(null));
                m.put("type", l.type().map(Object::toString).orElse(null));
                groupsListed.add(m);
            }
            result.put("list_groups", groupsListed);

            Map<String, Object> described = new LinkedHashMap<>();
            Map<String, ConsumerGroupDescription> descs = admin.describeConsumerGroups(groups).all().get(60, TimeUnit.SECONDS);
            for (String g : groups) {
                ConsumerGroupDescription d = descs.get(g);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("state", d.groupState().toString());
                m.put("assignor", d.partitionAssignor());
                m.put("type", d.type().toString());
                m.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
                m.put("simple", d.isSimpleConsumerGroup());
                List<Object> members = new ArrayList<>();
                for (MemberDescription md : d.members()) {
                    Map<String, Object> mm = new LinkedHashMap<>();
                    mm.put("member_id", md.consumerId());
                    mm.put("instance_id", md.groupInstanceId().orElse(null));
                    mm.put("client_id", md.clientId());
                    mm.put("host", md.host());
                    mm.put("partitions", partitionsOf(md.assignment().topicPartitions(), topic));
                    members.add(mm);
                }
                m.put("members", members);
                described.put(g, m);
            }
            result.put("describe", described);

            Map<String, Object> offsets = new LinkedHashMap<>();
            Map<String, Object> lags = new LinkedHashMap<>();
            for (String g : groups) {
                Map<TopicPartition, OffsetAndMetadata> committed =
                        admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get(60, TimeUnit.SECONDS);
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                Map<String, Object> om = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                    if (e.getKey().topic().equals(topic) && e.getValue() != null) {
                        om.put(String.valueOf(e.getKey().partition()), e.getValue().offset());
                        latest.put(e.getKey(), OffsetSpec.latest());
                    }
                }
                offsets.put(g, om);
                Map<String, Object> lm = new TreeMap<>();
                if (!latest.isEmpty()) {
                    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends =
                            admin.listOffsets(latest).all().get(60, TimeUnit.SECONDS);
                    for (TopicPartition tp : latest.keySet()) {
                        lm.put(String.valueOf(tp.partition()), ends.get(tp).offset() - committed.get(tp).offset());
                    }
                }
                lags.put(g, lm);
            }
            result.put("offsets", offsets);
            result.put("lag", lags);
        }
    }

    /** kafka-consumer-groups.sh --delete: the error per group, null when deleted. */
    static void delete(String bootstrap, List<String> groups, Map<String, Object> result) throws Exception {
        try (Admin admin = newAdmin(bootstrap)) {
            Map<String, Object> out = new LinkedHashMap<>();
            admin.deleteConsumerGroups(groups).deletedGroups().forEach((g, f) -> out.put(g, errorOf(f)));
            result.put("deleted", out);
        }
    }

    /** kafka-consumer-groups.sh --delete-offsets: the error per partition, null when deleted. */
    static void deleteOffsets(String bootstrap, String topic, String group, String partitions, Map<String, Object> result)
            throws Exception {
        try (Admin admin = newAdmin(bootstrap)) {
            Set<TopicPartition> tps = new HashSet<>();
            for (String s : partitions.split(",")) {
                tps.add(new TopicPartition(topic, Integer.parseInt(s)));
            }
            var res = admin.deleteConsumerGroupOffsets(group, tps);
            result.put("all", errorOf(res.all()));
            Map<String, Object> out = new TreeMap<>();
            for (TopicPartition tp : tps) {
                out.put(String.valueOf(tp.partition()), errorOf(res.partitionResult(tp)));
            }
            result.put("partitions", out);
        }
    }

    static String errorOf(KafkaFuture<?> f) {
        try {
            f.get(60, TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            Throwable c = e.getCause() == null ? e : e.getCause();
            return c.getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    // ---- JSON ---------------------------------------------------------------

    static synchronized void emit(Map<String, ?> m) {
        StringBuilder sb = new StringBuilder();
        json(sb, m);
        System.out.println(sb);
        System.out.flush();
    }

    static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                sb.append(Main.quote(String.valueOf(e.getKey()))).append(": ");
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection<?> c) {
            sb.append('[');
            boolean first = true;
            for (Object o : c) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                json(sb, o);
            }
            sb.append(']');
        } else {
            sb.append(Main.quote(String.valueOf(v)));
        }
    }
}
