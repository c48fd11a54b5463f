package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// One connection, one order (ARCHITECTURE rule 9). Kafka handles one
// connection's requests strictly one after another. kgate starts a request
// only once every earlier request on the connection it could observe has
// taken effect; requests overlap only within a class whose members cannot
// see each other:
//
//   - Produce with Produce: the backend applies one connection's produces
//     in call order (Backend.Produce), so overlapping them changes no
//     offset, and no read runs in between.
//   - Reads with reads (Fetch, ListOffsets, OffsetFetch, Describe*, …):
//     they change nothing, so none can see another.
//
// Everything else — group and offset writes, topic administration,
// Metadata (which may create a topic), and any API not listed below — waits
// for all earlier requests, and all later ones wait for it. Answers always
// leave in request order (conn.write).
type overlapClass uint8

const (
	exclusive overlapClass = iota
	produces
	reads
)

func overlapOf(key int16) overlapClass {
	switch kmsg.Key(key) {
	case kmsg.Produce:
		return produces
	case kmsg.Fetch, kmsg.ListOffsets, kmsg.OffsetFetch, kmsg.OffsetForLeaderEpoch, kmsg.ApiVersions,
		kmsg.DescribeConfigs, kmsg.DescribeCluster, kmsg.DescribeGroups, kmsg.ListGroups, kmsg.FindCoordinator:
		return reads
	default:
		return exclusive
	}
}

// inOrder tracks one connection's requests still taking effect.
type inOrder struct {
	running []running
}

type running struct {
	class overlapClass
	done  <-chan struct{}
}

// admit waits until a request with this key may start: until every running
// request of another class (or, for an exclusive one, every running
// request) is done. False when ctx ended first.
func (o *inOrder) admit(ctx context.Context, key int16) bool {
	class := overlapOf(key)
	keep := o.running[:0]
	for _, r := range o.running {
		select {
		case <-r.done:
			continue
		default:
		}
		if class == exclusive || r.class != class {
			select {
			case <-r.done:
				continue
			case <-ctx.Done():
				return false
			}
		}
		keep = append(keep, r)
	}
	o.running = keep
	return true
}

// started records a request whose effect completes later.
func (o *inOrder) started(key int16, done <-chan struct{}) {
	if done != nil {
		o.running = append(o.running, running{overlapOf(key), done})
	}
}
