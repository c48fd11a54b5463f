package cluster

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Raft's pipelined replication, as pipelineReplicate drives it, against a
// follower that refuses an append (Success=false, as one that cannot store
// entries answers): the decoder reads that answer and returns, the sender
// sends on until it notices. Every send must return; on the bare
// transport the third one blocks for good (hashicorp/raft#612) and the
// follower never gets another entry.
func TestPipelineSendsOnAfterTheDecoderStopped(t *testing.T) {
	follower, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case rpc := <-follower.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: false}, nil)
			case <-stop:
				return
			}
		}
	}()
	leader, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()

	p, err := pipelineSafe{&raftTransport{NetworkTransport: leader}}.AppendEntriesPipeline("follower", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	send := func(i int) {
		t.Helper()
		sent := make(chan error, 1)
		go func() {
			_, err := p.AppendEntries(&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax},
				Term: 1, PrevLogEntry: uint64(i)}, &raft.AppendEntriesResponse{})
			sent <- err
		}()
		select {
		case err := <-sent:
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			p.Close() // releases the blocked send
			t.Fatalf("send %d blocked after the decoder stopped reading answers", i)
		}
	}
	send(0)
	if f := <-p.Consumer(); f.Response().Success {
		t.Fatal("the follower's refusal arrived as a success")
	}
	// The decoder has returned; the sender goes on a few times.
	for i := 1; i <= 4; i++ {
		send(i)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
