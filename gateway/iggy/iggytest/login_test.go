package iggytest_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/kgate/kgate/gateway/iggy"
)

func TestLoginOK(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		c := dial(t, srv)
		c.ok(iggy.Ping()) // ping before login
		lr := c.login("iggy", "iggy")
		if lr.UserID != 0 {
			t.Fatalf("user id %d", lr.UserID)
		}
		if d == iggy.Current {
			if lr.Session == 0 || lr.ServerProtocolVersion != iggy.ProtocolVersion || lr.ServerVersion == "" {
				t.Fatalf("login reply %+v", lr)
			}
		}
		if srv.Logins() != 1 || srv.Requests(iggy.CodePing) != 1 {
			t.Fatalf("logins %d pings %d", srv.Logins(), srv.Requests(iggy.CodePing))
		}
		want := iggy.CodeLoginRegister
		if d == iggy.Legacy {
			want = iggy.CodeLegacyLoginUser
		}
		if srv.Requests(want) != 1 {
			t.Fatalf("login requests %d", srv.Requests(want))
		}
		c.ok(iggy.GetStreams())

		// Token login.
		c2 := dial(t, srv)
		req := must[iggy.Request](t)(iggy.LoginToken(d, testToken, "kgate-test", "0.1.0"))
		lr2 := must[iggy.LoginReply](t)(iggy.DecodeLoginReply(d, c2.ok(req)))
		c2.session = lr2.Session
		if d == iggy.Current && lr2.Session == lr.Session {
			t.Fatal("sessions must differ")
		}
		c2.ok(iggy.GetStreams())
		if srv.Logins() != 2 || srv.Connections() != 2 {
			t.Fatalf("logins %d connections %d", srv.Logins(), srv.Connections())
		}
		if d == iggy.Current && srv.Requests(iggy.CodeLoginRegisterPAT) != 1 {
			t.Fatal("PAT login not counted under 45")
		}
	})
}

func TestLoginRejected(t *testing.T) {
	t.Run("current", func(t *testing.T) {
		srv := start(t, iggy.Current)
		login := func(user, pass string) iggy.Request {
			return must[iggy.Request](t)(iggy.LoginUser(iggy.Current, iggy.Login{Username: user, Password: pass, SDKName: "t", SDKVersion: "1"}))
		}
		dial(t, srv).expectEviction(login("iggy", "wrong"), 9)
		dial(t, srv).expectEviction(login("nobody", "iggy"), 9)
		dial(t, srv).expectEviction(must[iggy.Request](t)(iggy.LoginToken(iggy.Current, "nope", "t", "1")), 10)

		// Protocol 0.12 (0x3000) and 0.10 (0x2800) are refused; 0.11.7 is accepted.
		for _, v := range []uint32{0x3000, 0x2800} {
			req := login("iggy", "iggy")
			binary.LittleEndian.PutUint32(req.Body, v)
			dial(t, srv).expectEviction(req, 14)
		}
		req := login("iggy", "iggy")
		binary.LittleEndian.PutUint32(req.Body, 0x2C07)
		dial(t, srv).ok(req)

		// Undecodable body, and the legacy login code sent as a non-replicated op.
		dial(t, srv).expectEviction(iggy.Request{Code: 40, Operation: iggy.OpRegister, Body: []byte{0, 0x2c, 0, 0, 1}}, 15)
		legacyLogin := must[iggy.Request](t)(iggy.LoginUser(iggy.Legacy, iggy.Login{Username: "iggy", Password: "iggy"}))
		dial(t, srv).expectEviction(nonReplicated(iggy.CodeLegacyLoginUser, legacyLogin.Body), 15)
		if srv.Logins() != 1 {
			t.Fatalf("logins %d", srv.Logins())
		}
	})
	t.Run("legacy", func(t *testing.T) {
		srv := start(t, iggy.Legacy)
		c := dial(t, srv)
		login := func(user, pass string) iggy.Request {
			return must[iggy.Request](t)(iggy.LoginUser(iggy.Legacy, iggy.Login{Username: user, Password: pass, SDKVersion: "0.8.0"}))
		}
		c.expectStatus(login("iggy", "wrong"), 42)
		c.expectStatus(must[iggy.Request](t)(iggy.LoginToken(iggy.Legacy, "nope", "", "")), 20)
		c.expectStatus(iggy.Request{Code: 38, Body: []byte{2, 'a', 'b', 4, 'i', 'g', 'g', 'y'}}, 43)
		c.expectStatus(iggy.Request{Code: 38, Body: []byte{4, 'i', 'g', 'g', 'y', 2, 'a', 'b'}}, 44)
		c.expectStatus(iggy.Request{Code: 38, Body: []byte{0}}, 4)
		c.expectStatus(iggy.Request{Code: 38, Body: []byte{9, 'x'}}, 3)
		// The connection stays usable after a failed login.
		c.login("iggy", "iggy")
		c.ok(iggy.GetStreams())
	})
}

// TestLegacyGolden checks the byte-exact exchanges of §13.12.
func TestLegacyGolden(t *testing.T) {
	srv := start(t, iggy.Legacy)
	c := dial(t, srv)
	exchange := func(req, want []byte) {
		t.Helper()
		c.write(req)
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c.br, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("got %x want %x", got, want)
		}
	}
	exchange([]byte{4, 0, 0, 0, 1, 0, 0, 0}, make([]byte, 8))
	login := []byte{0x1b, 0, 0, 0, 0x26, 0, 0, 0, 4, 'i', 'g', 'g', 'y', 4, 'i', 'g', 'g', 'y', 5, 0, 0, 0, '0', '.', '8', '.', '0', 0, 0, 0, 0}
	wrong := append([]byte(nil), login...)
	wrong[17] = 'x'
	exchange(wrong, []byte{0x2a, 0, 0, 0, 0, 0, 0, 0})
	exchange(login, []byte{0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0})
}

func TestBeforeLogin(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		c := dial(t, srv)
		c.ok(iggy.Ping())
		c.expectStatus(iggy.GetStreams(), 40)
		c.expectStatus(must[iggy.Request](t)(iggy.GetTopic(iggy.NumericID(0), iggy.NumericID(0))), 40)
		create := must[iggy.Request](t)(iggy.CreateStream("s"))
		if d == iggy.Current {
			// A replicated op without a session is evicted (NoSession).
			c.expectEviction(create, 1)
			// So is one carrying a session the server never issued.
			c2 := dial(t, srv)
			c2.session = 12345
			c2.expectEviction(create, 1)
		} else {
			c.expectStatus(create, 40)
			c.expectStatus(iggy.Request{Code: iggy.CodeLogout}, 40)
		}
	})
}

func TestLogout(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		c := loggedIn(t, srv)
		r := c.do(iggy.Request{Code: iggy.CodeLogout, Operation: iggy.OpLogout})
		if r.Err() != nil || len(r.Body) != 0 {
			t.Fatalf("logout: %v %x", r.Err(), r.Body)
		}
		if srv.Requests(iggy.CodeLogout) != 1 {
			t.Fatal("logout not counted")
		}
		c.expectStatus(iggy.GetStreams(), 40)
		c.ok(iggy.Ping())
		if d == iggy.Legacy {
			c.login("iggy", "iggy")
			c.ok(iggy.GetStreams())
		}
	})
}

func TestUnknownCommand(t *testing.T) {
	forEach(t, func(t *testing.T, d iggy.Dialect) {
		srv := start(t, d)
		c := loggedIn(t, srv)
		c.expectStatus(nonReplicated(9999), 3)
		c.expectStatus(nonReplicated(606), 3) // consumer groups are not simulated
		flush := nonReplicated(102, idNum(0), idNum(0), u32(0), []byte{0})
		if d == iggy.Current {
			c.expectStatus(iggy.Request{Code: 0, Operation: 77}, 3)
			c.expectStatus(flush, 5) // FeatureUnavailable
		} else {
			c.expectStatus(flush, 1009)
		}
		c.ok(iggy.Ping())
	})
}

func TestEvictAll(t *testing.T) {
	t.Run("current", func(t *testing.T) {
		srv := start(t, iggy.Current)
		c := loggedIn(t, srv)
		idle := dial(t, srv) // not logged in: not affected
		srv.EvictAll(13)
		r := c.do(iggy.Ping())
		if r.Eviction == nil || r.Eviction.Reason != 13 {
			t.Fatalf("got %+v", r)
		}
		var ee *iggy.EvictionError
		if err := r.Err(); !errors.As(err, &ee) || !errors.Is(err, iggy.ErrStaleClient) {
			t.Fatal(err)
		}
		c.expectClosed()
		idle.ok(iggy.Ping())
		// A new connection logs in again.
		c2 := loggedIn(t, srv)
		c2.ok(iggy.GetStreams())
		if srv.Logins() != 2 {
			t.Fatalf("logins %d", srv.Logins())
		}
	})
	t.Run("legacy", func(t *testing.T) {
		srv := start(t, iggy.Legacy)
		c := loggedIn(t, srv)
		idle := dial(t, srv)
		idle.ok(iggy.Ping())
		srv.EvictAll(13)
		c.expectClosed()
		idle.ok(iggy.Ping())
	})
}

// TestInvalidHeader: a current-dialect frame with a bad header is dropped
// with the connection and no reply (§1, §2).
func TestInvalidHeader(t *testing.T) {
	srv := start(t, iggy.Current)
	mutate := map[string]func(f []byte){
		"command":           func(f []byte) { f[60] = 7 },
		"client 0":          func(f []byte) { clear(f[128:144]) },
		"operation 0":       func(f []byte) { f[176] = 0 },
		"size too small":    func(f []byte) { binary.LittleEndian.PutUint32(f[48:], 100) },
		"size too big":      func(f []byte) { binary.LittleEndian.PutUint32(f[48:], 64<<20+1) },
		"register with req": func(f []byte) { f[176] = 1; f[168] = 5 },
		"replicated req 0":  func(f []byte) { f[176] = 128; clear(f[168:176]) },
	}
	for name, m := range mutate {
		t.Run(name, func(t *testing.T) {
			c := dial(t, srv)
			f := c.frame(iggy.Ping())
			m(f)
			c.write(f)
			c.expectClosed()
		})
	}
	// The double still serves.
	dial(t, srv).ok(iggy.Ping())
}

// TestReplyHeader checks the echoed fields of §1.2 and the §9 Ping reply.
func TestReplyHeader(t *testing.T) {
	srv := start(t, iggy.Current)
	c := dial(t, srv)
	c.id = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	f := c.frame(iggy.Ping())
	copy(f[144:160], bytes.Repeat([]byte{0xab}, 16)) // request_checksum
	binary.LittleEndian.PutUint64(f[160:], 777)      // timestamp
	c.write(f)
	raw := make([]byte, 256)
	if _, err := io.ReadFull(c.br, raw); err != nil {
		t.Fatal(err)
	}
	switch {
	case binary.LittleEndian.Uint32(raw[48:]) != 256, raw[60] != 8,
		!bytes.Equal(raw[128:144], bytes.Repeat([]byte{0xab}, 16)),
		!bytes.Equal(raw[160:176], c.id[:]),
		binary.LittleEndian.Uint64(raw[192:]) != 777,
		binary.LittleEndian.Uint64(raw[200:]) != 1, raw[208] != 2,
		binary.LittleEndian.Uint32(raw[216:]) != 0:
		t.Fatalf("reply header %x", raw)
	}
}
