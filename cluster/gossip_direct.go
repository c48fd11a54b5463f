package cluster

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// directExchangeTimeout bounds one direct push-pull with a node (pushPull:
// a leaving node telling the leader, reviveFailedServers, mayJoin, a
// non-voter's progress, the feature level). memberlist gives every stream
// its TCPTimeout (10 s), meant for its own periodic state sync: behind a
// black hole (a link that drops every byte and resets nothing) one such
// exchange held its caller for 10 s, and with it the next node to ask, the
// next retry of a leave, the leader's reconcile. A push-pull between live
// nodes takes milliseconds; a node that cannot answer within this is
// asked again by the caller's next round.
const directExchangeTimeout = time.Second

// boundedTransport is memberlist's transport with the streams of direct
// exchanges bounded: while a direct exchange with an address is in flight
// (do), a stream dialled to that address gets the exchange's deadline and
// is closed when the caller's context ends (not when the exchange ends: a
// stream of memberlist's own may outlive it). memberlist's Join, which the
// exchange runs, cannot be given a deadline of its own; its streams can.
// One exchange with an address is in flight at a time, so that each
// stream's bound is its own exchange's; a stream memberlist itself opens to
// the same node meanwhile (its own push-pull, every 30 s) gets the same
// bound. Every other stream keeps memberlist's timeouts.
type boundedTransport struct {
	memberlist.NodeAwareTransport

	mu      sync.Mutex
	flights map[string]*flight // by address (addrKey)
}

// flight is a direct exchange in flight.
type flight struct {
	ctx      context.Context // the caller's
	deadline time.Time
	done     chan struct{}
	ok       bool
}

func newBoundedTransport(t memberlist.Transport) *boundedTransport {
	na, ok := t.(memberlist.NodeAwareTransport)
	if !ok {
		na = shimTransport{t}
	}
	return &boundedTransport{NodeAwareTransport: na, flights: map[string]*flight{}}
}

// shimTransport makes a plain Transport (tests') node-aware, as memberlist
// does for one it is given.
type shimTransport struct{ memberlist.Transport }

func (s shimTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return s.WriteTo(b, a.Addr)
}

func (s shimTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return s.DialTimeout(a.Addr, timeout)
}

// addrKey is addr in one spelling (memberlist's Join re-spells what it is
// given).
func addrKey(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	return addr
}

// do runs exchange, a direct exchange with addr, its streams bounded by
// deadline and ctx. While another is in flight with addr, it waits for
// that one's outcome instead, until deadline or ctx ends.
func (t *boundedTransport) do(ctx context.Context, deadline time.Time, addr string, exchange func() bool) bool {
	k := addrKey(addr)
	t.mu.Lock()
	if f := t.flights[k]; f != nil {
		t.mu.Unlock()
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		select {
		case <-f.done:
			return f.ok
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		}
	}
	f := &flight{ctx: ctx, deadline: deadline, done: make(chan struct{})}
	t.flights[k] = f
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.flights, k)
		t.mu.Unlock()
		close(f.done)
	}()
	f.ok = exchange()
	return f.ok
}

// boundOf is the exchange in flight with addr, if any.
func (t *boundedTransport) boundOf(addr string) *flight {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.flights[addrKey(addr)]
}

func (t *boundedTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *boundedTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	f := t.boundOf(a.Addr)
	if f == nil {
		return t.NodeAwareTransport.DialAddressTimeout(a, timeout)
	}
	ctx, deadline := f.ctx, f.deadline
	if left := time.Until(deadline); left < timeout {
		timeout = left
	}
	if timeout <= 0 || ctx.Err() != nil {
		return nil, errors.Join(errors.New("gossip: direct exchange with "+a.Addr+" out of time"), ctx.Err())
	}
	c, err := t.NodeAwareTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	bc := &boundedConn{Conn: c, deadline: deadline}
	// The caller's context ending (it gave up, the node stops) ends the
	// stream at once.
	bc.stop = context.AfterFunc(ctx, func() { c.Close() })
	if err := c.SetDeadline(deadline); err != nil {
		bc.Close()
		return nil, err
	}
	return bc, nil
}

// boundedConn never waits past deadline, whatever deadline memberlist sets.
type boundedConn struct {
	net.Conn
	deadline time.Time
	stop     func() bool
}

func (c *boundedConn) clamp(t time.Time) time.Time {
	if t.IsZero() || t.After(c.deadline) {
		return c.deadline
	}
	return t
}

func (c *boundedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *boundedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *boundedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

func (c *boundedConn) Close() error {
	c.stop()
	return c.Conn.Close()
}
