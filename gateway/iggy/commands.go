package iggy

import "fmt"

// Request is an encoded command body plus what a frame needs to carry it:
// the command code (on the wire for Legacy and for Current non-replicated
// operations) and the Current operation byte.
type Request struct {
	Code      uint32
	Operation uint8 // Current dialect only
	Body      []byte
	// reply, when large enough, holds the reply body instead of a fresh
	// buffer (polls reuse theirs: allocating and zeroing a megabyte per
	// poll was a sixth of the fetch path's CPU).
	reply []byte
}

// Frame wraps the request for dialect d. For Current, h supplies client,
// request id and session; Operation and Code come from req. Register
// (login) frames always carry request 0 and session 0 (§2). h is ignored
// for Legacy.
func (req Request) Frame(d Dialect, h RequestHeader) ([]byte, error) {
	f, err := req.header(d, h)
	if err != nil {
		return nil, err
	}
	return append(f, req.Body...), nil
}

// header is the frame without its body: what is sent before req.Body,
// which then goes to the socket as it is, not copied into a frame.
func (req Request) header(d Dialect, h RequestHeader) ([]byte, error) {
	switch d {
	case Current:
		h.Operation = req.Operation
		h.Code = req.Code
		if h.Operation == OpRegister {
			h.Request, h.Session = 0, 0
		}
		return encodeRequestHeader(h, len(req.Body))
	case Legacy:
		return encodeLegacyHeader(req.Code, len(req.Body))
	}
	return nil, d.valid()
}

func nonReplicated(code uint32, body []byte) Request {
	return Request{Code: code, Operation: OpNonReplicated, Body: body}
}

// ---- Ping ----

// Ping encodes code 1 (empty body; allowed before login).
func Ping() Request { return nonReplicated(CodePing, nil) }

// ---- Login ----

// Login carries user/password credentials.
type Login struct {
	Username string
	Password string
	// SDKName/SDKVersion are sent by the Current dialect (WireNames, 1..255
	// bytes). Legacy sends SDKVersion as its optional version string.
	SDKName    string
	SDKVersion string
}

// LoginUser encodes a user/password login: Current register body (§5.2,
// operation 1) or Legacy LoginUser 38 (§13.2).
func LoginUser(d Dialect, l Login) (Request, error) {
	if len(l.Username) < 3 || len(l.Username) > 50 {
		return Request{}, fmt.Errorf("%w: username must be 3..50 bytes", ErrInvalidArgument)
	}
	if len(l.Password) < 3 || len(l.Password) > 100 {
		return Request{}, fmt.Errorf("%w: password must be 3..100 bytes", ErrInvalidArgument)
	}
	w := &writer{}
	switch d {
	case Current:
		if err := sdkPrefix(w, l.SDKName, l.SDKVersion); err != nil {
			return Request{}, err
		}
		w.str8(l.Username)
		w.str8(l.Password)
		w.u32(0) // context
		return Request{Code: CodeLoginRegister, Operation: OpRegister, Body: w.b}, nil
	case Legacy:
		w.str8(l.Username)
		w.str8(l.Password)
		w.str32(l.SDKVersion)
		w.u32(0) // context
		return Request{Code: CodeLegacyLoginUser, Body: w.b}, nil
	}
	return Request{}, d.valid()
}

func sdkPrefix(w *writer, name, version string) error {
	if err := checkName("sdk name", name); err != nil {
		return err
	}
	if err := checkName("sdk version", version); err != nil {
		return err
	}
	w.u32(ProtocolVersion)
	w.str8(name)
	w.str8(version)
	return nil
}

// LoginToken encodes a personal-access-token login: Current register body
// (code 45 semantics, operation 1) or Legacy LoginWithPAT 44. sdkName and
// sdkVersion are used by Current only.
func LoginToken(d Dialect, token, sdkName, sdkVersion string) (Request, error) {
	if len(token) < 1 || len(token) > 255 {
		return Request{}, fmt.Errorf("%w: token must be 1..255 bytes", ErrInvalidArgument)
	}
	w := &writer{}
	switch d {
	case Current:
		if err := sdkPrefix(w, sdkName, sdkVersion); err != nil {
			return Request{}, err
		}
		w.str8(token)
		w.u32(0) // context
		return Request{Code: CodeLoginRegisterPAT, Operation: OpRegister, Body: w.b}, nil
	case Legacy:
		w.str8(token)
		return Request{Code: CodeLegacyLoginPAT, Body: w.b}, nil
	}
	return Request{}, d.valid()
}

// LoginReply is the decoded login answer. Legacy only sets UserID.
type LoginReply struct {
	UserID                uint32
	Session               uint64
	ServerProtocolVersion uint32
	ServerVersion         string
}

// DecodeLoginReply decodes a login reply body (status already checked).
func DecodeLoginReply(d Dialect, body []byte) (LoginReply, error) {
	var out LoginReply
	switch d {
	case Current:
		p, err := splitResult(body)
		if err != nil {
			return out, err
		}
		r := reader{b: p}
		out.UserID = r.u32()
		out.Session = r.u64()
		out.ServerProtocolVersion = r.u32()
		out.ServerVersion = r.wireName()
		return out, r.end(d)
	case Legacy:
		r := reader{b: body}
		out.UserID = r.u32()
		return out, r.done()
	}
	return out, d.valid()
}

// ---- Streams ----

// Stream is a stream description (§5.1 / §13.5).
type Stream struct {
	ID            uint32
	CreatedAt     uint64 // µs since epoch
	TopicsCount   uint32
	SizeBytes     uint64
	MessagesCount uint64
	Name          string
	Options       []byte // Current only: raw options TLV
}

// CreateStream encodes code 202 (Current operation 128) with no options.
func CreateStream(name string) (Request, error) {
	if err := checkName("stream name", name); err != nil {
		return Request{}, err
	}
	w := &writer{}
	w.str8(name)
	return Request{Code: CodeCreateStream, Operation: OpCreateStream, Body: w.b}, nil
}

func decodeStream(d Dialect, r *reader) Stream {
	var s Stream
	s.ID = r.u32()
	s.CreatedAt = r.u64()
	s.TopicsCount = r.u32()
	s.SizeBytes = r.u64()
	s.MessagesCount = r.u64()
	s.Name = r.wireName()
	if d == Current {
		s.Options = r.bytes32()
	}
	return s
}

// DecodeCreateStreamReply decodes the Stream returned by CreateStream.
func DecodeCreateStreamReply(d Dialect, body []byte) (Stream, error) {
	if err := d.valid(); err != nil {
		return Stream{}, err
	}
	p := body
	if d == Current {
		var err error
		if p, err = splitResult(body); err != nil {
			return Stream{}, err
		}
	}
	r := reader{b: p}
	s := decodeStream(d, &r)
	return s, r.end(d)
}

// GetStreams encodes code 201.
func GetStreams() Request { return nonReplicated(CodeGetStreams, nil) }

// DecodeGetStreamsReply decodes Stream × n up to the end of the body.
func DecodeGetStreamsReply(d Dialect, body []byte) ([]Stream, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	r := reader{b: body}
	out := make([]Stream, 0, min(len(body)/33, 64))
	for r.err == nil && r.remaining() > 0 {
		s := decodeStream(d, &r)
		if r.err == nil {
			out = append(out, s)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// ---- Topics ----

// Compression algorithm of a topic.
type Compression uint8

const (
	CompressionNone Compression = 1
	CompressionGzip Compression = 2
)

// TopicConfig describes a topic to create.
type TopicConfig struct {
	Name            string
	PartitionsCount uint32 // 0..1000
	// Compression: 0 means "server default" (none). Current sends it as the
	// Uint8 option compression_algorithm; Legacy sends 1 for 0.
	Compression Compression
	// MessageExpiry in µs: 0 = server default, math.MaxUint64 = never.
	MessageExpiry uint64
	// MaxTopicSize in bytes: 0 = server default, math.MaxUint64 = unlimited.
	MaxTopicSize uint64
	// ReplicationFactor is sent by Legacy only (0 is stored as 1).
	ReplicationFactor uint8
	// MessagesRequiredToSave (Current CreateTopic only; 0 = server
	// default, 1,024): how many acknowledged messages a partition may hold
	// in memory before writing them to its segment. A kill -9 of the server
	// loses those; 1 writes every batch before the answer. A legacy server
	// has it as a server setting (IGGY_SYSTEM_PARTITION_MESSAGES_REQUIRED_TO_SAVE).
	MessagesRequiredToSave uint32
}

// Value kinds of the TLV blocks (§4).
const (
	KindRaw     uint8 = 1
	KindString  uint8 = 2
	KindBool    uint8 = 3
	KindUint8   uint8 = 9
	KindUint32  uint8 = 11
	KindUint64  uint8 = 12
	KindFloat64 uint8 = 15
)

func option(w *writer, key string, kind uint8, val []byte) {
	w.u8(KindString)
	w.u32(uint32(len(key)))
	w.b = append(w.b, key...)
	w.u8(kind)
	w.u32(uint32(len(val)))
	w.b = append(w.b, val...)
}

// CreateTopic encodes code 302 (Current operation 132, §5.3; Legacy §13.6).
// Current options are emitted only for non-zero settings, in the order
// compression_algorithm, message_expiry, max_topic_size.
func CreateTopic(d Dialect, stream Identifier, c TopicConfig) (Request, error) {
	if err := checkName("topic name", c.Name); err != nil {
		return Request{}, err
	}
	if c.PartitionsCount > 1000 {
		return Request{}, fmt.Errorf("%w: partitions count %d > 1000", ErrInvalidArgument, c.PartitionsCount)
	}
	if c.Compression > CompressionGzip {
		return Request{}, fmt.Errorf("%w: compression %d", ErrInvalidArgument, c.Compression)
	}
	w := &writer{}
	if err := stream.encode(w); err != nil {
		return Request{}, err
	}
	w.u32(c.PartitionsCount)
	switch d {
	case Current:
		w.str8(c.Name)
		topicOptions(w, c)
		if c.MessagesRequiredToSave != 0 {
			v := &writer{}
			v.u32(c.MessagesRequiredToSave)
			option(w, "messages_required_to_save", KindUint32, v.b)
		}
		return Request{Code: CodeCreateTopic, Operation: OpCreateTopic, Body: w.b}, nil
	case Legacy:
		comp := c.Compression
		if comp == 0 {
			comp = CompressionNone
		}
		w.u8(uint8(comp))
		w.u64(c.MessageExpiry)
		w.u64(c.MaxTopicSize)
		w.u8(c.ReplicationFactor)
		w.str8(c.Name)
		return Request{Code: CodeCreateTopic, Body: w.b}, nil
	}
	return Request{}, d.valid()
}

// topicOptions writes the Current options of c's non-zero settings, in the
// order compression_algorithm, message_expiry, max_topic_size.
func topicOptions(w *writer, c TopicConfig) {
	if c.Compression != 0 {
		option(w, "compression_algorithm", KindUint8, []byte{uint8(c.Compression)})
	}
	if c.MessageExpiry != 0 {
		v := &writer{}
		v.u64(c.MessageExpiry)
		option(w, "message_expiry", KindUint64, v.b)
	}
	if c.MaxTopicSize != 0 {
		v := &writer{}
		v.u64(c.MaxTopicSize)
		option(w, "max_topic_size", KindUint64, v.b)
	}
}

// Topic is a TopicHeader (§5.1 / §13.5). u64::MAX in MessageExpiry /
// MaxTopicSize means never / unlimited.
type Topic struct {
	ID                uint32
	CreatedAt         uint64
	PartitionsCount   uint32
	MessageExpiry     uint64
	Compression       Compression
	MaxTopicSize      uint64
	ReplicationFactor uint8 // Legacy only
	SizeBytes         uint64
	MessagesCount     uint64
	Name              string
	Options           []byte // Current only: explicit options TLV
	DerivedOptions    []byte // Current only: derived options TLV
}

// PartitionInfo is the 40-byte Partition structure.
type PartitionInfo struct {
	ID            uint32
	CreatedAt     uint64
	SegmentsCount uint32
	CurrentOffset uint64 // last committed offset, not "next" (§8)
	SizeBytes     uint64
	MessagesCount uint64
}

// TopicDetails is a TopicHeader followed by its partitions.
type TopicDetails struct {
	Topic
	Partitions []PartitionInfo
}

const (
	minTopicSizeCurrent = 4 + 8 + 4 + 8 + 1 + 8 + 8 + 8 + 2 + 4 + 4
	minTopicSizeLegacy  = 51 + 1
	partitionSize       = 40
)

func decodeTopic(d Dialect, r *reader) Topic {
	var t Topic
	t.ID = r.u32()
	t.CreatedAt = r.u64()
	t.PartitionsCount = r.u32()
	t.MessageExpiry = r.u64()
	t.Compression = Compression(r.u8())
	t.MaxTopicSize = r.u64()
	if d == Legacy {
		t.ReplicationFactor = r.u8()
	}
	t.SizeBytes = r.u64()
	t.MessagesCount = r.u64()
	t.Name = r.wireName()
	if d == Current {
		t.Options = r.bytes32()
		t.DerivedOptions = r.bytes32()
	}
	return t
}

func decodeTopicDetails(d Dialect, p []byte) (TopicDetails, error) {
	r := reader{b: p}
	var td TopicDetails
	td.Topic = decodeTopic(d, &r)
	if r.err != nil {
		return TopicDetails{}, r.err
	}
	if need := uint64(td.PartitionsCount) * partitionSize; need > uint64(r.remaining()) || d == Legacy && need != uint64(r.remaining()) {
		return TopicDetails{}, fmt.Errorf("%w: %d partitions need %d bytes, have %d",
			ErrMalformed, td.PartitionsCount, uint64(td.PartitionsCount)*partitionSize, r.remaining())
	}
	td.Partitions = make([]PartitionInfo, td.PartitionsCount)
	for i := range td.Partitions {
		pi := &td.Partitions[i]
		pi.ID = r.u32()
		pi.CreatedAt = r.u64()
		pi.SegmentsCount = r.u32()
		pi.CurrentOffset = r.u64()
		pi.SizeBytes = r.u64()
		pi.MessagesCount = r.u64()
	}
	return td, r.end(d)
}

// DecodeCreateTopicReply decodes TopicHeader + Partition × n.
func DecodeCreateTopicReply(d Dialect, body []byte) (TopicDetails, error) {
	if err := d.valid(); err != nil {
		return TopicDetails{}, err
	}
	p := body
	if d == Current {
		var err error
		if p, err = splitResult(body); err != nil {
			return TopicDetails{}, err
		}
	}
	return decodeTopicDetails(d, p)
}

// GetTopic encodes code 300.
func GetTopic(stream, topic Identifier) (Request, error) {
	w := &writer{}
	if err := stream.encode(w); err != nil {
		return Request{}, err
	}
	if err := topic.encode(w); err != nil {
		return Request{}, err
	}
	return nonReplicated(CodeGetTopic, w.b), nil
}

// DecodeGetTopicReply decodes a GetTopic reply; found is false for the
// empty "not found" body.
func DecodeGetTopicReply(d Dialect, body []byte) (td TopicDetails, found bool, err error) {
	if err := d.valid(); err != nil {
		return TopicDetails{}, false, err
	}
	if len(body) == 0 {
		return TopicDetails{}, false, nil
	}
	td, err = decodeTopicDetails(d, body)
	return td, err == nil, err
}

// GetTopics encodes code 301.
func GetTopics(stream Identifier) (Request, error) {
	w := &writer{}
	if err := stream.encode(w); err != nil {
		return Request{}, err
	}
	return nonReplicated(CodeGetTopics, w.b), nil
}

// DecodeGetTopicsReply decodes Current `[count u32] + TopicHeader × count`
// or Legacy TopicHeader × n up to the end (empty if the stream is missing).
func DecodeGetTopicsReply(d Dialect, body []byte) ([]Topic, error) {
	r := reader{b: body}
	switch d {
	case Current:
		if len(body) == 0 {
			return nil, nil // the released SDKs read an empty body as no topics
		}
		count := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		if uint64(count)*minTopicSizeCurrent > uint64(r.remaining()) {
			return nil, fmt.Errorf("%w: %d topics cannot fit in %d bytes", ErrTruncated, count, r.remaining())
		}
		out := make([]Topic, 0, count)
		for i := uint32(0); i < count && r.err == nil; i++ {
			out = append(out, decodeTopic(d, &r))
		}
		if err := r.end(d); err != nil {
			return nil, err
		}
		return out, nil
	case Legacy:
		out := make([]Topic, 0, min(len(body)/minTopicSizeLegacy, 64))
		for r.err == nil && r.remaining() > 0 {
			t := decodeTopic(d, &r)
			if r.err == nil {
				out = append(out, t)
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		return out, nil
	}
	return nil, d.valid()
}

// ---- Partitions ----

// CreatePartitions encodes code 402 (Current operation 136); count 1..1000.
func CreatePartitions(stream, topic Identifier, count uint32) (Request, error) {
	if count < 1 || count > 1000 {
		return Request{}, fmt.Errorf("%w: partitions count %d not in 1..1000", ErrInvalidArgument, count)
	}
	w := &writer{}
	if err := stream.encode(w); err != nil {
		return Request{}, err
	}
	if err := topic.encode(w); err != nil {
		return Request{}, err
	}
	w.u32(count)
	return Request{Code: CodeCreatePartitions, Operation: OpCreatePartitions, Body: w.b}, nil
}

// DecodeEmptyReply checks the body of a command whose success reply is
// empty (CreatePartitions, StoreConsumerOffset, ...). For Current the
// result section is checked first (§3). Unexpected payload is ignored for
// Current (the reference marks some of these bodies UNSURE) but rejected
// for Legacy.
func DecodeEmptyReply(d Dialect, body []byte) error {
	switch d {
	case Current:
		_, err := splitResult(body)
		return err
	case Legacy:
		if len(body) != 0 {
			return fmt.Errorf("%w: expected an empty reply, got %d bytes", ErrMalformed, len(body))
		}
		return nil
	}
	return d.valid()
}

// ---- Consumer offsets ----

// Ack is the Current dialect's acknowledgement mode for offset writes.
type Ack uint8

const (
	AckNone   Ack = 0
	AckQuorum Ack = 1 // default
)

func offsetPrefix(c Consumer, stream, topic Identifier, p PartitionID) (*writer, error) {
	w := &writer{}
	if err := c.encode(w); err != nil {
		return nil, err
	}
	if err := stream.encode(w); err != nil {
		return nil, err
	}
	if err := topic.encode(w); err != nil {
		return nil, err
	}
	p.encode(w)
	return w, nil
}

// StoreConsumerOffset encodes code 121 (Current operation 161, with ack;
// Legacy without). offset is the last consumed offset (§8).
func StoreConsumerOffset(d Dialect, c Consumer, stream, topic Identifier, p PartitionID, offset uint64, ack Ack) (Request, error) {
	if err := d.valid(); err != nil {
		return Request{}, err
	}
	w, err := offsetPrefix(c, stream, topic, p)
	if err != nil {
		return Request{}, err
	}
	w.u64(offset)
	if d == Current {
		if ack > AckQuorum {
			return Request{}, fmt.Errorf("%w: ack %d", ErrInvalidArgument, ack)
		}
		w.u8(uint8(ack))
	}
	return Request{Code: CodeStoreConsumerOffset, Operation: OpStoreConsumerOffset, Body: w.b}, nil
}

// GetConsumerOffset encodes code 120 (same body in both dialects).
func GetConsumerOffset(c Consumer, stream, topic Identifier, p PartitionID) (Request, error) {
	w, err := offsetPrefix(c, stream, topic, p)
	if err != nil {
		return Request{}, err
	}
	return nonReplicated(CodeGetConsumerOffset, w.b), nil
}

// ConsumerOffset is a GetConsumerOffset answer.
type ConsumerOffset struct {
	PartitionID   uint32
	CurrentOffset uint64
	StoredOffset  uint64
}

// DecodeGetConsumerOffsetReply decodes the 20-byte reply; found is false
// for the empty body (nothing stored).
func DecodeGetConsumerOffsetReply(d Dialect, body []byte) (co ConsumerOffset, found bool, err error) {
	if err := d.valid(); err != nil {
		return co, false, err
	}
	if len(body) == 0 {
		return co, false, nil
	}
	r := reader{b: body}
	co.PartitionID = r.u32()
	co.CurrentOffset = r.u64()
	co.StoredOffset = r.u64()
	if err := r.end(d); err != nil {
		return ConsumerOffset{}, false, err
	}
	return co, true, nil
}

// ---- GetStream, DeleteStream, DeleteTopic, UpdateTopic ----

// GetStream encodes code 200.
func GetStream(stream Identifier) (Request, error) {
	w := &writer{}
	if err := stream.encode(w); err != nil {
		return Request{}, err
	}
	return nonReplicated(CodeGetStream, w.b), nil
}

// DecodeGetStreamReply decodes Stream + TopicHeader × topics_count; found
// is false for the empty "not found" body.
func DecodeGetStreamReply(d Dialect, body []byte) (s Stream, topics []Topic, found bool, err error) {
	if err := d.valid(); err != nil {
		return Stream{}, nil, false, err
	}
	if len(body) == 0 {
		return Stream{}, nil, false, nil
	}
	r := reader{b: body}
	s = decodeStream(d, &r)
	for r.err == nil && r.remaining() > 0 {
		t := decodeTopic(d, &r)
		if r.err == nil {
			topics = append(topics, t)
		}
	}
	if r.err != nil {
		return Stream{}, nil, false, r.err
	}
	return s, topics, true, nil
}

// DeleteStream encodes code 203 (Current operation 130).
func DeleteStream(stream Identifier) (Request, error) {
	w := &writer{}
	if err := stream.encode(w); err != nil {
		return Request{}, err
	}
	return Request{Code: CodeDeleteStream, Operation: OpDeleteStream, Body: w.b}, nil
}

// DeleteTopic encodes code 303 (Current operation 134).
func DeleteTopic(stream, topic Identifier) (Request, error) {
	w := &writer{}
	if err := stream.encode(w); err != nil {
		return Request{}, err
	}
	if err := topic.encode(w); err != nil {
		return Request{}, err
	}
	return Request{Code: CodeDeleteTopic, Operation: OpDeleteTopic, Body: w.b}, nil
}

// UpdateTopic encodes code 304 (Current operation 133). Current sends the
// name and, as options, only the non-zero settings of c (absent keys stay
// unchanged). Legacy replaces every field, so c must carry all the values
// to keep (§13.6). c.PartitionsCount is not used.
func UpdateTopic(d Dialect, stream, topic Identifier, c TopicConfig) (Request, error) {
	if err := checkName("topic name", c.Name); err != nil {
		return Request{}, err
	}
	if c.Compression > CompressionGzip {
		return Request{}, fmt.Errorf("%w: compression %d", ErrInvalidArgument, c.Compression)
	}
	w := &writer{}
	if err := stream.encode(w); err != nil {
		return Request{}, err
	}
	if err := topic.encode(w); err != nil {
		return Request{}, err
	}
	switch d {
	case Current:
		w.str8(c.Name)
		topicOptions(w, c)
		return Request{Code: CodeUpdateTopic, Operation: OpUpdateTopic, Body: w.b}, nil
	case Legacy:
		comp := c.Compression
		if comp == 0 {
			comp = CompressionNone
		}
		w.u8(uint8(comp))
		w.u64(c.MessageExpiry)
		w.u64(c.MaxTopicSize)
		w.u8(c.ReplicationFactor)
		w.str8(c.Name)
		return Request{Code: CodeUpdateTopic, Body: w.b}, nil
	}
	return Request{}, d.valid()
}
