#!/usr/bin/python3
"""kgate end-to-end client: confluent-kafka-python (librdkafka).

Usage: client.py BOOTSTRAP TOPIC create PARTITIONS
       client.py BOOTSTRAP TOPIC produce FROM TO CODEC
       client.py BOOTSTRAP TOPIC verify FROM TO -
See test/clients/README.md for the record convention.
"""
import json
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CLIENT = "confluent-kafka-python"
PARTITIONS = 3
BASE_TS = 1700000000000
# The records' timestamps are in 2023: ask for unlimited retention so that a
# time-based retention check does not delete them.
TOPIC_CONFIG = {"retention.ms": "-1"}
VERIFY_TIMEOUT = 90.0


class Failure(Exception):
    pass


def record(i):
    unit = "value-%d-" % i
    n = 10 + (i * 37) % 491
    value = (unit * (n // len(unit) + 1))[:n]
    return {
        "partition": i % PARTITIONS,
        "key": ("key-%d" % i).encode(),
        "value": value.encode(),
        "headers": [("h1", ("v%d" % i).encode()), ("h2", b"")],
        "timestamp": BASE_TS + i,
    }


def create(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=TOPIC_CONFIG)],
                                  operation_timeout=30, request_timeout=30)
    futures[topic].result(timeout=60)
    return {}


def produce(bootstrap, topic, lo, hi, codec):
    failures = []
    acked = [0]

    def on_delivery(err, msg):
        if err is not None:
            failures.append("record %s: %s" % (msg.key(), err))
        else:
            acked[0] += 1

    p = Producer({
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 60000,
    })
    for i in range(lo, hi):
        r = record(i)
        while True:
            try:
                p.produce(topic, key=r["key"], value=r["value"], headers=r["headers"],
                          timestamp=r["timestamp"], partition=r["partition"], on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(90)
    if left:
        raise Failure("%d records not delivered after flush(90s)" % left)
    if failures:
        raise Failure("%d delivery failures, first: %s" % (len(failures), failures[0]))
    if acked[0] != hi - lo:
        raise Failure("%d records acknowledged, want %d" % (acked[0], hi - lo))
    return {"records": acked[0]}


def expected_indexes(lo, hi, p):
    return [i for i in range(lo, hi) if i % PARTITIONS == p]


def check(msg, n, want_index):
    i = want_index
    want = record(i)
    where = "partition %d offset %d (record #%d there, expected index %d)" % (msg.partition(), msg.offset(), n, i)
    if msg.offset() != n:
        raise Failure("%s: got offset %d, want %d" % (where, msg.offset(), n))
    if msg.key() != want["key"]:
        raise Failure("%s: key %r, want %r" % (where, msg.key(), want["key"]))
    if msg.value() != want["value"]:
        raise Failure("%s: value %r (%d bytes), want %r (%d bytes)" % (
            where, msg.value()[:40], len(msg.value() or b""), want["value"][:40], len(want["value"])))
    headers = [(k, v) for k, v in (msg.headers() or [])]
    if headers != want["headers"]:
        raise Failure("%s: headers %r, want %r" % (where, headers, want["headers"]))
    ts_type, ts = msg.timestamp()
    if ts_type != confluent_kafka.TIMESTAMP_CREATE_TIME or ts != want["timestamp"]:
        raise Failure("%s: timestamp (type %d) %d, want CreateTime %d" % (where, ts_type, ts, want["timestamp"]))


def verify(bootstrap, topic, lo, hi):
    want = {p: expected_indexes(lo, hi, p) for p in range(PARTITIONS)}
    got = {p: 0 for p in range(PARTITIONS)}
    c = Consumer({
        "bootstrap.servers": bootstrap,
        # confluent-kafka-python 1.x insists on a group.id even for assign();
        # nothing is subscribed or committed, so the group is never joined.
        "group.id": "kgate-e2e-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 500,
    })
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + VERIFY_TIMEOUT
        while any(got[p] < len(want[p]) for p in range(PARTITIONS)):
            if time.monotonic() > deadline:
                raise Failure("incomplete after %ds: %s" % (VERIFY_TIMEOUT, progress(got, want)))
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise Failure("consume error: %s (%s)" % (msg.error(), progress(got, want)))
            p = msg.partition()
            n = got[p]
            if n >= len(want[p]):
                raise Failure("partition %d: unexpected extra record at offset %d (key %r): want exactly %d" % (
                    p, msg.offset(), msg.key(), len(want[p])))
            check(msg, n, want[p][n])
            got[p] += 1
        for p in range(PARTITIONS):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high != len(want[p]):
                raise Failure("partition %d: high watermark %d, want %d" % (p, high, len(want[p])))
    finally:
        c.close()
    return {"records": sum(got.values())}


def progress(got, want):
    return ", ".join("p%d %d/%d" % (p, got[p], len(want[p])) for p in range(PARTITIONS))


def main(argv):
    result = {"client": CLIENT, "version": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0]}
    start = time.monotonic()
    try:
        if len(argv) < 4:
            raise Failure("usage: client.py BOOTSTRAP TOPIC create|produce|verify ...")
        bootstrap, topic, mode = argv[1], argv[2], argv[3]
        result["mode"] = mode
        if mode == "create":
            result.update(create(bootstrap, topic, int(argv[4])))
        elif mode in ("produce", "verify"):
            lo, hi, codec = int(argv[4]), int(argv[5]), argv[6]
            result.update({"from": lo, "to": hi})
            if mode == "produce":
                result["codec"] = codec
                result.update(produce(bootstrap, topic, lo, hi, codec))
            else:
                result.update(verify(bootstrap, topic, lo, hi))
        else:
            raise Failure("unknown mode %r" % mode)
        result["ok"] = True
    except Exception as e:  # report everything as JSON
        result["ok"] = False
        result["error"] = "%s: %s" % (type(e).__name__, e)
    result["elapsed_ms"] = int((time.monotonic() - start) * 1000)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
