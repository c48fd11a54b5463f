package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// pipelineSafe is the Raft transport with a deadlock of hashicorp/raft's
// pipelined replication taken out (hashicorp/raft#612). When a follower
// answers a pipelined append with Success=false — it could not store the
// entries (a full disk) — Raft's decoder for that follower returns, and no
// one reads the pipeline's answers any more. The transport's answer reader
// then blocks handing over the next answer, the sender blocks handing the
// reader its next request, and the sender never gets back to noticing that
// the decoder is gone: the leader sends that follower heartbeats, so it
// never calls an election, but never another entry. Seen here: a follower
// restarted after its disk filled stayed behind until the leader changed.
//
// pipelineSafe takes every answer off the transport's pipeline as it comes
// and queues it for Raft, so the answer reader never blocks and the sender
// always returns to its loop, sees the decoder gone and closes the
// pipeline; replication starts again from the follower's real position.
type pipelineSafe struct {
	*raftTransport
}

func (t pipelineSafe) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.raftTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainedPipeline(p), nil
}

// drainedPipeline queues the answers of an AppendPipeline. The queue holds
// at most the answers of requests sent after Raft stopped reading: a few,
// as the sender then stops.
type drainedPipeline struct {
	raft.AppendPipeline
	out  chan raft.AppendFuture
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newDrainedPipeline(p raft.AppendPipeline) *drainedPipeline {
	d := &drainedPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture), stop: make(chan struct{}),
		done: make(chan struct{})}
	go d.forward() // owned by the pipeline: Close stops it
	return d
}

func (d *drainedPipeline) forward() {
	defer close(d.done)
	in := d.AppendPipeline.Consumer()
	var queue []raft.AppendFuture
	for {
		var out chan raft.AppendFuture
		var next raft.AppendFuture
		if len(queue) > 0 {
			out, next = d.out, queue[0]
		}
		select {
		case f := <-in:
			queue = append(queue, f)
		case out <- next:
			queue[0] = nil
			queue = queue[1:]
		case <-d.stop:
			return
		}
	}
}

// Consumer is where Raft reads the answers, in order.
func (d *drainedPipeline) Consumer() <-chan raft.AppendFuture { return d.out }

// Close closes the transport's pipeline and stops forwarding.
func (d *drainedPipeline) Close() error {
	err := d.AppendPipeline.Close()
	d.once.Do(func() { close(d.stop) })
	<-d.done
	return err
}
