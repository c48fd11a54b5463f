package iggy

import (
	"errors"
	"fmt"
)

// Codec errors (client-side; never sent by a server).
var (
	// ErrTruncated: the input ends before a field the format requires.
	ErrTruncated = errors.New("iggy: truncated input")
	// ErrMalformed: the input is structurally invalid (bad kind, length, trailing bytes...).
	ErrMalformed = errors.New("iggy: malformed input")
	// ErrFrameTooLarge: a frame size is outside the dialect's bounds.
	ErrFrameTooLarge = errors.New("iggy: frame too large")
	// ErrInvalidArgument: a request cannot be encoded as given.
	ErrInvalidArgument = errors.New("iggy: invalid argument")
	// ErrEvicted is wrapped by every *EvictionError.
	ErrEvicted = errors.New("iggy: session evicted")
	// ErrServer is wrapped by every *Error.
	ErrServer = errors.New("iggy: server error")
)

// Sentinels wrapped by *Error; use errors.Is.
var (
	ErrGeneric                    = errors.New("iggy: error")
	ErrInvalidCommand             = errors.New("iggy: invalid command")
	ErrInvalidFormat              = errors.New("iggy: invalid format")
	ErrFeatureUnavailable         = errors.New("iggy: feature unavailable")
	ErrInvalidIdentifier          = errors.New("iggy: invalid identifier")
	ErrDisconnected               = errors.New("iggy: disconnected")
	ErrResourceNotFound           = errors.New("iggy: resource not found")
	ErrStaleClient                = errors.New("iggy: stale client")
	ErrUnauthenticated            = errors.New("iggy: unauthenticated")
	ErrUnauthorized               = errors.New("iggy: unauthorized")
	ErrInvalidCredentials         = errors.New("iggy: invalid credentials")
	ErrInvalidUsername            = errors.New("iggy: invalid username")
	ErrInvalidPassword            = errors.New("iggy: invalid password")
	ErrUserAlreadyExists          = errors.New("iggy: user already exists")
	ErrUserInactive               = errors.New("iggy: user inactive")
	ErrInvalidToken               = errors.New("iggy: invalid or expired personal access token")
	ErrTransient                  = errors.New("iggy: transient failure, resend the identical frame")
	ErrRequestAlreadyApplied      = errors.New("iggy: request already applied")
	ErrInvalidSizeBytes           = errors.New("iggy: invalid size bytes")
	ErrInvalidNumberEncoding      = errors.New("iggy: invalid number encoding")
	ErrClientNotFound             = errors.New("iggy: client not found")
	ErrStreamNotFound             = errors.New("iggy: stream not found")
	ErrStreamAlreadyExists        = errors.New("iggy: stream already exists")
	ErrInvalidStream              = errors.New("iggy: invalid stream name or id")
	ErrInvalidTopicSize           = errors.New("iggy: invalid topic size")
	ErrTooManyStreams             = errors.New("iggy: too many streams")
	ErrTopicNotFound              = errors.New("iggy: topic not found")
	ErrTopicAlreadyExists         = errors.New("iggy: topic already exists")
	ErrInvalidTopic               = errors.New("iggy: invalid topic name or id")
	ErrTooManyPartitions          = errors.New("iggy: too many partitions")
	ErrInvalidReplicationFactor   = errors.New("iggy: invalid replication factor")
	ErrInvalidPartitionsCount     = errors.New("iggy: invalid partitions count")
	ErrTooManyTopics              = errors.New("iggy: too many topics")
	ErrPartitionNotFound          = errors.New("iggy: partition not found")
	ErrNoPartitions               = errors.New("iggy: no partitions")
	ErrTopicFull                  = errors.New("iggy: topic full")
	ErrPartitionIDSpaceExhausted  = errors.New("iggy: partition id space exhausted")
	ErrConsumerOffsetNotFound     = errors.New("iggy: consumer offset not found")
	ErrNotResolvedConsumer        = errors.New("iggy: consumer not resolved")
	ErrInvalidMessages            = errors.New("iggy: invalid messages")
	ErrInvalidChecksum            = errors.New("iggy: invalid checksum")
	ErrInvalidOption              = errors.New("iggy: invalid option")
	ErrInvalidOffset              = errors.New("iggy: invalid offset")
	ErrConsumerGroupNotFound      = errors.New("iggy: consumer group not found")
	ErrConsumerGroupAlreadyExists = errors.New("iggy: consumer group already exists")
	ErrConsumerGroupMember        = errors.New("iggy: consumer group member not found or partition not owned")
	ErrIncompatibleProtocol       = errors.New("iggy: incompatible protocol version")
	ErrUnknownCode                = errors.New("iggy: unknown error code")
)

type codeInfo struct {
	name     string
	sentinel error
}

// codes lists every code of §10 (current) and §13.10 (legacy). The numeric
// values are shared; codes 57–59, 1020, 2021, 3013, 4041–4043, 5009 and
// 14003 exist only in the current dialect, 8, 80, 82, 100, 3022 and
// 4031–4037 only in the legacy one.
var codes = map[uint32]codeInfo{
	1:     {"Error", ErrGeneric},
	3:     {"InvalidCommand", ErrInvalidCommand},
	4:     {"InvalidFormat", ErrInvalidFormat},
	5:     {"FeatureUnavailable", ErrFeatureUnavailable},
	6:     {"InvalidIdentifier", ErrInvalidIdentifier},
	8:     {"Disconnected", ErrDisconnected},
	20:    {"ResourceNotFound", ErrResourceNotFound},
	30:    {"StaleClient", ErrStaleClient},
	40:    {"Unauthenticated", ErrUnauthenticated},
	41:    {"Unauthorized", ErrUnauthorized},
	42:    {"InvalidCredentials", ErrInvalidCredentials},
	43:    {"InvalidUsername", ErrInvalidUsername},
	44:    {"InvalidPassword", ErrInvalidPassword},
	46:    {"UserAlreadyExists", ErrUserAlreadyExists},
	47:    {"UserInactive", ErrUserInactive},
	53:    {"InvalidPersonalAccessToken", ErrInvalidToken},
	54:    {"PersonalAccessTokenExpired", ErrInvalidToken},
	57:    {"TransientNotCommitted", ErrTransient},
	58:    {"TransientNotAccepted", ErrTransient},
	59:    {"RequestAlreadyApplied", ErrRequestAlreadyApplied},
	80:    {"InvalidSizeBytes", ErrInvalidSizeBytes},
	82:    {"InvalidNumberEncoding", ErrInvalidNumberEncoding},
	100:   {"ClientNotFound", ErrClientNotFound},
	1009:  {"StreamIdNotFound", ErrStreamNotFound},
	1010:  {"StreamNameNotFound", ErrStreamNotFound},
	1012:  {"StreamNameAlreadyExists", ErrStreamAlreadyExists},
	1013:  {"InvalidStreamName", ErrInvalidStream},
	1014:  {"InvalidStreamId", ErrInvalidStream},
	1019:  {"InvalidTopicSize", ErrInvalidTopicSize},
	1020:  {"TooManyStreams", ErrTooManyStreams},
	2010:  {"TopicIdNotFound", ErrTopicNotFound},
	2011:  {"TopicNameNotFound", ErrTopicNotFound},
	2013:  {"TopicNameAlreadyExists", ErrTopicAlreadyExists},
	2014:  {"InvalidTopicName", ErrInvalidTopic},
	2015:  {"TooManyPartitions", ErrTooManyPartitions},
	2016:  {"InvalidTopicId", ErrInvalidTopic},
	2018:  {"InvalidReplicationFactor", ErrInvalidReplicationFactor},
	2019:  {"InvalidPartitionsCount", ErrInvalidPartitionsCount},
	2021:  {"TooManyTopics", ErrTooManyTopics},
	3007:  {"PartitionNotFound", ErrPartitionNotFound},
	3008:  {"NoPartitions", ErrNoPartitions},
	3009:  {"TopicFull", ErrTopicFull},
	3013:  {"PartitionIdSpaceExhausted", ErrPartitionIDSpaceExhausted},
	3021:  {"ConsumerOffsetNotFound", ErrConsumerOffsetNotFound},
	3022:  {"NotResolvedConsumer", ErrNotResolvedConsumer},
	4009:  {"InvalidMessagesCount", ErrInvalidMessages},
	4017:  {"TooBigUserHeaders", ErrInvalidMessages},
	4022:  {"TooBigMessagePayload", ErrInvalidMessages},
	4023:  {"TooManyMessages", ErrInvalidMessages},
	4024:  {"EmptyMessagePayload", ErrInvalidMessages},
	4027:  {"InvalidMessageChecksum", ErrInvalidChecksum},
	4031:  {"NonZeroOffset", ErrInvalidMessages},
	4032:  {"NonZeroTimestamp", ErrInvalidMessages},
	4033:  {"MissingIndex", ErrInvalidMessages},
	4034:  {"InvalidIndexesByteSize", ErrInvalidMessages},
	4035:  {"InvalidIndexesCount", ErrInvalidMessages},
	4036:  {"InvalidMessagesSize", ErrInvalidMessages},
	4037:  {"TooSmallMessage", ErrInvalidMessages},
	4038:  {"InvalidMessageTimestampDelta", ErrInvalidMessages},
	4039:  {"InvalidBatchChecksum", ErrInvalidChecksum},
	4041:  {"UnsupportedOptionKey", ErrInvalidOption},
	4042:  {"InvalidOptionValue", ErrInvalidOption},
	4043:  {"OptionsBlockTooLarge", ErrInvalidOption},
	4100:  {"InvalidOffset", ErrInvalidOffset},
	5000:  {"ConsumerGroupIdNotFound", ErrConsumerGroupNotFound},
	5003:  {"ConsumerGroupNameNotFound", ErrConsumerGroupNotFound},
	5004:  {"ConsumerGroupNameAlreadyExists", ErrConsumerGroupAlreadyExists},
	5006:  {"ConsumerGroupMemberNotFound", ErrConsumerGroupMember},
	5009:  {"ConsumerGroupPartitionNotOwned", ErrConsumerGroupMember},
	14003: {"IncompatibleProtocolVersion", ErrIncompatibleProtocol},
}

// Error is a non-zero status or result code returned by the server.
type Error struct {
	Code uint32
	Name string // "Unknown" for codes not in the reference
	err  error  // the sentinel
}

// CodeError returns the *Error for code (nil for 0).
func CodeError(code uint32) error {
	if code == 0 {
		return nil
	}
	if ci, ok := codes[code]; ok {
		return &Error{Code: code, Name: ci.name, err: ci.sentinel}
	}
	return &Error{Code: code, Name: "Unknown", err: ErrUnknownCode}
}

func (e *Error) Error() string { return fmt.Sprintf("iggy: server error %d (%s)", e.Code, e.Name) }

// Unwrap exposes both ErrServer and the code's sentinel.
func (e *Error) Unwrap() []error { return []error{ErrServer, e.err} }

// Transient reports whether the request should be resent unchanged (57, 58).
func (e *Error) Transient() bool { return e.Code == 57 || e.Code == 58 }

// EvictionReason is byte 255 of a current-dialect eviction frame (§1.3).
type EvictionReason uint8

var evictionNames = map[EvictionReason]struct {
	name string
	code uint32
}{
	1:  {"NoSession", 40},
	2:  {"ClientReleaseTooLow", 3},
	3:  {"ClientReleaseTooHigh", 3},
	4:  {"InvalidRequestOperation", 3},
	5:  {"InvalidRequestBody", 3},
	6:  {"InvalidRequestBodySize", 3},
	7:  {"SessionTooLow", 40},
	8:  {"SessionReleaseMismatch", 40},
	9:  {"InvalidCredentials", 42},
	10: {"InvalidToken", 53},
	11: {"UserInactive", 40},
	12: {"SessionError", 40},
	13: {"StaleClient", 30},
	14: {"IncompatibleProtocol", 14003},
	15: {"MalformedLogin", 4},
}

func (r EvictionReason) String() string {
	if n, ok := evictionNames[r]; ok {
		return n.name
	}
	return fmt.Sprintf("EvictionReason(%d)", uint8(r))
}

// Code is the error code the Go SDK maps the reason to (§1.3); 1 if unknown.
func (r EvictionReason) Code() uint32 {
	if n, ok := evictionNames[r]; ok {
		return n.code
	}
	return 1
}

// EvictionError reports an eviction frame. It wraps ErrEvicted and the
// *Error of the mapped code, so errors.Is(err, ErrUnauthenticated) works.
type EvictionError struct {
	Eviction Eviction
}

func (e *EvictionError) Error() string {
	return fmt.Sprintf("iggy: evicted (%s), server protocol %#x (min %#x)",
		e.Eviction.Reason, e.Eviction.ServerProtocolVersion, e.Eviction.ServerProtocolVersionMin)
}

func (e *EvictionError) Unwrap() []error {
	return []error{ErrEvicted, CodeError(e.Eviction.Reason.Code())}
}
