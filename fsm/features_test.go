package fsm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An entry this binary cannot decode halts the FSM: the entry is not
// counted as applied, nothing after it is applied, no snapshot can be
// taken, and the error names the index and the command.
func TestEntryThisBinaryCannotApplyHalts(t *testing.T) {
	appendEntry := Encode(&Append{NowMs: 1, Batches: []Batch{{Topic: "t", Data: []byte{1, 2, 3}}}})
	for _, tc := range []struct {
		name    string
		entry   []byte
		command string
	}{
		{"unknown kind, old form", []byte{99, 1, 2}, "unknown kind 99 v1"},
		{"unknown kind, versioned form", []byte{versionedEntry, 1, 99, 1, 2}, "unknown kind 99 v1"},
		{"unknown version", append([]byte{versionedEntry, 7, byte(KindDeleteTopic)}, 1, 't'), "DeleteTopic v7"},
		{"truncated", appendEntry[:len(appendEntry)-2], "Append v1"},
		{"trailing bytes", append(Encode(&DeleteTopic{Name: "t"}), 0), "DeleteTopic v1"},
		{"empty", []byte{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openFSM(t, t.TempDir())
			if r := f.Apply(1, Encode(&CreateTopic{Name: "t", Partitions: 1})); r.(*CodeResult).Code != 0 {
				t.Fatalf("create topic: %+v", r)
			}
			h, ok := f.Apply(2, tc.entry).(*HaltError)
			if !ok {
				t.Fatalf("Apply of %x did not halt", tc.entry)
			}
			if h.Index != 2 || h.Command != tc.command || !strings.Contains(h.Error(), "entry 2") {
				t.Fatalf("halt error %q (index %d, command %q), want index 2 and command %q", h, h.Index, h.Command, tc.command)
			}
			if f.Applied() != 1 {
				t.Fatalf("applied index %d after a halt at 2, want 1", f.Applied())
			}
			if _, ok := f.Apply(3, Encode(&CreateTopic{Name: "u", Partitions: 1})).(*HaltError); !ok || f.Topic("u") != nil {
				t.Fatal("a halted FSM applied a later entry")
			}
			if _, err := f.Snapshot(); !errors.As(err, &h) {
				t.Fatalf("snapshot of a halted FSM: %v", err)
			}
		})
	}
}

// A local I/O error while applying halts the node instead of giving this
// replica a result the others did not get.
func TestIOErrorWhileApplyingHalts(t *testing.T) {
	dir := t.TempDir()
	f := openFSM(t, dir)
	topics := filepath.Join(dir, "topics")
	if err := os.RemoveAll(topics); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(topics, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, ok := f.Apply(1, Encode(&CreateTopic{Name: "t", Partitions: 1})).(*HaltError)
	if !ok {
		t.Fatal("a create topic that could not write its partition did not halt")
	}
	if h.Command != "CreateTopic v1" || !strings.Contains(h.Error(), "create topic t") {
		t.Fatalf("halt error: %v", h)
	}
}

// Entries written before feature levels ([kind][body]) decode as version 1;
// Encode writes [0][version][kind][body]; Admit proposes the old form while
// the cluster is at the baseline level, so earlier releases can apply it.
func TestEntryFormsAndAdmit(t *testing.T) {
	legacy := []byte{byte(KindDeleteTopic), 1, 't'}
	c, err := Decode(legacy)
	if err != nil || c.(*DeleteTopic).Name != "t" {
		t.Fatalf("decode of an old-form entry: %v %+v", err, c)
	}
	entry := Encode(&DeleteTopic{Name: "t"})
	if want := []byte{versionedEntry, 1, byte(KindDeleteTopic), 1, 't'}; !bytes.Equal(entry, want) {
		t.Fatalf("Encode = %x, want %x", entry, want)
	}
	f := openFSM(t, t.TempDir())
	got, err := f.Admit(entry)
	if err != nil || !bytes.Equal(got, legacy) {
		t.Fatalf("Admit at the baseline level = %x, %v; want the old form %x", got, err, legacy)
	}
	f.Apply(1, Encode(&SetFeatureLevel{Level: LevelVersioned}))
	if got, err := f.Admit(entry); err != nil || !bytes.Equal(got, entry) {
		t.Fatalf("Admit at level %d = %x, %v; want the versioned form", f.FeatureLevel(), got, err)
	}
}

// testKind registers a command kind introduced at a level above this
// binary's, as the next release would add one.
func testKind(t *testing.T, since ...Level) Kind {
	const k Kind = 250
	commands[k] = row("TestCommand", since,
		func(d *dec, _ uint8) *testCommand { return &testCommand{V: d.i32()} },
		func(*FSM, *testCommand) any { return &CodeResult{} })
	t.Cleanup(func() { delete(commands, k) })
	return k
}

type testCommand struct{ V int32 }

func (*testCommand) Kind() Kind      { return 250 }
func (c *testCommand) encode(e *enc) { e.i32(c.V) }

// A command kind above the cluster's feature level is refused before it is
// proposed, with an error the gateway maps to a Kafka code; the FSM itself
// refuses it the same way (a deterministic result, not a halt).
func TestNewKindGatedByFeatureLevel(t *testing.T) {
	testKind(t, LatestLevel+1)
	f := openFSM(t, t.TempDir())
	f.Apply(1, Encode(&SetFeatureLevel{Level: LatestLevel}))
	_, err := f.Admit(Encode(&testCommand{V: 1}))
	var fe *FeatureError
	if !errors.Is(err, ErrFeatureDisabled) || !errors.As(err, &fe) || fe.Need != LatestLevel+1 || fe.Cluster != LatestLevel {
		t.Fatalf("Admit of a kind above the level: %v", err)
	}
	if _, ok := f.Apply(2, Encode(&testCommand{V: 1})).(*FeatureError); !ok {
		t.Fatal("Apply of a kind above the level was not refused")
	}
	if f.Halted() != nil || f.Applied() != 2 {
		t.Fatalf("a refused command halted the FSM (%v) or was not counted (applied %d)", f.Halted(), f.Applied())
	}
}

// A new version of an existing kind is gated like a new kind.
func TestNewVersionGatedByFeatureLevel(t *testing.T) {
	testKind(t, LevelBaseline, LatestLevel+1)
	f := openFSM(t, t.TempDir())
	if _, err := f.Admit(Encode(&testCommand{V: 1})); !errors.Is(err, ErrFeatureDisabled) {
		t.Fatalf("Admit of version 2 at level %d: %v", f.FeatureLevel(), err)
	}
}

// SetFeatureLevel only raises the level, survives snapshot and checkpoint,
// and halts a binary that does not support the new level.
func TestSetFeatureLevel(t *testing.T) {
	dir := t.TempDir()
	f := openFSM(t, dir)
	f.Apply(1, Encode(&InitCluster{ClusterID: "c"}))
	if f.FeatureLevel() != LevelBaseline {
		t.Fatalf("a new FSM is at level %d", f.FeatureLevel())
	}
	f.Apply(2, Encode(&SetFeatureLevel{Level: LevelVersioned}))
	f.Apply(3, Encode(&SetFeatureLevel{Level: LevelBaseline}))
	if f.FeatureLevel() != LevelVersioned {
		t.Fatalf("level %d after raising to %d and asking for %d", f.FeatureLevel(), LevelVersioned, LevelBaseline)
	}
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Persist(f, &buf); err != nil {
		t.Fatal(err)
	}
	s.Release()
	restored := openFSM(t, t.TempDir())
	if err := restored.Restore(&buf); err != nil || restored.FeatureLevel() != LevelVersioned {
		t.Fatalf("restored level %d (%v), want %d", restored.FeatureLevel(), err, LevelVersioned)
	}
	f.Close()
	reopened := openFSM(t, dir) // from the checkpoint Persist wrote
	if reopened.FeatureLevel() != LevelVersioned {
		t.Fatalf("level %d after reopening, want %d", reopened.FeatureLevel(), LevelVersioned)
	}
	if _, ok := reopened.Apply(4, Encode(&SetFeatureLevel{Level: LatestLevel + 1})).(*HaltError); !ok {
		t.Fatal("a level above this binary's did not halt")
	}
}
