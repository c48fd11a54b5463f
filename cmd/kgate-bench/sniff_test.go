package main

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// responseFrame frames resp as a broker would answer correlation id corr.
func responseFrame(corr int32, resp kmsg.Response) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if resp.IsFlexible() {
		b = append(b, 0) // header tags
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// feedChunked feeds b to s in random pieces.
func feedChunked(r *rand.Rand, s *frameScanner, b []byte) {
	for len(b) > 0 {
		n := min(1+r.IntN(7), len(b))
		s.feed(b[:n])
		b = b[n:]
	}
}

func TestSniffHeartbeats(t *testing.T) {
	for _, version := range []int16{0, 1, 3, 4} {
		var got []int16
		c := newSniffConn(nil, "a:1", func(addr string, code int16, _ time.Time) {
			if addr != "a:1" {
				t.Errorf("addr %q", addr)
			}
			got = append(got, code)
		})
		r := rand.New(rand.NewPCG(uint64(version), 1))
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("x"))

		var reqs, resps []byte
		var want []int16
		for corr := int32(1); corr <= 20; corr++ {
			if corr%3 == 0 { // something else in between
				md := kmsg.NewPtrMetadataRequest()
				md.Version = 9
				reqs = append(reqs, f.AppendRequest(nil, md, corr)...) // AppendRequest frames from the start of dst
				mr := kmsg.NewPtrMetadataResponse()
				mr.Version = 9
				for range 50 {
					b := kmsg.NewMetadataResponseBroker()
					b.Host = "some-long-host-name.example"
					mr.Brokers = append(mr.Brokers, b)
				}
				resps = append(resps, responseFrame(corr, mr)...)
				continue
			}
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Version = version
			hb.Group, hb.MemberID = "g", "m"
			reqs = append(reqs, f.AppendRequest(nil, hb, corr)...)
			hr := kmsg.NewPtrHeartbeatResponse()
			hr.Version = version
			hr.ErrorCode = int16(corr % 4 * 9) // 0, 9, 18, 27
			hr.ThrottleMillis = 12345
			resps = append(resps, responseFrame(corr, hr)...)
			want = append(want, hr.ErrorCode)
		}
		feedChunked(r, &c.w, reqs)
		feedChunked(r, &c.r, resps)
		if !slices.Equal(got, want) {
			t.Errorf("v%d: codes %v, want %v", version, got, want)
		}
		if len(c.hb) != 0 {
			t.Errorf("v%d: %d heartbeats left in flight", version, len(c.hb))
		}
	}
}

func TestFrameScannerEmptyAndShortFrames(t *testing.T) {
	var ends [][]byte
	s := frameScanner{size: -1, peek: 8,
		decide: func(b []byte) int { return 0 },
		end:    func(b []byte) { ends = append(ends, slices.Clone(b)) },
	}
	s.feed([]byte{0, 0, 0, 0, 0, 0, 0, 2, 7, 8, 0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	want := [][]byte{{}, {7, 8}, {1, 2, 3, 4, 5, 6, 7, 8}}
	if len(ends) != len(want) {
		t.Fatalf("frames %v, want %v", ends, want)
	}
	for i := range want {
		if !slices.Equal(ends[i], want[i]) {
			t.Errorf("frame %d: %v, want %v", i, ends[i], want[i])
		}
	}
}
