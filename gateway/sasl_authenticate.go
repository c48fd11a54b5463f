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
// SASL.FailureDelay (to slow down guessing) and the connection closes.
func (s *Server) handleSASLAuthenticate(ctx context.Context, r *Request) Reply {
	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	sess := r.sess
	if sess.noSASL || sess.exchange == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate before a SaslHandshake")
		return Reply{resp: resp, closeAfter: true}
	}
	out, done, err := sess.exchange.Step(req.SASLAuthBytes)
	if err == nil && done && sess.reauthMechanism != "" && sess.exchange.User() != sess.user {
		err = errors.New("re-authentication must keep the same user")
	}
	if err != nil {
		mech := sess.mechanism
		sess.mechanism, sess.exchange, sess.authed = "", nil, false
		s.log.Info("SASL authentication failed", "remote", r.Remote, "mechanism", mech, "err", err)
		msg := fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mech)
		if !errors.Is(err, sasl.ErrAuthFailed) {
			msg = fmt.Sprintf("Authentication failed: %v", err)
		}
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &msg
		sleepCtx(ctx, s.cfg.SASL.FailureDelay)
		return Reply{resp: resp, closeAfter: true}
	}
	resp.SASLAuthBytes = out
	if done {
		sess.authed, sess.user = true, sess.exchange.User()
		sess.reauthMechanism = sess.mechanism
		sess.mechanism, sess.exchange = "", nil
		sess.expires = time.Time{}
		if lt := s.cfg.SASL.SessionLifetime; lt > 0 {
			sess.expires = time.Now().Add(lt)
			resp.SessionLifetimeMillis = lt.Milliseconds()
		}
	}
	return now(resp)
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
