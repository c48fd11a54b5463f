package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// kafkaPythonAlterConfigs creates a topic with kafka-python's admin client,
// replaces its configs with AlterConfigs, checks them with DescribeConfigs
// (values and sources) and that a bad value is refused with INVALID_CONFIG.
// Arguments: bootstrap, topic. The last stdout line is the JSON result.
const kafkaPythonAlterConfigs = `import json, sys
from kafka.admin import KafkaAdminClient, NewTopic, ConfigResource, ConfigResourceType

bootstrap, topic = sys.argv[1], sys.argv[2]

def fail(msg):
    print(json.dumps({"ok": False, "error": msg}))
    sys.exit(1)

def describe():
    res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    out = {}
    for r in res:
        for (code, msg, rtype, rname, entries) in r.resources:
            if code != 0:
                fail("describe_configs: error %d %s" % (code, msg))
            for e in entries:
                out[e[0]] = (e[1], e[3])  # name -> (value, config_source for v1+)
    return out

def alter(configs):
    res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    (code, msg, rtype, rname) = res.resources[0]
    return code, msg

admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kgate-e2e-alter-configs", request_timeout_ms=20000)
admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "-1", "retention.bytes": "1000000"})])
code, msg = alter({"retention.ms": "3600000", "segment.bytes": "1048576"})
if code != 0:
    fail("alter_configs: error %d %s" % (code, msg))
got = describe()
if got.get("retention.ms") != ("3600000", 1) or got.get("segment.bytes") != ("1048576", 1):
    fail("after alter: retention.ms=%r segment.bytes=%r, want dynamic 3600000 and 1048576" % (got.get("retention.ms"), got.get("segment.bytes")))
if got.get("retention.bytes") != ("-1", 5):
    fail("AlterConfigs did not replace every config: retention.bytes=%r" % (got.get("retention.bytes"),))
code, msg = alter({"retention.ms": "-2"})
if code != 40 or "retention.ms" not in (msg or ""):
    fail("bad value: error %d %r, want 40 (INVALID_CONFIG) naming retention.ms" % (code, msg))
if describe().get("retention.ms") != ("3600000", 1):
    fail("a rejected alter changed retention.ms")
admin.close()
print(json.dumps({"ok": True}))
`

func TestKafkaPythonAlterConfigs(t *testing.T) {
	py := python(t)
	requireCommand(t, "kafka-python", ".", py, "-c", "import kafka.admin")
	srv := startKgate(t)
	topic := fmt.Sprintf("e2e-alter-configs-%d", time.Now().UnixNano()%1e9)
	prog := clientProgram{name: "kafka-python", dir: ".", argv: []string{py, "-c", kafkaPythonAlterConfigs}}
	step(t, "kafka-python alter_configs and describe_configs", createTimeout,
		func(ctx context.Context) error { return prog.run(ctx, srv.bootstrap(), topic) })
}
