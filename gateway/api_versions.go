package gateway

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(s.handlers))
	for k, h := range s.handlers {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: h.min, MaxVersion: h.max})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

func (s *Server) handleAPIVersions(_ context.Context, r *Request) Reply {
	resp := r.Body.(*kmsg.ApiVersionsRequest).ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = s.apiKeys()
	// No finalized features: kgate has no transactions to version.
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
