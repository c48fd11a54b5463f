package gateway

import (
	"net"
	"strconv"

	"github.com/kgate/kgate/cluster"
)

const apiVersionsKey = 18

// handlerTable lists every API we answer and the versions we really
// implement; ApiVersions advertises exactly this table.
func (s *Server) handlerTable() map[int16]handler {
	t := map[int16]handler{
		0:  {0, 12, s.handleProduce}, // v0-2 advertised for librdkafka's version check, answered UNSUPPORTED_VERSION
		1:  {4, 16, s.handleFetch},
		2:  {1, 8, s.handleListOffsets},
		3:  {0, 12, s.handleMetadata},
		18: {0, 4, s.handleAPIVersions},
		19: {2, 7, s.handleCreateTopics},
		20: {1, 6, s.handleDeleteTopics},
		21: {0, 2, s.handleDeleteRecords},
		22: {0, 5, s.handleInitProducerID},
		23: {2, 4, s.handleOffsetForLeaderEpoch},
		32: {1, 4, s.handleDescribeConfigs},
		33: {0, 2, s.handleAlterConfigs},
		35: {1, 4, s.handleDescribeLogDirs},
		37: {0, 3, s.handleCreatePartitions},
		43: {0, 2, s.handleElectLeaders},
		44: {0, 1, s.handleIncrementalAlterConfigs},
		45: {0, 1, s.handleAlterPartitionReassignments},
		46: {0, 0, s.handleListPartitionReassignments},
		55: {0, 2, s.handleDescribeQuorum},
		60: {0, 1, s.handleDescribeCluster},
		61: {0, 0, s.handleDescribeProducers},
		75: {0, 0, s.handleDescribeTopicPartitions},
	}
	if s.quotas != nil {
		t[48] = handler{0, 1, s.handleDescribeClientQuotas}
		t[49] = handler{0, 1, s.handleAlterClientQuotas}
	}
	if s.groups != nil {
		t[8] = handler{0, 9, s.handleOffsetCommit}
		t[9] = handler{0, 9, s.handleOffsetFetch}
		t[10] = handler{0, 5, s.handleFindCoordinator}
		t[11] = handler{0, 9, s.handleJoinGroup}
		t[12] = handler{0, 4, s.handleHeartbeat}
		t[13] = handler{0, 5, s.handleLeaveGroup}
		t[14] = handler{0, 5, s.handleSyncGroup}
		t[15] = handler{0, 5, s.handleDescribeGroups}
		t[16] = handler{0, 5, s.handleListGroups}
		t[42] = handler{0, 2, s.handleDeleteGroups}
		t[47] = handler{0, 0, s.handleOffsetDelete}
	}
	if s.txns != nil && s.groups != nil {
		// The versions a client sends: AddPartitionsToTxn v4+ is Kafka's
		// broker-to-broker batch form, answered too; the KIP-890 part 2
		// versions (implicit partition adds, EndTxn v5) are not offered.
		t[24] = handler{0, 4, s.handleAddPartitionsToTxn}
		t[25] = handler{0, 3, s.handleAddOffsetsToTxn}
		t[26] = handler{0, 3, s.handleEndTxn}
		t[27] = handler{0, 2, s.handleWriteTxnMarkers} // kafka-transactions abort
		t[28] = handler{0, 3, s.handleTxnOffsetCommit}
		t[65] = handler{0, 0, s.handleDescribeTransactions}
		t[66] = handler{0, 1, s.handleListTransactions}
	}
	if s.cfg.SASL != nil {
		// v0 is advertised because librdkafka requires it to see SASL at
		// all, but refused: its unframed tokens are not supported.
		t[saslHandshakeKey] = handler{0, 1, s.handleSASLHandshake}
		t[saslAuthenticateKey] = handler{0, 2, s.handleSASLAuthenticate}
	}
	if s.cfg.Credentials != nil {
		t[50] = handler{0, 0, s.handleDescribeUserScramCredentials}
		t[51] = handler{0, 0, s.handleAlterUserScramCredentials}
	}
	if s.cfg.ACLs != nil {
		t[29] = handler{0, 3, s.handleDescribeAcls}
		t[30] = handler{0, 3, s.handleCreateAcls}
		t[31] = handler{0, 3, s.handleDeleteAcls}
	}
	return t
}

// brokerAddr splits a node's advertised Kafka address for Metadata.
func brokerAddr(n cluster.NodeInfo) (string, int32) {
	host, port, err := net.SplitHostPort(n.KafkaAddr)
	if err != nil {
		return n.KafkaAddr, 9092
	}
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// controllerID is the node clients should send admin requests to.
func (s *Server) controllerID() int32 {
	if id, ok := s.cluster.LeaderID(); ok {
		return id
	}
	return -1
}

// validTopicName applies Kafka's rules: 1-249 of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// splitRepeated separates the items whose key is given once from the keys
// given more than once (in the order first given): Kafka refuses a topic
// named twice in CreatePartitions or DeleteTopics with one INVALID_REQUEST
// and goes on with the others.
func splitRepeated[T any, K comparable](items []T, key func(T) K) (once []T, repeated []K) {
	count := make(map[K]int, len(items))
	for _, it := range items {
		count[key(it)]++
	}
	for _, it := range items {
		k := key(it)
		switch n := count[k]; {
		case n == 1:
			once = append(once, it)
		case n > 1:
			repeated = append(repeated, k)
			count[k] = 0 // listed once
		}
	}
	return once, repeated
}
