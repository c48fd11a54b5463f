package kgate.e2e;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count with processing.guarantee=exactly_once_v2.
 *
 * <pre>
 * java -cp kgate-e2e-java.jar kgate.e2e.StreamsMain BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR REPLICATION [STANDBYS]
 * </pre>
 *
 * Reads INPUT (value = a word, any key), re-keys each record by its word
 * (the repartition topic APP_ID-counts-repartition), counts per word in the
 * state store "counts" (changelog APP_ID-counts-changelog) and writes every
 * new count to OUTPUT (key = word, value = the count as a big-endian long).
 * The record cache is off, so every input record yields one output record:
 * read committed, the counts of a word in OUTPUT are 1, 2, 3, ... without
 * a repeat or a gap exactly when every input record was counted once.
 *
 * Runs until SIGTERM (closes cleanly) or SIGKILL. Prints one line per
 * state change ("state RUNNING") to stdout and exits 1 if the application
 * dies (state ERROR, or an uncaught exception in a stream thread).
 */
public final class StreamsMain {
    public static void main(String[] args) throws InterruptedException {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        int replication = Integer.parseInt(args[5]);
        int standbys = args.length > 6 ? Integer.parseInt(args[6]) : 0;

        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, replication);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, standbys);
        // A killed instance's tasks move to the other one after the session
        // timeout; a lost coordinator is found again within seconds.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10_000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1_000);
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10_000);
        p.put(StreamsConfig.RETRY_BACKOFF_MS_CONFIG, 200);
        // Purge consumed repartition records (DeleteRecords) every second
        // rather than every 30 s, so that a short run does it too.
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1_000);

        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.String()))
                .groupBy((k, word) -> word, Grouped.with("counts", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        System.out.println("kafka-streams " + AppInfoParser.getVersion());
        System.out.flush();
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch dead = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                dead.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("uncaught " + e);
            e.printStackTrace();
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
        }));
        streams.start();
        dead.await();
        System.exit(1);
    }
}
