package gateway

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEachErrorCodeFindsNestedCodes: top-level, per-topic and
// per-partition codes are all counted; zero codes are not.
func TestEachErrorCodeFindsNestedCodes(t *testing.T) {
	fetch := kmsg.NewPtrFetchResponse()
	fetch.ErrorCode = 0
	for i, codes := range [][]int16{{0, 6}, {3}} {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = string(rune('a' + i))
		for _, c := range codes {
			p := kmsg.NewFetchResponseTopicPartition()
			p.ErrorCode = c
			rt.Partitions = append(rt.Partitions, p)
		}
		fetch.Topics = append(fetch.Topics, rt)
	}
	join := kmsg.NewPtrJoinGroupResponse()
	join.ErrorCode = 27
	create := kmsg.NewPtrCreateTopicsResponse()
	for _, c := range []int16{36, 0, 37} {
		ct := kmsg.NewCreateTopicsResponseTopic()
		ct.ErrorCode = c
		create.Topics = append(create.Topics, ct)
	}
	for _, tc := range []struct {
		resp kmsg.Response
		want []int16
	}{
		{fetch, []int16{6, 3}},
		{join, []int16{27}},
		{create, []int16{36, 37}},
		{kmsg.NewPtrMetadataResponse(), nil},
	} {
		var got []int16
		for range 2 { // the second pass uses the cached plan
			got = got[:0]
			eachErrorCode(tc.resp, func(c int16) { got = append(got, c) })
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%T: codes %v, want %v", tc.resp, got, tc.want)
		}
	}
}

// BenchmarkObserve is the per-request cost of the metrics hook for a
// one-partition produce.
func BenchmarkObserve(b *testing.B) {
	s := &Server{metrics: newMetrics()}
	req := kmsg.NewPtrProduceRequest()
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, 100)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	st := kmsg.NewProduceResponseTopic()
	st.Topic = "t"
	st.Partitions = append(st.Partitions, kmsg.NewProduceResponseTopicPartition())
	resp.Topics = append(resp.Topics, st)
	r := &Request{Header: Header{Key: req.Key(), Version: 9}, Body: req}
	b.ReportAllocs()
	for b.Loop() {
		s.observer(r)(resp)
	}
}
