package main

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker answers ApiVersions and Heartbeat (error code = correlation id
// % 100) in order on every connection, after a delay for odd ids.
func fakeBroker(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				for {
					var size [4]byte
					if _, err := io.ReadFull(nc, size[:]); err != nil {
						return
					}
					frame := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(nc, frame); err != nil {
						return
					}
					key := int16(binary.BigEndian.Uint16(frame))
					version := int16(binary.BigEndian.Uint16(frame[2:]))
					corr := int32(binary.BigEndian.Uint32(frame[4:]))
					var resp kmsg.Response
					switch key {
					case 18:
						r := kmsg.NewPtrApiVersionsResponse()
						r.Version = version
						for _, k := range []int16{11, 12, 14} {
							v := kmsg.NewApiVersionsResponseApiKey()
							v.ApiKey, v.MaxVersion = k, 4
							r.ApiKeys = append(r.ApiKeys, v)
						}
						resp = r
					case 12:
						r := kmsg.NewPtrHeartbeatResponse()
						r.Version = version
						r.ErrorCode = int16(corr % 100)
						resp = r
						if corr%2 == 1 {
							time.Sleep(5 * time.Millisecond)
						}
					default:
						return
					}
					out := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 0}, uint32(corr))
					if resp.IsFlexible() && key != 18 {
						out = append(out, 0)
					}
					out = resp.AppendTo(out)
					binary.BigEndian.PutUint32(out, uint32(len(out)-4))
					if _, err := nc.Write(out); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String(), func() {
		ln.Close()
		wg.Wait()
	}
}

func TestLinkPipelines(t *testing.T) {
	addr, stop := fakeBroker(t)
	defer stop()
	l := &link{addr: addr, clientID: "test"}
	defer l.close()
	ctx := context.Background()
	_, vers, err := l.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if vers.join != 4 || vers.sync != 4 || vers.heartbeat != 4 {
		t.Fatalf("versions %+v", vers)
	}

	// The connection's first correlation id went to ApiVersions, so
	// heartbeats get 2, 3, ...; the fake answers code = id % 100.
	var wg sync.WaitGroup
	codes := make(chan int32, 50)
	for range 50 {
		wg.Go(func() {
			resp, lat, err := l.do(ctx, kmsg.NewPtrHeartbeatRequest(), func(v groupVersions) int16 { return v.heartbeat })
			if err != nil {
				t.Error(err)
				return
			}
			if lat <= 0 {
				t.Errorf("latency %v", lat)
			}
			codes <- int32(resp.(*kmsg.HeartbeatResponse).ErrorCode)
		})
	}
	wg.Wait()
	close(codes)
	seen := map[int32]bool{}
	for c := range codes {
		if c < 2 || c > 51 || seen[c] {
			t.Errorf("unexpected or repeated code %d", c)
		}
		seen[c] = true
	}
	if len(seen) != 50 {
		t.Errorf("%d distinct answers, want 50", len(seen))
	}
}

func TestLinkRedialsAfterFailure(t *testing.T) {
	addr, stop := fakeBroker(t)
	defer stop()
	l := &link{addr: addr, clientID: "test"}
	defer l.close()
	ctx := context.Background()
	w, _, err := l.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.nc.Close() // the reader fails, the link redials
	<-w.readerDone
	if _, _, err := w.do(ctx, kmsg.NewPtrHeartbeatRequest()); err == nil {
		t.Error("request on a closed connection: no error")
	}
	if _, _, err := l.do(ctx, kmsg.NewPtrHeartbeatRequest(), func(v groupVersions) int16 { return v.heartbeat }); err != nil {
		t.Errorf("after redial: %v", err)
	}
}

func TestSkipTags(t *testing.T) {
	b, err := skipTags([]byte{2, 0, 1, 9, 5, 2, 7, 7, 42})
	if err != nil || len(b) != 1 || b[0] != 42 {
		t.Errorf("got %v, %v", b, err)
	}
	if _, err := skipTags([]byte{1, 0, 5, 1}); err == nil {
		t.Error("truncated tag: no error")
	}
}
