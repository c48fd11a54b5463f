package iggybackend

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kgate/kgate/gateway/iggy"
)

var errUnknownPartition = kerr.UnknownTopicOrPartition

// kafkaError maps an Iggy failure to the Kafka code a client should see
// on a read (Fetch, ListOffsets) or an admin request. Anything that may
// pass (the server down, slow or restarting) is KAFKA_STORAGE_ERROR, which
// every client retries after refreshing its metadata; REQUEST_TIMED_OUT is
// not a code the Java consumer accepts on a fetched partition.
func kafkaError(err error) error {
	var ke *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke):
		return ke
	case errors.Is(err, iggy.ErrStreamNotFound), errors.Is(err, iggy.ErrTopicNotFound),
		errors.Is(err, iggy.ErrPartitionNotFound), errors.Is(err, iggy.ErrResourceNotFound),
		errors.Is(err, iggy.ErrNoPartitions):
		return kerr.UnknownTopicOrPartition
	case errors.Is(err, iggy.ErrUnauthorized):
		return kerr.TopicAuthorizationFailed
	case errors.Is(err, iggy.ErrTopicFull):
		return kerr.PolicyViolation
	case errors.Is(err, iggy.ErrInvalidMessages):
		return kerr.MessageTooLarge
	case errors.Is(err, iggy.ErrInvalidChecksum):
		return kerr.CorruptMessage
	}
	return kerr.KafkaStorageError
}

// produceError is kafkaError for Produce, where an unreachable or slow
// Iggy is REQUEST_TIMED_OUT: producers retry it at once, without the
// metadata refresh (rate-limited to one per 5 s in franz-go) that
// KAFKA_STORAGE_ERROR costs.
func produceError(err error) error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) || errors.Is(err, iggy.ErrUnavailable) ||
		errors.Is(err, iggy.ErrConnClosed) || errors.Is(err, iggy.ErrEvicted) {
		return kerr.RequestTimedOut
	}
	return kafkaError(err)
}

// outcomeUnknown reports a failed request that may have reached the
// server: the connection broke or the deadline passed after it was sent.
// A connect that failed, or a server's refusal, is a known failure.
func outcomeUnknown(err error) bool {
	if errors.Is(err, iggy.ErrUnavailable) || errors.Is(err, iggy.ErrClientClosed) {
		return false
	}
	var ie *iggy.Error
	if errors.As(err, &ie) {
		return false
	}
	return true
}

// errorLog rate-limits the log line for Iggy failures: while the server is
// down every request fails, and one line per second is enough.
type errorLog struct {
	mu   sync.Mutex
	last time.Time
	n    int
}

func (b *Backend) noteError(op, topic string, part int32, err error) {
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, iggy.ErrTopicNotFound) ||
		errors.Is(err, iggy.ErrResourceNotFound) || errors.Is(err, iggy.ErrPartitionNotFound) {
		b.kickRefresh()
	}
	b.errs.mu.Lock()
	b.errs.n++
	if time.Since(b.errs.last) < time.Second {
		b.errs.mu.Unlock()
		return
	}
	n := b.errs.n
	b.errs.n, b.errs.last = 0, time.Now()
	b.errs.mu.Unlock()
	b.log.Warn("iggy request failed", "op", op, "topic", topic, "partition", part, "err", err, "failures", n)
}
