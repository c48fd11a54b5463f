package gateway

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LogDirReporter is a Backend that can say where this node keeps partition
// data and how large each partition is there.
type LogDirReporter interface {
	LogDirs(ctx context.Context) ([]LogDir, error)
}

// LogDir is one data directory of this node.
type LogDir struct {
	Path        string
	TotalBytes  int64 // of the file system; -1 when unknown
	UsableBytes int64
	Partitions  []PartitionSize
}

// PartitionSize is one partition's bytes in a LogDir.
type PartitionSize struct {
	Topic     string
	Partition int32
	Bytes     int64
}

// DescribeLogDirs answers for this node only, as a Kafka broker does (the
// tools ask every broker). Every node holds a full copy of the embedded
// log, applied up to the commit index, so the offset lag is 0.
func (s *Server) handleDescribeLogDirs(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	if !s.allowedCluster(r, kmsg.ACLOperationDescribe) {
		resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	return later(func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		lr, ok := s.backend.(LogDirReporter)
		if !ok {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return resp
		}
		dirs, err := lr.LogDirs(ctx)
		if err != nil {
			resp.ErrorCode = ErrorCode(err)
			return resp
		}
		var want map[string]map[int32]bool // nil: every partition
		if req.Topics != nil {
			want = map[string]map[int32]bool{}
			for _, t := range req.Topics {
				if want[t.Topic] == nil {
					want[t.Topic] = map[int32]bool{}
				}
				for _, p := range t.Partitions {
					want[t.Topic][p] = true
				}
			}
		}
		for _, d := range dirs {
			rd := kmsg.NewDescribeLogDirsResponseDir()
			rd.Dir = d.Path
			rd.TotalBytes, rd.UsableBytes = d.TotalBytes, d.UsableBytes
			rd.Topics = []kmsg.DescribeLogDirsResponseDirTopic{}
			byTopic := map[string]int{}
			for _, p := range d.Partitions {
				if want != nil && !want[p.Topic][p.Partition] {
					continue
				}
				i, seen := byTopic[p.Topic]
				if !seen {
					i = len(rd.Topics)
					byTopic[p.Topic] = i
					rt := kmsg.NewDescribeLogDirsResponseDirTopic()
					rt.Topic = p.Topic
					rd.Topics = append(rd.Topics, rt)
				}
				rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
				rp.Partition, rp.Size = p.Partition, p.Bytes
				rd.Topics[i].Partitions = append(rd.Topics[i].Partitions, rp)
			}
			resp.Dirs = append(resp.Dirs, rd)
		}
		return resp
	})
}
