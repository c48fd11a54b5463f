#!/usr/bin/python3
"""kgate end-to-end consumer-group member: confluent-kafka-python (librdkafka).

Usage: group_consumer.py BOOTSTRAP TOPIC group GROUP CLIENT_ID [key=value ...]
See test/clients/GROUPS.md for the options and the JSON lines printed.
"""
import json
import sys
import threading
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, TopicPartition

CLIENT = "confluent-kafka-python"
MAX_LIFETIME = 180.0

_out = threading.Lock()


def emit(obj):
    line = json.dumps(obj)
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Failure(Exception):
    pass


def parse(argv):
    if len(argv) < 6 or argv[3] != "group":
        raise Failure("usage: group_consumer.py BOOTSTRAP TOPIC group GROUP CLIENT_ID [assignor=range|roundrobin] "
                      "[instance=ID] [session=MS] [stopat=N]")
    o = {"bootstrap": argv[1], "topic": argv[2], "group": argv[4], "client_id": argv[5],
         "assignor": None, "instance": None, "session": 6000, "stopat": -1}
    for kv in argv[6:]:
        k, sep, v = kv.partition("=")
        if not sep:
            raise Failure("option %r is not key=value" % kv)
        if k == "assignor":
            o["assignor"] = None if v == "default" else v
        elif k == "instance":
            o["instance"] = v
        elif k in ("session", "stopat"):
            o[k] = int(v)
        else:
            raise Failure("unknown option %r" % k)
    return o


def run(o, result):
    conf = {
        "bootstrap.servers": o["bootstrap"],
        "group.id": o["group"],
        "client.id": o["client_id"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": o["session"],
        "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": 500,
    }
    if o["assignor"]:
        conf["partition.assignment.strategy"] = o["assignor"]
    if o["instance"]:
        conf["group.instance.id"] = o["instance"]
    topic = o["topic"]
    stopat = o["stopat"]

    # The assignors used here (range, roundrobin) are eager: on_assign gets the
    # whole assignment and on_revoke takes all of it.
    def on_assign(consumer, partitions):
        emit({"event": "assigned", "partitions": sorted(tp.partition for tp in partitions if tp.topic == topic)})

    def on_revoke(consumer, partitions):
        ps = sorted(tp.partition for tp in partitions if tp.topic == topic)
        if ps:
            emit({"event": "revoked", "partitions": ps})

    def on_lost(consumer, partitions):
        ps = sorted(tp.partition for tp in partitions if tp.topic == topic)
        if ps:
            emit({"event": "lost", "partitions": ps})

    close_asked = threading.Event()

    def read_stdin():
        for line in sys.stdin:
            if line.strip() == "close":
                break
        close_asked.set()

    threading.Thread(target=read_stdin, daemon=True).start()

    c = Consumer(conf)
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    deadline = time.monotonic() + MAX_LIFETIME
    records = 0
    while not close_asked.is_set():
        if time.monotonic() > deadline:
            c.close()
            raise Failure("no close request within %ds" % MAX_LIFETIME)
        msgs = c.consume(num_messages=500, timeout=0.2)
        commit = {}
        for m in msgs:
            if m.error():
                emit({"event": "error", "error": str(m.error())})
                continue
            if 0 <= stopat <= m.offset():
                continue
            records += 1
            emit({"event": "record", "p": m.partition(), "o": m.offset(), "k": (m.key() or b"").decode()})
            commit[m.partition()] = m.offset() + 1
        if commit:
            try:
                res = c.commit(offsets=[TopicPartition(topic, p, off) for p, off in commit.items()],
                               asynchronous=False)
                errs = [str(tp.error) for tp in (res or []) if tp.error]
                if errs:
                    emit({"event": "commit_error", "error": "; ".join(errs)})
                else:
                    emit({"event": "commit", "offsets": {str(p): off for p, off in commit.items()}})
            except KafkaException as e:
                emit({"event": "commit_error", "error": str(e)})
    c.close()  # leaves the group unless group.instance.id is set
    result["records"] = records


def main(argv):
    result = {"client": CLIENT, "mode": "group", "version": confluent_kafka.version()[0],
              "librdkafka": confluent_kafka.libversion()[0]}
    start = time.monotonic()
    try:
        run(parse(argv), result)
        result["ok"] = True
    except Exception as e:  # report everything as JSON
        result["ok"] = False
        result["error"] = "%s: %s" % (type(e).__name__, e)
    result["elapsed_ms"] = int((time.monotonic() - start) * 1000)
    emit(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
