package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Against Apache Kafka (no -admin addresses) the node to kill is the
// group's coordinator, found with FindCoordinator; a node is ready again
// when Metadata lists it and its port accepts connections. Kafka reports
// no group generation outside the group, so the consumers' own view counts.

func (f *failover) kafka() bool { return len(f.cfg.admin) == 0 }

// kafkaNodes fills f.nodes from Metadata.
func (f *failover) kafkaNodes(ctx context.Context) error {
	md, err := f.adm.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	for _, b := range md.Brokers {
		f.nodes[b.NodeID] = nodeView{ID: b.NodeID, KafkaAddr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))}
	}
	return nil
}

// kafkaCoordinator returns the group's coordinator if a live node names
// one other than exclude (and the node being restarted).
func (f *failover) kafkaCoordinator(ctx context.Context, exclude int32) (int32, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = f.group
	req.CoordinatorKeys = []string{f.group}
	for id, n := range f.nodes {
		if id == f.dead || id == exclude {
			continue
		}
		resp, err := req.RequestWith(ctx, f.kcl.Broker(int(n.ID)))
		if err != nil {
			continue
		}
		node, code := resp.NodeID, resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			node, code = resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
		}
		if code == 0 && node >= 0 && node != exclude && node != f.dead {
			return node, true
		}
		if code != 0 && code != kerr.CoordinatorNotAvailable.Code && code != kerr.NotCoordinator.Code {
			f.log.Debug("find coordinator", "node", id, "code", code)
		}
	}
	return -1, false
}

// kafkaReady reports whether node id is listed by Metadata and accepts
// connections.
func (f *failover) kafkaReady(ctx context.Context, id int32) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	md, err := f.adm.BrokerMetadata(ctx)
	if err != nil {
		return false
	}
	for _, b := range md.Brokers {
		if b.NodeID == id {
			c, err := net.DialTimeout("tcp", f.nodes[id].KafkaAddr, time.Second)
			if err != nil {
				return false
			}
			c.Close()
			return true
		}
	}
	return false
}
