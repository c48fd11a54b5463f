package gateway

import "github.com/twmb/franz-go/pkg/kerr"

// fencedAs answers a fenced producer as Kafka does per request version:
// PRODUCER_FENCED from the version that introduced it (KIP-588), else
// INVALID_PRODUCER_EPOCH, which older clients know.
func fencedAs(code, version, since int16) int16 {
	if code == kerr.ProducerFenced.Code && version < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
