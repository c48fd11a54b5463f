package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestQuickstart runs the README's quickstart exactly as written: `make run`,
// then every command of the block that follows it, against the three-node
// cluster it starts on the README's fixed loopback ports. It runs in a
// private network namespace (so those ports cannot collide with anything
// else on the machine) and a private pid namespace (so nothing it starts
// outlives it), in a copy of the repository's layout whose ./kgate-data and
// ./bin are its own.
//
// It checks what the README promises: the consumer prints the record
// produced before it started, make run reports the killed leader and keeps
// the other two nodes serving, and the consumer prints the record produced
// after the kill. It then produces to a new topic through a follower.
func TestQuickstart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestQuickstart needs root for its network namespace (unshare); run it as root")
	}
	for _, tool := range []string{"kcat", "curl", "jq", "make", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: %s", tool, installHint)
		}
	}
	root := repoRoot(t)
	readme := readFile(t, filepath.Join(root, "README.md"))
	start := shBlockAfter(t, readme, "## Quickstart", 0)
	if len(start) != 1 || start[0] != "make run" {
		t.Fatalf("README quickstart starts with %q, the test expects exactly `make run`", start)
	}
	cmds := shBlockAfter(t, readme, "## Quickstart", 1)

	farm := t.TempDir()
	mirrorRepo(t, root, farm)
	script := quickstartScript(t, cmds)
	if err := os.WriteFile(filepath.Join(farm, "quickstart.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "quickstart.sh")
	cmd.Dir = farm
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL, // the pid namespace dies with its first process
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("quickstart script output:\n%s", out)
		for _, f := range []string{"run.out", "consumer.out", "consumer.err", "kgate-data/node1/kgate.log", "kgate-data/node2/kgate.log", "kgate-data/node3/kgate.log"} {
			b, _ := os.ReadFile(filepath.Join(farm, f))
			t.Logf("--- %s (tail):\n%s", f, tail(string(b), 3000))
		}
		t.Fatalf("quickstart failed: %v", err)
	}
	t.Logf("quickstart script output:\n%s", out)
}

// quickstartScript turns the README's commands into one bash script: the
// long-running consumer goes to the background, and after the commands whose
// effect the README states the script waits (bounded) for that effect.
func quickstartScript(t *testing.T, cmds []string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`set -euo pipefail
ip link set lo up
await() { # await PATTERN FILE: wait up to 60 s for PATTERN in FILE
  for _ in $(seq 600); do grep -q -- "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$1' in $2"; return 1
}
setsid make run >run.out 2>&1 &
runpid=$!
finish() {
  kill -INT -- "-$runpid" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$runpid" 2>/dev/null || break; sleep 0.1; done
}
trap finish EXIT
await '^bootstrap servers' run.out
`)
	var sawConsumer, sawKill, sawLater bool
	for _, c := range cmds {
		fmt.Fprintf(&b, "echo %s\n", shellQuote("+ "+c))
		switch {
		case strings.Contains(c, " -G "):
			fmt.Fprintf(&b, "( %s ) >consumer.out 2>consumer.err &\nconsumerpid=$!\n", c)
			b.WriteString("await '^hello$' consumer.out\n")
			sawConsumer = true
		case strings.HasPrefix(c, "kill -9"):
			b.WriteString(c + "\n")
			b.WriteString("await \"^kgate node $leader (pid [0-9]*) exited .* 2 node(s) still running\" run.out\n")
			sawKill = true
		case sawKill && strings.Contains(c, "'world'"):
			b.WriteString(c + "\n")
			b.WriteString("await '^world$' consumer.out\n")
			sawLater = true
		default:
			b.WriteString(c + "\n")
		}
	}
	if !sawConsumer || !sawKill || !sawLater {
		t.Fatalf("README quickstart block changed shape (consumer %v, kill -9 %v, produce after the kill %v); update TestQuickstart", sawConsumer, sawKill, sawLater)
	}
	// The two survivors serve: both ready, one of them leads, and a new
	// topic can be created and written through the follower.
	b.WriteString(`
echo '+ (test) the survivors serve; produce through the follower'
survivors=""
for i in 1 2 3; do [ "$i" = "$leader" ] || survivors+=" $i"; done
newleader=""
for _ in $(seq 600); do
  newleader=$(curl -s "127.0.0.1:939${survivors:1:1}/v1/cluster" | jq -r '.leader_id // empty')
  [ -n "$newleader" ] && [ "$newleader" != "$leader" ] && break
  sleep 0.1
done
[ -n "$newleader" ] && [ "$newleader" != "$leader" ] || { echo "no new leader"; exit 1; }
follower=""
for i in $survivors; do
  curl -fs "127.0.0.1:939$i/readyz" >/dev/null || { echo "node $i not ready"; exit 1; }
  [ "$i" = "$newleader" ] || follower=$i
done
echo "old leader $leader, new leader $newleader, follower $follower"
echo 'via-follower' | kcat -b "127.0.0.1:909$((2 * follower))" -t demo-follower -P
kcat -b "127.0.0.1:909$((2 * follower))" -C -t demo-follower -o beginning -c 1 -e -m 30 | grep -qx via-follower
kill -0 "$consumerpid" || { echo "the consumer exited"; exit 1; }
echo "quickstart ok"
`)
	return b.String()
}

// shBlockAfter returns the lines of the n-th (0-based) ```sh block after the
// heading in markdown.
func shBlockAfter(t *testing.T, markdown, heading string, n int) []string {
	t.Helper()
	i := strings.Index(markdown, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("heading %q not found", heading)
	}
	sc := bufio.NewScanner(strings.NewReader(markdown[i:]))
	var lines []string
	in, seen := false, 0
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !in && l == "```sh":
			in = true
		case in && l == "```":
			if seen == n {
				return lines
			}
			in, lines = false, nil
			seen++
		case in && seen == n:
			lines = append(lines, l)
		}
	}
	t.Fatalf("no %d-th ```sh block after %q", n, heading)
	return nil
}

// mirrorRepo makes dst look like the repository for `make run`: every
// top-level entry is a symlink except bin and kgate-data, which dst owns.
func mirrorRepo(t *testing.T, root, dst string) {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch e.Name() {
		case "bin", "kgate-data", ".git":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
