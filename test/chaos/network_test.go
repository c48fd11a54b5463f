//go:build linux

package chaos

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line on c and reads it back; an error means the link
// is down.
func roundTrip(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

// linksFromOne is a network in which this test dials as node 1, with
// proxies to echo servers as nodes 2 and 3.
func linksFromOne(t *testing.T) (*Network, *Proxy, *Proxy) {
	t.Helper()
	nw := NewNetwork()
	t.Cleanup(nw.Close)
	nw.SetProcess(1, os.Getpid())
	to2, err := nw.Listen(2, echoServer(t), false)
	if err != nil {
		t.Fatal(err)
	}
	to3, err := nw.Listen(3, echoServer(t), false)
	if err != nil {
		t.Fatal(err)
	}
	return nw, to2, to3
}

// dial opens a connection through p, closed when the test ends.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestNetworkCutAndHeal: a proxy knows the dialling process as its node,
// passes bytes while the link is up, closes open connections and refuses
// new ones once it is cut, and passes again after Heal; a link not cut is
// untouched.
func TestNetworkCutAndHeal(t *testing.T) {
	nw, to2, to3 := linksFromOne(t)
	open2, open3 := dial(t, to2), dial(t, to3)
	if err := roundTrip(open2); err != nil {
		t.Fatalf("link 1-2 up: %v", err)
	}
	if err := roundTrip(open3); err != nil {
		t.Fatalf("link 1-3 up: %v", err)
	}

	nw.Cut(1, 2)
	if err := roundTrip(open2); err == nil {
		t.Fatal("an open connection on the cut link 1-2 still passes bytes")
	}
	if err := roundTrip(dial(t, to2)); err == nil {
		t.Fatal("a new connection on the cut link 1-2 passes bytes")
	}
	if err := roundTrip(open3); err != nil {
		t.Fatalf("link 1-3 was not cut: %v", err)
	}

	nw.Heal()
	if err := roundTrip(dial(t, to2)); err != nil {
		t.Fatalf("link 1-2 after heal: %v", err)
	}
	if n := nw.Unknowns().Total; n != 0 {
		t.Fatalf("%d connections from an unknown sender, want 0", n)
	}
}

// TestNetworkUnknownSender: a connection from a process that is no node is
// counted, with why; it passes while every link of its target is up, is
// refused while one is down (cut or black-holed), and is closed when one
// goes down: unknown, it could be from the far side of that link.
func TestNetworkUnknownSender(t *testing.T) {
	nw := NewNetwork()
	defer nw.Close()
	to2, err := nw.Listen(2, echoServer(t), false)
	if err != nil {
		t.Fatal(err)
	}
	to3, err := nw.Listen(3, echoServer(t), false)
	if err != nil {
		t.Fatal(err)
	}
	open2 := dial(t, to2)
	if err := roundTrip(open2); err != nil {
		t.Fatalf("unknown sender, every link up: %v", err)
	}
	nw.Cut(1, 3)
	if err := roundTrip(open2); err != nil {
		t.Fatalf("unknown sender to node 2 after a cut of 1-3: %v", err)
	}
	if err := roundTrip(dial(t, to3)); err == nil {
		t.Fatal("a new connection of an unknown sender to node 3, whose link 1-3 is cut, passes bytes")
	}
	nw.Cut(1, 2)
	if err := roundTrip(open2); err == nil {
		t.Fatal("an open connection of an unknown sender to node 2 passes bytes after the cut of 1-2")
	}
	nw.Heal()
	held := dial(t, to2)
	if err := roundTrip(held); err != nil {
		t.Fatalf("unknown sender after the heal: %v", err)
	}
	nw.BlackHole(1, 2)
	if err := roundTrip(held); err == nil {
		t.Fatal("an open connection of an unknown sender to node 2 passes bytes into a black hole")
	}
	if err := roundTrip(dial(t, to2)); err == nil {
		t.Fatal("a new connection of an unknown sender to node 2 passes bytes into a black hole")
	}
	u := nw.Unknowns()
	if u.Total != 4 || u.Refused != 2 || u.Closed != 2 {
		t.Fatalf("unknown senders %+v, want 4, 2 of them refused and 2 closed", u)
	}
	for why, n := range u.Why {
		if !strings.HasPrefix(why, NoNode) || n != 4 {
			t.Fatalf("unknown senders by why: %v, want all 4 %q (this test process)", u.Why, NoNode)
		}
	}
}

// TestNetworkGossipUDP: a gossip datagram is known by its source port (the
// sending node's own gossip port); a cut link drops it, a healed one
// passes it.
func TestNetworkGossipUDP(t *testing.T) {
	listen := func() *net.UDPConn {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { u.Close() })
		return u
	}
	gossip1, gossip2 := listen(), listen()
	nw := NewNetwork()
	defer nw.Close()
	if _, err := nw.Listen(1, gossip1.LocalAddr().String(), true); err != nil {
		t.Fatal(err)
	}
	to2, err := nw.Listen(2, gossip2.LocalAddr().String(), true)
	if err != nil {
		t.Fatal(err)
	}
	proxy2, err := net.ResolveUDPAddr("udp", to2.Addr)
	if err != nil {
		t.Fatal(err)
	}
	send := func(msg string) {
		if _, err := gossip1.WriteToUDP([]byte(msg), proxy2); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() string {
		buf := make([]byte, 100)
		_ = gossip2.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _, err := gossip2.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("node 2 received nothing: %v", err)
		}
		return string(buf[:n])
	}
	send("up")
	if got := recv(); got != "up" {
		t.Fatalf("received %q, want up", got)
	}
	nw.Cut(1, 2)
	send("while cut")
	for deadline := time.Now().Add(10 * time.Second); nw.Dropped() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the datagram sent on the cut link was neither dropped nor passed")
		}
	}
	nw.Heal()
	send("healed")
	// Datagrams on loopback keep their order: the first one node 2 gets
	// after the cut shows whether the cut one was dropped.
	if got := recv(); got != "healed" {
		t.Fatalf("received %q after the cut, want the datagram sent after the heal", got)
	}
}

// TestNetworkBlackHole: a black-holed link closes nothing and passes
// nothing, on open connections and on new ones (a dial still succeeds);
// a link not black-holed is untouched; after Heal what was held arrives,
// in order, on the same connections.
func TestNetworkBlackHole(t *testing.T) {
	nw, to2, to3 := linksFromOne(t)
	open2, open3 := dial(t, to2), dial(t, to3)
	if err := roundTrip(open2); err != nil {
		t.Fatalf("link 1-2 up: %v", err)
	}

	nw.BlackHole(1, 2)
	fresh2 := dial(t, to2) // accepted, as a SYN-ACK would have been before the hole
	silent := func(name string, c net.Conn) *bufio.Reader {
		if _, err := c.Write([]byte("held " + name + "\n")); err != nil {
			t.Fatalf("%s: a write into the black hole failed: %v", name, err)
		}
		r := bufio.NewReader(c)
		// Nothing may come back, and the connection must not close: only
		// the reader's own timeout ends the wait.
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		line, err := r.ReadString('\n')
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%s: read %q, %v through the black hole; want nothing until the reader's timeout", name, line, err)
		}
		return r
	}
	r2, rFresh := silent("open", open2), silent("fresh", fresh2)
	if err := roundTrip(open3); err != nil {
		t.Fatalf("link 1-3 was not black-holed: %v", err)
	}

	nw.Heal()
	for name, r := range map[string]*bufio.Reader{"open": r2, "fresh": rFresh} {
		c := open2
		if name == "fresh" {
			c = fresh2
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if line, err := r.ReadString('\n'); err != nil || line != "held "+name+"\n" {
			t.Fatalf("%s connection after heal: read %q, %v; want what was held", name, line, err)
		}
	}
	if err := roundTrip(dial(t, to2)); err != nil {
		t.Fatalf("link 1-2 after heal: %v", err)
	}
}

// TestNetworkSplit: Split cuts exactly the links that cross between the
// side and the rest, both ways.
func TestNetworkSplit(t *testing.T) {
	nw := NewNetwork()
	defer nw.Close()
	nw.Split([]int{1, 4}, []int{1, 2, 3, 4, 5})
	for a := 1; a <= 5; a++ {
		for b := 1; b <= 5; b++ {
			if a == b {
				continue
			}
			crosses := (a == 1 || a == 4) != (b == 1 || b == 4)
			if got := nw.isCut(a, b); got != crosses {
				t.Errorf("link %d-%d cut: %v, want %v", a, b, got, crosses)
			}
		}
	}
}
