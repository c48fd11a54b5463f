package iggybackend

// Record ↔ message encoding of the Iggy backend: one Kafka record is one
// Iggy message. The format ("kgate format 1") is specified byte for byte in
// docs/iggy.md, section "Record encoding"; keep the two in step.

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

var (
	// ErrRecordTooLarge: a record cannot be stored as one Iggy message
	// under any layout (its key and headers need more than
	// iggy.MaxUserHeadersSize bytes of user headers, or its value is over
	// iggy.MaxPayloadSize). Kafka's answer is MESSAGE_TOO_LARGE (10).
	ErrRecordTooLarge = errors.New("iggybackend: record too large for an Iggy message")
	// ErrMalformedMessage: a message's user headers do not parse, or its
	// kgate metadata is inconsistent or of an unknown format version.
	// Such a message can still be served with DecodeNative.
	ErrMalformedMessage = errors.New("iggybackend: malformed kgate message")
)

// FormatVersion is the kgate format version written in the marker header.
const FormatVersion = 1

// Reserved user-header keys (all of kind String).
const (
	markerKey   = "kgate"     // first pair of every message carrying metadata
	keyHeader   = "kafka.key" // the Kafka key when it is 1..255 bytes
	chunkPrefix = "kafka.r."  // kafka.r.0, kafka.r.1, ...: the envelope
)

// Marker flags (byte 1 of the marker value).
const (
	flagKeyHeader  = 0x01 // the pair after the marker is kafka.key
	flagKeyEnv     = 0x02 // the envelope holds the key
	flagValueNull  = 0x04 // value is null; the payload is the placeholder
	flagValueEmpty = 0x08 // value is empty; the payload is the placeholder
	flagTimestamp  = 0x10 // the envelope holds the timestamp
	flagHeaders    = 0x20 // the envelope holds some headers
	// flagTxn: the record is of a transactional batch; its producer id,
	// epoch and sequence are in the message id (idempotent id layout).
	flagTxn = 0x40
	// flagControl: the message is a transaction marker (a control
	// record); its producer id and epoch are in the message id.
	flagControl = 0x80

	flagsEnv = flagKeyEnv | flagTimestamp | flagHeaders
)

const (
	maxTLV       = 255 // longest user-header key or value
	pairOverhead = 10  // two [kind u8][len u32] prefixes
	markerLen    = 4   // [version][flags][chunks u16 BE]
	maxChunks    = math.MaxUint16
)

// placeholderByte is the payload of a record whose value is null or empty
// (Iggy payloads cannot be empty).
const placeholderByte = 0x00

// ---- Encoding ----

// EncodeBatch maps the records of one decoded Kafka batch to Iggy
// messages, one per record and in order. Payloads and header values alias
// the records. newID is called once per message, in order.
//
// Every returned OriginTimestamp lies within math.MaxUint32 µs of the
// smallest one, as a Current-dialect SendMessages batch requires. A record
// that cannot fit fails the whole batch with an error wrapping
// ErrRecordTooLarge.
func EncodeBatch(recs []records.Record, hdr records.Header, newID func() [16]byte) ([]iggy.Message, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	var extra byte
	if hdr.Transactional() {
		extra = flagTxn
	}
	logAppend := hdr.LogAppendTime()
	var win uint64
	hasWin := false
	if !logAppend {
		win, hasWin = originWindow(recs)
	}
	out := make([]iggy.Message, len(recs))
	for i := range recs {
		r := &recs[i]
		if len(r.Value) > iggy.MaxPayloadSize {
			return nil, fmt.Errorf("%w: record %d: value of %d bytes (Iggy limit %d)",
				ErrRecordTooLarge, i, len(r.Value), iggy.MaxPayloadSize)
		}
		var origin uint64
		tsEnv := false
		if !logAppend {
			origin, tsEnv = placeTimestamp(r.Timestamp, win, hasWin)
		}
		hs, err := encodeHeaders(r, tsEnv, false, extra)
		if errors.Is(err, ErrRecordTooLarge) {
			// The compact layout (everything in the envelope) costs a few
			// bytes per header instead of ten: try it when the readable
			// one does not fit.
			hs, err = encodeHeaders(r, tsEnv, true, extra)
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		payload := r.Value
		if len(payload) == 0 {
			payload = []byte{placeholderByte}
		}
		out[i] = iggy.Message{ID: newID(), OriginTimestamp: origin, Payload: payload, Headers: hs}
	}
	return out, nil
}

// exactOrigin returns ts ms as µs when a native reader would read it back
// exactly: ts ≥ 1 (origin 0 means "none") and ts×1000 fits in an int64.
func exactOrigin(ts int64) (uint64, bool) {
	if ts < 1 || ts > math.MaxInt64/1000 {
		return 0, false
	}
	return uint64(ts) * 1000, true
}

// originWindow picks the start W of the window [W, W+MaxUint32] µs that
// holds the most exactly representable record timestamps (ties: the
// earliest W). ok is false when no timestamp is representable.
func originWindow(recs []records.Record) (w uint64, ok bool) {
	lo, hi := uint64(math.MaxUint64), uint64(0)
	n := 0
	for i := range recs {
		if o, exact := exactOrigin(recs[i].Timestamp); exact {
			lo, hi = min(lo, o), max(hi, o)
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	if hi-lo <= math.MaxUint32 {
		return lo, true // the usual case: everything fits
	}
	c := make([]uint64, 0, n)
	for i := range recs {
		if o, exact := exactOrigin(recs[i].Timestamp); exact {
			c = append(c, o)
		}
	}
	slices.Sort(c)
	best, bestN := c[0], 0
	for i, j := 0, 0; i < len(c); i++ {
		for j < len(c) && c[j]-c[i] <= math.MaxUint32 {
			j++
		}
		if j-i > bestN {
			best, bestN = c[i], j-i
		}
	}
	return best, true
}

// placeTimestamp returns a record's origin timestamp and whether its
// Kafka timestamp must travel in the envelope. Origins not carrying the
// timestamp are clamped into the window (0 when there is none).
func placeTimestamp(ts int64, w uint64, hasWin bool) (origin uint64, inEnvelope bool) {
	if !hasWin {
		return 0, true
	}
	o, exact := exactOrigin(ts)
	switch {
	case exact && o >= w && o-w <= math.MaxUint32:
		return o, false
	case exact && o > w, !exact && ts > 0:
		return w + math.MaxUint32, true
	default:
		return w, true
	}
}

// plainHeader reports whether a Kafka header may be written as an ordinary
// user header (name and value 1..255 bytes, name not reserved). Names must
// also be unique among a message's plain headers; the caller checks that.
func plainHeader(h *records.RecordHeader) bool {
	return len(h.Key) >= 1 && len(h.Key) <= maxTLV && h.Value != nil &&
		len(h.Value) >= 1 && len(h.Value) <= maxTLV && !reservedName(h.Key)
}

func reservedName(name string) bool {
	return name == markerKey || name == keyHeader || strings.HasPrefix(name, chunkPrefix)
}

// nameKind is String for UTF-8 header names, Raw otherwise.
func nameKind(name string) uint8 {
	if utf8.ValidString(name) {
		return iggy.KindString
	}
	return iggy.KindRaw
}

func chunkKey(i int) string { return chunkPrefix + strconv.Itoa(i) }

// encodeHeaders returns the user headers of one record. In the readable
// layout a 1..255-byte key is the kafka.key header and every plain header
// (see plainHeader) with a name not seen before is an ordinary pair; the
// rest goes into the envelope. The compact layout puts key and all
// headers into the envelope.
func encodeHeaders(r *records.Record, tsEnv, compact bool, extra byte) ([]iggy.UserHeader, error) {
	flags := extra
	var env []byte
	switch {
	case r.Key == nil:
	case !compact && len(r.Key) >= 1 && len(r.Key) <= maxTLV:
		flags |= flagKeyHeader
	default:
		flags |= flagKeyEnv
		env = binary.AppendUvarint(env, uint64(len(r.Key)))
		env = append(env, r.Key...)
	}
	switch {
	case r.Value == nil:
		flags |= flagValueNull
	case len(r.Value) == 0:
		flags |= flagValueEmpty
	}
	if tsEnv {
		flags |= flagTimestamp
		env = binary.AppendVarint(env, r.Timestamp)
	}

	// Choose the plain headers; the others go to the envelope by index.
	plain := make([]bool, len(r.Headers))
	nPlain, plainSize := 0, 0
	var seen map[string]struct{}
	if !compact {
		for i := range r.Headers {
			h := &r.Headers[i]
			if !plainHeader(h) {
				continue
			}
			if len(r.Headers) <= 8 { // a scan beats a map for a few headers
				dup := false
				for j := range i {
					if plain[j] && r.Headers[j].Key == h.Key {
						dup = true
						break
					}
				}
				if dup {
					continue
				}
			} else {
				if _, dup := seen[h.Key]; dup {
					continue
				}
				if seen == nil {
					seen = make(map[string]struct{}, len(r.Headers))
				}
				seen[h.Key] = struct{}{}
			}
			plain[i] = true
			nPlain++
			plainSize += pairOverhead + len(h.Key) + len(h.Value)
		}
	}
	if nEnv := len(r.Headers) - nPlain; nEnv > 0 {
		flags |= flagHeaders
		env = binary.AppendUvarint(env, uint64(nEnv))
		for i := range r.Headers {
			if plain[i] {
				continue
			}
			h := &r.Headers[i]
			env = binary.AppendUvarint(env, uint64(i))
			env = binary.AppendUvarint(env, uint64(len(h.Key)))
			env = append(env, h.Key...)
			if h.Value == nil {
				env = append(env, 0)
			} else {
				env = binary.AppendUvarint(env, uint64(len(h.Value))+1)
				env = append(env, h.Value...)
			}
		}
	}

	if flags == 0 {
		// Nothing beyond the plain headers: no marker, the message reads
		// the same natively and through kgate.
		if nPlain == 0 {
			return nil, nil
		}
		if plainSize > iggy.MaxUserHeadersSize {
			return nil, headersTooLarge(plainSize)
		}
		hs := make([]iggy.UserHeader, 0, nPlain)
		return appendPlain(hs, r.Headers, plain), nil
	}

	chunks := (len(env) + maxTLV - 1) / maxTLV
	size := plainSize + pairOverhead + len(markerKey) + markerLen + len(env) + chunks*pairOverhead
	if flags&flagKeyHeader != 0 {
		size += pairOverhead + len(keyHeader) + len(r.Key)
	}
	for i := 0; i < chunks && size <= iggy.MaxUserHeadersSize; i++ {
		size += len(chunkPrefix) + len(strconv.Itoa(i))
	}
	if size > iggy.MaxUserHeadersSize || chunks > maxChunks {
		return nil, headersTooLarge(size)
	}

	hs := make([]iggy.UserHeader, 0, 1+1+chunks+nPlain)
	hs = append(hs, iggy.UserHeader{
		Key:   iggy.HeaderValue{Kind: iggy.KindString, Value: []byte(markerKey)},
		Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: []byte{FormatVersion, flags, byte(chunks >> 8), byte(chunks)}},
	})
	if flags&flagKeyHeader != 0 {
		hs = append(hs, iggy.UserHeader{
			Key:   iggy.HeaderValue{Kind: iggy.KindString, Value: []byte(keyHeader)},
			Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: r.Key},
		})
	}
	for i := 0; i < chunks; i++ {
		end := min((i+1)*maxTLV, len(env))
		hs = append(hs, iggy.UserHeader{
			Key:   iggy.HeaderValue{Kind: iggy.KindString, Value: []byte(chunkKey(i))},
			Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: env[i*maxTLV : end : end]},
		})
	}
	return appendPlain(hs, r.Headers, plain), nil
}

func headersTooLarge(size int) error {
	return fmt.Errorf("%w: key and headers need %d bytes of Iggy user headers (limit %d)",
		ErrRecordTooLarge, size, iggy.MaxUserHeadersSize)
}

func appendPlain(hs []iggy.UserHeader, headers []records.RecordHeader, plain []bool) []iggy.UserHeader {
	for i := range headers {
		if !plain[i] {
			continue
		}
		h := &headers[i]
		hs = append(hs, iggy.UserHeader{
			Key:   iggy.HeaderValue{Kind: nameKind(h.Key), Value: []byte(h.Key)},
			Value: iggy.HeaderValue{Kind: iggy.KindRaw, Value: h.Value},
		})
	}
	return hs
}

// ---- Decoding ----

// DecodeMessage maps a polled message back to a Kafka record: a message
// written by EncodeBatch gives back exactly the record it was given. A
// message whose first user header is not the kgate marker is read with
// the native mapping (see DecodeNative), which is also how EncodeBatch
// writes records that need no metadata. Key, Value and header values may alias m. Errors wrap
// ErrMalformedMessage; the caller may then serve DecodeNative(m).
func DecodeMessage(m iggy.PolledMessage) (records.Record, error) {
	rec, _, err := decodeMessage(m)
	return rec, err
}

// decodeMessage is DecodeMessage that also returns the marker's flags (0
// for a message without the marker).
func decodeMessage(m iggy.PolledMessage) (records.Record, byte, error) {
	hs, err := iggy.DecodeUserHeaders(m.UserHeaders)
	if err != nil {
		return records.Record{}, 0, fmt.Errorf("%w: user headers: %w", ErrMalformedMessage, err)
	}
	rec := nativeRecord(m)
	if len(hs) == 0 || !isStringKey(hs[0].Key, markerKey) {
		rec.Headers = nativeHeaders(hs)
		return rec, 0, nil
	}
	flags, err := decodeKgate(&rec, m.Payload, hs)
	if err != nil {
		return records.Record{}, 0, fmt.Errorf("%w: %s", ErrMalformedMessage, err)
	}
	return rec, flags, nil
}

// DecodeNative maps a message as written by Iggy's own clients, ignoring
// kgate metadata: Value = payload, Key = null, Timestamp = origin µs / 1000
// (append µs / 1000 when origin is 0), user headers as Kafka headers in
// wire order. A header block that does not parse is dropped.
func DecodeNative(m iggy.PolledMessage) records.Record {
	rec := nativeRecord(m)
	if hs, err := iggy.DecodeUserHeaders(m.UserHeaders); err == nil {
		rec.Headers = nativeHeaders(hs)
	}
	return rec
}

func nativeRecord(m iggy.PolledMessage) records.Record {
	v := m.Payload
	if v == nil {
		v = []byte{} // an empty payload is an empty value, never null
	}
	ts := m.OriginTimestamp
	if ts == 0 {
		ts = m.Timestamp
	}
	return records.Record{Offset: int64(m.Offset), Timestamp: int64(ts / 1000), Value: v}
}

func nativeHeaders(hs []iggy.UserHeader) []records.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	out := make([]records.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = records.RecordHeader{Key: renderKey(h.Key), Value: h.Value.Value}
	}
	return out
}

func isStringKey(v iggy.HeaderValue, s string) bool {
	return v.Kind == iggy.KindString && string(v.Value) == s
}

// renderKey gives a header key as a Kafka header name: the bytes for Raw
// and String keys, a decimal/textual rendering of other kinds (hex with a
// 0x prefix when the length does not match the kind).
func renderKey(v iggy.HeaderValue) string {
	b := v.Value
	le := binary.LittleEndian
	switch {
	case v.Kind == iggy.KindRaw || v.Kind == iggy.KindString:
		return string(b)
	case v.Kind == iggy.KindBool && len(b) == 1 && b[0] <= 1:
		return strconv.FormatBool(b[0] == 1)
	case v.Kind == 4 && len(b) == 1:
		return strconv.FormatInt(int64(int8(b[0])), 10)
	case v.Kind == 5 && len(b) == 2:
		return strconv.FormatInt(int64(int16(le.Uint16(b))), 10)
	case v.Kind == 6 && len(b) == 4:
		return strconv.FormatInt(int64(int32(le.Uint32(b))), 10)
	case v.Kind == 7 && len(b) == 8:
		return strconv.FormatInt(int64(le.Uint64(b)), 10)
	case (v.Kind == 8 || v.Kind == 13) && len(b) == 16:
		be := make([]byte, 16)
		for i := range be {
			be[i] = b[15-i]
		}
		n := new(big.Int).SetBytes(be)
		if v.Kind == 8 && be[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 128))
		}
		return n.String()
	case v.Kind == 9 && len(b) == 1:
		return strconv.FormatUint(uint64(b[0]), 10)
	case v.Kind == 10 && len(b) == 2:
		return strconv.FormatUint(uint64(le.Uint16(b)), 10)
	case v.Kind == 11 && len(b) == 4:
		return strconv.FormatUint(uint64(le.Uint32(b)), 10)
	case v.Kind == 12 && len(b) == 8:
		return strconv.FormatUint(le.Uint64(b), 10)
	case v.Kind == 14 && len(b) == 4:
		return strconv.FormatFloat(float64(math.Float32frombits(le.Uint32(b))), 'g', -1, 32)
	case v.Kind == 15 && len(b) == 8:
		return strconv.FormatFloat(math.Float64frombits(le.Uint64(b)), 'g', -1, 64)
	}
	return "0x" + hex.EncodeToString(b)
}

// decodeKgate applies the metadata of a message whose first pair is the
// marker to rec, which holds the native mapping of the message.
func decodeKgate(rec *records.Record, payload []byte, hs []iggy.UserHeader) (byte, error) {
	flags := hs[0].Value.Value
	if err := decodeKgateBody(rec, payload, hs); err != nil {
		return 0, err
	}
	return flags[1], nil
}

func decodeKgateBody(rec *records.Record, payload []byte, hs []iggy.UserHeader) error {
	mv := hs[0].Value
	if mv.Kind != iggy.KindRaw || len(mv.Value) != markerLen {
		return fmt.Errorf("marker value of kind %d and %d bytes", mv.Kind, len(mv.Value))
	}
	if mv.Value[0] != FormatVersion {
		return fmt.Errorf("unknown format version %d", mv.Value[0])
	}
	flags := mv.Value[1]
	chunks := int(binary.BigEndian.Uint16(mv.Value[2:]))
	switch {
	case flags&(flagKeyHeader|flagKeyEnv) == flagKeyHeader|flagKeyEnv:
		return errors.New("key both in a header and in the envelope")
	case flags&(flagValueNull|flagValueEmpty) == flagValueNull|flagValueEmpty:
		return errors.New("value both null and empty")
	case flags&(flagTxn|flagControl) == flagTxn|flagControl:
		return errors.New("both TXN and CONTROL")
	case (flags&flagsEnv != 0) != (chunks > 0):
		return fmt.Errorf("flags %#02x with %d envelope chunks", flags, chunks)
	}
	rest := hs[1:]
	if flags&flagKeyHeader != 0 {
		if len(rest) == 0 || !isStringKey(rest[0].Key, keyHeader) || rest[0].Value.Kind != iggy.KindRaw {
			return errors.New("missing kafka.key header")
		}
		rec.Key = rest[0].Value.Value
		rest = rest[1:]
	}
	if len(rest) < chunks {
		return fmt.Errorf("%d envelope chunks announced, %d headers left", chunks, len(rest))
	}
	var env []byte
	if chunks > 0 {
		env = make([]byte, 0, chunks*maxTLV)
	}
	for i := 0; i < chunks; i++ {
		if !isStringKey(rest[i].Key, chunkKey(i)) || rest[i].Value.Kind != iggy.KindRaw {
			return fmt.Errorf("envelope chunk %d missing", i)
		}
		env = append(env, rest[i].Value.Value...)
	}
	rest = rest[chunks:]
	if flags&(flagValueNull|flagValueEmpty) != 0 {
		if len(payload) != 1 || payload[0] != placeholderByte {
			return fmt.Errorf("placeholder payload of %d bytes", len(payload))
		}
		if flags&flagValueNull != 0 {
			rec.Value = nil
		} else {
			rec.Value = []byte{}
		}
	}

	d := envReader{b: env}
	if flags&flagKeyEnv != 0 {
		rec.Key = d.bytes(d.uvarint())
		if rec.Key == nil && d.err == nil {
			rec.Key = []byte{}
		}
	}
	if flags&flagTimestamp != 0 {
		rec.Timestamp = d.varint()
	}
	plain := nativeHeaders(rest)
	if flags&flagHeaders == 0 {
		rec.Headers = plain
		return d.done()
	}
	k := d.uvarint()
	if d.err == nil && (k == 0 || k > uint64(len(d.b)-d.off)/3) { // an entry takes ≥ 3 bytes
		return fmt.Errorf("envelope header count %d", k)
	}
	total := uint64(len(plain)) + k
	out := make([]records.RecordHeader, 0, total)
	next := 0 // next plain header
	for j := uint64(0); j < k && d.err == nil; j++ {
		idx := d.uvarint()
		name := d.bytes(d.uvarint())
		var value []byte
		if n := d.uvarint(); n > 0 {
			value = d.bytes(n - 1)
			if value == nil {
				value = []byte{}
			}
		}
		if d.err != nil {
			break
		}
		if idx >= total || idx < uint64(len(out)) {
			return fmt.Errorf("envelope header index %d (of %d, after %d)", idx, total, len(out))
		}
		for uint64(len(out)) < idx {
			if next >= len(plain) {
				return fmt.Errorf("envelope header index %d leaves a gap", idx)
			}
			out = append(out, plain[next])
			next++
		}
		out = append(out, records.RecordHeader{Key: string(name), Value: value})
	}
	out = append(out, plain[next:]...)
	if err := d.done(); err != nil {
		return err
	}
	rec.Headers = out
	return nil
}

// envReader reads the envelope; the first error sticks.
type envReader struct {
	b   []byte
	off int
	err error
}

func (d *envReader) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("envelope: bad %s at byte %d", what, d.off)
	}
}

func (d *envReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *envReader) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.off += n
	return v
}

// bytes returns the next n bytes (nil for n == 0 or on error).
func (d *envReader) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("length")
		return nil
	}
	if n == 0 {
		return nil
	}
	end := d.off + int(n)
	b := d.b[d.off:end:end]
	d.off = end
	return b
}

func (d *envReader) done() error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	return d.err
}

// ---- Fetch ----

// batchClass is what a message's Kafka batch must share with it: control
// or not, transactional or not, and for those, producer id and epoch.
type batchClass struct {
	control, txn bool
	pid          int64
	epoch        int16
}

var plainClass = batchClass{pid: -1, epoch: -1}

// classify decodes a message and says which batch it belongs in, with
// its sequence for a transactional record. A message whose kgate metadata
// is malformed, or whose transaction flags do not match its id or
// contents, is a plain record read natively.
func classify(m iggy.PolledMessage) (records.Record, batchClass, int32) {
	r, flags, err := decodeMessage(m)
	if err != nil {
		return DecodeNative(m), plainClass, -1
	}
	switch {
	case flags&flagControl != 0:
		pid, epoch, ok := parseControlID(m.ID)
		if ok && validControl(&r) {
			return r, batchClass{control: true, txn: true, pid: pid, epoch: epoch}, -1
		}
		return DecodeNative(m), plainClass, -1
	case flags&flagTxn != 0:
		pid, epoch, seq, ok := parseID(m.ID)
		if ok {
			return r, batchClass{txn: true, pid: pid, epoch: epoch}, seq
		}
		return DecodeNative(m), plainClass, -1
	}
	return r, plainClass, -1
}

// validControl tells whether r is a transaction marker Kafka clients can
// read: a control key of version 0 and type abort (0) or commit (1).
func validControl(r *records.Record) bool {
	return len(r.Key) == 4 && r.Key[0] == 0 && r.Key[1] == 0 && r.Key[2] == 0 && r.Key[3] <= 1 && len(r.Value) == 6
}

// BuildBatch encodes the longest prefix of msgs with contiguous offsets
// and one batch class as one uncompressed Kafka v2 record batch with
// BaseOffset msgs[0].Offset, keeping it within maxBytes; the first message
// always goes in. n is how many messages the batch holds (0 only for no
// messages). Records of non-transactional batches are framed with
// producer id, epoch and sequence -1; records of a transactional batch
// with their producer id, epoch and first sequence and the transactional
// bit; a transaction marker as a control batch of its own. A message whose
// kgate metadata is malformed is served as native (DecodeNative).
func BuildBatch(msgs []iggy.PolledMessage, maxBytes int) (batch []byte, n int, err error) {
	return AppendBatch(nil, msgs, maxBytes)
}

// AppendBatch is BuildBatch appending the batch to dst (in place when dst
// has the room); out is dst and the batch.
func AppendBatch(dst []byte, msgs []iggy.PolledMessage, maxBytes int) (out []byte, n int, err error) {
	if len(msgs) == 0 {
		return dst, 0, nil
	}
	base := msgs[0].Offset
	if base > math.MaxInt64 {
		return dst, 0, fmt.Errorf("iggybackend: offset %d is beyond Kafka's range", base)
	}
	// Room up front for the records that fit (growing it by doubling
	// copied every record several times), not for a whole 4 MiB poll.
	fit, _ := framedPrefix(msgs, maxBytes)
	recs := make([]records.Record, 0, fit)
	size := records.HeaderSize
	var first int64
	var class batchClass
	var seq int32
	for i := range msgs {
		if i > 0 && (msgs[i].Offset != base+uint64(i) || msgs[i].Offset > math.MaxInt64 || i == math.MaxInt32) {
			break
		}
		r, c, s := classify(msgs[i])
		if i == 0 {
			class, seq = c, s
		} else if c != class || c.control {
			break
		}
		r.Attributes = 0
		if i == 0 {
			first = r.Timestamp
		}
		rs := records.EncodedSize(&r, r.Timestamp-first, i) // Builder's BaseTimestamp is 0: a 0 timestamp stays 0
		if i > 0 && size+rs > maxBytes {
			break
		}
		size += rs
		recs = append(recs, r)
	}
	bld := records.Builder{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if class.txn {
		bld = records.Builder{ProducerID: class.pid, ProducerEpoch: class.epoch, BaseSequence: seq,
			Transactional: true, Control: class.control}
	}
	start := len(dst)
	out, err = bld.AppendBuild(dst, recs)
	if err != nil {
		return dst, 0, err
	}
	records.SetBaseOffset(out[start:], int64(base))
	return out, len(recs), nil
}

// EncodeMarker is the Iggy message of a transaction marker: the Kafka
// control record (key: version 0 and type, 1 commit or 0 abort; value:
// version 0 and the coordinator epoch) with the kgate marker's CONTROL
// flag, timestamp nowMs, and an id of producer id, epoch, the low 32 bits
// of nowMs and "kc".
func EncodeMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) (iggy.Message, error) {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	value := []byte{0, 0, byte(coordinatorEpoch >> 24), byte(coordinatorEpoch >> 16), byte(coordinatorEpoch >> 8), byte(coordinatorEpoch)}
	r := records.Record{Key: key, Value: value, Timestamp: nowMs}
	origin, exact := exactOrigin(nowMs)
	hs, err := encodeHeaders(&r, !exact, false, flagControl)
	if err != nil {
		return iggy.Message{}, err
	}
	var id [16]byte
	binary.LittleEndian.PutUint64(id[0:], uint64(producerID))
	binary.LittleEndian.PutUint16(id[8:], uint16(epoch))
	binary.LittleEndian.PutUint32(id[10:], uint32(nowMs))
	copy(id[14:], controlIDMarker[:])
	return iggy.Message{ID: id, OriginTimestamp: origin, Payload: value, Headers: hs}, nil
}

// controlIDMarker ends the ids of transaction markers.
var controlIDMarker = [2]byte{'k', 'c'}

// parseControlID reads a marker's message id.
func parseControlID(id [16]byte) (pid int64, epoch int16, ok bool) {
	if id[14] != controlIDMarker[0] || id[15] != controlIDMarker[1] {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(id[0:])), int16(binary.LittleEndian.Uint16(id[8:])), true
}
