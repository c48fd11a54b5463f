package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"github.com/kgate/kgate/fsm"
	"github.com/kgate/kgate/gateway/sasl"
)

// SASL turns on client authentication on the Kafka listener: every
// connection must authenticate (SaslHandshake, SaslAuthenticate) before any
// request but ApiVersions is served, also from a client whose certificate
// the TLS handshake verified, as Kafka does on a SASL_SSL listener (the
// certificate is checked, SASL names the principal).
// CertificateInsteadOfSASL keeps kgate's former rule, where such a
// certificate authenticated the connection on its own.
type SASL struct {
	// Mechanisms offered, among PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
	// (Kafka's sasl.enabled.mechanisms).
	Mechanisms []string
	// PlainUsers looks up a PLAIN user's password.
	PlainUsers func(user string) (password string, ok bool)
	// FailureDelay holds the answer to a failed authentication this long
	// before the connection closes (connection.failed.authentication.delay.ms).
	FailureDelay time.Duration
	// SessionLifetime, when positive, is how long an authentication lasts
	// (connections.max.reauth.ms, KIP-368); the client re-authenticates on
	// the same connection before it ends, or the connection is closed. An
	// OAUTHBEARER session also ends with its token, as in Kafka.
	SessionLifetime time.Duration
	// OAuthKeys are the keys OAUTHBEARER tokens are signed with (re-read
	// when their file changes); OAuthRules what else a token must meet.
	OAuthKeys  func() (*sasl.KeySet, error)
	OAuthRules sasl.TokenRules
	// CertificateInsteadOfSASL: on a listener with SASL, a client
	// certificate verified by the TLS handshake authenticates the
	// connection without SASL (kgate's rule before it followed Kafka).
	CertificateInsteadOfSASL bool
}

// Credentials is the replicated SCRAM credential store.
type Credentials interface {
	ScramCredential(user string, m fsm.ScramMechanism) (fsm.ScramCredential, bool)
	ScramUsers() map[string][]fsm.ScramCredential
	// AlterScramCredentials proposes the change on the leader and returns
	// one code per deletion, then per upsert.
	AlterScramCredentials(ctx context.Context, cmd *fsm.AlterScramCredentials) ([]int16, error)
}

// session is a connection's authentication state. Only the connection's
// reader touches it: the SASL handlers answer synchronously.
type session struct {
	user      string // authenticated principal ("" before)
	authed    bool
	expires   time.Time // zero: never
	mechanism string    // chosen by SaslHandshake, until SaslAuthenticate completes
	exchange  sasl.Server
	// reauthMechanism is the mechanism of the first authentication; a
	// re-authentication must use the same one and the same user (KIP-368).
	reauthMechanism string
	// noSASL: the connection's listener does not authenticate clients.
	noSASL bool
	// mechanisms are those the connection's listener offers, plainUsers
	// its PLAIN users (nil: Config.SASL's).
	mechanisms []string
	plainUsers func(user string) (password string, ok bool)
	// The listener's failure delay, session lifetime and OAUTHBEARER
	// settings: its own where it has them, else Config.SASL's.
	failureDelay time.Duration
	lifetime     time.Duration
	oauthKeys    func() (*sasl.KeySet, error)
	oauthRules   sasl.TokenRules
	// rawTokens: a SaslHandshake v0 chose the mechanism, so its tokens
	// come as bare size-prefixed frames, without a Kafka header, until the
	// exchange ends (conn.rawToken).
	rawTokens bool
}

// startSession sets up a new connection's session: open when its
// listener does not authenticate, else waiting for SASL. A verified client
// certificate names the connection's principal (its subject's
// distinguished name, as Kafka's default principal builder takes it) on a
// listener without SASL; on one with SASL it only passed the TLS
// handshake, and SASL names the principal, as on Kafka's SASL_SSL
// listeners (unless CertificateInsteadOfSASL, the listener's or Config.SASL's).
func (s *Server) startSession(sess *session, tc *tls.Conn, l *Listener) {
	certUser := ""
	if tc != nil {
		if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 {
			certUser = st.PeerCertificates[0].Subject.String()
		}
	}
	if s.cfg.SASL == nil || !l.SASL {
		sess.authed, sess.noSASL = true, true
		sess.user = certUser
		return
	}
	instead := s.cfg.SASL.CertificateInsteadOfSASL
	if l.CertificateInsteadOfSASL != nil {
		instead = *l.CertificateInsteadOfSASL
	}
	if certUser != "" && instead {
		sess.authed, sess.user = true, certUser
	}
	sc := s.cfg.SASL
	sess.mechanisms, sess.plainUsers = sc.Mechanisms, l.PlainUsers
	if l.Mechanisms != nil {
		sess.mechanisms = l.Mechanisms
	}
	sess.failureDelay, sess.lifetime = sc.FailureDelay, sc.SessionLifetime
	sess.oauthKeys, sess.oauthRules = sc.OAuthKeys, sc.OAuthRules
	if l.FailureDelay != nil {
		sess.failureDelay = max(*l.FailureDelay, 0)
	}
	if l.SessionLifetime != nil {
		sess.lifetime = *l.SessionLifetime
	}
	if l.OAuthKeys != nil {
		sess.oauthKeys = l.OAuthKeys
	}
	if l.OAuthRules != nil {
		sess.oauthRules = *l.OAuthRules
	}
}

// admit is the authentication gate: may this request be served on this
// connection now? Before authentication (or after its lifetime ended) only
// ApiVersions and the SASL requests are; anything else closes the
// connection, as Kafka does.
func (sess *session) admit(key int16, now time.Time) bool {
	switch key {
	case apiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
		return true
	}
	if !sess.authed {
		return false
	}
	return sess.expires.IsZero() || now.Before(sess.expires)
}

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// scramMechanism maps a SASL mechanism name to the stored mechanism.
func scramMechanism(name string) (fsm.ScramMechanism, bool) {
	switch name {
	case sasl.ScramSHA256:
		return fsm.ScramSHA256, true
	case sasl.ScramSHA512:
		return fsm.ScramSHA512, true
	}
	return 0, false
}

// newExchange starts the server side of a mechanism for a session.
func (s *Server) newExchange(sess *session, mechanism string) sasl.Server {
	if mechanism == sasl.OAuthBearer {
		keys := sess.oauthKeys
		if keys == nil {
			keys = func() (*sasl.KeySet, error) { return nil, errors.New("no OAUTHBEARER key set configured") }
		}
		return &sasl.OAuthBearerServer{Keys: keys, Rules: sess.oauthRules}
	}
	if mechanism == sasl.Plain {
		lookup := s.cfg.SASL.PlainUsers
		if sess.plainUsers != nil {
			lookup = sess.plainUsers
		}
		if lookup == nil {
			lookup = func(string) (string, bool) { return "", false }
		}
		return &sasl.PlainServer{Lookup: lookup}
	}
	m, _ := scramMechanism(mechanism)
	ex, err := sasl.NewScramServer(mechanism, func(user string) (sasl.ScramCredential, bool) {
		if s.cfg.Credentials == nil {
			return sasl.ScramCredential{}, false
		}
		c, ok := s.cfg.Credentials.ScramCredential(user, m)
		return sasl.ScramCredential{Salt: c.Salt, Iterations: int(c.Iterations), StoredKey: c.StoredKey, ServerKey: c.ServerKey}, ok
	})
	if err != nil {
		return nil
	}
	return ex
}
