package iggytest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/kgate/kgate/gateway/iggy"
)

// SDKCheck runs test/iggy-sdk-check: a small program on the official Iggy
// Rust SDK (iggy 0.11.0 for the current dialect, 0.10.0 for the legacy
// one). It holds the double, and kgate's Iggy topics, to what Iggy's own
// clients send and expect. Rust (cargo) must be installed; the first run
// builds the program, later runs only check it is up to date.
type SDKCheck struct {
	bin string
}

// BuildSDKCheck builds the check program for dialect with cargo.
func BuildSDKCheck(ctx context.Context, dialect iggy.Dialect) (*SDKCheck, error) {
	dir, err := sdkCheckDir()
	if err != nil {
		return nil, err
	}
	cargo, err := findCargo()
	if err != nil {
		return nil, err
	}
	feature := "v011"
	if dialect == iggy.Legacy {
		feature = "v010"
	}
	name := "iggy-sdk-check-" + feature
	cmd := exec.CommandContext(ctx, cargo, "build", "--locked", "--quiet", "--features", feature, "--bin", name)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cargo build %s: %w\n%s", name, err, out.String())
	}
	return &SDKCheck{bin: filepath.Join(dir, "target", "debug", name)}, nil
}

// findCargo looks on PATH, then where rustup installs it.
func findCargo() (string, error) {
	if p, err := exec.LookPath("cargo"); err == nil {
		return p, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cargo", "bin", "cargo")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("cargo not found: install Rust with rustup; the official Iggy SDK checks need it")
}

// sdkCheckDir finds test/iggy-sdk-check from this source file.
func sdkCheckDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("iggytest: cannot locate the source tree")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "test", "iggy-sdk-check"), nil
}

// Check runs every command kgate relies on through the SDK on a stream
// of its own, and fails on the first reply the SDK does not accept.
func (s *SDKCheck) Check(ctx context.Context, addr, user, password string) error {
	_, err := s.run(ctx, addr, user, password, "check")
	return err
}

// Produce sends count messages with payloads prefix0, prefix1, … to the
// 0-based partition of stream/topic, in one batch, as an Iggy application
// would.
func (s *SDKCheck) Produce(ctx context.Context, addr, user, password, stream, topic string, partition, count int, prefix string) error {
	_, err := s.run(ctx, addr, user, password, "produce", stream, topic,
		strconv.Itoa(partition), strconv.Itoa(count), prefix)
	return err
}

// Consume polls the first count messages of the 0-based partition and
// returns their payloads.
func (s *SDKCheck) Consume(ctx context.Context, addr, user, password, stream, topic string, partition, count int) ([]string, error) {
	out, err := s.run(ctx, addr, user, password, "consume", stream, topic,
		strconv.Itoa(partition), strconv.Itoa(count))
	if err != nil {
		return nil, err
	}
	return outputLines(out), nil
}

// outputLines is what the program printed, a line each, without its
// closing "iggy-sdk-check: OK".
func outputLines(out string) []string {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "iggy-sdk-check: OK" {
		lines = lines[:n-1]
	}
	return lines
}

// VolumePayload is message i's payload in the volume modes, as
// test/iggy-sdk-check computes it: "prefixi:" padded with letters to
// 8 + (i*7919)%2000 bytes.
func VolumePayload(prefix string, i int) []byte {
	p := []byte(prefix + strconv.Itoa(i) + ":")
	want := 8 + (i*7919)%2000
	for len(p) < want {
		p = append(p, byte('a'+len(p)%26))
	}
	return p
}

// ProduceVolume sends messages first to first+count-1 (payloads
// VolumePayload(prefix, i)) to the 0-based partition, in batches of 1,000.
func (s *SDKCheck) ProduceVolume(ctx context.Context, addr, user, password, stream, topic string, partition, first, count int, prefix string) error {
	_, err := s.run(ctx, addr, user, password, "produce-volume", stream, topic,
		strconv.Itoa(partition), strconv.Itoa(first), strconv.Itoa(count), prefix)
	return err
}

// PolledDigest is what the SDK read at one offset: the payload's length
// and FNV-1a 64 hash.
type PolledDigest struct {
	Offset uint64
	Len    int
	Hash   uint64
}

// ConsumeVolume polls count messages of the 0-based partition from offset
// from and returns each one's digest, in offset order (the program checks
// that offsets follow each other).
func (s *SDKCheck) ConsumeVolume(ctx context.Context, addr, user, password, stream, topic string, partition, from, count int) ([]PolledDigest, error) {
	out, err := s.run(ctx, addr, user, password, "consume-volume", stream, topic,
		strconv.Itoa(partition), strconv.Itoa(from), strconv.Itoa(count))
	if err != nil {
		return nil, err
	}
	var ds []PolledDigest
	for _, line := range outputLines(out) {
		var d PolledDigest
		if _, err := fmt.Sscanf(line, "%d %d %x", &d.Offset, &d.Len, &d.Hash); err != nil {
			return nil, fmt.Errorf("iggy-sdk-check consume-volume: line %q: %w", line, err)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

func (s *SDKCheck) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("iggy-sdk-check %s: %w\n%s%s", args[3], err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}
