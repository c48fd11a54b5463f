package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// raftTransport is hashicorp/raft's NetworkTransport for everything this
// node sends, with the inbound side of its own. The wire format is the
// NetworkTransport's, byte for byte, so nodes with and without it work
// together; what differs is how an append's entries are decoded.
//
// NetworkTransport decodes with a msgpack handle of default options, which
// reads a byte string of n bytes in steps of 256 KiB, allocating a new
// slice at each step and copying everything read so far into it: a 1 MiB
// entry costs 2.5 MiB of zeroed allocations and 1.5 MiB of copies on top of
// the read. On followers that decoding was the largest share of their CPU.
// The handle here allocates entries of up to maxInitLen at once.
type raftTransport struct {
	*raft.NetworkTransport
	stream raft.StreamLayer // the real listener; the NetworkTransport gets a mute one
	log    hclog.Logger

	consumeCh chan raft.RPC
	hbMu      sync.Mutex
	hbFn      func(raft.RPC)
	// sameTermFollower reports whether this node is a follower in the
	// given term (set once Raft runs; nil until then): only then may a
	// heartbeat take Raft's fast path (fastHeartbeat).
	sameTermFollower atomic.Pointer[func(term uint64) bool]

	// snapshotIdle (nanoseconds) bounds the wait for the next bytes of a
	// snapshot being received (see idleReader); zero waits for as long as
	// the connection lives. Atomic: the node sets it once the transport
	// is already accepting.
	snapshotIdle atomic.Int64
	// logs is the node's Raft log, for boundCommit's record; set once it
	// is open.
	logs    atomic.Pointer[raft.LogStore]
	boundMu sync.Mutex
	bounded bounded

	// answered holds, per follower (raft.ServerID), when it last answered
	// an append or heartbeat of this node's (unix nanos, *atomic.Int64):
	// how a leader that steps down tells whether a majority had stopped
	// answering it (Node.CutOff).
	answered sync.Map

	// stopping, once the node closes it, ends retries of a failed append
	// (AppendEntries); nil until the node sets it (atomic: set after the
	// transport runs).
	stopping atomic.Pointer[<-chan struct{}]

	shutdown chan struct{}
	once     sync.Once
	wg       sync.WaitGroup // accept loop and connection handlers
	connMu   sync.Mutex
	conns    map[net.Conn]struct{}
}

// Raft's RPC type bytes (net_transport.go, unexported there).
const (
	rpcAppendEntries uint8 = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

const (
	// maxInitLen bounds what one decoded length may allocate up front (in
	// elements): entries of a 1 MiB Append fit in one allocation, and a
	// bogus length from a broken peer costs at most this many bytes (times
	// the element size for the entry list) before the bytes must arrive.
	maxInitLen = 2 << 20
	// As NetworkTransport's connReceiveBufferSize.
	recvBufferSize = 256 << 10
)

// snapshotIdleFor is how long a node waits for more of a snapshot whose
// sender went quiet: several heartbeat timeouts, at least two seconds, so
// that a slow but living sender is never cut off, while a follower whose
// leader froze or vanished mid-snapshot is back to voting within seconds.
func snapshotIdleFor(heartbeat time.Duration) time.Duration {
	return max(4*heartbeat, 2*time.Second)
}

// newRaftTransport makes the transport over stream; Close closes stream.
func newRaftTransport(stream raft.StreamLayer, log hclog.Logger) *raftTransport {
	t := &raftTransport{stream: stream, log: log, consumeCh: make(chan raft.RPC),
		shutdown: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	// For Raft's default heartbeat timeout, until the node sets its own.
	t.snapshotIdle.Store(int64(snapshotIdleFor(time.Second)))
	t.NetworkTransport = raft.NewNetworkTransportWithLogger(&muteStream{StreamLayer: stream, closed: make(chan struct{})}, 4, 10*time.Second, log)
	t.wg.Add(1)
	go t.listen() // owned by the transport: Close stops it
	return t
}

// muteStream is the stream as NetworkTransport sees it: it dials through
// it, but its Accept yields nothing until the transport shuts down, since
// raftTransport accepts and serves the inbound connections itself.
type muteStream struct {
	raft.StreamLayer
	once   sync.Once
	closed chan struct{}
}

func (s *muteStream) Accept() (net.Conn, error) {
	<-s.closed
	return nil, net.ErrClosed
}

func (s *muteStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.StreamLayer.Close()
}

func (t *raftTransport) Consumer() <-chan raft.RPC { return t.consumeCh }

func (t *raftTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	t.hbMu.Lock()
	t.hbFn = cb
	t.hbMu.Unlock()
}

// fastHeartbeat reports whether a heartbeat of term may go to Raft's
// heartbeat handler on this connection's goroutine instead of through
// Raft's main loop: only while this node follows in that term, where the
// handler changes nothing but the time of last contact.
//
// hashicorp/raft's handler, called beside its main loop, also steps a
// leader down to a newer term (hashicorp/raft#695): a leader paused with
// proposals queued woke to a heartbeat of the term that had replaced it,
// and its main loop, not yet told, wrote the queued proposals under that
// newer term. The new leader's entries at those indexes carried the same
// term, so Raft took the old leader's for its own and never replaced them:
// the old leader applied other commands there than the others did, and
// gave acknowledged records' offsets to other records (found by the chaos
// campaign's digests). A heartbeat that changes a term or a role now waits
// for the main loop, which handles it between two proposals.
func (t *raftTransport) fastHeartbeat(term uint64) bool {
	f := t.sameTermFollower.Load()
	return f != nil && (*f)(term)
}

// Close stops sending (NetworkTransport, which closes the stream), then
// the accept loop and every inbound connection, and waits for them.
func (t *raftTransport) Close() error {
	t.once.Do(func() { close(t.shutdown) })
	err := t.NetworkTransport.Close()
	t.closeInbound()
	t.wg.Wait()
	return err
}

// isHeartbeat reports whether an append is one of Raft's heartbeats: a
// term and a leader, nothing else.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	leaderAddr := req.RPCHeader.Addr
	if len(leaderAddr) == 0 {
		leaderAddr = req.Leader // older leaders set only this
	}
	return req.Term != 0 && leaderAddr != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// Retries of a failed append (see AppendEntries).
const (
	appendRetryFor   = 5 * time.Second
	appendRetryEvery = 100 * time.Millisecond
)

// AppendEntries sends an append to a follower. One that fails is tried
// again every appendRetryEvery for up to appendRetryFor (Raft's appends
// are idempotent) before the error goes back to Raft: hashicorp/raft
// waits before each new attempt at a follower that failed n times in a
// row, 10 ms doubling per failure up to 10.24 s, so a follower back from a
// cut or a restart after a few seconds of fast failures waited up to 10 s
// more for its entries (in-process: 5.7 s after a 15 s cut), and meanwhile
// the leader's majority had no room for another fault (the fault campaign:
// a follower killed 3 s after another's cut healed stopped every commit
// for the 9 s it was down). Retried here, a failure takes up to
// appendRetryFor, the count grows that much slower, and a follower that
// answers again is sent its entries within appendRetryEvery. Heartbeats
// are not retried: Raft's own backoff for them stops at half the heartbeat
// timeout.
func (t *raftTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.noteAnswer(id)
	}
	if err == nil || isHeartbeat(args) {
		return err
	}
	var stopping <-chan struct{}
	if p := t.stopping.Load(); p != nil {
		stopping = *p
	}
	retry := time.NewTicker(appendRetryEvery)
	defer retry.Stop()
	for until := time.Now().Add(appendRetryFor); time.Now().Before(until); {
		select {
		case <-retry.C:
		case <-stopping:
			return err
		case <-t.shutdown:
			return err
		}
		*resp = raft.AppendEntriesResponse{}
		if t.NetworkTransport.AppendEntries(id, target, args, resp) == nil {
			t.noteAnswer(id)
			return nil
		}
	}
	return err
}

// noteAnswer records that follower id answered an append just now.
func (t *raftTransport) noteAnswer(id raft.ServerID) {
	at, ok := t.answered.Load(id)
	if !ok {
		at, _ = t.answered.LoadOrStore(id, new(atomic.Int64))
	}
	at.(*atomic.Int64).Store(time.Now().UnixNano())
}

// answeredAt is when follower id last answered an append of this node's
// (the zero time: never).
func (t *raftTransport) answeredAt(id raft.ServerID) time.Time {
	at, ok := t.answered.Load(id)
	if !ok {
		return time.Time{}
	}
	return time.Unix(0, at.(*atomic.Int64).Load())
}

// CloseStreams closes the pooled outbound connections and, as
// NetworkTransport's does for the ones it serves, the inbound ones.
func (t *raftTransport) CloseStreams() {
	t.NetworkTransport.CloseStreams()
	t.closeInbound()
}

// closeInbound closes every inbound connection; their handlers end.
func (t *raftTransport) closeInbound() {
	t.connMu.Lock()
	defer t.connMu.Unlock()
	for c := range t.conns {
		c.Close()
	}
}

func (t *raftTransport) closing() bool {
	select {
	case <-t.shutdown:
		return true
	default:
		return false
	}
}

func (t *raftTransport) listen() {
	defer t.wg.Done()
	const baseDelay, maxDelay = 5 * time.Millisecond, time.Second
	var delay time.Duration
	for {
		conn, err := t.stream.Accept()
		if err != nil {
			if t.closing() || errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, baseDelay), maxDelay)
			t.log.Error("failed to accept connection", "error", err)
			select {
			case <-t.shutdown:
				return
			case <-time.After(delay):
				continue
			}
		}
		delay = 0
		t.connMu.Lock()
		if t.closing() {
			t.connMu.Unlock()
			conn.Close()
			return
		}
		t.conns[conn] = struct{}{}
		t.wg.Add(1)
		t.connMu.Unlock()
		go t.handleConn(conn) // owned by the transport: Close closes conn
	}
}

func (t *raftTransport) handleConn(conn net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.connMu.Lock()
		delete(t.conns, conn)
		t.connMu.Unlock()
		conn.Close()
	}()
	r := bufio.NewReaderSize(conn, recvBufferSize)
	w := bufio.NewWriter(conn)
	dh := &codec.MsgpackHandle{}
	dh.MaxInitLen = maxInitLen
	dec := codec.NewDecoder(r, dh)
	// As NetworkTransport's (msgpackUseNewTimeFormat is false there).
	enc := codec.NewEncoder(w, &codec.MsgpackHandle{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}})
	for !t.closing() {
		if err := t.handleCommand(conn, r, dec, enc); err != nil {
			if err != io.EOF && !t.closing() {
				t.log.Error("failed to decode incoming command", "error", err)
			}
			return
		}
		if err := w.Flush(); err != nil {
			t.log.Error("failed to flush response", "error", err)
			return
		}
	}
}

// boundCommit keeps a follower from committing entries an append has not
// shown to be the leader's. hashicorp/raft moves a follower's commit index
// to the leader's, capped by the end of the follower's whole log, where
// Raft's paper caps it by the last entry of the append: the entries the
// leader just matched. Past them, a deposed leader's log may still hold
// entries of its own term that the new leader replaced, and the follower
// would apply those to its state machine — its partitions then hold other
// records than the cluster acknowledged, and it hands out their offsets
// again once it leads. The append is answered as before; the commit index
// catches up with the next append, which carries the entries after these.
//
// Whether it mattered shows later: the last entry the commit would have
// reached is remembered with its term, and when an append names that index
// with another term, the entries were a replaced log's (checkBounded).
func (t *raftTransport) boundCommit(req *raft.AppendEntriesRequest) {
	matched := req.PrevLogEntry + uint64(len(req.Entries))
	if req.LeaderCommitIndex <= matched {
		return
	}
	if p := t.logs.Load(); p != nil {
		t.noteBounded(*p, req, matched)
	}
	req.LeaderCommitIndex = matched
}

// noteBounded records the entry Raft's own rule would have committed up to,
// when that is past the append: this node's log runs past it, and the
// append's last entry is this node's too (else Raft cuts the log there,
// and its rule is safe).
func (t *raftTransport) noteBounded(logs raft.LogStore, req *raft.AppendEntriesRequest, matched uint64) {
	last, err := logs.LastIndex()
	if err != nil || last <= matched {
		return
	}
	matchedTerm := req.PrevLogTerm
	if n := len(req.Entries); n > 0 {
		matchedTerm = req.Entries[n-1].Term
	}
	var here, reach raft.Log
	if matched > 0 && (logs.GetLog(matched, &here) != nil || here.Term != matchedTerm) {
		return
	}
	at := min(req.LeaderCommitIndex, last)
	if logs.GetLog(at, &reach) != nil {
		return
	}
	t.boundMu.Lock()
	t.bounded = bounded{index: at, term: reach.Term, matched: matched}
	t.boundMu.Unlock()
}

// bounded is the entry a bounded commit would have reached (boundCommit).
type bounded struct{ index, term, matched uint64 }

// checkBounded compares the entry a bounded commit would have reached with
// the leader's entry at that index, once an append shows it: by Raft's log
// matching, equal terms mean every entry up to it was the leader's.
func (t *raftTransport) checkBounded(req *raft.AppendEntriesRequest) {
	t.boundMu.Lock()
	defer t.boundMu.Unlock()
	b := t.bounded
	if b.index == 0 {
		return
	}
	var leaderTerm uint64
	switch {
	case req.PrevLogEntry == b.index:
		leaderTerm = req.PrevLogTerm
	case len(req.Entries) > 0 && req.Entries[0].Index <= b.index && b.index <= req.Entries[len(req.Entries)-1].Index:
		leaderTerm = req.Entries[b.index-req.Entries[0].Index].Term
	default:
		return
	}
	t.bounded = bounded{}
	if leaderTerm != b.term {
		t.log.Warn("the commit index of an append reached entries the leader had replaced; Raft would have applied them (they were not)",
			"matched", b.matched, "replaced_up_to", b.index, "term_here", b.term, "leader_term", leaderTerm)
	}
}

// handleCommand reads one RPC, hands it to Raft and writes the answer, as
// NetworkTransport.handleCommand does (without its metrics), except that a
// snapshot's bytes are read with a deadline (idleReader).
func (t *raftTransport) handleCommand(conn net.Conn, r *bufio.Reader, dec *codec.Decoder, enc *codec.Encoder) error {
	rpcType, err := r.ReadByte()
	if err != nil {
		return err
	}
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{RespChan: respCh}
	heartbeat := false
	var snapshot *idleReader
	switch rpcType {
	case rpcAppendEntries:
		var req raft.AppendEntriesRequest
		if err := dec.Decode(&req); err != nil {
			return err
		}
		rpc.Command = &req
		heartbeat = isHeartbeat(&req)
		t.checkBounded(&req)
		t.boundCommit(&req)
	case rpcRequestVote:
		var req raft.RequestVoteRequest
		if err := dec.Decode(&req); err != nil {
			return err
		}
		rpc.Command = &req
	case rpcRequestPreVote:
		var req raft.RequestPreVoteRequest
		if err := dec.Decode(&req); err != nil {
			return err
		}
		rpc.Command = &req
	case rpcInstallSnapshot:
		var req raft.InstallSnapshotRequest
		if err := dec.Decode(&req); err != nil {
			return err
		}
		rpc.Command = &req
		snapshot = &idleReader{conn: conn, r: io.LimitReader(r, req.Size), idle: time.Duration(t.snapshotIdle.Load())}
		rpc.Reader = snapshot
	case rpcTimeoutNow:
		var req raft.TimeoutNowRequest
		if err := dec.Decode(&req); err != nil {
			return err
		}
		rpc.Command = &req
	default:
		return fmt.Errorf("unknown rpc type %d", rpcType)
	}

	dispatched := false
	if heartbeat && t.fastHeartbeat(rpc.Command.(*raft.AppendEntriesRequest).Term) {
		t.hbMu.Lock()
		fn := t.hbFn
		t.hbMu.Unlock()
		if fn != nil {
			fn(rpc)
			dispatched = true
		}
	}
	if !dispatched {
		select {
		case t.consumeCh <- rpc:
		case <-t.shutdown:
			return raft.ErrTransportShutdown
		}
	}
	select {
	case resp := <-respCh:
		if snapshot != nil {
			if err := snapshot.end(); err != nil {
				// The rest of the snapshot may still come: the stream
				// is out of step, so the connection ends, and the
				// sender learns of the failure by that.
				return err
			}
		}
		respErr := ""
		if resp.Error != nil {
			respErr = resp.Error.Error()
		}
		if err := enc.Encode(respErr); err != nil {
			return err
		}
		return enc.Encode(resp.Response)
	case <-t.shutdown:
		return raft.ErrTransportShutdown
	}
}

// idleReader is a snapshot's bytes as Raft reads them: each read waits at
// most idle for the sender. Raft reads a snapshot on its main loop, so a
// sender that stops mid-stream without closing the connection (a paused
// leader, a link that drops packets) would hold the follower there, deaf
// to votes and heartbeats, until TCP gave up minutes later; meanwhile no
// majority could form without it. A read past the deadline fails the
// install, and Raft goes on.
type idleReader struct {
	conn net.Conn
	r    io.Reader
	idle time.Duration
	err  error // the first read error but io.EOF
}

func (ir *idleReader) Read(p []byte) (int, error) {
	if ir.err != nil {
		return 0, ir.err
	}
	if ir.idle > 0 {
		if err := ir.conn.SetReadDeadline(time.Now().Add(ir.idle)); err != nil {
			ir.err = err
			return 0, err
		}
	}
	n, err := ir.r.Read(p)
	if err != nil && err != io.EOF {
		ir.err = fmt.Errorf("receiving a snapshot: %w", err)
		err = ir.err
	}
	return n, err
}

// end clears the deadline once Raft is done with the snapshot, and returns
// the read error that cut it short, if any.
func (ir *idleReader) end() error {
	if ir.err != nil {
		return ir.err
	}
	if ir.idle > 0 {
		return ir.conn.SetReadDeadline(time.Time{})
	}
	return nil
}
