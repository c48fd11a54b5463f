// Package deploy holds kgate's deployment files (docker, kubernetes,
// systemd); its tests keep them true to the binary. No container engine or
// Kubernetes cluster runs here: the tests check what can be checked
// without one (see docs/operations.md, Deploying).
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

var (
	buildOnce sync.Once
	binDir    string // removed when the tests end
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// kgate builds the binary once for these tests.
func kgate(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kgate-deploy-test")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "kgate")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/kgate").CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build ../cmd/kgate: %v\n%s", buildErr, binPath)
	}
	return binPath
}

// flagsOf lists the flags `kgate <command> -h` prints.
func flagsOf(t *testing.T, command string) map[string]bool {
	t.Helper()
	cmd := exec.Command(kgate(t), command, "-h")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kgate %s -h: %v\n%s", command, err, out.String())
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		t.Fatalf("kgate %s -h lists no flags:\n%s", command, out.String())
	}
	return flags
}

// deployFiles lists every file under deploy/ but the tests.
func deployFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cliCommands are the subcommands whose flags deploy/ may use.
var cliCommands = map[string]bool{"serve": true, "health": true, "status": true, "topics": true, "groups": true, "leave": true}

// TestDeployNamesOnlyRealSettings: every KGATE_* variable, every flag on a
// kgate command line and every key of a kgate config file in deploy/ is
// one the binary has.
func TestDeployNamesOnlyRealSettings(t *testing.T) {
	serve := flagsOf(t, "serve")
	flags := map[string]map[string]bool{"serve": serve}
	cliEnv := map[string]bool{"KGATE_ADMIN": true} // the admin commands' --admin
	checked := 0
	envRe := regexp.MustCompile(`KGATE_[A-Z0-9_]+`)
	tokenSplit := regexp.MustCompile(`[\s"',\[\]]+`)
	for _, f := range deployFiles(t) {
		text := read(t, f)
		for _, env := range envRe.FindAllString(text, -1) {
			name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "KGATE_"), "_", "-"))
			if !serve[name] && !cliEnv[env] {
				t.Errorf("%s names %s, but kgate serve has no --%s", f, env, name)
			}
			checked++
		}
		for i, line := range strings.Split(text, "\n") {
			toks := tokenSplit.Split(line, -1)
			for j := 0; j+1 < len(toks); j++ {
				if filepath.Base(toks[j]) != "kgate" || !cliCommands[toks[j+1]] {
					continue
				}
				cmd := toks[j+1]
				if flags[cmd] == nil {
					flags[cmd] = flagsOf(t, cmd)
				}
				for _, tok := range toks[j+2:] {
					if !strings.HasPrefix(tok, "-") {
						continue
					}
					name, _, _ := strings.Cut(strings.TrimLeft(tok, "-"), "=")
					if !flags[cmd][name] {
						t.Errorf("%s:%d: kgate %s has no flag %s", f, i+1, cmd, tok)
					}
					checked++
				}
			}
		}
		if filepath.Base(f) == "kgate.yaml" {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(text), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for k := range m {
				if !serve[k] || k == "config" {
					t.Errorf("%s: key %q is not a kgate serve flag", f, k)
				}
				checked++
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d settings found in deploy/: the scan is broken", checked)
	}
	t.Logf("%d setting references in deploy/ checked against the binary", checked)
}

// TestSystemdUnit: the unit passes `systemd-analyze verify` without a
// single warning (in a scratch root holding the binary at the unit's path)
// and keeps its hardening.
func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not found: run scripts/install-test-deps.sh (it installs systemd)")
	}
	unit := read(t, "systemd/kgate.service")
	for _, want := range []string{"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "EnvironmentFile=",
		"Restart=on-failure", "StateDirectory=kgate", "ExecStart=/usr/local/bin/kgate serve --config /etc/kgate/kgate.yaml"} {
		if !strings.Contains(unit, "\n"+want) {
			t.Errorf("kgate.service lost %q", want)
		}
	}
	root := t.TempDir()
	for _, d := range []string{"usr/local/bin", "etc/systemd/system", "usr/lib/systemd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, kgate(t), filepath.Join(root, "usr/local/bin/kgate"), 0o755)
	copyFile(t, "systemd/kgate.service", filepath.Join(root, "etc/systemd/system/kgate.service"), 0o644)
	// The units kgate.service depends on (network-online.target, ...).
	if out, err := exec.Command("cp", "-r", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/")).CombinedOutput(); err != nil {
		t.Fatalf("copying the system's units: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, sa, "verify", "--root="+root, "kgate.service").CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify kgate.service: %v\n%s", err, out)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(read(t, path)))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if err != nil {
			if err.Error() == "EOF" {
				return docs
			}
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks a decoded YAML value by keys and list indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestKubernetesManifests: the Kustomize base parses, names only files that
// exist, and keeps what running kgate on Kubernetes needs.
func TestKubernetesManifests(t *testing.T) {
	kust := yamlDocs(t, "kubernetes/kustomization.yaml")[0]
	byKind := map[string]map[string]any{}
	for _, r := range get(kust, "resources").([]any) {
		for _, d := range yamlDocs(t, filepath.Join("kubernetes", r.(string))) {
			kind, _ := d["kind"].(string)
			name, _ := get(d, "metadata", "name").(string)
			if d["apiVersion"] == nil || kind == "" || name == "" {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", r)
			}
			byKind[kind+"/"+name] = d
		}
	}
	sts := byKind["StatefulSet/kgate"]
	svc := byKind["Service/kgate"]
	pdb := byKind["PodDisruptionBudget/kgate"]
	if sts == nil || svc == nil || pdb == nil {
		t.Fatalf("want StatefulSet, Service and PodDisruptionBudget named kgate; have %v", keys(byKind))
	}
	labels := get(sts, "spec", "template", "metadata", "labels").(map[string]any)
	for what, sel := range map[string]any{
		"StatefulSet selector": get(sts, "spec", "selector", "matchLabels"),
		"PDB selector":         get(pdb, "spec", "selector", "matchLabels"),
		"Service selector":     get(svc, "spec", "selector"),
	} {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("%s is empty", what)
		}
		for k, v := range m {
			if labels[k] != v {
				t.Errorf("%s %s=%v does not match the pod labels %v", what, k, v, labels)
			}
		}
	}
	if get(svc, "spec", "clusterIP") != "None" || get(svc, "spec", "publishNotReadyAddresses") != true {
		t.Error("the StatefulSet's Service must be headless and publish not-ready pods (gossip before readiness)")
	}
	if get(sts, "spec", "serviceName") != "kgate" || get(sts, "spec", "podManagementPolicy") != "Parallel" {
		t.Error("StatefulSet: serviceName kgate and podManagementPolicy Parallel (bootstrap needs all pods at once)")
	}
	if get(pdb, "spec", "maxUnavailable") != 1 {
		t.Errorf("PDB maxUnavailable %v, want 1", get(pdb, "spec", "maxUnavailable"))
	}
	if g, _ := get(sts, "spec", "template", "spec", "terminationGracePeriodSeconds").(int); g < 30 {
		t.Errorf("terminationGracePeriodSeconds %d: too short for a leadership transfer", g)
	}
	c := get(sts, "spec", "template", "spec", "containers", 0)
	if get(c, "readinessProbe", "httpGet", "path") != "/readyz" || get(c, "livenessProbe", "httpGet", "path") != "/healthz" {
		t.Error("probes: readiness /readyz, liveness /healthz")
	}
	if get(sts, "spec", "volumeClaimTemplates", 0, "metadata", "name") != get(c, "volumeMounts", 0, "name") {
		t.Error("the data volume claim is not mounted")
	}
	env := map[string]string{}
	for _, e := range get(c, "env").([]any) {
		v, _ := get(e, "value").(string)
		env[get(e, "name").(string)] = v
	}
	for _, k := range []string{"KGATE_ADVERTISE_KAFKA_ADDR", "KGATE_ADVERTISE_RAFT_ADDR", "KGATE_ADVERTISE_GOSSIP_ADDR"} {
		if !strings.HasPrefix(env[k], "$(POD_NAME).kgate.") {
			t.Errorf("%s=%q: advertise the pod's own DNS name", k, env[k])
		}
	}
	if !strings.HasPrefix(env["KGATE_JOIN"], "kgate.$(POD_NAMESPACE).svc") {
		t.Errorf("KGATE_JOIN=%q: join through the headless service's name", env["KGATE_JOIN"])
	}
	// Where kubectl is installed, let Kustomize itself render the base.
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "kustomize", "kubernetes").CombinedOutput()
		if err != nil {
			t.Errorf("kubectl kustomize deploy/kubernetes: %v\n%s", err, out)
		}
	} else {
		t.Log("kubectl not installed: Kustomize rendering not checked (the manifests were parsed and checked above)")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCompose: three kgate nodes on Iggy, each with a health check, a
// volume for its data and its own advertised addresses.
func TestCompose(t *testing.T) {
	doc := yamlDocs(t, "docker/compose.yaml")[0]
	services, _ := doc["services"].(map[string]any)
	if services["iggy"] == nil {
		t.Fatal("compose.yaml has no iggy service")
	}
	volumes, _ := doc["volumes"].(map[string]any)
	for _, v := range get(services, "iggy", "volumes").([]any) {
		if name, _, _ := strings.Cut(v.(string), ":"); volumes == nil || !hasKey(volumes, name) {
			t.Errorf("iggy volume %q is not declared", name)
		}
	}
	for _, n := range []string{"kgate1", "kgate2", "kgate3"} {
		s := services[n]
		if s == nil {
			t.Fatalf("compose.yaml has no %s service", n)
		}
		if test, _ := get(s, "healthcheck", "test").([]any); len(test) < 3 || test[2] != "health" {
			t.Errorf("%s: health check %v, want kgate health", n, get(s, "healthcheck", "test"))
		}
		vols, _ := get(s, "volumes").([]any)
		if len(vols) != 1 || !strings.HasSuffix(vols[0].(string), ":/var/lib/kgate") {
			t.Errorf("%s: volumes %v, want one on /var/lib/kgate", n, vols)
		} else if name, _, _ := strings.Cut(vols[0].(string), ":"); !hasKey(volumes, name) {
			t.Errorf("%s: volume %q is not declared", n, name)
		}
		env, _ := get(s, "environment").(map[string]any)
		if env["KGATE_BACKEND"] != "iggy" || env["KGATE_IGGY_ADDR"] != "iggy:8090" {
			t.Errorf("%s: backend %v at %v, want iggy at iggy:8090", n, env["KGATE_BACKEND"], env["KGATE_IGGY_ADDR"])
		}
		if env["KGATE_NODE_ID"] != strings.TrimPrefix(n, "kgate") || !strings.HasPrefix(env["KGATE_ADVERTISE_RAFT_ADDR"].(string), n+":") {
			t.Errorf("%s: node id %v, advertised raft %v", n, env["KGATE_NODE_ID"], env["KGATE_ADVERTISE_RAFT_ADDR"])
		}
		if get(s, "depends_on", "iggy", "condition") != "service_healthy" {
			t.Errorf("%s: must wait for a healthy iggy", n)
		}
	}
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// TestDockerfile: the Dockerfile's instructions are well formed, it is
// multi-stage with a non-root final stage, and its build command, run
// here, gives a static binary.
func TestDockerfile(t *testing.T) {
	known := map[string]bool{"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "EXPOSE": true, "ENV": true, "ADD": true,
		"COPY": true, "ENTRYPOINT": true, "VOLUME": true, "USER": true, "WORKDIR": true, "ARG": true, "ONBUILD": true,
		"STOPSIGNAL": true, "HEALTHCHECK": true, "SHELL": true}
	var instrs [][2]string
	sc := bufio.NewScanner(strings.NewReader(read(t, "docker/Dockerfile")))
	cont := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, cont = cont+line, ""
		kw, rest, _ := strings.Cut(line, " ")
		if !known[strings.ToUpper(kw)] {
			t.Errorf("Dockerfile: unknown instruction %q", kw)
		}
		instrs = append(instrs, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
	}
	var froms []int
	build := ""
	for i, in := range instrs {
		switch in[0] {
		case "FROM":
			froms = append(froms, i)
		case "RUN":
			if strings.Contains(in[1], "go build") {
				build = in[1]
			}
		}
	}
	if len(froms) < 2 {
		t.Fatal("Dockerfile: want a multi-stage build")
	}
	final := instrs[froms[len(froms)-1]:]
	if !strings.Contains(final[0][1], "distroless/static") {
		t.Errorf("final stage FROM %s: want a static distroless base", final[0][1])
	}
	user := ""
	for _, in := range final {
		if in[0] == "USER" {
			user = in[1]
		}
	}
	if user == "" || user == "root" || strings.HasPrefix(user, "0") {
		t.Errorf("final stage USER %q: must be non-root", user)
	}
	if !strings.HasPrefix(build, "CGO_ENABLED=0 go build") || !strings.Contains(build, "-o /out/kgate") {
		t.Fatalf("Dockerfile build step %q", build)
	}
	// Run the same build (output redirected) and check the result is static.
	out := filepath.Join(t.TempDir(), "kgate")
	cmd := exec.Command("sh", "-c", strings.Replace(build, "-o /out/kgate", "-o "+out, 1))
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build step: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the Dockerfile's binary is dynamically linked (%v)", p.Type)
		}
	}
	v, err := exec.Command(out, "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "kgate v0.0.0-test ") {
		t.Errorf("kgate version of the Dockerfile's build: %q, %v (the -X version stamp)", v, err)
	}
}
