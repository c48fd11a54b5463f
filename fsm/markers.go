package fsm

import (
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record batch attribute bits (Kafka's RecordBatch attributes).
const (
	attrTransactional = 0x10
	attrControl       = 0x20
	// batchAttributesAt is where a v2 batch's attributes start: base
	// offset (8), length (4), leader epoch (4), magic (1), CRC (4).
	batchAttributesAt = 21
)

// transactionalBatch tells whether a validated v2 batch has the
// transactional bit set.
func transactionalBatch(data []byte) bool {
	return len(data) > batchAttributesAt+1 && data[batchAttributesAt+1]&attrTransactional != 0
}

// markerBatch encodes a transaction marker: a control batch of one record
// whose key says COMMIT or ABORT, as Kafka's brokers write it. Every input
// comes from the command, so every replica writes the same bytes.
func markerBatch(producerID int64, epoch int16, commit bool, nowMs int64, coordinatorEpoch int32) []byte {
	key := kmsg.NewControlRecordKey()
	key.Type = kmsg.ControlRecordKeyTypeAbort
	if commit {
		key.Type = kmsg.ControlRecordKeyTypeCommit
	}
	value := kmsg.NewEndTxnMarker()
	value.CoordinatorEpoch = coordinatorEpoch
	rec := kmsg.Record{Key: key.AppendTo(nil), Value: value.AppendTo(nil)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the zero length took one byte
	recBytes := rec.AppendTo(nil)

	b := kmsg.RecordBatch{
		Magic:          2,
		Attributes:     attrTransactional | attrControl,
		FirstTimestamp: nowMs,
		MaxTimestamp:   nowMs,
		ProducerID:     producerID,
		ProducerEpoch:  epoch,
		FirstSequence:  -1,
		NumRecords:     1,
		Records:        recBytes,
	}
	out := b.AppendTo(nil)
	// Length counts what follows it; the CRC covers the attributes on.
	putU32(out[8:], uint32(len(out)-12))
	putU32(out[17:], crc32.Checksum(out[batchAttributesAt:], castagnoli))
	return out
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}
