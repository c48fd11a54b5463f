package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A snapshot file (`kgate snapshot save`) is one header line naming the
// format, one line of JSON SnapshotMeta, then the Raft snapshot's bytes:
// the FSM's own stream, with every group, offset, producer id and (with
// the embedded log) every retained record.
const snapshotFileMagic = "kgate-snapshot 1\n"

// removeUnfinishedSnapshots deletes the temporary directories (NAME.tmp) of
// Raft snapshots that a crash interrupted. hashicorp/raft's file store
// skips them but never removes them, and each holds up to a full copy of
// the partition data (a snapshot received from a leader), or links that
// keep segment files retention has since deleted, so every crash during a
// snapshot would leave that much disk taken for good. Only the process holding the data directory's
// Raft log (opened first) may call it.
func removeUnfinishedSnapshots(raftDir string, log *slog.Logger) error {
	dir := filepath.Join(raftDir, "snapshots")
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range es {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("removing an unfinished snapshot: %w", err)
		}
		log.Warn("removed a snapshot that a crash left unfinished", "dir", path)
	}
	return nil
}

// SnapshotMeta describes a snapshot copied out of a node.
type SnapshotMeta struct {
	ClusterID string `json:"cluster_id"`
	NodeID    int32  `json:"node_id"` // the node it was taken on
	Index     uint64 `json:"index"`   // last Raft entry it covers
	Term      uint64 `json:"term"`
	Version   int    `json:"raft_snapshot_version"`
	Size      int64  `json:"size"` // bytes of snapshot data after the header
}

// OpenSnapshot takes a snapshot of the applied state and opens it; when
// nothing was applied since the latest snapshot, that one is opened. The
// caller closes the reader.
func (n *Node) OpenSnapshot() (SnapshotMeta, io.ReadCloser, error) {
	var (
		meta *raft.SnapshotMeta
		rc   io.ReadCloser
	)
	f := n.raft.Snapshot()
	err := f.Error()
	switch {
	case err == nil:
		meta, rc, err = f.Open()
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
		var list []*raft.SnapshotMeta
		if list, err = n.snaps.List(); err == nil {
			if len(list) == 0 {
				return SnapshotMeta{}, nil, errors.New("no snapshot: this node has applied nothing yet")
			}
			meta, rc, err = n.snaps.Open(list[0].ID)
		}
	}
	if err != nil {
		return SnapshotMeta{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	return SnapshotMeta{ClusterID: n.fsm.ClusterID(), NodeID: n.cfg.NodeID, Index: meta.Index, Term: meta.Term,
		Version: int(meta.Version), Size: meta.Size}, rc, nil
}

// WriteSnapshotFile writes the header of a snapshot file and then copies
// the snapshot data.
func WriteSnapshotFile(w io.Writer, meta SnapshotMeta, data io.Reader) error {
	line, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, snapshotFileMagic+string(line)+"\n"); err != nil {
		return err
	}
	n, err := io.Copy(w, data)
	if err != nil {
		return err
	}
	if n != meta.Size {
		return fmt.Errorf("snapshot: copied %d bytes, its metadata says %d", n, meta.Size)
	}
	return nil
}

// ReadSnapshotHeader reads a snapshot file's header; the rest of r is the
// data, meta.Size bytes.
func ReadSnapshotHeader(r *bufio.Reader) (SnapshotMeta, error) {
	var meta SnapshotMeta
	magic, err := r.ReadString('\n')
	if err != nil || magic != snapshotFileMagic {
		return meta, errors.New("not a kgate snapshot file (kgate snapshot save writes one)")
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return meta, fmt.Errorf("snapshot header: %w", err)
	}
	if err := json.Unmarshal(line, &meta); err != nil {
		return meta, fmt.Errorf("snapshot header: %w", err)
	}
	if meta.Size < 0 || meta.Index == 0 {
		return meta, fmt.Errorf("snapshot header: index %d size %d", meta.Index, meta.Size)
	}
	return meta, nil
}

// RestoreSnapshot seeds an empty data directory from a snapshot file: the
// node that then starts on it (with this node id and advertised Raft
// address) restores the snapshot's state and is the only voter of its
// cluster, which keeps the snapshot's cluster id. Further nodes join it
// with --join and empty data directories.
func RestoreSnapshot(dataDir string, nodeID int32, raftAddr string, snapshotFile io.Reader) (SnapshotMeta, error) {
	if ents, err := os.ReadDir(dataDir); err == nil && len(ents) > 0 {
		return SnapshotMeta{}, fmt.Errorf("data directory %s is not empty: restore only into a new node's data directory", dataDir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return SnapshotMeta{}, err
	}
	br := bufio.NewReaderSize(snapshotFile, 1<<20)
	meta, err := ReadSnapshotHeader(br)
	if err != nil {
		return meta, err
	}
	dir := filepath.Join(dataDir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return meta, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		return meta, err
	}
	self := raft.Configuration{Servers: []raft.Server{{
		ID: raft.ServerID(strconv.Itoa(int(nodeID))), Address: raft.ServerAddress(raftAddr), Suffrage: raft.Voter,
	}}}
	// The file store still writes the legacy peer list, encoded by a
	// transport; an in-memory one encodes addresses as the TCP one does.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr))
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersion(meta.Version), meta.Index, meta.Term, self, meta.Index, trans)
	if err != nil {
		return meta, err
	}
	n, err := io.Copy(sink, io.LimitReader(br, meta.Size))
	if err == nil && n != meta.Size {
		err = fmt.Errorf("snapshot file truncated: %d of %d bytes", n, meta.Size)
	}
	if err == nil {
		if extra, _ := br.Peek(1); len(extra) > 0 {
			err = errors.New("snapshot file has bytes after its data")
		}
	}
	if err != nil {
		sink.Cancel()
		os.RemoveAll(dir)
		return meta, err
	}
	return meta, sink.Close()
}
