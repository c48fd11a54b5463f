// Package sasl holds the server side of the SASL mechanisms kgate offers on
// its Kafka listener: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802,
// RFC 7677). It parses client messages and checks credentials; the wire
// framing (SaslHandshake, SaslAuthenticate) is the gateway's.
package sasl

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
)

// Mechanism names as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// ErrAuthFailed is every credential failure. The message is the same for an
// unknown user and a wrong password, so neither can be told apart.
var ErrAuthFailed = errors.New("authentication failed: invalid credentials")

// Server is one mechanism's side of one authentication exchange.
type Server interface {
	// Step takes the client's next message and returns the answer. done
	// reports success; an error ends the exchange (ErrAuthFailed for bad
	// credentials, another error for a malformed message).
	Step(msg []byte) (resp []byte, done bool, err error)
	// User is the authenticated user once done.
	User() string
}

// ParsePlain splits a PLAIN message: [authzid] NUL authcid NUL passwd.
func ParsePlain(msg []byte) (authzid, user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("PLAIN: expected 3 NUL-separated fields, got %d", len(parts))
	}
	if len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", "", "", errors.New("PLAIN: empty user name or password")
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}

// PlainServer checks PLAIN messages against a user → password lookup.
type PlainServer struct {
	Lookup func(user string) (password string, ok bool)
	user   string
}

func (p *PlainServer) Step(msg []byte) ([]byte, bool, error) {
	authzid, user, password, err := ParsePlain(msg)
	if err != nil {
		return nil, false, err
	}
	if authzid != "" && authzid != user {
		return nil, false, errors.New("PLAIN: authorization id must be empty or the user name")
	}
	want, ok := p.Lookup(user)
	// Compare even for an unknown user so both take the same time.
	eq := subtle.ConstantTimeCompare([]byte(password), []byte(want)) == 1
	if !ok || !eq {
		return nil, false, ErrAuthFailed
	}
	p.user = user
	return nil, true, nil
}

func (p *PlainServer) User() string { return p.user }
