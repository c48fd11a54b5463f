// Package iggy is the wire codec for kgate's Apache Iggy client, written
// from the shared reference iggy-protocol.md. It speaks two dialects:
//
//   - Current: the 256-byte-header protocol of server 0.9.x (protocol
//     0.11.0). Requests are built with EncodeRequest / Request.Frame,
//     replies and eviction frames decoded with DecodeReply / ReadReply.
//   - Legacy: the `[length][code][payload]` protocol of server 0.7.x–0.8.x.
//
// Implemented commands (both dialects unless noted): Ping, login with
// user/password and with a personal access token, CreateStream,
// GetStreams, CreateTopic (partitions, compression, message expiry, max
// size), GetTopic / GetTopics, CreatePartitions, SendMessages (ids,
// payloads, user headers, origin timestamps, all three partitioning kinds;
// the Current batch carries XXH3-64 checksums, from github.com/zeebo/xxh3),
// PollMessages (offset, timestamp, first, last, next) and
// Store/GetConsumerOffset. Server status codes, result-section codes and
// eviction reasons map to *Error / *EvictionError, which wrap sentinels
// such as ErrUnauthenticated or ErrStreamNotFound for errors.Is.
//
// Decoders never trust a length field beyond the bytes they were given
// and return ErrTruncated / ErrMalformed instead of panicking.
//
// Not here yet (later work): connections, dialect probing (§0.1), request
// id / session bookkeeping, lockstep I/O, retries of transient results,
// connection pool and reconnect, and the mapping of Kafka requests onto
// Iggy (the kgate backend). Other commands of the catalogue (users,
// consumer groups, purge/delete, stats...) are not encoded.
package iggy
