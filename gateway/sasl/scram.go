package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// MinIterations and MaxIterations bound SCRAM iteration counts as Kafka does.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// ScramCredential is what the server keeps for a user: never the password.
type ScramCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// ScramHash returns the hash of a SCRAM mechanism, or nil for another name.
func ScramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// SaltPassword is RFC 5802's Hi(password, salt, i).
func SaltPassword(h func() hash.Hash, password string, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// KeysFromSalted derives StoredKey and ServerKey from a salted password.
func KeysFromSalted(h func() hash.Hash, salted []byte) (storedKey, serverKey []byte) {
	clientKey := mac(h, salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return sum.Sum(nil), mac(h, salted, "Server Key")
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// ScramServer runs one SCRAM exchange: client-first, server-first,
// client-final, server-final.
type ScramServer struct {
	hash   func() hash.Hash
	lookup func(user string) (ScramCredential, bool)

	step            int
	user            string
	known           bool
	cred            ScramCredential
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string
}

// NewScramServer starts an exchange for a SCRAM mechanism.
func NewScramServer(mechanism string, lookup func(user string) (ScramCredential, bool)) (*ScramServer, error) {
	h := ScramHash(mechanism)
	if h == nil {
		return nil, fmt.Errorf("unsupported SCRAM mechanism %q", mechanism)
	}
	return &ScramServer{hash: h, lookup: lookup}, nil
}

func (s *ScramServer) User() string { return s.user }

func (s *ScramServer) Step(msg []byte) ([]byte, bool, error) {
	s.step++
	switch s.step {
	case 1:
		return s.first(string(msg))
	case 2:
		return s.final(string(msg))
	}
	return nil, false, errors.New("SCRAM: exchange already finished")
}

// ClientFirst is a parsed client-first-message.
type ClientFirst struct {
	GS2Header string // "n,," or "n,a=user," or "y,,"
	User      string
	Nonce     string
	Bare      string // client-first-message-bare, for the AuthMessage
}

// ParseClientFirst parses a client-first-message (RFC 5802 §7). Channel
// binding is not offered, so "p=" is refused; extensions after the nonce
// (Kafka's tokenauth) are accepted and ignored.
func ParseClientFirst(msg string) (ClientFirst, error) {
	var cf ClientFirst
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return cf, errors.New("SCRAM: malformed client-first-message")
	}
	switch {
	case flag == "n", flag == "y":
	case strings.HasPrefix(flag, "p="):
		return cf, errors.New("SCRAM: channel binding is not supported")
	default:
		return cf, errors.New("SCRAM: bad GS2 channel binding flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return cf, errors.New("SCRAM: malformed client-first-message")
	}
	if authz != "" && !strings.HasPrefix(authz, "a=") {
		return cf, errors.New("SCRAM: bad authorization identity")
	}
	cf.GS2Header = flag + "," + authz + ","
	cf.Bare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return cf, errors.New("SCRAM: client-first-message must start with n= and r=")
	}
	user, err := decodeSaslName(attrs[0][2:])
	if err != nil {
		return cf, err
	}
	if user == "" {
		return cf, errors.New("SCRAM: empty user name")
	}
	if authz != "" {
		az, err := decodeSaslName(authz[2:])
		if err != nil || az != user {
			return cf, errors.New("SCRAM: authorization identity must be the user name")
		}
	}
	cf.User, cf.Nonce = user, attrs[1][2:]
	if !printableNonce(cf.Nonce) {
		return cf, errors.New("SCRAM: bad client nonce")
	}
	return cf, nil
}

// decodeSaslName undoes RFC 5802's escaping of ',' (=2C) and '=' (=3D).
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("SCRAM: bad escape in user name")
		}
		i += 2
	}
	return b.String(), nil
}

func printableNonce(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

func (s *ScramServer) first(msg string) ([]byte, bool, error) {
	cf, err := ParseClientFirst(msg)
	if err != nil {
		return nil, false, err
	}
	s.user, s.gs2Header, s.clientFirstBare = cf.User, cf.GS2Header, cf.Bare
	s.cred, s.known = s.lookup(cf.User)
	if !s.known {
		// Answer an unknown user like a known one, with a made-up salt, and
		// fail at the proof: the reply must not reveal who exists.
		s.cred = ScramCredential{Salt: randomBytes(16), Iterations: MinIterations}
	}
	s.nonce = cf.Nonce + base64.RawStdEncoding.EncodeToString(randomBytes(18))
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.serverFirst), false, nil
}

// ClientFinal is a parsed client-final-message.
type ClientFinal struct {
	ChannelBinding []byte // decoded c=
	Nonce          string
	Proof          []byte
	WithoutProof   string
}

// ParseClientFinal parses a client-final-message (RFC 5802 §7).
func ParseClientFinal(msg string) (ClientFinal, error) {
	var cf ClientFinal
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return cf, errors.New("SCRAM: client-final-message without proof")
	}
	cf.WithoutProof = msg[:i]
	proof, err := base64.StdEncoding.DecodeString(msg[i+3:])
	if err != nil {
		return cf, errors.New("SCRAM: proof is not base64")
	}
	cf.Proof = proof
	attrs := strings.Split(cf.WithoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return cf, errors.New("SCRAM: client-final-message must start with c= and r=")
	}
	if cf.ChannelBinding, err = base64.StdEncoding.DecodeString(attrs[0][2:]); err != nil {
		return cf, errors.New("SCRAM: channel binding is not base64")
	}
	cf.Nonce = attrs[1][2:]
	return cf, nil
}

func (s *ScramServer) final(msg string) ([]byte, bool, error) {
	cf, err := ParseClientFinal(msg)
	if err != nil {
		return nil, false, err
	}
	if string(cf.ChannelBinding) != s.gs2Header {
		return nil, false, errors.New("SCRAM: channel binding does not match the GS2 header")
	}
	// librdkafka sends its own nonce again before the combined one; Kafka
	// accepts a nonce that ends with the server's, and so do we.
	if !strings.HasSuffix(cf.Nonce, s.nonce) {
		return nil, false, errors.New("SCRAM: nonce does not match")
	}
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + cf.WithoutProof
	if !s.known || len(cf.Proof) != len(s.cred.StoredKey) {
		return nil, false, ErrAuthFailed
	}
	sig := hmac.New(s.hash, s.cred.StoredKey)
	sig.Write([]byte(authMessage))
	clientKey := sig.Sum(nil)
	subtle.XORBytes(clientKey, clientKey, cf.Proof)
	sum := s.hash()
	sum.Write(clientKey)
	if !hmac.Equal(sum.Sum(nil), s.cred.StoredKey) {
		return nil, false, ErrAuthFailed
	}
	srv := hmac.New(s.hash, s.cred.ServerKey)
	srv.Write([]byte(authMessage))
	var out bytes.Buffer
	out.WriteString("v=")
	out.WriteString(base64.StdEncoding.EncodeToString(srv.Sum(nil)))
	return out.Bytes(), true, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return b
}
