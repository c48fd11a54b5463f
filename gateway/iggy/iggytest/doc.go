// Package iggytest is an in-memory test double of the Apache Iggy server,
// for tests and benchmarks of kgate's Iggy client. It speaks one dialect
// per instance, over real TCP, as described in iggy-protocol.md:
//
//   - Current (server 0.9.x, protocol 0.11): 256-byte headers, sessions
//     bound at login (operation 1), result-framed metadata replies,
//     eviction frames, per-session dedup of metadata request ids, XXH3
//     message and batch checksums verified on SendMessages.
//   - Legacy (server 0.7/0.8): `[length][code][payload]` frames, the
//     connection is the session.
//
// Both answer the other dialect's frames as the real servers do (§0.1),
// so a client's dialect probe can be tested.
//
// Simulated: ping, login by password or personal access token, logout,
// GetClusterMetadata (a one-node roster; the released 0.11 SDK asks for it),
// streams (get, list, create, delete), topics (get, list, create with
// options, update, delete), partitions (add, delete), SendMessages with
// the three partitioning kinds, PollMessages with every strategy and
// auto-commit, kind-1 consumer offsets (get, store, delete), lazy message
// expiry, and faults: slow replies (SetDelay), a hung server (SetHang),
// dropped connections, evictions, Close + Restart on the same address.
//
// Not simulated: consumer groups (a kind-2 consumer is never a member),
// users and permissions beyond the root user, purge, segments, max topic
// size enforcement, stats, clustering beyond the one-node roster, TLS,
// heartbeats, the legacy desynchronisation after an early SendMessages
// error, and persistence
// (data lives in memory for the Server's lifetime). Messages keys are
// hashed with XXH32 as the server does; the Balanced round-robin counter
// is per topic.
package iggytest
