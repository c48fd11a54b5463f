package iggytest

import (
	"fmt"

	"github.com/kgate/kgate/gateway/iggy"
)

// CreateTopic creates topic (never expiring, unlimited size, no
// compression) with partitions partitions in stream, creating the stream
// if missing, as a native client would. It returns an *iggy.Error 2013
// (TopicNameAlreadyExists) if the topic exists, 2015 for more than 1000
// partitions.
func (s *Server) CreateTopic(stream, topicName string, partitions uint32) error {
	if err := checkName(stream); err != nil {
		return err
	}
	if err := checkName(topicName); err != nil {
		return err
	}
	if partitions > maxPartitions {
		return iggy.CodeError(codeTooManyPartitions)
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	st := s.data.streamByName(stream)
	if st == nil {
		var c uint32
		if st, c = s.data.createStream(stream); c != 0 {
			return iggy.CodeError(c)
		}
	}
	t := &topic{name: topicName, compression: 1, expiry: never, maxSize: never, replication: 1}
	if _, c := s.data.createTopic(st, t, partitions); c != 0 {
		return iggy.CodeError(c)
	}
	return nil
}

func checkName(n string) error {
	if len(n) < 1 || len(n) > 255 {
		return fmt.Errorf("iggytest: name must be 1..255 bytes, got %d", len(n))
	}
	return nil
}

// Append stores msgs at the end of a partition, as one batch with one
// append timestamp, and returns the offset of the first one. Headers are
// encoded with iggy.EncodeUserHeaders. A zero ID stays zero on a Current
// double and gets a random UUID on a Legacy one (as each server does).
// Missing stream / topic / partition give *iggy.Error 1009 / 2010 / 3007.
func (s *Server) Append(stream, topicName string, partition uint32, msgs ...iggy.Message) (baseOffset uint64, err error) {
	if len(msgs) == 0 {
		return 0, fmt.Errorf("iggytest: Append without messages")
	}
	stored := make([]StoredMessage, len(msgs))
	for i, m := range msgs {
		h, err := iggy.EncodeUserHeaders(m.Headers)
		if err != nil {
			return 0, fmt.Errorf("iggytest: message %d: %w", i, err)
		}
		stored[i] = StoredMessage{
			ID: m.ID, OriginTimestamp: m.OriginTimestamp,
			Payload: append([]byte(nil), m.Payload...), UserHeaders: h,
		}
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	_, t, c := s.data.lookup(ident{name: stream, isName: true}, ident{name: topicName, isName: true})
	if c != 0 {
		return 0, iggy.CodeError(c)
	}
	if int64(partition) >= int64(len(t.partitions)) {
		return 0, iggy.CodeError(codePartitionNotFound)
	}
	return s.data.appendMsgs(t.partitions[partition], stored), nil
}

// Messages returns a copy of the messages a partition retains (after
// applying the topic's message expiry), oldest first; nil if the stream,
// topic or partition does not exist.
func (s *Server) Messages(stream, topicName string, partition uint32) []StoredMessage {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	_, t, c := s.data.lookup(ident{name: stream, isName: true}, ident{name: topicName, isName: true})
	if c != 0 || int64(partition) >= int64(len(t.partitions)) {
		return nil
	}
	p := t.partitions[partition]
	out := make([]StoredMessage, len(p.msgs))
	for i, m := range p.msgs {
		out[i] = m.StoredMessage
		out[i].Payload = append([]byte(nil), m.Payload...)
		out[i].UserHeaders = append([]byte(nil), m.UserHeaders...)
	}
	return out
}
