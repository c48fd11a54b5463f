"""kgate end-to-end client for the security tests: confluent-kafka-python
(librdkafka) with settings from a JSON file of librdkafka properties.

Usage: secure_client.py CONFIG_JSON TOPIC roundtrip N
       secure_client.py CONFIG_JSON TOPIC expect-auth-failure
Prints one JSON line {"ok": ..., "error": ...}; exits non-zero on failure.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def roundtrip(conf, topic, n):
    errors = []
    p = Producer(dict(conf, **{"message.timeout.ms": 30000}))
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
                  on_delivery=lambda err, msg: err and errors.append(str(err)))
    left = p.flush(40)
    if left or errors:
        raise RuntimeError("produce: %d undelivered, errors %s" % (left, errors))
    c = Consumer(dict(conf, **{"group.id": "secure-" + topic, "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 60
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(m.error())
        got.append(m.value().decode())
    c.close()
    if got[:n] != ["v%d" % i for i in range(n)]:
        raise RuntimeError("read back %r" % got)


def expect_auth_failure(conf, topic):
    errors = []
    conf = dict(conf, **{"error_cb": lambda err: errors.append(err)})
    p = Producer(conf)
    deadline = time.time() + 30
    while time.time() < deadline:
        p.poll(0.2)
        for e in errors:
            if e.code() == KafkaError._AUTHENTICATION:
                print("refused as expected: %s" % e.str(), file=sys.stderr)
                return
    raise RuntimeError("no authentication error; errors %s" % [str(e) for e in errors])


def main():
    with open(sys.argv[1]) as f:
        conf = json.load(f)
    topic, mode = sys.argv[2], sys.argv[3]
    try:
        if mode == "roundtrip":
            roundtrip(conf, topic, int(sys.argv[4]))
        elif mode == "expect-auth-failure":
            expect_auth_failure(conf, topic)
        else:
            raise ValueError("unknown mode " + mode)
    except Exception as e:  # noqa: BLE001 - every failure becomes the result line
        print(json.dumps({"ok": False, "error": "%s: %s" % (type(e).__name__, e)}))
        sys.exit(1)
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    main()
