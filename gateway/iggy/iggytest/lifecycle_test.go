package iggytest_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestDropConnections(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		a, b := loggedIn(t, srv), dial(t, srv)
		waitFor(t, "2 connections", func() bool { return srv.Connections() == 2 })
		srv.DropConnections()
		a.expectClosed()
		b.expectClosed()
		waitFor(t, "0 connections", func() bool { return srv.Connections() == 0 })
		// Still listening; a reconnect logs in again.
		loggedIn(t, srv).ok(iggy.Ping())
		if srv.Logins() != 2 {
			t.Fatalf("logins %d", srv.Logins())
		}
	})
}

func TestCloseRestart(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		addr := srv.Addr()
		c := loggedIn(t, srv)
		createStream(t, c, "keep")
		createTopic(t, c, s0, iggy.TopicConfig{Name: "t", PartitionsCount: 1})
		send(t, c, iggy.ToPartition(0), testMessages(1, 3, "k")...)

		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		checkNoLeaks(t)
		c.expectClosed() // Legacy first gets the Disconnected frame (08...)
		if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			nc.Close()
			t.Fatal("still listening after Close")
		}
		if err := srv.Close(); err != nil { // idempotent
			t.Fatal(err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(); err == nil {
			t.Fatal("Restart while running")
		}
		if srv.Addr() != addr {
			t.Fatalf("address changed: %s → %s", addr, srv.Addr())
		}
		c2 := loggedIn(t, srv)
		expectOffsets(t, pollMsgs(t, c2, iggy.Poll{Partition: iggy.Partition(0), Kind: iggy.PollFirst, Count: 10}), 0, 1, 2)
		if srv.Logins() != 2 {
			t.Fatalf("logins %d", srv.Logins())
		}
	})
}

func TestLegacyShutdownFrame(t *testing.T) {
	srv := start(t, iggy.Legacy)
	c := loggedIn(t, srv)
	go srv.Close()
	got, _ := io.ReadAll(c.br)
	if !bytes.Equal(got, []byte{8, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("got %x", got)
	}
}

func TestDelayAndHang(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		c := dial(t, srv)
		srv.SetDelay(150 * time.Millisecond)
		t0 := time.Now()
		c.ok(iggy.Ping())
		if el := time.Since(t0); el < 150*time.Millisecond {
			t.Fatalf("reply after %v", el)
		}
		srv.SetDelay(0)
		c.ok(iggy.Ping())

		srv.SetHang(true)
		c.write(c.frame(iggy.Ping()))
		c.expectSilence(200 * time.Millisecond)
		if srv.Requests(iggy.CodePing) != 3 {
			t.Fatalf("pings %d", srv.Requests(iggy.CodePing))
		}
		srv.SetHang(false)
		// The hung request is never answered; the next one is.
		c.ok(iggy.Ping())

		// Close is not blocked by a hung or delayed connection.
		srv.SetHang(true)
		c.write(c.frame(iggy.Ping()))
		h := dial(t, srv)
		srv.SetHang(false)
		srv.SetDelay(time.Hour)
		h.write(h.frame(iggy.Ping()))
		waitFor(t, "the delayed request", func() bool { return srv.Requests(iggy.CodePing) == 6 })
		done := make(chan error)
		go func() { done <- srv.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close blocked")
		}
	})
}

// TestCrossDialect checks the §0.1 reactions that a dialect probe relies on.
func TestCrossDialect(t *testing.T) {
	t.Run("legacy frames to a current double", func(t *testing.T) {
		srv := start(t, iggy.Current)
		c := dial(t, srv)
		c.write([]byte{4, 0, 0, 0, 1, 0, 0, 0}) // legacy Ping: waits for 256 bytes
		c.expectSilence(300 * time.Millisecond)
		login := must[iggy.Request](t)(iggy.LoginUser(iggy.Legacy, iggy.Login{Username: "iggy", Password: "iggy", SDKVersion: "0.8.0"}))
		c.write(must[[]byte](t)(login.Frame(iggy.Legacy, iggy.RequestHeader{}))) // 39 bytes in all: still short
		c.expectSilence(300 * time.Millisecond)
		// A longer legacy frame is parsed as a header: size at 48 is junk → dropped.
		c2 := dial(t, srv)
		junk := bytes.Repeat([]byte{0xee}, 300)
		c2.write(must[[]byte](t)(iggy.EncodeLegacyRequest(iggy.CodeCreateStream, junk)))
		c2.expectClosed()
		if srv.Logins() != 0 {
			t.Fatal("login")
		}
	})
	t.Run("current frames to a legacy double", func(t *testing.T) {
		srv := start(t, iggy.Legacy)
		c := dial(t, srv)
		c.d = iggy.Current
		c.write(c.frame(iggy.Ping()))
		got := make([]byte, 48)
		_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c.br, got); err != nil {
			t.Fatal(err)
		}
		if want := bytes.Repeat([]byte{3, 0, 0, 0, 0, 0, 0, 0}, 6); !bytes.Equal(got, want) {
			t.Fatalf("got %x", got)
		}
		c.expectSilence(300 * time.Millisecond) // stuck mid-frame
		// The alternative probe: a legacy Ping gets 00×8 at once.
		c2 := dial(t, srv)
		c2.write([]byte{4, 0, 0, 0, 1, 0, 0, 0})
		_ = c2.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c2.br, got[:8]); err != nil || !bytes.Equal(got[:8], make([]byte, 8)) {
			t.Fatalf("legacy ping: %x %v", got[:8], err)
		}
	})
	t.Run("oversized legacy payload", func(t *testing.T) {
		srv := start(t, iggy.Legacy)
		c := loggedIn(t, srv)
		hdr := []byte{0, 0, 0, 0, 0xc9, 0, 0, 0}
		hdr[0], hdr[1], hdr[2] = 0x05, 0x00, 0xa1 // length 0xa10005 > 10 MiB + 4
		c.write(hdr)
		r, err := c.read(5 * time.Second)
		if err != nil || r.Status != 3 {
			t.Fatalf("%+v %v", r, err)
		}
	})
}

func TestConfigDefaults(t *testing.T) {
	srv, err := iggytest.Start(iggytest.Config{Username: "root", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Close(); checkNoLeaks(t) }()
	if srv.Dialect() != iggy.Current {
		t.Fatal(srv.Dialect())
	}
	host, _, _ := net.SplitHostPort(srv.Addr())
	if host != "127.0.0.1" {
		t.Fatal(srv.Addr())
	}
	c := dial(t, srv)
	c.login("root", "secret")
	if _, err := iggytest.Start(iggytest.Config{Dialect: 9}); err == nil {
		t.Fatal("bad dialect accepted")
	}
}

// TestConcurrentClients runs clients in parallel against one double (for -race).
func TestConcurrentClients(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		if err := srv.CreateTopic("s", "t", 4); err != nil {
			t.Fatal(err)
		}
		const workers, batches = 4, 20
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			go func() {
				errs <- func() error {
					nc, err := net.Dial("tcp", srv.Addr())
					if err != nil {
						return err
					}
					defer nc.Close()
					c := &client{d: d, nc: nc, br: bufio.NewReader(nc), id: [16]byte{byte(w + 1), 9}}
					lreq, _ := iggy.LoginUser(d, iggy.Login{Username: "iggy", Password: "iggy", SDKName: "x", SDKVersion: "1"})
					f, _ := lreq.Frame(d, iggy.RequestHeader{Client: c.id})
					if _, err := nc.Write(f); err != nil {
						return err
					}
					r, err := c.read(5 * time.Second)
					if err != nil {
						return err
					}
					lr, err := iggy.DecodeLoginReply(d, r.Body)
					if err != nil {
						return err
					}
					c.session = lr.Session
					for i := 0; i < batches; i++ {
						req, _ := iggy.SendMessages(d, s0, t0, iggy.ToPartition(uint32(w)), testMessages(uint64(i), 3, "c"))
						f, _ := req.Frame(d, iggy.RequestHeader{Client: c.id, Request: uint64(i + 1), Session: c.session})
						if _, err := nc.Write(f); err != nil {
							return err
						}
						r, err := c.read(5 * time.Second)
						if err != nil {
							return err
						}
						if err := r.Err(); err != nil {
							return err
						}
					}
					return nil
				}()
			}()
		}
		for w := 0; w < workers; w++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for p := uint32(0); p < workers; p++ {
			ms := srv.Messages("s", "t", p)
			if len(ms) != 3*batches || ms[len(ms)-1].Offset != 3*batches-1 {
				t.Fatalf("partition %d: %d messages", p, len(ms))
			}
		}
	})
}
