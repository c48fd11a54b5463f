package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgate/kgate/cluster"
)

// TestSnapshotSaveAsksTheLeader: kgate snapshot save, pointed at a
// follower, finds the leader through /v1/cluster and saves the leader's
// snapshot (a follower may trail the leader's applied state).
func TestSnapshotSaveAsksTheLeader(t *testing.T) {
	data := bytes.Repeat([]byte("state"), 1000)
	meta := cluster.SnapshotMeta{ClusterID: "c0ffee", NodeID: 2, Index: 42, Term: 3, Version: 1, Size: int64(len(data))}
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/snapshot" {
			http.NotFound(w, r)
			return
		}
		cluster.WriteSnapshotFile(w, meta, bytes.NewReader(data))
	}))
	defer leader.Close()
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/cluster" {
			http.Error(w, "asked the follower for "+r.URL.Path, http.StatusTeapot)
			return
		}
		fmt.Fprintf(w, `{"cluster_id":"c0ffee","leader_id":2,"nodes":[{"id":1,"admin_addr":"127.0.0.1:1"},{"id":2,"admin_addr":%q}]}`,
			strings.TrimPrefix(leader.URL, "http://"))
	}))
	defer follower.Close()

	file := filepath.Join(t.TempDir(), "s.snap")
	var out, errOut bytes.Buffer
	if code := runSnapshot([]string{"save", file, "--admin", follower.URL}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if want := "saved snapshot of cluster c0ffee from node 2 (index 42, term 3, 5000 bytes)"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("output %q, want it to start with %q", out.String(), want)
	}
	var wantFile bytes.Buffer
	cluster.WriteSnapshotFile(&wantFile, meta, bytes.NewReader(data))
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, wantFile.Bytes()) {
		t.Fatalf("saved file differs from the leader's snapshot (%v)", err)
	}

	// A truncated download leaves no file behind.
	short := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster" {
			fmt.Fprintf(w, `{"leader_id":1,"nodes":[{"id":1,"admin_addr":%q}]}`, r.Host)
			return
		}
		var b bytes.Buffer
		cluster.WriteSnapshotFile(&b, meta, bytes.NewReader(data))
		w.Write(b.Bytes()[:b.Len()-10])
	}))
	defer short.Close()
	file2 := filepath.Join(t.TempDir(), "short.snap")
	if code := runSnapshot([]string{"save", file2, "--admin", short.URL}, &out, &errOut); code != 1 {
		t.Errorf("truncated snapshot: exit %d", code)
	}
	if _, err := os.Stat(file2); !os.IsNotExist(err) {
		t.Errorf("truncated snapshot left %s behind (%v)", file2, err)
	}
}

// TestVersionCommand: kgate version names the build and the Go version.
func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	if code := runVersion(&out); code != 0 || !strings.HasPrefix(out.String(), "kgate ") || !strings.Contains(out.String(), "(go1.") {
		t.Errorf("kgate version: exit %d, %q", code, out.String())
	}
}
