package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// docShellBlocks returns the ```sh blocks of a markdown file, in order.
func docShellBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

// TestSecurityDocCommands runs every sh block of docs/security.md, as
// written, in one shell in an empty directory. Only the loopback addresses
// are swapped for free ports, and a leading "! " (the command must fail) is
// checked rather than left to the shell, which exempts it from errexit.
func TestSecurityDocCommands(t *testing.T) {
	root := repoRoot(t)
	jars := kafkaJars(t)
	work := t.TempDir()
	bin := filepath.Join(work, ".bin")
	os.MkdirAll(bin, 0o755)
	if err := os.Symlink(kgateBinary(t), filepath.Join(bin, "kgate")); err != nil {
		t.Fatal(err)
	}
	// kafka-configs.sh is this one class of the Kafka distribution.
	writeFile(t, filepath.Join(bin, "kafka-configs.sh"), "#!/bin/sh\nexec java -cp '"+filepath.Join(jars, "*")+"' kafka.admin.ConfigCommand \"$@\"\n")
	os.Chmod(filepath.Join(bin, "kafka-configs.sh"), 0o755)
	// kafka-acls.sh is AclCommand of the kafka-tools jar (test/clients/kafka-tools).
	tools := filepath.Join(clientsDir(t, "kafka-tools"), "target", "lib")
	requireFile(t, filepath.Join(tools, ".complete"), "Kafka tools jars (mvn dependency:copy-dependencies in test/clients/kafka-tools)")
	writeFile(t, filepath.Join(bin, "kafka-acls.sh"), "#!/bin/sh\nexec java -cp '"+filepath.Join(tools, "*")+"' org.apache.kafka.tools.AclCommand \"$@\"\n")
	os.Chmod(filepath.Join(bin, "kafka-acls.sh"), 0o755)
	// The console tools, which like the distribution's scripts pass
	// KAFKA_OPTS to the JVM and log warnings and errors only.
	for name, class := range map[string]string{
		"kafka-console-producer.sh": "org.apache.kafka.tools.ConsoleProducer",
		"kafka-console-consumer.sh": "org.apache.kafka.tools.consumer.ConsoleConsumer",
	} {
		writeFile(t, filepath.Join(bin, name), "#!/bin/sh\nexec java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn $KAFKA_OPTS -cp '"+filepath.Join(tools, "*")+"' "+class+" \"$@\"\n")
		os.Chmod(filepath.Join(bin, name), 0o755)
	}

	blocks := docShellBlocks(t, filepath.Join(root, "docs", "security.md"))
	if len(blocks) < 5 {
		t.Fatalf("docs/security.md has %d sh blocks", len(blocks))
	}
	script := strings.Join(blocks, "\n")
	ports := map[string]string{}
	script = regexp.MustCompile(`127\.0\.0\.1:9[0-9]{3}`).ReplaceAllStringFunc(script, func(a string) string {
		if ports[a] == "" {
			ports[a] = freeAddr(t)
		}
		return ports[a]
	})
	script = regexp.MustCompile(`(?m)^! `).ReplaceAllString(script, "expect_fail ")
	prelude := "set -euo pipefail\nexpect_fail() { if \"$@\"; then echo \"expected to fail: $*\" >&2; exit 1; fi; }\n"
	writeFile(t, filepath.Join(work, ".script.sh"), prelude+script)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", ".script.sh")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = groupProcAttr()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The script leaves kgate nodes running in its process group: stop
	// them, and wait, before the temporary directory goes.
	defer func() {
		pgid := cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGTERM)
		deadline := time.Now().Add(stopTimeout)
		for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline.Add(10*time.Second)) {
			if time.Now().After(deadline) {
				syscall.Kill(-pgid, syscall.SIGKILL)
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
	}()
	err := cmd.Wait()
	if err != nil {
		for _, log := range []string{"kgate.log", "kgate-mtls.log", "kgate-acl.log", "kgate-overrides.log", "kgate-sasl-listeners.log"} {
			t.Logf("%s:\n%s", log, tailFile(filepath.Join(work, log), 30))
		}
		t.Fatalf("docs/security.md commands failed: %v\n%s", err, out.String())
	}
	for _, want := range []string{"hello\n", "401\n", "node-4.pem: OK", "inside\n", "over-mtls\n", "paid\n", "Topic authorization failed",
		"principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW",
		"after 3", "ms in state AUTH_REQ", "Disconnected (after", "before\nafter\n",
		"with-a-token\n", "invalid credentials with SASL mechanism OAUTHBEARER"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), `"nodes"`) && !strings.Contains(out.String(), `"leader`) {
		t.Errorf("GET /v1/cluster with the token printed no cluster view:\n%s", out.String())
	}
}
