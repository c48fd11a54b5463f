#!/usr/bin/python3
"""kgate cluster end-to-end client: a confluent-kafka-python group consumer.

Usage: cluster_consumer.py BOOTSTRAP TOPIC group-consume GROUP CLIENT_ID [key=value ...]

Options: session=MS (session.timeout.ms), heartbeat=MS
(heartbeat.interval.ms), commit=MS (auto.commit.interval.ms, default 500),
assignor=cooperative-sticky (default: the client's).

Joins GROUP with client.id CLIENT_ID, subscribes to TOPIC (reading from the
earliest offset when the group has no commit), commits automatically every
500 ms and reports everything on stdout, one JSON object per line:

  {"event": "assigned" | "revoked" | "lost", "partitions": [p, ...],
   "generation": g}           the member's generation in the callback (-1:
                              unknown; see generation())
  {"event": "records", "records": [{"p": partition, "o": offset, "v": value,
   "t": timestamp (ms)}, ...]}
  {"event": "error", "where": "error_cb" | "consume" | "commit", "code": n,
   "name": "...", "retriable": bool, "fatal": bool, "message": "..."}
  {"event": "committed", "offsets": [{"p": partition, "o": offset}, ...]}
                              the coordinator acknowledged a commit of these
  {"event": "session-timeout", "message": "..."}
                              librdkafka ended the member's group session on
                              its own clock (log SESSTMOUT: no successful
                              heartbeat answer for session.timeout.ms), not
                              on an answer from the coordinator
  {"event": "closing"}        stdin reached EOF; the consumer closes now
  {"ok": true} or {"ok": false, "error": "..."}   last line

Records are printed in the order the application got them relative to the
rebalance events: records polled before a callback are printed (and their
offsets stored) before its event, so a record belongs to the assignment the
last event before it announced. Record values are printed as text (the Go
harness produces ASCII values).
The harness in test/e2e (cluster_load_test.go) reads these lines.
KGATE_E2E_RDKAFKA_DEBUG, if set, is librdkafka's "debug" property. librdkafka's
log goes to stderr, as without a logger, in librdkafka's own line format.
"""
import json
import os
import struct
import sys
import threading
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

_out = threading.Lock()


def emit(obj):
    line = json.dumps(obj, separators=(",", ":"))
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def error_event(where, err, message=None):
    if isinstance(err, KafkaError):
        return {"event": "error", "where": where, "code": err.code(), "name": err.name(),
                "retriable": bool(err.retriable()), "fatal": bool(err.fatal()),
                "message": message or err.str()}
    return {"event": "error", "where": where, "code": -1, "name": type(err).__name__,
            "retriable": False, "fatal": False, "message": message or str(err)}


def generation(c):
    """The consumer's current group generation, or -1.

    confluent-kafka-python 1.7 has no accessor for it: consumer_group_metadata()
    returns librdkafka's serialization of the group metadata
    (rd_kafka_consumer_group_metadata_write: the magic "CGMDv2:", then the
    generation id as a native int32, then the group and member ids). Any other
    layout is reported as unknown (-1), never guessed.
    """
    magic = b"CGMDv2:"
    try:
        md = c.consumer_group_metadata()
    except KafkaException:
        return -1
    if not isinstance(md, bytes) or len(md) < len(magic) + 4 or not md.startswith(magic):
        return -1
    return struct.unpack_from("=i", md, len(magic))[0]


def partitions(tps):
    return sorted(tp.partition for tp in tps)


class ClientLog:
    """librdkafka's log (the "logger" property): each line to stderr, and a
    session the client ended on its own clock as an event, so that the
    harness tells it from one the coordinator ended."""

    def log(self, level, fmt, *args):
        if len(args) == 3:  # confluent-kafka calls log(level, "%s [%s] %s", fac, name, msg)
            fac, name, msg = args
        else:
            fac, name, msg = "", "", fmt % args if args else fmt
        syslog = {50: 2, 40: 3, 30: 4, 20: 6, 10: 7}.get(level, level)  # back from Python's levels
        sys.stderr.write("%%%d|%.3f|%s|%s| %s\n" % (syslog, time.time(), fac, name, msg))
        sys.stderr.flush()
        if fac == "SESSTMOUT":
            emit({"event": "session-timeout", "message": msg})


def group_consume(bootstrap, topic, group, client_id, opts):
    stop = threading.Event()

    def watch_stdin():
        try:
            while sys.stdin.read(4096):
                pass
        finally:
            stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()

    def on_error(err):
        emit(error_event("error_cb", err))

    def on_commit(err, offsets):
        if err is not None:
            emit(error_event("commit", err))
            return
        done = []
        for tp in offsets or []:
            if tp.error is not None:
                emit(error_event("commit", tp.error, "partition %d: %s" % (tp.partition, tp.error)))
            elif tp.offset >= 0:
                done.append({"p": tp.partition, "o": tp.offset})
        # What the client committed, in the order the coordinator
        # acknowledged it: a retried commit carries its old offsets.
        if done:
            emit({"event": "committed", "offsets": done})

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "enable.auto.commit": True,
        "auto.commit.interval.ms": int(opts.get("commit", 500)),
        # librdkafka 2.0.x stores a batch's offsets while it fills the batch,
        # and a rebalance can then drop messages it already stored (fixed in
        # 2.1.0, PR #4208); store only what was handed to the application.
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 500,
        "error_cb": on_error,
        "on_commit": on_commit,
        "logger": ClientLog(),
    }
    if "session" in opts:
        conf["session.timeout.ms"] = int(opts["session"])
    if "heartbeat" in opts:
        conf["heartbeat.interval.ms"] = int(opts["heartbeat"])
    if opts.get("assignor") == "cooperative-sticky":
        conf["partition.assignment.strategy"] = "cooperative-sticky"
    if os.environ.get("KGATE_E2E_RDKAFKA_DEBUG"):
        conf["debug"] = os.environ["KGATE_E2E_RDKAFKA_DEBUG"]
    # Extra librdkafka properties, "name=value,name=value" (the failover
    # benchmark's tuned row sets reconnect.backoff.max.ms this way).
    for prop in filter(None, os.environ.get("KGATE_E2E_RDKAFKA_CONF", "").split(",")):
        name, sep, value = prop.partition("=")
        if not sep:
            raise ValueError("KGATE_E2E_RDKAFKA_CONF: %r is not name=value" % prop)
        conf[name.strip()] = value.strip()
    c = Consumer(conf)
    batch = []  # records handed to the application, not yet printed
    done = {}   # partition -> next offset, of the batch

    def flush():
        if not batch:
            return
        emit({"event": "records", "records": batch})
        try:
            c.store_offsets(offsets=[TopicPartition(topic, p, o) for p, o in done.items()])
        except KafkaException:
            pass  # revoked meanwhile: not ours to store; the next owner reads them again
        batch.clear()
        done.clear()

    # A rebalance callback runs inside poll(): what was polled before it
    # belongs to the assignment it ends, so it is printed first.
    def on_assign(_c, tps):
        flush()
        emit({"event": "assigned", "partitions": partitions(tps), "generation": generation(_c)})

    def on_revoke(_c, tps):
        flush()
        emit({"event": "revoked", "partitions": partitions(tps), "generation": generation(_c)})

    def on_lost(_c, tps):
        flush()
        emit({"event": "lost", "partitions": partitions(tps), "generation": generation(_c)})

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    try:
        while not stop.is_set():
            # Wait for the first message only, then take what is already
            # there (up to 500), as a latency-minded application would; one
            # poll() a message, so that a rebalance callback between two
            # messages prints the first before its event (consume() would
            # return both after it).
            m = c.poll(0.5)
            n = 0
            while m is not None:
                n += 1
                if m.error():
                    emit(error_event("consume", m.error()))
                else:
                    batch.append({"p": m.partition(), "o": m.offset(),
                                  "v": (m.value() or b"").decode("utf-8", "replace"),
                                  "t": m.timestamp()[1]})
                    done[m.partition()] = m.offset() + 1
                m = None if n == 500 else c.poll(0)
            flush()
    finally:
        emit({"event": "closing"})
        c.close()  # commits the last offsets and leaves the group
    return {"client": "confluent-kafka-python", "version": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0]}


def main(argv):
    if len(argv) < 6 or argv[3] != "group-consume":
        emit({"ok": False, "error": "usage: cluster_consumer.py BOOTSTRAP TOPIC group-consume GROUP CLIENT_ID [key=value ...]"})
        return 2
    opts = {}
    for arg in argv[6:]:
        key, sep, value = arg.partition("=")
        if not sep or key not in ("session", "heartbeat", "commit", "assignor"):
            emit({"ok": False, "error": "unknown option %s" % arg})
            return 2
        opts[key] = value
    try:
        res = group_consume(argv[1], argv[2], argv[4], argv[5], opts)
    except Exception as e:  # noqa: BLE001 - reported to the harness
        emit({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
        return 1
    res["ok"] = True
    emit(res)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
