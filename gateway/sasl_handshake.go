package gateway

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleSASLHandshake picks the mechanism for the exchange that follows:
// in SaslAuthenticate requests (v1), or in bare tokens (v0). An unknown
// mechanism, or a second handshake before the first exchange finished, is
// answered and the connection closed, as Kafka does.
func (s *Server) handleSASLHandshake(_ context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	sess := r.sess
	resp.SupportedMechanisms = sess.mechanisms
	switch {
	case sess.noSASL:
		// A listener without SASL, as Kafka answers on one.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return Reply{resp: resp, closeAfter: true}
	case req.Version == 0 && sess.reauthMechanism != "":
		// KIP-368: re-authentication takes SaslAuthenticate (v1).
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return Reply{resp: resp, closeAfter: true}
	case sess.mechanism != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return Reply{resp: resp, closeAfter: true}
	case !slices.Contains(sess.mechanisms, req.Mechanism):
		s.log.Info("SASL handshake refused: mechanism not enabled", "remote", r.Remote, "mechanism", req.Mechanism)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return Reply{resp: resp, closeAfter: true}
	case sess.reauthMechanism != "" && req.Mechanism != sess.reauthMechanism:
		// KIP-368: re-authentication keeps the mechanism.
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return Reply{resp: resp, closeAfter: true}
	}
	sess.mechanism = req.Mechanism
	sess.exchange = s.newExchange(sess, req.Mechanism)
	// v0: the tokens follow unframed, as Kafka before SaslAuthenticate.
	sess.rawTokens = req.Version == 0
	return now(resp)
}
