package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/xdg-go/scram"
)

// secureKgate is one kgate process started with extra (security) flags.
type secureKgate struct {
	kafka, admin string
	logPath      string
	cmd          *exec.Cmd
}

func startSecureKgate(t *testing.T, extra ...string) *secureKgate {
	t.Helper()
	dir := t.TempDir()
	s := &secureKgate{kafka: freeAddr(t), admin: freeAddr(t), logPath: filepath.Join(dir, "kgate.log")}
	args := append([]string{"serve", "--node-id", "1", "--data-dir", filepath.Join(dir, "data"),
		"--kafka-addr", s.kafka, "--admin-addr", s.admin, "--raft-addr", freeAddr(t), "--gossip-addr", freeAddr(t)}, extra...)
	logf, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command(kgateBinary(t), args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { s.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			s.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("kgate log:\n%s", tailFile(s.logPath, 40))
		}
	})
	deadline := time.Now().Add(startTimeout)
	for {
		b, _ := os.ReadFile(s.logPath)
		if strings.Contains(string(b), "ready: bootstrap servers") {
			return s
		}
		select {
		case <-exited:
			t.Fatalf("kgate exited at start-up:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kgate not ready after %s:\n%s", startTimeout, b)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// kafkaJars is the Kafka jar directory (scripts/kafka-broker.sh fetch).
func kafkaJars(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "kafka-broker.sh"), "fetch").CombinedOutput(); err != nil {
		t.Fatalf("fetch Kafka jars: %v\n%s", err, out)
	}
	dirs, _ := filepath.Glob(filepath.Join(root, ".cache", "kafka", "jars-*"))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, ".complete")); err == nil {
			return d
		}
	}
	t.Fatalf("no Kafka jars under %s/.cache/kafka: %s", root, installHint)
	return ""
}

// runTool runs argv and returns its combined output; err is non-nil when it
// exits non-zero or runs past two minutes.
func runTool(dir, name string, args ...string) (string, error) {
	return runToolInput(dir, "", name, args...)
}

// runToolInput is runTool with stdin as the program's input.
func runToolInput(dir, stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// javaProps is a client properties file for Java tools.
func javaProps(t *testing.T, dir, name string, kv map[string]string) string {
	var b strings.Builder
	for k, v := range kv {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return writeFile(t, filepath.Join(dir, name), b.String())
}

func jaas(module, user, pass string) string {
	return fmt.Sprintf(`org.apache.kafka.common.security.%s required username="%s" password="%s";`, module, user, pass)
}

// TestSecuritySASLSSLClients runs kgate with TLS and SASL (PLAIN for an
// admin, SCRAM-SHA-512 for users) and drives it with kafka-configs
// (ConfigCommand), the Java client, kcat and confluent-kafka-python.
func TestSecuritySASLSSLClients(t *testing.T) {
	jars := kafkaJars(t)
	work := t.TempDir()
	certs := filepath.Join(work, "certs")
	if out, err := runTool(work, kgateBinary(t), "certs", "-dir", certs, "-names", "node-1,client"); err != nil {
		t.Fatalf("kgate certs: %v\n%s", err, out)
	}
	ca := filepath.Join(certs, "ca.pem")
	users := writeFile(t, filepath.Join(work, "users"), "# PLAIN users\nadmin:admin-secret\n")
	token := writeFile(t, filepath.Join(work, "token"), "s3cr3t-token\n")
	k := startSecureKgate(t, "--kafka-tls-cert", filepath.Join(certs, "node-1.pem"), "--kafka-tls-key", filepath.Join(certs, "node-1-key.pem"),
		"--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-512", "--sasl-plain-users-file", users, "--admin-token-file", token)
	cp := filepath.Join(jars, "*")
	tlsProps := map[string]string{"bootstrap.servers": k.kafka, "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": ca}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range tlsProps {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	adminProps := javaProps(t, work, "admin.properties", with(map[string]string{"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas("plain.PlainLoginModule", "admin", "admin-secret")}))
	aliceProps := javaProps(t, work, "alice.properties", with(map[string]string{"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas("scram.ScramLoginModule", "alice", "alice-secret")}))
	wrongProps := javaProps(t, work, "wrong.properties", with(map[string]string{"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas("scram.ScramLoginModule", "alice", "guess")}))

	t.Run("kafka-configs adds a SCRAM user", func(t *testing.T) {
		out, err := runTool(work, "java", "-cp", cp, "kafka.admin.ConfigCommand", "--bootstrap-server", k.kafka, "--command-config", adminProps,
			"--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]", "--entity-type", "users", "--entity-name", "alice")
		if err != nil {
			t.Fatalf("kafka-configs --alter: %v\n%s", err, out)
		}
		// kafka-configs --describe --entity-type users also asks for client
		// quotas (DescribeClientQuotas); check the credential with kadm.
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(must(os.ReadFile(ca)))
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.kafka), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
			kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d, err := kadm.NewClient(cl).DescribeUserSCRAMs(ctx, "alice")
		if err != nil || len(d["alice"].CredInfos) != 1 || d["alice"].CredInfos[0].Mechanism != kadm.ScramSha512 || d["alice"].CredInfos[0].Iterations != 8192 {
			t.Fatalf("described: %+v %v", d, err)
		}
	})
	javaClient := filepath.Join(repoRoot(t), "test", "clients", "java", "secure", "SecureClient.java")
	t.Run("java SCRAM-SHA-512", func(t *testing.T) {
		if out, err := runTool(work, "java", "-cp", cp, javaClient, aliceProps, "java-scram", "roundtrip", "5"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		out, err := runTool(work, "java", "-cp", cp, javaClient, wrongProps, "java-wrong", "expect-auth-failure")
		if err != nil || !strings.Contains(out, "invalid credentials") {
			t.Fatalf("wrong password: %v\n%s", err, out)
		}
	})
	kcatSec := []string{"-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + ca, "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
	t.Run("kcat SCRAM-SHA-512", func(t *testing.T) {
		p := exec.Command("kcat", append([]string{"-b", k.kafka, "-P", "-t", "kcat-scram", "-p", "0"}, kcatSec...)...)
		p.Stdin = strings.NewReader("one\ntwo\n")
		if out, err := p.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
		out, err := runTool(work, "kcat", append([]string{"-b", k.kafka, "-C", "-t", "kcat-scram", "-p", "0", "-o", "beginning", "-c", "2", "-e"}, kcatSec...)...)
		if err != nil || out != "one\ntwo\n" {
			t.Fatalf("kcat -C: %v\n%q", err, out)
		}
		wrong := append(append([]string{}, kcatSec...), "-X", "sasl.password=guess")
		out, err = runTool(work, "kcat", append([]string{"-b", k.kafka, "-L", "-m", "10"}, wrong...)...)
		if err == nil || !strings.Contains(out, "Authentication failed") {
			t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
		}
		out, err = runTool(work, "kcat", "-b", k.kafka, "-L", "-m", "5")
		if err == nil {
			t.Fatalf("plaintext kcat on the TLS listener got metadata:\n%s", out)
		}
	})
	t.Run("confluent-kafka-python SCRAM-SHA-512", func(t *testing.T) {
		py := python(t)
		dir := clientsDir(t, "confluent-kafka-python")
		conf := map[string]any{"bootstrap.servers": k.kafka, "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
			"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret"}
		write := func(name string, c map[string]any) string {
			b, _ := json.Marshal(c)
			return writeFile(t, filepath.Join(work, name), string(b))
		}
		if out, err := runTool(dir, py, "secure_client.py", write("py.json", conf), "py-scram", "roundtrip", "5"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		conf["sasl.password"] = "guess"
		if out, err := runTool(dir, py, "secure_client.py", write("py-wrong.json", conf), "py-wrong", "expect-auth-failure"); err != nil {
			t.Fatalf("wrong password: %v\n%s", err, out)
		}
		conf["sasl.password"], conf["sasl.mechanism"] = "alice-secret", "SCRAM-SHA-256"
		out, err := runTool(dir, py, "secure_client.py", write("py-mech.json", conf), "py-mech", "expect-auth-failure")
		if err != nil {
			t.Fatalf("mechanism not enabled: %v\n%s", err, out)
		}
	})
	t.Run("kafkajs SCRAM-SHA-512", func(t *testing.T) {
		dir := clientsDir(t, "kafkajs")
		requireCommand(t, "kafkajs (npm ci in test/clients/kafkajs)", dir, "node", "-e", "require('kafkajs')")
		env := []string{"KGATE_E2E_SSL_CA=" + ca, "KGATE_E2E_SASL_MECHANISM=scram-sha-512", "KGATE_E2E_SASL_USER=alice"}
		run := func(password string, args ...string) (string, error) {
			cmd := exec.Command("node", append([]string{"client.js", k.kafka, "kafkajs-scram"}, args...)...)
			cmd.Dir, cmd.Env = dir, append(append(os.Environ(), env...), "KGATE_E2E_SASL_PASSWORD="+password)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, args := range [][]string{{"create", "3"}, {"produce", "0", "300", "none"}, {"verify", "0", "300", "-"}} {
			if out, err := run("alice-secret", args...); err != nil {
				t.Fatalf("kafkajs %v: %v\n%s", args, err, out)
			}
		}
		if out, err := run("guess", "verify", "0", "300", "-"); err == nil || !strings.Contains(out, "SASL") {
			t.Fatalf("kafkajs with a wrong password: %v\n%s", err, out)
		}
	})
	t.Run("sarama SCRAM-SHA-512", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(must(os.ReadFile(ca)))
		cfg := saramaConfig()
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, &tls.Config{RootCAs: pool}
		cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: scram.SHA512} }
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		prod, err := sarama.NewSyncProducer([]string{k.kafka}, cfg)
		if err != nil {
			t.Fatalf("sarama producer over SASL_SSL: %v", err)
		}
		defer prod.Close()
		for i := range 5 {
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama-plain", Partition: 0, Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		cons, err := sarama.NewConsumer([]string{k.kafka}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		pc, err := cons.ConsumePartition("sarama-plain", 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		timeout := time.After(30 * time.Second)
		for i := range 5 {
			select {
			case m := <-pc.Messages():
				if string(m.Value) != fmt.Sprint(i) {
					t.Fatalf("record %d: %q", i, m.Value)
				}
			case <-timeout:
				t.Fatalf("read %d of 5 records", i)
			}
		}
		cfg.Net.SASL.Password = "guess"
		if c, err := sarama.NewClient([]string{k.kafka}, cfg); err == nil {
			c.Close()
			t.Fatal("sarama with a wrong password connected")
		}
	})
	t.Run("admin API needs the token", func(t *testing.T) {
		get := func(path, tok string) int {
			req, _ := http.NewRequest("GET", "http://"+k.admin+path, nil)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, c := range []struct {
			path, tok string
			want      int
		}{
			{"/v1/cluster", "", 401}, {"/v1/cluster", "wrong", 401}, {"/v1/cluster", "s3cr3t-token", 200},
			{"/healthz", "", 200}, {"/readyz", "", 200}, {"/debug/pprof/", "s3cr3t-token", 404},
		} {
			if got := get(c.path, c.tok); got != c.want {
				t.Errorf("GET %s with token %q: %d, want %d", c.path, c.tok, got, c.want)
			}
		}
		resp, err := http.Post("http://"+k.admin+"/v1/leave", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("POST /v1/leave without the token: %d", resp.StatusCode)
		}
	})
	t.Run("no secret in the log", func(t *testing.T) {
		b, _ := os.ReadFile(k.logPath)
		for _, s := range []string{"admin-secret", "alice-secret", "s3cr3t-token"} {
			if strings.Contains(string(b), s) {
				t.Errorf("log contains %q", s)
			}
		}
	})
}

// xdgSCRAM is Sarama's SCRAM client over xdg-go/scram, as Sarama's own
// examples wire it.
type xdgSCRAM struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, password, authzID string) error {
	c, err := x.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

// serverCertSerial is the serial of the certificate the listener presents.
func serverCertSerial(t *testing.T, addr string) string {
	t.Helper()
	nc, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // only reading which certificate is served
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	return nc.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestSecurityMutualTLSClients runs kgate with mutual TLS and no SASL:
// clients with a certificate from the CA get in, others do not; SIGHUP
// reloads the certificate without closing the listener.
func TestSecurityMutualTLSClients(t *testing.T) {
	jars := kafkaJars(t)
	work := t.TempDir()
	certs := filepath.Join(work, "certs")
	if out, err := runTool(work, kgateBinary(t), "certs", "-dir", certs, "-names", "node-1,client"); err != nil {
		t.Fatalf("kgate certs: %v\n%s", err, out)
	}
	ca, cert, key := filepath.Join(certs, "ca.pem"), filepath.Join(certs, "client.pem"), filepath.Join(certs, "client-key.pem")
	nodeCert, nodeKey := filepath.Join(certs, "node-1.pem"), filepath.Join(certs, "node-1-key.pem")
	k := startSecureKgate(t, "--kafka-tls-cert", nodeCert, "--kafka-tls-key", nodeKey, "--kafka-tls-client-ca", ca)

	kcatTLS := []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca}
	kcatMTLS := append(append([]string{}, kcatTLS...), "-X", "ssl.certificate.location="+cert, "-X", "ssl.key.location="+key)
	t.Run("kcat", func(t *testing.T) {
		p := exec.Command("kcat", append([]string{"-b", k.kafka, "-P", "-t", "kcat-mtls", "-p", "0"}, kcatMTLS...)...)
		p.Stdin = strings.NewReader("one\n")
		if out, err := p.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
		out, err := runTool(work, "kcat", append([]string{"-b", k.kafka, "-C", "-t", "kcat-mtls", "-p", "0", "-o", "beginning", "-c", "1", "-e"}, kcatMTLS...)...)
		if err != nil || out != "one\n" {
			t.Fatalf("kcat -C: %v\n%q", err, out)
		}
		if out, err := runTool(work, "kcat", append([]string{"-b", k.kafka, "-L", "-m", "5"}, kcatTLS...)...); err == nil {
			t.Fatalf("kcat without a client certificate got metadata:\n%s", out)
		}
	})
	t.Run("java", func(t *testing.T) {
		keystore := writeFile(t, filepath.Join(work, "client-keystore.pem"), string(must(os.ReadFile(key)))+string(must(os.ReadFile(cert))))
		props := javaProps(t, work, "mtls.properties", map[string]string{"bootstrap.servers": k.kafka, "security.protocol": "SSL", "ssl.truststore.type": "PEM",
			"ssl.truststore.location": ca, "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore})
		javaClient := filepath.Join(repoRoot(t), "test", "clients", "java", "secure", "SecureClient.java")
		if out, err := runTool(work, "java", "-cp", filepath.Join(jars, "*"), javaClient, props, "java-mtls", "roundtrip", "3"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	t.Run("confluent-kafka-python", func(t *testing.T) {
		conf, _ := json.Marshal(map[string]any{"bootstrap.servers": k.kafka, "security.protocol": "SSL", "ssl.ca.location": ca,
			"ssl.certificate.location": cert, "ssl.key.location": key})
		if out, err := runTool(clientsDir(t, "confluent-kafka-python"), python(t), "secure_client.py",
			writeFile(t, filepath.Join(work, "py.json"), string(conf)), "py-mtls", "roundtrip", "3"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(must(os.ReadFile(ca)))
	clientCert := must(tls.LoadX509KeyPair(cert, key))
	t.Run("franz-go", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.kafka), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("franz-mtls"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DialTLSConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "franz-mtls", Value: []byte("m")}).FirstErr(); err != nil {
			t.Fatalf("produce over mTLS: %v", err)
		}
		if fs := cl.PollRecords(ctx, 1); fs.Err0() != nil || fs.NumRecords() != 1 {
			t.Fatalf("consume over mTLS: %v, %d records", fs.Err0(), fs.NumRecords())
		}
		bare, err := kgo.NewClient(kgo.SeedBrokers(k.kafka), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}))
		if err != nil {
			t.Fatal(err)
		}
		defer bare.Close()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bare); err == nil {
			t.Fatal("franz-go without a client certificate got metadata")
		}
	})
	t.Run("sarama", func(t *testing.T) {
		cfg := saramaConfig()
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		prod, err := sarama.NewSyncProducer([]string{k.kafka}, cfg)
		if err != nil {
			t.Fatalf("sarama over mTLS: %v", err)
		}
		defer prod.Close()
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama-mtls", Value: sarama.StringEncoder("m")}); err != nil {
			t.Fatalf("sarama send over mTLS: %v", err)
		}
		cfg.Net.TLS.Config = &tls.Config{RootCAs: pool}
		if c, err := sarama.NewClient([]string{k.kafka}, cfg); err == nil {
			c.Close()
			t.Fatal("sarama without a client certificate connected")
		}
	})
	t.Run("kafkajs", func(t *testing.T) {
		dir := clientsDir(t, "kafkajs")
		requireCommand(t, "kafkajs (npm ci in test/clients/kafkajs)", dir, "node", "-e", "require('kafkajs')")
		for _, args := range [][]string{{"create", "3"}, {"produce", "0", "100", "none"}, {"verify", "0", "100", "-"}} {
			cmd := exec.Command("node", append([]string{"client.js", k.kafka, "kafkajs-mtls"}, args...)...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "KGATE_E2E_SSL_CA="+ca, "KGATE_E2E_SSL_CERT="+cert, "KGATE_E2E_SSL_KEY="+key)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kafkajs %v over mTLS: %v\n%s", args, err, out)
			}
		}
	})
	t.Run("SIGHUP reloads the certificate", func(t *testing.T) {
		before := serverCertSerial(t, k.kafka)
		fresh := filepath.Join(work, "fresh")
		if out, err := runTool(work, kgateBinary(t), "certs", "-dir", fresh, "-names", "node-1"); err != nil {
			t.Fatalf("kgate certs: %v\n%s", err, out)
		}
		writeFile(t, nodeCert, string(must(os.ReadFile(filepath.Join(fresh, "node-1.pem")))))
		writeFile(t, nodeKey, string(must(os.ReadFile(filepath.Join(fresh, "node-1-key.pem")))))
		if err := k.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for serverCertSerial(t, k.kafka) == before {
			if time.Now().After(deadline) {
				t.Fatal("the listener still serves the old certificate")
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
		want := must(os.ReadFile(filepath.Join(fresh, "node-1.pem")))
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(must(os.ReadFile(filepath.Join(fresh, "ca.pem"))))
		nc, err := tls.Dial("tcp", k.kafka, &tls.Config{RootCAs: pool})
		if err != nil {
			t.Fatalf("new certificate (%d bytes) does not verify: %v", len(want), err)
		}
		nc.Close()
	})
}

// caPool trusts the CA that `kgate certs` wrote into dir.
func caPool(dir string) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(must(os.ReadFile(filepath.Join(dir, "ca.pem"))))
	return p
}

// clientKeyPair is the "client" certificate `kgate certs` wrote into dir.
func clientKeyPair(dir string) tls.Certificate {
	return must(tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
