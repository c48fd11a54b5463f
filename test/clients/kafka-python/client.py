#!/usr/bin/python3
"""kgate end-to-end client: kafka-python.

Usage: client.py BOOTSTRAP TOPIC create PARTITIONS
       client.py BOOTSTRAP TOPIC produce FROM TO CODEC
       client.py BOOTSTRAP TOPIC verify FROM TO -
See test/clients/README.md for the record convention.
"""
import json
import logging
import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

CLIENT = "kafka-python"
PARTITIONS = 3
BASE_TS = 1700000000000
# The records' timestamps are in 2023: ask for unlimited retention so that a
# time-based retention check does not delete them.
TOPIC_CONFIG = {"retention.ms": "-1"}
VERIFY_TIMEOUT = 90.0
COMMON = {"client_id": "kgate-e2e-kafka-python", "request_timeout_ms": 30000, "api_version_auto_timeout_ms": 10000}


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
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **COMMON)
    try:
        resp = admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=TOPIC_CONFIG)], timeout_ms=30000)
        for t in resp.topic_errors:
            if t[1] != 0:
                raise Failure("CreateTopics %s: error code %d %s" % (t[0], t[1], t[2] if len(t) > 2 else ""))
        return {"api_version": ".".join(map(str, admin.config["api_version"]))}
    finally:
        admin.close()


def produce(bootstrap, topic, lo, hi, codec):
    # kafka-python has no idempotent producer; use acks=1 for the
    # uncompressed runs and acks=all otherwise.
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks=1 if codec == "none" else "all",
        linger_ms=5,
        retries=5,
        max_in_flight_requests_per_connection=1,
        **COMMON,
    )
    try:
        futures = []
        for i in range(lo, hi):
            r = record(i)
            futures.append((i, p.send(topic, key=r["key"], value=r["value"], headers=r["headers"],
                                      partition=r["partition"], timestamp_ms=r["timestamp"])))
        p.flush(timeout=90)
        for i, f in futures:
            md = f.get(timeout=30)
            if md.partition != i % PARTITIONS:
                raise Failure("record %d acknowledged on partition %d, want %d" % (i, md.partition, i % PARTITIONS))
        return {"records": len(futures), "api_version": ".".join(map(str, p.config["api_version"]))}
    finally:
        p.close(timeout=30)


def check(msg, n, i):
    want = record(i)
    where = "partition %d offset %d (record #%d there, expected index %d)" % (msg.partition, msg.offset, n, i)
    if msg.offset != n:
        raise Failure("%s: got offset %d, want %d" % (where, msg.offset, n))
    if msg.key != want["key"]:
        raise Failure("%s: key %r, want %r" % (where, msg.key, want["key"]))
    if msg.value != want["value"]:
        raise Failure("%s: value %r (%d bytes), want %r (%d bytes)" % (
            where, (msg.value or b"")[:40], len(msg.value or b""), want["value"][:40], len(want["value"])))
    headers = [(k, v) for k, v in (msg.headers or [])]
    if headers != want["headers"]:
        raise Failure("%s: headers %r, want %r" % (where, headers, want["headers"]))
    if msg.timestamp_type != 0 or msg.timestamp != want["timestamp"]:
        raise Failure("%s: timestamp (type %d) %d, want CreateTime %d" % (
            where, msg.timestamp_type, msg.timestamp, want["timestamp"]))


def verify(bootstrap, topic, lo, hi):
    want = {p: [i for i in range(lo, hi) if i % PARTITIONS == p] for p in range(PARTITIONS)}
    got = {p: 0 for p in range(PARTITIONS)}
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",
        fetch_max_wait_ms=500,
        **COMMON,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        deadline = time.monotonic() + VERIFY_TIMEOUT
        while any(got[p] < len(want[p]) for p in range(PARTITIONS)):
            if time.monotonic() > deadline:
                raise Failure("incomplete after %ds: %s" % (VERIFY_TIMEOUT, progress(got, want)))
            for tp, msgs in c.poll(timeout_ms=1000).items():
                for msg in msgs:
                    p = msg.partition
                    n = got[p]
                    if n >= len(want[p]):
                        raise Failure("partition %d: unexpected extra record at offset %d (key %r): want exactly %d" % (
                            p, msg.offset, msg.key, len(want[p])))
                    check(msg, n, want[p][n])
                    got[p] += 1
        for tp, high in c.end_offsets(tps).items():
            if high != len(want[tp.partition]):
                raise Failure("partition %d: high watermark %d, want %d" % (tp.partition, high, len(want[tp.partition])))
        return {"records": sum(got.values()), "api_version": ".".join(map(str, c.config["api_version"]))}
    finally:
        c.close(autocommit=False)


def progress(got, want):
    return ", ".join("p%d %d/%d" % (p, got[p], len(want[p])) for p in range(PARTITIONS))


def main(argv):
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    result = {"client": CLIENT, "version": kafka.__version__}
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
