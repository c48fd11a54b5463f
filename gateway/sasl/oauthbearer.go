package sasl

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"slices"
	"strings"
	"time"
)

// OAuthBearer is the OAUTHBEARER mechanism (RFC 7628) with JSON Web Tokens
// (RFC 7519) signed by a key of a configured key set (RFC 7517), as Kafka's
// OAuthBearerValidatorCallbackHandler validates them.
const OAuthBearer = "OAUTHBEARER"

// KeySet is the public keys tokens may be signed with, by key id.
type KeySet struct {
	keys []jwk
}

type jwk struct {
	kid string
	key crypto.PublicKey
}

// ParseKeySet reads a JWKS document ({"keys": [...]}); RSA and EC (P-256,
// P-384, P-521) keys are kept, others (and private parts) ignored.
func ParseKeySet(doc []byte) (*KeySet, error) {
	var raw struct {
		Keys []struct {
			Kty, Kid, Use, N, E, Crv, X, Y string
		} `json:"keys"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	ks := &KeySet{}
	for i, k := range raw.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var pub crypto.PublicKey
		switch k.Kty {
		case "RSA":
			n, err1 := b64(k.N)
			e, err2 := b64(k.E)
			if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
				return nil, fmt.Errorf("JWKS: key %d: bad RSA n or e", i)
			}
			pub = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			curve := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}[k.Crv]
			x, err1 := b64(k.X)
			y, err2 := b64(k.Y)
			if curve == nil || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("JWKS: key %d: bad EC key", i)
			}
			size := (curve.Params().BitSize + 7) / 8
			if len(x) > size || len(y) > size {
				return nil, fmt.Errorf("JWKS: key %d: bad EC coordinates", i)
			}
			point := make([]byte, 1+2*size)
			point[0] = 4
			copy(point[1+size-len(x):1+size], x)
			copy(point[1+2*size-len(y):], y)
			ec, err := ecdsa.ParseUncompressedPublicKey(curve, point)
			if err != nil {
				return nil, fmt.Errorf("JWKS: key %d: %w", i, err)
			}
			pub = ec
		default:
			continue
		}
		ks.keys = append(ks.keys, jwk{kid: k.Kid, key: pub})
	}
	if len(ks.keys) == 0 {
		return nil, errors.New("JWKS: no RSA or EC signing key")
	}
	return ks, nil
}

func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// TokenRules is what a token must satisfy besides its signature.
type TokenRules struct {
	Issuer    string   // "": any
	Audiences []string // empty: any; else the token's aud must name one
	SubClaim  string   // claim naming the principal ("sub" when empty)
	ClockSkew time.Duration
}

// Token is a validated token's principal and expiry.
type Token struct {
	Principal string
	Expires   time.Time
}

// ValidateToken checks a compact JWS token: a known algorithm (never
// "none"), a signature by a key of ks (the one its kid names, else any),
// an expiry in the future and a not-before in the past (within the clock
// skew), and the issuer, audience and principal claims.
func ValidateToken(token string, ks *KeySet, rules TokenRules, now time.Time) (Token, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Token{}, errors.New("not a signed JWT (header.payload.signature)")
	}
	hb, err1 := b64(parts[0])
	pb, err2 := b64(parts[1])
	sig, err3 := b64(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return Token{}, errors.New("JWT is not base64url")
	}
	var hdr struct{ Alg, Kid string }
	if err := json.Unmarshal(hb, &hdr); err != nil {
		return Token{}, fmt.Errorf("JWT header: %w", err)
	}
	signed := []byte(parts[0] + "." + parts[1])
	if err := verifySignature(hdr.Alg, hdr.Kid, signed, sig, ks); err != nil {
		return Token{}, err
	}
	var claims map[string]any
	dec := json.NewDecoder(bytes.NewReader(pb))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return Token{}, fmt.Errorf("JWT claims: %w", err)
	}
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return Token{}, errors.New("JWT has no exp claim")
	}
	if !now.Before(exp.Add(rules.ClockSkew)) {
		return Token{}, errors.New("JWT expired")
	}
	if nbf, ok := numericDate(claims["nbf"]); ok && now.Add(rules.ClockSkew).Before(nbf) {
		return Token{}, errors.New("JWT not valid yet (nbf)")
	}
	if rules.Issuer != "" {
		if iss, _ := claims["iss"].(string); iss != rules.Issuer {
			return Token{}, fmt.Errorf("JWT issuer %q is not the expected one", iss)
		}
	}
	if len(rules.Audiences) > 0 {
		var auds []string
		switch a := claims["aud"].(type) {
		case string:
			auds = []string{a}
		case []any:
			for _, v := range a {
				if s, ok := v.(string); ok {
					auds = append(auds, s)
				}
			}
		}
		if !slices.ContainsFunc(auds, func(a string) bool { return slices.Contains(rules.Audiences, a) }) {
			return Token{}, errors.New("JWT audience is not an expected one")
		}
	}
	subClaim := rules.SubClaim
	if subClaim == "" {
		subClaim = "sub"
	}
	sub, _ := claims[subClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return Token{}, fmt.Errorf("JWT has no %s claim", subClaim)
	}
	return Token{Principal: sub, Expires: exp}, nil
}

func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}

func verifySignature(alg, kid string, signed, sig []byte, ks *KeySet) error {
	var h func() hash.Hash
	var ch crypto.Hash
	switch alg[len(alg)-min(len(alg), 3):] {
	case "256":
		h, ch = sha256.New, crypto.SHA256
	case "384":
		h, ch = sha512.New384, crypto.SHA384
	case "512":
		h, ch = sha512.New, crypto.SHA512
	}
	if h == nil || !slices.Contains([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}, alg) {
		return fmt.Errorf("JWT algorithm %q not accepted", alg)
	}
	d := h()
	d.Write(signed)
	digest := d.Sum(nil)
	tried := false
	for _, k := range ks.keys {
		if kid != "" && k.kid != kid {
			continue
		}
		switch pub := k.key.(type) {
		case *rsa.PublicKey:
			var err error
			switch alg[:2] {
			case "RS":
				tried = true
				err = rsa.VerifyPKCS1v15(pub, ch, digest, sig)
			case "PS":
				tried = true
				err = rsa.VerifyPSS(pub, ch, digest, sig, nil)
			default:
				continue
			}
			if err == nil {
				return nil
			}
		case *ecdsa.PublicKey:
			size := (pub.Curve.Params().BitSize + 7) / 8
			if alg[:2] != "ES" || len(sig) != 2*size {
				continue
			}
			tried = true
			r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
			if ecdsa.Verify(pub, digest, r, s) {
				return nil
			}
		}
	}
	if !tried {
		return fmt.Errorf("no key for JWT key id %q and algorithm %s", kid, alg)
	}
	return errors.New("JWT signature does not verify")
}

// OAuthBearerServer validates the token of an OAUTHBEARER exchange. A bad
// token is answered, as RFC 7628 and Kafka do, with an error challenge
// ({"status":"invalid_token"}); the client's reply to it (%x01) then ends
// the exchange with ErrAuthFailed.
type OAuthBearerServer struct {
	Keys  func() (*KeySet, error)
	Rules TokenRules
	Now   func() time.Time

	tok    Token
	failed error
}

func (o *OAuthBearerServer) Step(msg []byte) ([]byte, bool, error) {
	if o.failed != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrAuthFailed, o.failed)
	}
	token, err := parseOAuthInitial(msg)
	if err != nil {
		return nil, false, err
	}
	ks, err := o.Keys()
	if err != nil {
		return nil, false, err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	tok, err := ValidateToken(token, ks, o.Rules, now())
	if err != nil {
		o.failed = err
		return []byte(`{"status":"invalid_token"}`), false, nil
	}
	o.tok = tok
	return nil, true, nil
}

func (o *OAuthBearerServer) User() string { return o.tok.Principal }

// Expires is when the token's validity ends: the session may not outlive
// it (KIP-368).
func (o *OAuthBearerServer) Expires() time.Time { return o.tok.Expires }

// parseOAuthInitial reads the client's first message:
// gs2-header %x01 *(key=value %x01) %x01, and returns its bearer token.
func parseOAuthInitial(msg []byte) (string, error) {
	gs2, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok || !bytes.HasPrefix(gs2, []byte("n,")) || !bytes.HasSuffix(gs2, []byte(",")) {
		return "", errors.New("OAUTHBEARER: malformed GS2 header (channel binding is not supported)")
	}
	if !bytes.HasSuffix(rest, []byte{1}) {
		return "", errors.New("OAUTHBEARER: message does not end with %x01")
	}
	var token string
	for _, kv := range bytes.Split(bytes.TrimSuffix(rest, []byte{1}), []byte{1}) {
		if len(kv) == 0 {
			continue
		}
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			return "", errors.New("OAUTHBEARER: malformed key=value pair")
		}
		if string(k) == "auth" {
			scheme, t, ok := strings.Cut(string(v), " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || t == "" {
				return "", errors.New("OAUTHBEARER: auth is not 'Bearer <token>'")
			}
			token = strings.TrimSpace(t)
		}
	}
	if token == "" {
		return "", errors.New("OAUTHBEARER: no auth=Bearer token")
	}
	return token, nil
}
