package e2e

import (
	"os"
	"testing"
)

// envPython overrides the interpreter for the Python clients. The default is
// Debian's /usr/bin/python3, for which install-test-deps.sh installs
// python3-confluent-kafka and python3-kafka (a pyenv python3 on PATH would
// not see them).
const envPython = "KGATE_E2E_PYTHON"

func python(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envPython); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

func TestKcat(t *testing.T) {
	dir := clientsDir(t, "kcat")
	requireCommand(t, "kcat", dir, "kcat", "-V")
	c := clientProgram{name: "kcat", dir: dir, argv: []string{"bash", "client.sh"}}.asClient(allCodecs, false)
	c.want = kcatRecord
	runScenario(t, c)
}

func TestConfluentKafkaPython(t *testing.T) {
	dir := clientsDir(t, "confluent-kafka-python")
	py := python(t)
	requireCommand(t, "confluent-kafka-python", dir, py, "-c", "import confluent_kafka")
	runScenario(t, clientProgram{name: "confluent-kafka-python", dir: dir, argv: []string{py, "client.py"}}.asClient(allCodecs, true))
}

func TestKafkaPython(t *testing.T) {
	dir := clientsDir(t, "kafka-python")
	py := python(t)
	requireCommand(t, "kafka-python with snappy, lz4 and zstd", dir, py, "-c",
		"import kafka, kafka.codec as c; assert c.has_snappy() and c.has_lz4() and c.has_zstd()")
	runScenario(t, clientProgram{name: "kafka-python", dir: dir, argv: []string{py, "client.py"}}.asClient(allCodecs, true))
}

func TestKafkaJS(t *testing.T) {
	dir := clientsDir(t, "kafkajs")
	requireCommand(t, "kafkajs and its codecs (npm ci in test/clients/kafkajs)", dir, "node", "-e",
		"for (const m of ['kafkajs', 'kafkajs-snappy', 'lz4js', 'zstd-codec']) require(m)")
	runScenario(t, clientProgram{name: "kafkajs", dir: dir, argv: []string{"node", "client.js"}}.asClient(allCodecs, true))
}

func TestJavaClients(t *testing.T) {
	dir, jar := javaJar(t)
	runScenario(t, clientProgram{name: "java", dir: dir, argv: []string{"java", javaTmpDir(t), "-jar", jar}}.asClient(allCodecs, true))
}
