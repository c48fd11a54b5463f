package cluster

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// serve answers every RPC that reaches trans's consumer with answer, until
// stop is closed.
func serve(t *testing.T, trans raft.Transport, stop <-chan struct{}, answer func(raft.RPC)) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case rpc := <-trans.Consumer():
				answer(rpc)
			case <-stop:
				return
			}
		}
	}()
	return done
}

// transportPair is a raftTransport receiving and hashicorp/raft's own
// NetworkTransport sending, both closed when the test ends.
func transportPair(t *testing.T) (*raftTransport, *raft.NetworkTransport) {
	t.Helper()
	recv, _, err := tcpTransport("127.0.0.1:0", nil, hclog.NewNullLogger(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.Close() })
	send, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Close() })
	return recv, send
}

// The inbound side of raftTransport against hashicorp/raft's own
// NetworkTransport as the sender (a leader of any release): every RPC kind
// arrives whole — entries larger than maxInitLen too — and every answer,
// error included, gets back.
func TestRaftTransportTalksWithNetworkTransport(t *testing.T) {
	recv, send := transportPair(t)

	entry := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	entries := []*raft.Log{
		{Index: 7, Term: 2, Type: raft.LogCommand, Data: entry(100, 1)},
		{Index: 8, Term: 2, Type: raft.LogCommand, Data: entry(1<<20+61, 2)},
		{Index: 9, Term: 2, Type: raft.LogCommand, Data: entry(3*maxInitLen+5, 3), Extensions: entry(10, 4)},
	}
	snapshots := make(chan []byte, 1)
	stop := make(chan struct{})
	served := serve(t, recv, stop, func(rpc raft.RPC) {
		switch c := rpc.Command.(type) {
		case *raft.AppendEntriesRequest:
			if len(c.Entries) != len(entries) {
				rpc.Respond(nil, errors.New("wrong entry count"))
				return
			}
			for i, e := range c.Entries {
				w := entries[i]
				if e.Index != w.Index || e.Term != w.Term || e.Type != w.Type || !bytes.Equal(e.Data, w.Data) || !bytes.Equal(e.Extensions, w.Extensions) {
					rpc.Respond(nil, errors.New("entry differs"))
					return
				}
			}
			rpc.Respond(&raft.AppendEntriesResponse{Term: c.Term, LastLog: c.Entries[len(c.Entries)-1].Index, Success: true}, nil)
		case *raft.RequestVoteRequest:
			rpc.Respond(&raft.RequestVoteResponse{Term: c.Term, Granted: true}, nil)
		case *raft.RequestPreVoteRequest:
			rpc.Respond(nil, errors.New("no pre-vote today"))
		case *raft.TimeoutNowRequest:
			rpc.Respond(&raft.TimeoutNowResponse{RPCHeader: raft.RPCHeader{ID: []byte("f")}}, nil)
		case *raft.InstallSnapshotRequest:
			b, err := io.ReadAll(rpc.Reader)
			snapshots <- b
			rpc.Respond(&raft.InstallSnapshotResponse{Term: c.Term, Success: err == nil}, nil)
		default:
			rpc.Respond(nil, errors.New("unexpected rpc"))
		}
	})
	defer func() { close(stop); <-served }()

	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"), Addr: []byte(send.LocalAddr())}
	to := recv.LocalAddr()
	var ar raft.AppendEntriesResponse
	if err := send.AppendEntries("f", to, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 2, PrevLogEntry: 6, PrevLogTerm: 1, Entries: entries}, &ar); err != nil {
		t.Fatal(err)
	}
	if !ar.Success || ar.LastLog != 9 || ar.Term != 2 {
		t.Fatalf("append answer %+v", ar)
	}
	// The same through the pipeline, as a leader replicates.
	p, err := send.AppendEntriesPipeline("f", to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{RPCHeader: hdr, Term: 2, PrevLogEntry: 6, PrevLogTerm: 1, Entries: entries}, &raft.AppendEntriesResponse{}); err != nil {
		t.Fatal(err)
	}
	if f := <-p.Consumer(); f.Error() != nil || !f.Response().Success {
		t.Fatalf("pipelined append: %v %+v", f.Error(), f.Response())
	}
	p.Close()

	var vr raft.RequestVoteResponse
	if err := send.RequestVote("f", to, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 3}, &vr); err != nil || !vr.Granted || vr.Term != 3 {
		t.Fatalf("vote: %v %+v", err, vr)
	}
	var pr raft.RequestPreVoteResponse
	if err := send.RequestPreVote("f", to, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 3}, &pr); err == nil || err.Error() != "no pre-vote today" {
		t.Fatalf("pre-vote error: %v", err)
	}
	var tr raft.TimeoutNowResponse
	if err := send.TimeoutNow("f", to, &raft.TimeoutNowRequest{RPCHeader: hdr}, &tr); err != nil || string(tr.ID) != "f" {
		t.Fatalf("timeout now: %v %+v", err, tr)
	}
	data := entry(700_000, 5)
	var sr raft.InstallSnapshotResponse
	if err := send.InstallSnapshot("f", to, &raft.InstallSnapshotRequest{RPCHeader: hdr, Term: 4, Size: int64(len(data))}, &sr, bytes.NewReader(data)); err != nil || !sr.Success {
		t.Fatalf("snapshot: %v %+v", err, sr)
	}
	if snapshot := <-snapshots; !bytes.Equal(snapshot, data) {
		t.Fatalf("snapshot data: %d bytes arrived of %d, or different", len(snapshot), len(data))
	}
}

// A heartbeat goes to the heartbeat handler once one is set, not through
// the consumer; CloseStreams drops inbound connections; Close returns while
// a sender's connection is still open.
func TestRaftTransportHeartbeatAndClose(t *testing.T) {
	recv, _, err := tcpTransport("127.0.0.1:0", nil, hclog.NewNullLogger(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	send, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	recv.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 77, Success: true}, nil)
	})
	followerOf5 := func(term uint64) bool { return term == 5 }
	recv.sameTermFollower.Store(&followerOf5)
	stop := make(chan struct{})
	served := serve(t, recv, stop, func(rpc raft.RPC) { rpc.Respond(nil, errors.New("heartbeat reached the consumer")) })
	defer func() { close(stop); <-served }()

	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"),
		Addr: []byte(send.LocalAddr())}, Term: 5}
	var resp raft.AppendEntriesResponse
	if err := send.AppendEntries("f", recv.LocalAddr(), hb, &resp); err != nil || resp.Term != 77 {
		t.Fatalf("heartbeat: %v %+v", err, resp)
	}
	// CloseStreams drops the sender's connection: the RPC on its pooled one
	// fails, the next dials again.
	recv.CloseStreams()
	if err := send.AppendEntries("f", recv.LocalAddr(), hb, &raft.AppendEntriesResponse{}); err == nil {
		t.Fatal("a heartbeat on a connection CloseStreams closed got an answer")
	}
	resp = raft.AppendEntriesResponse{}
	if err := send.AppendEntries("f", recv.LocalAddr(), hb, &resp); err != nil || resp.Term != 77 {
		t.Fatalf("heartbeat after CloseStreams: %v %+v", err, resp)
	}
	closed := make(chan error, 1)
	go func() { closed <- recv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with a connection open")
	}
}

// A heartbeat takes Raft's fast path (the handler, on the connection's
// goroutine) only while the node follows in the heartbeat's term. One that
// would step a leader down, or move a follower to a newer term, goes
// through Raft's main loop (the consumer), which alone may change the term
// a leader writes its entries with (hashicorp/raft#695); so does every
// heartbeat before Raft runs.
func TestHeartbeatThatChangesTermOrRoleGoesThroughTheMainLoop(t *testing.T) {
	recv, send := transportPair(t)
	const fast, main = 1, 2
	recv.SetHeartbeatHandler(func(rpc raft.RPC) { rpc.Respond(&raft.AppendEntriesResponse{Term: fast}, nil) })
	stop := make(chan struct{})
	served := serve(t, recv, stop, func(rpc raft.RPC) { rpc.Respond(&raft.AppendEntriesResponse{Term: main}, nil) })
	defer func() { close(stop); <-served }()
	via := func(term uint64) uint64 {
		t.Helper()
		hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"),
			Addr: []byte(send.LocalAddr())}, Term: term}
		var resp raft.AppendEntriesResponse
		if err := send.AppendEntries("f", recv.LocalAddr(), hb, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Term
	}
	if got := via(10); got != main {
		t.Fatalf("before Raft runs, a heartbeat went to the fast path")
	}
	role, current := raft.Leader, uint64(10)
	sameTermFollower := func(term uint64) bool { return role == raft.Follower && term == current }
	recv.sameTermFollower.Store(&sameTermFollower)
	if got := via(11); got != main {
		t.Fatalf("a heartbeat of a newer term to a leader went to the fast path")
	}
	role = raft.Follower
	if got := via(11); got != main {
		t.Fatalf("a heartbeat of a newer term to a follower went to the fast path")
	}
	if got := via(10); got != fast {
		t.Fatalf("a heartbeat of the follower's own term went through the main loop")
	}
}

// pausedReader is a snapshot source that yields head, then gives nothing
// more until resume is closed (a leader frozen mid-snapshot), then fails.
type pausedReader struct {
	head   *bytes.Reader
	resume <-chan struct{}
}

func (r *pausedReader) Read(p []byte) (int, error) {
	if r.head.Len() > 0 {
		return r.head.Read(p)
	}
	<-r.resume
	return 0, errors.New("sender gone")
}

// trickleReader yields its data a little at a time, with a gap before each
// piece: a slow sender that never goes quiet for long.
type trickleReader struct {
	data  []byte
	piece int
	gap   time.Duration
}

func (r *trickleReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.gap) // the pace of the data, not a synchronization
	n := copy(p[:min(len(p), r.piece)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// A leader that stops sending in the middle of a snapshot without closing
// the connection (frozen, or behind a link that drops packets) holds the
// follower's Raft loop in the snapshot's read for no longer than the idle
// limit: the read fails, the connection ends, and the loop goes on to
// votes and heartbeats. A slow sender that never goes quiet that long
// delivers a snapshot taking several times that limit in all.
func TestSnapshotFromAStalledSenderEndsAfterTheIdleLimit(t *testing.T) {
	const idle = 300 * time.Millisecond
	recv, _, err := tcpTransport("127.0.0.1:0", nil, hclog.NewNullLogger(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	recv.snapshotIdle.Store(int64(idle))
	send, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()

	type received struct {
		n   int64
		err error
	}
	got := make(chan received, 1)
	stop := make(chan struct{})
	served := serve(t, recv, stop, func(rpc raft.RPC) {
		c, ok := rpc.Command.(*raft.InstallSnapshotRequest)
		if !ok {
			rpc.Respond(nil, errors.New("unexpected rpc"))
			return
		}
		n, err := io.Copy(io.Discard, rpc.Reader) // as Raft's loop reads it
		got <- received{n, err}
		rpc.Respond(&raft.InstallSnapshotResponse{Term: c.Term, Success: err == nil}, nil)
	})
	defer func() { close(stop); <-served }()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"), Addr: []byte(send.LocalAddr())}

	resume := make(chan struct{})
	defer close(resume)
	sent := make(chan error, 1)
	go func() {
		src := &pausedReader{head: bytes.NewReader(make([]byte, 300<<10)), resume: resume}
		sent <- send.InstallSnapshot("f", recv.LocalAddr(), &raft.InstallSnapshotRequest{RPCHeader: hdr, Term: 4, Size: 4 << 20}, &raft.InstallSnapshotResponse{}, src)
	}()
	select {
	case r := <-got:
		if r.err == nil || r.n >= 4<<20 {
			t.Fatalf("a stalled snapshot read %d bytes with error %v, want a failed read", r.n, r.err)
		}
		if !errors.Is(r.err, os.ErrDeadlineExceeded) {
			t.Fatalf("stalled snapshot: %v, want the read deadline", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the snapshot read was still waiting for a stalled sender after 30 s")
	}

	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 13)
	}
	src := &trickleReader{data: data, piece: 4 << 10, gap: idle / 3} // 16 pieces: over five idle limits
	var sr raft.InstallSnapshotResponse
	if err := send.InstallSnapshot("f", recv.LocalAddr(), &raft.InstallSnapshotRequest{RPCHeader: hdr, Term: 4, Size: int64(len(data))}, &sr, src); err != nil || !sr.Success {
		t.Fatalf("slow snapshot: %v %+v", err, sr)
	}
	if r := <-got; r.err != nil || r.n != int64(len(data)) {
		t.Fatalf("slow snapshot: read %d of %d bytes, error %v", r.n, len(data), r.err)
	}
}

// A follower commits only entries an append has shown to be the leader's
// (Raft's paper: up to the append's last entry). Its log here runs past
// them, with the tail of a deposed leader of term 2; hashicorp/raft, given
// the leader's commit index as it came, would commit and apply that tail.
// The append reaches Raft with its commit index bounded, and once the
// leader's entries at those indexes arrive, a replaced tail is reported.
func TestAppendCommitsOnlyWhatItMatched(t *testing.T) {
	for _, replaced := range []bool{true, false} {
		logs := raft.NewInmemStore()
		for i := uint64(1); i <= 10; i++ {
			term := uint64(1)
			if i > 5 {
				term = 2
			}
			if err := logs.StoreLog(&raft.Log{Index: i, Term: term, Type: raft.LogCommand}); err != nil {
				t.Fatal(err)
			}
		}
		var out logSink
		recv, _, err := tcpTransport("127.0.0.1:0", nil, hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Warn}), nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var store raft.LogStore = logs
		recv.logs.Store(&store)
		send, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		commits := make(chan uint64, 2)
		stop := make(chan struct{})
		served := serve(t, recv, stop, func(rpc raft.RPC) {
			a := rpc.Command.(*raft.AppendEntriesRequest)
			commits <- a.LeaderCommitIndex
			rpc.Respond(&raft.AppendEntriesResponse{Term: a.Term, Success: true}, nil)
		})
		leaderTerm := uint64(2)
		if replaced {
			leaderTerm = 3
		}
		header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"), Addr: []byte(send.LocalAddr())}
		appendEntries := func(prev, prevTerm uint64, entries []*raft.Log, commit uint64) uint64 {
			req := &raft.AppendEntriesRequest{RPCHeader: header, Term: 3, PrevLogEntry: prev, PrevLogTerm: prevTerm,
				Entries: entries, LeaderCommitIndex: commit}
			if err := send.AppendEntries("f", recv.LocalAddr(), req, &raft.AppendEntriesResponse{}); err != nil {
				t.Fatal(err)
			}
			return <-commits
		}
		// Entries 4 and 5 match this log; the leader has committed up to 9.
		if c := appendEntries(3, 1, []*raft.Log{{Index: 4, Term: 1}, {Index: 5, Term: 1}}, 9); c != 5 {
			t.Fatalf("replaced=%v: commit index %d reached Raft, want 5 (the append's last entry)", replaced, c)
		}
		var next []*raft.Log
		for i := uint64(6); i <= 9; i++ {
			next = append(next, &raft.Log{Index: i, Term: leaderTerm})
		}
		if c := appendEntries(5, 1, next, 9); c != 9 {
			t.Fatalf("replaced=%v: commit index %d with the entries up to 9, want 9", replaced, c)
		}
		warned := out.contains("reached entries the leader had replaced")
		if warned != replaced {
			t.Errorf("replaced=%v: warning logged %v; log:\n%s", replaced, warned, out.String())
		}
		close(stop)
		<-served
		send.Close()
		recv.Close()
	}
}
