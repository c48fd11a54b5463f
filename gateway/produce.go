package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/records"
	"github.com/kgate/kgate/internal/worktime"
)

func (s *Server) handleProduce(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxElements {
		return Reply{close: true}
	}
	// In the handler, not later: the connection's produces must reach the
	// backend in request order.
	s.awaitProduceLeaders(ctx, req)

	// Fill every partition's answer up front; batches that pass the checks
	// are marked pending and filled in when the backend answers.
	type slot struct{ t, p int }
	var batches []ProduceBatch
	var slots []slot
	refused := false // a partition's answer is an error
	topLevel := int16(0)
	switch {
	case req.Version < 3:
		topLevel = kerr.UnsupportedVersion.Code // message formats v0/v1 are gone
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		topLevel = kerr.InvalidRequiredAcks.Code
	case req.TransactionID != nil && s.txns == nil:
		topLevel = kerr.TransactionalIDAuthorizationFailed.Code
	case hasTransactionalBatch(req) && (req.TransactionID == nil ||
		!s.allowed(r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionID)):
		// Kafka refuses the whole request so, before any partition.
		topLevel = kerr.TransactionalIDAuthorizationFailed.Code
	}
	for ti, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		info, known := s.backend.Topic(rt.Topic)
		permitted := topLevel != 0 || s.allowedTopic(r, kmsg.ACLOperationWrite, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			code := topLevel
			if code == 0 {
				switch {
				case !permitted:
					code = kerr.TopicAuthorizationFailed.Code
				case !known || rp.Partition < 0 || rp.Partition >= info.Partitions:
					code = kerr.UnknownTopicOrPartition.Code
				default:
					if leader, ok := s.backend.PartitionLeader(rt.Topic, rp.Partition); !ok || leader != s.cluster.Self().ID {
						code = kerr.NotLeaderForPartition.Code
					}
				}
			}
			if code == 0 {
				b, err := s.checkBatch(rt.Topic, info, rp.Partition, rp.Records, req.Version)
				if err != nil {
					code = ErrorCode(err)
					msg := err.Error()
					sp.ErrorMessage = &msg
					var re *recordErrors
					if errors.As(err, &re) {
						sp.ErrorRecords = re.records
					}
				} else {
					batches = append(batches, b)
					slots = append(slots, slot{ti, len(st.Partitions)})
				}
			}
			sp.ErrorCode = code
			refused = refused || code != 0
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	var wait func() []ProduceResult
	if len(batches) > 0 {
		wait = s.backend.Produce(ctx, batches)
	}
	if req.Acks == 0 {
		// No answer: a partition that fails closes the connection instead,
		// as on Kafka, so the client learns of it (a moved leader, a
		// refused batch) and looks again.
		reply := Reply{none: true, close: refused}
		if wait != nil { // no answer, but the next request still sees it
			reply.done = make(chan struct{})
			go func() {
				results := wait()
				r.done()
				close(reply.done)
				if !refused && slices.ContainsFunc(results, func(res ProduceResult) bool { return res.Err != nil }) && r.hangUp != nil {
					r.hangUp()
				}
			}()
		} else {
			r.done()
		}
		return reply
	}
	if wait == nil {
		r.done()
		s.addProduceLeaderHints(resp)
		return now(resp)
	}
	return later(func() kmsg.Response {
		endWait := worktime.Wait(ctx) // the Raft log or Iggy
		results := wait()
		endWait()
		r.done() // the backend is through with the records
		for i, res := range results {
			sp := &resp.Topics[slots[i].t].Partitions[slots[i].p]
			sp.ErrorCode = ErrorCode(res.Err)
			if res.Err == nil {
				sp.BaseOffset = res.BaseOffset
				sp.LogStartOffset = res.LogStartOffset
				if res.LogAppendTime > 0 {
					sp.LogAppendTime = res.LogAppendTime
				}
			}
		}
		s.addProduceLeaderHints(resp)
		return resp
	})
}

// checkBatch validates one partition's records as a Kafka broker does: one
// magic-2 batch at base offset 0, intact, within the topic's
// max.message.bytes, compressed as the request's version allows, not a
// control batch, and its records' timestamps within the topic's bounds.
func (s *Server) checkBatch(topic string, info TopicInfo, partition int32, data []byte, version int16) (ProduceBatch, error) {
	limit := int64(s.cfg.MaxMessageBytes) // the broker's message.max.bytes, the topics' default
	if _, ok := info.Configs["max.message.bytes"]; ok {
		limit = topicLong(info, "max.message.bytes")
	}
	if int64(len(data)) > limit {
		return ProduceBatch{}, withMessage(kerr.MessageTooLarge, fmt.Sprintf("the record batch is %d bytes, more than the topic's max.message.bytes %d", len(data), limit))
	}
	if data = wholeBatches(data); len(data) == 0 {
		return ProduceBatch{}, withMessage(kerr.InvalidRecord, "a produce request must hold at least one whole record batch per partition")
	}
	hdrs, err := records.Validate(data, int(s.cfg.MaxFrameBytes))
	if err != nil {
		return ProduceBatch{}, batchError(err)
	}
	if len(hdrs) != 1 {
		return ProduceBatch{}, withMessage(kerr.InvalidRecord, "a produce request must hold exactly one record batch per partition")
	}
	h := hdrs[0]
	switch {
	case h.BaseOffset != 0:
		return ProduceBatch{}, withMessage(kerr.InvalidRecord, fmt.Sprintf("the record batch's base offset must be 0, not %d", h.BaseOffset))
	case h.Compression() == records.Zstd && version < 7:
		return ProduceBatch{}, withMessage(kerr.UnsupportedCompressionType, "zstd needs Produce v7 or later")
	case h.Control():
		return ProduceBatch{}, withMessage(kerr.InvalidRecord, "clients may not write control batches")
	case h.Transactional() && h.ProducerID < 0:
		return ProduceBatch{}, withMessage(kerr.InvalidRecord, "a transactional batch needs a producer id")
	}
	if err := s.checkTimestamps(info, h, data, time.Now().UnixMilli()); err != nil {
		return ProduceBatch{}, err
	}
	return ProduceBatch{
		Topic: topic, Partition: partition, Data: data,
		LastOffsetDelta: h.LastOffsetDelta, MaxTimestamp: h.MaxTimestamp,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence,
		NumRecords: h.NumRecords,
	}, nil
}

// hasTransactionalBatch reports whether any partition's first batch is
// transactional, as Kafka looks before authorizing the transactional id.
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if h, err := records.ParseHeader(p.Records); err == nil && h.Magic == 2 && h.Transactional() {
				return true
			}
		}
	}
	return false
}

// checkTimestamps applies the topic's message.timestamp.after.max.ms and
// before.max.ms to the batch's records against now, the node's clock, as
// Kafka's broker does on append to a CreateTime topic: any record out of
// range fails the batch with INVALID_TIMESTAMP, each such record named in
// the answer. Records without a timestamp pass.
func (s *Server) checkTimestamps(info TopicInfo, h records.Header, data []byte, now int64) error {
	if info.Configs["message.timestamp.type"] == "LogAppendTime" {
		return nil // the append time replaces them
	}
	after := topicLong(info, "message.timestamp.after.max.ms")
	before := topicLong(info, "message.timestamp.before.max.ms")
	out := func(ts int64) bool { return ts != records.NoTimestamp && (now-ts > before || ts-now > after) }
	if !out(h.MinRecordTimestamp) && !out(h.MaxRecordTimestamp) {
		return nil
	}
	// The rare path: decode the records to name the ones out of range.
	_, recs, err := records.Records(data, int(s.cfg.MaxFrameBytes))
	if err != nil {
		return batchError(err)
	}
	re := &recordErrors{codedError: codedError{code: kerr.InvalidTimestamp}}
	for i, r := range recs {
		if !out(r.Timestamp) {
			continue
		}
		msg := fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
			r.Timestamp, i, now-before, now+after)
		e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		e.RelativeOffset, e.ErrorMessage = int32(i), &msg
		re.records = append(re.records, e)
		if re.msg == "" {
			re.msg = msg
		}
	}
	return re
}

// recordErrors fails a batch for some of its records (KIP-467's
// record_errors): the batch's code and message, and each record's.
type recordErrors struct {
	codedError
	records []kmsg.ProduceResponseTopicPartitionErrorRecord
}

// wholeBatches is data up to its last whole batch, by the batches' length
// fields, as Kafka's reader finds batches: a batch cut short ends them and
// is dropped with whatever follows (so a request without one whole batch is
// INVALID_RECORD, not CORRUPT_MESSAGE). A length below Kafka's
// smallest record leaves data as it is, for Validate to call it corrupt.
func wholeBatches(data []byte) []byte {
	const prefix, smallest = 12, 14 // offset and length fields; Kafka's smallest record (magic 0)
	n := 0
	for len(data)-n >= prefix {
		size := int64(int32(binary.BigEndian.Uint32(data[n+8:])))
		if size < smallest {
			return data
		}
		if int64(len(data)-n) < prefix+size {
			break
		}
		n += prefix + int(size)
	}
	return data[:n]
}

func batchError(err error) error {
	switch {
	case errors.Is(err, records.ErrCorrupt):
		return withMessage(kerr.CorruptMessage, err.Error())
	case errors.Is(err, records.ErrUnsupportedCompression):
		return withMessage(kerr.UnsupportedCompressionType, err.Error())
	case errors.Is(err, records.ErrTooLarge):
		return withMessage(kerr.MessageTooLarge, err.Error())
	default:
		return withMessage(kerr.InvalidRecord, err.Error())
	}
}

// codedError carries a Kafka code and a message for the client.
type codedError struct {
	code *kerr.Error
	msg  string
}

func (e *codedError) Error() string { return e.code.Message + ": " + e.msg }
func (e *codedError) Unwrap() error { return e.code }

func withMessage(code *kerr.Error, msg string) error { return &codedError{code: code, msg: msg} }
