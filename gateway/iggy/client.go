package iggy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kgate/kgate/internal/worktime"
)

// ErrUnavailable wraps the last connect error while the client backs off
// before dialling again.
var ErrUnavailable = errors.New("iggy: server unavailable")

// ErrClientClosed reports a call on a closed Client.
var ErrClientClosed = errors.New("iggy: client closed")

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = time.Second // a refused connect is cheap; come back quickly
	// idleCheck is how long a pooled connection may sit unused before it
	// is pinged ahead of a request that cannot simply be retried.
	idleCheck = 20 * time.Second
)

// Client is a pool of logged-in connections to one server, each carrying
// one request at a time. Broken connections are dropped and replaced on
// demand, with exponential backoff between failed connects and a fresh
// login on every new connection.
type Client struct {
	opts  Options
	slots chan struct{} // one token per connection that may exist
	idle  chan *pooled

	mu       sync.Mutex
	dialect  Dialect // detected or configured; 0 until known
	backoff  time.Duration
	nextDial time.Time
	lastErr  error
	logins   int
	closed   bool

	metrics *metrics

	// sendBufs holds SendMessages bodies for reuse: a body is the size of
	// the batch it carries, and allocating (and zeroing) one per send was
	// a fifth of the produce path's CPU.
	sendBufs sync.Pool // of *[]byte
	// pollBufs holds PollMessages reply bodies handed back by Release.
	pollBufs sync.Pool // of *[]byte
}

// maxPooledSend and maxPooledPoll bound the bodies kept for reuse.
const (
	maxPooledSend = 16 << 20
	maxPooledPoll = 16 << 20
)

type pooled struct {
	*Conn
	lastUsed time.Time
}

// NewClient returns a client that opens at most conns connections
// (at least 1), lazily.
func NewClient(opts Options, conns int) *Client {
	opts.defaults()
	conns = max(conns, 1)
	return &Client{
		opts:    opts,
		slots:   make(chan struct{}, conns),
		idle:    make(chan *pooled, conns),
		dialect: opts.Dialect,
		metrics: newMetrics(),
	}
}

// Connect opens one connection now, so start-up can report an unreachable
// server or wrong credentials; the connection joins the pool.
func (cl *Client) Connect(ctx context.Context) error {
	c, err := cl.get(ctx)
	if err != nil {
		return err
	}
	cl.put(c)
	return nil
}

// Dialect is the server's dialect, or 0 before the first connection.
func (cl *Client) Dialect() Dialect {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.dialect
}

// Logins counts successful logins (one per new connection).
func (cl *Client) Logins() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.logins
}

// Close closes idle connections; connections in use close when returned.
func (cl *Client) Close() error {
	cl.mu.Lock()
	cl.closed = true
	cl.mu.Unlock()
	for {
		select {
		case c := <-cl.idle:
			c.Close()
		default:
			return nil
		}
	}
}

func (cl *Client) get(ctx context.Context) (*pooled, error) {
	select {
	case cl.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		select {
		case c := <-cl.idle:
			if c.Err() == nil {
				return c, nil
			}
			continue
		default:
		}
		break
	}
	c, err := cl.dial(ctx)
	if err != nil {
		<-cl.slots
		return nil, err
	}
	return &pooled{Conn: c, lastUsed: time.Now()}, nil
}

func (cl *Client) dial(ctx context.Context) (*Conn, error) {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil, ErrClientClosed
	}
	if wait := time.Until(cl.nextDial); wait > 0 {
		// Backing off: a caller with time to spare waits for the next
		// attempt (the server may just be back); others fail at once.
		err := cl.lastErr
		cl.mu.Unlock()
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < wait+cl.opts.DialTimeout/10 {
			return nil, fmt.Errorf("%w (retrying in %v): %w", ErrUnavailable, wait.Round(time.Millisecond), err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		cl.mu.Lock()
		if cl.closed {
			cl.mu.Unlock()
			return nil, ErrClientClosed
		}
	}
	opts := cl.opts
	opts.Dialect = cl.dialect
	cl.mu.Unlock()

	c, err := Dial(ctx, opts)

	cl.mu.Lock()
	defer cl.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		return nil, err // the caller gave up; says nothing about the server
	}
	if err != nil {
		cl.metrics.connects.WithLabelValues("error").Inc()
		cl.backoff = min(max(2*cl.backoff, minBackoff), maxBackoff)
		cl.nextDial = time.Now().Add(cl.backoff)
		cl.lastErr = err
		cl.dialect = cl.opts.Dialect // the server may come back as another version
		return nil, err
	}
	if cl.closed {
		c.Close()
		return nil, ErrClientClosed
	}
	cl.backoff, cl.nextDial, cl.lastErr = 0, time.Time{}, nil
	cl.dialect = c.Dialect()
	cl.logins++
	cl.metrics.connects.WithLabelValues("ok").Inc()
	return c, nil
}

func (cl *Client) put(c *pooled) {
	cl.mu.Lock()
	closed := cl.closed
	cl.mu.Unlock()
	if c.Err() == nil && !closed {
		c.lastUsed = time.Now()
		cl.idle <- c // never blocks: at most cap(slots) connections exist
	} else {
		c.Close()
	}
	<-cl.slots
}

// call runs one request built for the connection's dialect. A request
// marked retryable (reads: no effect on the server) is sent once more on a
// new connection when the first one turns out to be dead; others are
// never resent here, but a long-idle connection is pinged first.
func (cl *Client) call(ctx context.Context, retryable bool, build func(Dialect) (Request, error)) (*Reply, Dialect, error) {
	defer worktime.Wait(ctx)()
	began := time.Now()
	var code uint32 // known once built
	for attempt := 0; ; attempt++ {
		c, err := cl.get(ctx)
		if err != nil {
			if code == 0 { // no connection to build on: learn the command to count it
				if req, berr := build(cl.Dialect()); berr == nil {
					code = req.Code
				}
			}
			cl.metrics.observe(code, began, err)
			return nil, 0, err
		}
		if !retryable {
			dead := c.closedByPeer()
			if !dead && time.Since(c.lastUsed) > idleCheck {
				_, err := c.Do(ctx, Ping())
				dead = err != nil && c.Err() != nil
			}
			if dead {
				cl.put(c)
				continue // take or dial another
			}
		}
		d := c.Dialect()
		req, err := build(d)
		if err != nil {
			cl.put(c)
			return nil, d, err
		}
		code = req.Code
		r, err := c.Do(ctx, req)
		dead := c.Err() != nil
		cl.put(c)
		if err != nil && retryable && dead && attempt == 0 && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			cl.metrics.reconnects.WithLabelValues(commandName(code)).Inc()
			continue
		}
		cl.metrics.observe(code, began, err)
		return r, d, err
	}
}

// Do sends a request that does not depend on the dialect.
func (cl *Client) Do(ctx context.Context, req Request, retryable bool) (*Reply, error) {
	r, _, err := cl.call(ctx, retryable, func(Dialect) (Request, error) { return req, nil })
	return r, err
}

// Ping checks the server.
func (cl *Client) Ping(ctx context.Context) error {
	_, err := cl.Do(ctx, Ping(), true)
	return err
}

// CreateStream creates a stream.
func (cl *Client) CreateStream(ctx context.Context, name string) (Stream, error) {
	req, err := CreateStream(name)
	if err != nil {
		return Stream{}, err
	}
	r, d, err := cl.call(ctx, false, func(Dialect) (Request, error) { return req, nil })
	if err != nil {
		return Stream{}, err
	}
	return DecodeCreateStreamReply(d, r.Body)
}

// GetStream returns a stream and its topics; found is false if missing.
func (cl *Client) GetStream(ctx context.Context, stream Identifier) (Stream, []Topic, bool, error) {
	req, err := GetStream(stream)
	if err != nil {
		return Stream{}, nil, false, err
	}
	r, d, err := cl.call(ctx, true, func(Dialect) (Request, error) { return req, nil })
	if err != nil {
		return Stream{}, nil, false, err
	}
	return DecodeGetStreamReply(d, r.Body)
}

// GetTopics lists a stream's topics.
func (cl *Client) GetTopics(ctx context.Context, stream Identifier) ([]Topic, error) {
	req, err := GetTopics(stream)
	if err != nil {
		return nil, err
	}
	r, d, err := cl.call(ctx, true, func(Dialect) (Request, error) { return req, nil })
	if err != nil {
		return nil, err
	}
	return DecodeGetTopicsReply(d, r.Body)
}

// GetTopic returns a topic with its partitions; found is false if missing.
func (cl *Client) GetTopic(ctx context.Context, stream, topic Identifier) (TopicDetails, bool, error) {
	req, err := GetTopic(stream, topic)
	if err != nil {
		return TopicDetails{}, false, err
	}
	r, d, err := cl.call(ctx, true, func(Dialect) (Request, error) { return req, nil })
	if err != nil {
		return TopicDetails{}, false, err
	}
	return DecodeGetTopicReply(d, r.Body)
}

// CreateTopic creates a topic.
func (cl *Client) CreateTopic(ctx context.Context, stream Identifier, c TopicConfig) (TopicDetails, error) {
	r, d, err := cl.call(ctx, false, func(d Dialect) (Request, error) { return CreateTopic(d, stream, c) })
	if err != nil {
		return TopicDetails{}, err
	}
	return DecodeCreateTopicReply(d, r.Body)
}

// UpdateTopic changes a topic's settings (see UpdateTopic for what each
// dialect needs in c).
func (cl *Client) UpdateTopic(ctx context.Context, stream, topic Identifier, c TopicConfig) error {
	_, _, err := cl.call(ctx, false, func(d Dialect) (Request, error) { return UpdateTopic(d, stream, topic, c) })
	return err
}

// DeleteTopic deletes a topic.
func (cl *Client) DeleteTopic(ctx context.Context, stream, topic Identifier) error {
	req, err := DeleteTopic(stream, topic)
	if err != nil {
		return err
	}
	_, _, err = cl.call(ctx, false, func(Dialect) (Request, error) { return req, nil })
	return err
}

// CreatePartitions adds count partitions to a topic.
func (cl *Client) CreatePartitions(ctx context.Context, stream, topic Identifier, count uint32) error {
	req, err := CreatePartitions(stream, topic, count)
	if err != nil {
		return err
	}
	_, _, err = cl.call(ctx, false, func(Dialect) (Request, error) { return req, nil })
	return err
}

// SendMessages appends msgs. Current servers confirm the base offset;
// legacy ones return no confirmations (§13.7). It is never resent here:
// a lost reply may mean the messages were stored.
func (cl *Client) SendMessages(ctx context.Context, stream, topic Identifier, p Partitioning, msgs []Message) ([]SendConfirmation, Dialect, error) {
	bp, _ := cl.sendBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	r, d, err := cl.call(ctx, false, func(d Dialect) (Request, error) {
		req, err := AppendSendMessages(*bp, d, stream, topic, p, msgs)
		*bp = req.Body
		return req, err
	})
	if cap(*bp) <= maxPooledSend {
		cl.sendBufs.Put(bp)
	}
	if err != nil {
		return nil, d, err
	}
	conf, err := DecodeSendMessagesReply(d, r.Body)
	return conf, d, err
}

// PollMessages reads messages. Their payloads and headers alias the
// reply; a caller done with all of them may hand it back with Release.
func (cl *Client) PollMessages(ctx context.Context, p Poll) (*PolledMessages, error) {
	req, err := PollMessages(p)
	if err != nil {
		return nil, err
	}
	if bp, _ := cl.pollBufs.Get().(*[]byte); bp != nil {
		req.reply = *bp
	}
	r, d, err := cl.call(ctx, !p.AutoCommit, func(Dialect) (Request, error) { return req, nil })
	if err != nil {
		return nil, err
	}
	out, err := DecodePollMessagesReply(d, r.Body)
	if err != nil {
		return nil, err
	}
	out.body = r.Body
	return out, nil
}

// Release hands the reply storage of m back for later polls. Nothing of m
// (payloads, headers) may be used afterwards; m is emptied.
func (cl *Client) Release(m *PolledMessages) {
	if m == nil || m.body == nil {
		return
	}
	b := m.body[:0]
	m.body, m.Messages = nil, nil
	if cap(b) <= maxPooledPoll {
		cl.pollBufs.Put(&b)
	}
}

// StoreConsumerOffset stores a consumer offset (Ack applies to Current).
func (cl *Client) StoreConsumerOffset(ctx context.Context, c Consumer, stream, topic Identifier, p PartitionID, offset uint64) error {
	_, _, err := cl.call(ctx, true, func(d Dialect) (Request, error) {
		return StoreConsumerOffset(d, c, stream, topic, p, offset, AckQuorum)
	})
	return err
}

// GetConsumerOffset reads a stored consumer offset; found is false when
// none is stored.
func (cl *Client) GetConsumerOffset(ctx context.Context, c Consumer, stream, topic Identifier, p PartitionID) (ConsumerOffset, bool, error) {
	req, err := GetConsumerOffset(c, stream, topic, p)
	if err != nil {
		return ConsumerOffset{}, false, err
	}
	r, d, err := cl.call(ctx, true, func(Dialect) (Request, error) { return req, nil })
	if err != nil {
		return ConsumerOffset{}, false, err
	}
	return DecodeGetConsumerOffsetReply(d, r.Body)
}
