package iggytest

import (
	"encoding/binary"
	"io"

	"github.com/kgate/kgate/gateway/iggy"
)

// serveLegacy runs the `[length][code][payload]` protocol (§13.1) on c.
// Like the 0.8.0 server it reads 8 bytes as [length][code]; a length
// below 4 is answered with status 3 and the next 8 bytes are a new frame,
// so a current-dialect frame gets six `03 00 00 00 00 00 00 00` replies
// before the double waits, stuck mid-frame, for a body that never comes
// (§0.1). A payload over 10 MiB (except SendMessages) gets status 3
// without being read, which desynchronises the stream as on the real
// server.
func (s *Server) serveLegacy(c *conn) {
	hdr := make([]byte, 8)
	for {
		if _, err := io.ReadFull(c.br, hdr); err != nil {
			return
		}
		length := binary.LittleEndian.Uint32(hdr[0:])
		code := binary.LittleEndian.Uint32(hdr[4:])
		if length < 4 {
			if !c.respond(legacyStatus(codeInvalidCommand, nil)) {
				return
			}
			continue
		}
		n := int(length - 4)
		if code != cSendMessages && n > iggy.LegacyMaxPayload {
			s.count(code)
			if !c.respond(legacyStatus(codeInvalidCommand, nil)) {
				return
			}
			continue
		}
		body, err := readBody(c.br, n)
		if err != nil {
			return
		}
		reply := s.handleLegacy(c, code, body)
		if reply != nil && !c.respond(reply) {
			return
		}
	}
}

// legacyStatus builds a reply: [status u32][length u32][payload].
func legacyStatus(status uint32, payload []byte) []byte {
	if status != 0 {
		payload = nil
	}
	f := make([]byte, 8+len(payload))
	binary.LittleEndian.PutUint32(f[0:], status)
	binary.LittleEndian.PutUint32(f[4:], uint32(len(payload)))
	copy(f[8:], payload)
	return f
}

// handleLegacy processes one request; nil means no answer (hang).
func (s *Server) handleLegacy(c *conn, code uint32, body []byte) []byte {
	s.count(code)
	if s.hang.Load() {
		return nil
	}
	session, _, _ := c.sessionState()
	switch code {
	case cPing:
		return legacyStatus(0, nil)
	case cLegacyLoginUser:
		return s.legacyLogin(c, body)
	case cLegacyLoginPAT:
		return s.legacyLoginPAT(c, body)
	}
	if session == 0 {
		return legacyStatus(codeUnauthenticated, nil)
	}
	if code == cLogout {
		c.setSession(0)
		return legacyStatus(0, nil)
	}
	out := s.exec(code, body)
	return legacyStatus(out.status|out.result, out.body)
}

// legacyLogin handles LoginUser 38 (§13.2). version and context are
// optional strings; the double, like the 0.8.0 server, ignores them.
func (s *Server) legacyLogin(c *conn, body []byte) []byte {
	r := breader{b: body}
	un := int(r.u8())
	if r.code == 0 && un == 0 {
		return legacyStatus(codeInvalidFormat, nil)
	}
	user := string(r.take(un))
	pass := string(r.take(int(r.u8())))
	for i := 0; i < 2 && r.code == 0 && r.remaining() > 0; i++ { // version, context
		n := r.u32()
		if r.code == 0 && uint64(n) > uint64(r.remaining()) {
			r.fail(codeInvalidCommand)
		}
		r.take(int(n))
	}
	switch {
	case r.code != 0:
		return legacyStatus(r.code, nil)
	case len(user) < 3 || len(user) > 50:
		return legacyStatus(codeInvalidUsername, nil)
	case len(pass) < 3 || len(pass) > 100:
		return legacyStatus(codeInvalidPassword, nil)
	case user != s.cfg.Username || pass != s.cfg.Password:
		return legacyStatus(codeInvalidCredentials, nil)
	}
	return s.legacyLoggedIn(c)
}

// legacyLoginPAT handles LoginWithPAT 44: an unknown token gives 20.
func (s *Server) legacyLoginPAT(c *conn, body []byte) []byte {
	r := breader{b: body}
	n := int(r.u8())
	if r.code == 0 && n == 0 {
		return legacyStatus(codeInvalidFormat, nil)
	}
	tok := string(r.take(n))
	if r.code != 0 {
		return legacyStatus(r.code, nil)
	}
	if !s.tokens[tok] {
		return legacyStatus(codeResourceNotFound, nil)
	}
	return s.legacyLoggedIn(c)
}

func (s *Server) legacyLoggedIn(c *conn) []byte {
	s.mu.Lock()
	s.sessions++
	c.session = s.sessions
	s.logins++
	s.mu.Unlock()
	return legacyStatus(0, []byte{0, 0, 0, 0}) // root user id 0
}
