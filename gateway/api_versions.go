package gateway

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

func (s *Server) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(s.handlers))
	for k, h := range s.handlers {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: h.min, MaxVersion: h.max})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// FeatureName is the KIP-584 feature that ApiVersions (v3+) reports for the
// cluster's feature level (fsm.Level, docs/operations.md): supported from 0
// to what this node's binary knows, finalized at the level the cluster
// runs at (kafka-features.sh describe). kgate finalizes no feature of
// Kafka's own: transaction.version 2, for one, would move Java producers to
// a transaction protocol kgate does not speak.
const FeatureName = "kgate.version"

func (s *Server) handleAPIVersions(_ context.Context, r *Request) Reply {
	resp := r.Body.(*kmsg.ApiVersionsRequest).ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = s.apiKeys()
	level := int16(s.cluster.FeatureLevel())
	resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: FeatureName, MinVersion: 0, MaxVersion: int16(fsm.LatestLevel)}}
	// The level only rises, so it serves as the epoch of what is finalized.
	resp.FinalizedFeaturesEpoch = int64(level)
	resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: FeatureName, MinVersionLevel: level, MaxVersionLevel: level}}
	return now(resp)
}

// unsupportedAPIVersions is the KIP-511 answer to a version we don't know.
func (s *Server) unsupportedAPIVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = s.apiKeys()
	return resp
}
