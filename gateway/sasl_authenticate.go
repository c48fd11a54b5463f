package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/gateway/sasl"
)

// handleSASLAuthenticate carries one step of the mechanism's exchange. A
// failure is answered with SASL_AUTHENTICATION_FAILED after
// the listener's failure delay (to slow down guessing) and the connection closes.
func (s *Server) handleSASLAuthenticate(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	sess := r.sess
	if sess.noSASL || sess.exchange == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate before a SaslHandshake")
		return Reply{resp: resp, closeAfter: true}
	}
	out, lifetime, err := s.saslStep(sess, req.SASLAuthBytes, r.Remote)
	if err != nil {
		msg := fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", err.mechanism)
		if !errors.Is(err.err, sasl.ErrAuthFailed) {
			msg = fmt.Sprintf("Authentication failed: %v", err.err)
		}
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &msg
		sleepCtx(ctx, sess.failureDelay)
		return Reply{resp: resp, closeAfter: true}
	}
	resp.SASLAuthBytes = out
	resp.SessionLifetimeMillis = lifetime.Milliseconds()
	return now(resp)
}

// stepError is a failed SASL exchange: its mechanism and why.
type stepError struct {
	mechanism string
	err       error
}

// saslStep carries one token of the session's exchange (SaslAuthenticate,
// or a bare token after SaslHandshake v0). When the exchange completes,
// the session is authenticated for lifetime (0: without end); when it
// fails, the session is left unauthenticated.
func (s *Server) saslStep(sess *session, token []byte, remote string) (out []byte, lifetime time.Duration, fail *stepError) {
	out, done, err := sess.exchange.Step(token)
	if err == nil && done && sess.reauthMechanism != "" && sess.exchange.User() != sess.user {
		err = errors.New("re-authentication must keep the same user")
	}
	if err != nil {
		mech := sess.mechanism
		sess.mechanism, sess.exchange, sess.authed, sess.rawTokens = "", nil, false, false
		s.log.Info("SASL authentication failed", "remote", remote, "mechanism", mech, "err", err)
		return nil, 0, &stepError{mechanism: mech, err: err}
	}
	if done {
		sess.authed, sess.user = true, sess.exchange.User()
		sess.reauthMechanism = sess.mechanism
		finished := sess.exchange
		sess.mechanism, sess.exchange, sess.rawTokens = "", nil, false
		sess.expires = time.Time{}
		if lt := sess.lifetime; lt > 0 {
			if ex, ok := finished.(interface{ Expires() time.Time }); ok {
				lt = min(lt, max(time.Until(ex.Expires()), time.Millisecond))
			}
			sess.expires = time.Now().Add(lt)
			lifetime = lt
		}
	}
	return out, lifetime, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
