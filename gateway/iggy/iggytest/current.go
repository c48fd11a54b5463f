package iggytest

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"

	"github.com/kgate/kgate/gateway/iggy"
)

const (
	// serverProtocol is the packed protocol version 0.11.0 of server 0.9.x;
	// the minimum is the same with patch 0.
	serverProtocol uint32 = 0x00002C00
	serverVersion         = "0.9.0-edge.5"

	headerSize    = iggy.HeaderSize
	maxFrameSize  = iggy.MaxFrameSize
	frameRequest  = 5
	frameReply    = 8
	frameEviction = 13

	codeFeatureUnavailable uint32 = 5
	cFlushUnsavedBuffer    uint32 = 102
)

// Eviction reasons the double sends (§1.3).
const (
	evictNoSession      iggy.EvictionReason = 1
	evictInvalidCreds   iggy.EvictionReason = 9
	evictInvalidToken   iggy.EvictionReason = 10
	evictIncompatible   iggy.EvictionReason = 14
	evictMalformedLogin iggy.EvictionReason = 15
)

// serveCurrent runs the 256-byte-header protocol (§1–§3) on c until the
// connection fails or a reply asks to close it. A frame whose size is out
// of 256..64 MiB, or whose header is invalid, drops the connection
// without a reply. A short frame (a legacy client's Ping) just waits for
// the rest of the 256 bytes (§0.1).
func (s *Server) serveCurrent(c *conn) {
	hdr := make([]byte, headerSize)
	for {
		if _, err := io.ReadFull(c.br, hdr); err != nil {
			return
		}
		size := binary.LittleEndian.Uint32(hdr[48:])
		if size < headerSize || size > maxFrameSize {
			s.log.Debug("dropping connection: frame size", "size", size)
			return
		}
		body, err := readBody(c.br, int(size)-headerSize)
		if err != nil {
			return
		}
		reply, closeAfter, drop := s.handleCurrent(c, hdr, body)
		if drop {
			s.log.Debug("dropping connection: invalid header")
			return
		}
		if reply != nil && !c.respond(reply) {
			return
		}
		if closeAfter {
			return
		}
	}
}

// currentRequest is the part of a request header the double uses.
type currentRequest struct {
	hdr       []byte
	client    [16]byte
	request   uint64
	operation uint8
	session   uint64
	code      uint32
}

// handleCurrent processes one frame. reply nil means no answer; drop
// means close the connection without one; closeAfter means close after
// the reply (evictions).
func (s *Server) handleCurrent(c *conn, hdr, body []byte) (reply []byte, closeAfter, drop bool) {
	rq := currentRequest{
		hdr:       hdr,
		request:   binary.LittleEndian.Uint64(hdr[168:]),
		operation: hdr[176],
		session:   binary.LittleEndian.Uint64(hdr[184:]),
		code:      binary.LittleEndian.Uint32(hdr[196:]),
	}
	copy(rq.client[:], hdr[128:144])
	// Header validation (§2): an invalid header gets no reply.
	switch {
	case hdr[60] != frameRequest, rq.client == [16]byte{}, rq.operation == 0:
		return nil, false, true
	case rq.operation == opRegister && (rq.request != 0 || rq.session != 0):
		return nil, false, true
	case rq.operation != opRegister && rq.operation != opNonReplicated && rq.request == 0:
		return nil, false, true
	}

	var login loginRequest
	var loginOK bool
	switch rq.operation {
	case opRegister:
		login, loginOK = parseLogin(body)
		if loginOK && login.token {
			s.count(cLoginRegisterPAT)
		} else {
			s.count(cLoginRegister)
		}
	case opNonReplicated:
		s.count(rq.code)
	default:
		if code, ok := opCodes[rq.operation]; ok {
			s.count(code)
		}
	}
	if s.hang.Load() {
		return nil, false, false
	}
	session, evicted, reason := c.sessionState()
	if evicted {
		return evictionFrame(rq.client, reason), true, false
	}

	switch rq.operation {
	case opRegister:
		return s.currentLogin(c, rq, login, loginOK, body)
	case opNonReplicated:
		switch {
		case rq.code == cPing:
			return s.replyFrame(rq, session, 0, nil, 0), false, false
		case rq.code == cLegacyLoginUser || rq.code == cLegacyLoginPAT:
			return evictionFrame(rq.client, evictMalformedLogin), true, false
		case session == 0:
			return s.replyFrame(rq, session, codeUnauthenticated, nil, 0), false, false
		}
		switch rq.code {
		case cGetClusterMetadata:
			// Released 0.11 SDKs ask for the roster before offset writes and
			// polls; a one-node roster tells them the server is not clustered.
			return s.replyFrame(rq, session, 0, s.clusterMetadata(), 0), false, false
		case cPollMessages, cGetConsumerOffset, cGetStream, cGetStreams, cGetTopic, cGetTopics:
			out := s.exec(rq.code, body)
			return s.replyFrame(rq, session, out.status|out.result, out.body, 0), false, false
		case cFlushUnsavedBuffer:
			return s.replyFrame(rq, session, codeFeatureUnavailable, nil, 0), false, false
		}
		return s.replyFrame(rq, session, codeInvalidCommand, nil, 0), false, false
	}

	code, known := opCodes[rq.operation]
	if !known {
		return s.replyFrame(rq, session, codeInvalidCommand, nil, 0), false, false
	}
	if session == 0 || rq.session != session {
		return evictionFrame(rq.client, evictNoSession), true, false
	}
	if rq.operation == opLogout {
		c.setSession(0)
		c.lastReq, c.lastReply, c.lastSend = 0, nil, 0
		return s.replyFrame(rq, 0, 0, nil, 0), false, false
	}
	if rq.operation == opSendMessages {
		// Partition dedup by request id, as the released 0.9 server does
		// (iggy_binary_protocol 0.11.0): an id at or below the session's last
		// send is a replay, answered with an empty body and not appended.
		if rq.request <= c.lastSend {
			return s.replyFrame(rq, session, 0, nil, 0), false, false
		}
		c.lastSend = rq.request
	}

	metadata := rq.operation >= 128 && rq.operation < 160
	if metadata {
		// Per-session dedup by request id (§2): a replay gets the cached
		// reply, an older id RequestAlreadyApplied.
		switch {
		case c.lastReply != nil && rq.request == c.lastReq:
			return c.lastReply, false, false
		case rq.request < c.lastReq:
			return s.replyFrame(rq, session, 0, resultBody(codeRequestAlreadyApplied, nil), 0), false, false
		}
	}

	var out outcome
	switch rq.operation {
	case opCreateStream, opDeleteStream, opCreateTopic, opUpdateTopic, opDeleteTopic,
		opCreatePartitions, opDeletePartitions, opSendMessages, opStoreConsumerOffset, opDeleteConsumerOffset:
		out = s.exec(code, body)
	default:
		out = denied(codeInvalidCommand) // in the catalogue, not simulated
	}
	var commit uint64
	if out.status == 0 && out.result == 0 {
		s.mu.Lock()
		s.commits++
		commit = s.commits
		s.mu.Unlock()
	}
	if rq.operation == opSendMessages {
		status := out.status | out.result
		if status == 0 && s.transientAfterCommit.Load() > 0 && s.transientAfterCommit.Add(-1) >= 0 {
			status = codeTransientNotCommitted // applied, but the client is told the outcome is unknown
		}
		reply = s.replyFrame(rq, session, status, out.body, commit)
	} else if out.status != 0 {
		reply = s.replyFrame(rq, session, out.status, nil, commit)
	} else {
		reply = s.replyFrame(rq, session, 0, resultBody(out.result, out.body), commit)
	}
	if metadata {
		c.lastReq, c.lastReply = rq.request, reply
	}
	return reply, false, false
}

// resultBody frames a result-framed payload (§3): count 0 + payload, or
// one entry {index 0, code} and no payload.
func resultBody(code uint32, payload []byte) []byte {
	w := &bwriter{}
	if code != 0 {
		w.u32(1)
		w.u32(0)
		w.u32(code)
		return w.b
	}
	w.u32(0)
	w.bytes(payload)
	return w.b
}

// replyFrame builds a reply (§1.2); a non-zero status always has an empty body.
func (s *Server) replyFrame(rq currentRequest, session uint64, status uint32, body []byte, commit uint64) []byte {
	if status != 0 {
		body = nil
	}
	f := make([]byte, headerSize+len(body))
	binary.LittleEndian.PutUint32(f[48:], uint32(len(f)))
	f[60] = frameReply
	copy(f[128:144], rq.hdr[144:160]) // request_checksum, echoed
	copy(f[160:176], rq.client[:])
	binary.LittleEndian.PutUint64(f[176:], session)
	binary.LittleEndian.PutUint64(f[184:], commit)
	copy(f[192:200], rq.hdr[160:168]) // timestamp, echoed
	binary.LittleEndian.PutUint64(f[200:], rq.request)
	f[208] = rq.operation
	binary.LittleEndian.PutUint32(f[216:], status)
	copy(f[headerSize:], body)
	return f
}

// evictionFrame builds an Eviction (§1.3).
func evictionFrame(client [16]byte, reason iggy.EvictionReason) []byte {
	f := make([]byte, headerSize)
	binary.LittleEndian.PutUint32(f[48:], headerSize)
	f[60] = frameEviction
	copy(f[128:144], client[:])
	binary.LittleEndian.PutUint32(f[144:], serverProtocol)
	binary.LittleEndian.PutUint32(f[148:], serverProtocol)
	f[255] = uint8(reason)
	return f
}

// loginRequest is a decoded register body (§5.2).
type loginRequest struct {
	version                   uint32
	token                     bool
	username, password, value string
}

// parseLogin decodes a register body, first as user/password (code 40),
// then as a personal access token (code 45); each must consume the body
// exactly. ok is false when neither fits.
func parseLogin(body []byte) (loginRequest, bool) {
	prefix := func(r *breader) uint32 {
		v := r.u32()
		r.wireName() // sdk name
		r.wireName() // sdk version
		return v
	}
	context := func(r *breader) {
		n := r.u32()
		if r.code == 0 && uint64(n) > uint64(r.remaining()) {
			r.fail(codeInvalidCommand)
		}
		r.take(int(n))
	}
	r := breader{b: body}
	l := loginRequest{version: prefix(&r)}
	l.username = r.wireName()
	pl := int(r.u8())
	l.password = string(r.take(pl))
	context(&r)
	if r.code == 0 && pl > 0 && r.remaining() == 0 {
		return l, true
	}
	r = breader{b: body}
	l = loginRequest{version: prefix(&r), token: true}
	l.value = r.wireName()
	context(&r)
	if r.code == 0 && r.remaining() == 0 {
		return l, true
	}
	return loginRequest{}, false
}

// versionOK accepts a client whose packed version is ≥ the minimum and
// whose major.minor is at most the server's: only 0.11.x.
func versionOK(v uint32) bool { return v>>10 == serverProtocol>>10 }

func (s *Server) currentLogin(c *conn, rq currentRequest, l loginRequest, ok bool, body []byte) ([]byte, bool, bool) {
	if !ok {
		// A body too short to hold a version is malformed; a readable
		// version is checked first so a newer client learns why.
		if len(body) >= 4 && !versionOK(binary.LittleEndian.Uint32(body)) {
			return evictionFrame(rq.client, evictIncompatible), true, false
		}
		return evictionFrame(rq.client, evictMalformedLogin), true, false
	}
	if !versionOK(l.version) {
		return evictionFrame(rq.client, evictIncompatible), true, false
	}
	if l.token {
		if !s.tokens[l.value] {
			return evictionFrame(rq.client, evictInvalidToken), true, false
		}
	} else if l.username != s.cfg.Username || l.password != s.cfg.Password {
		return evictionFrame(rq.client, evictInvalidCreds), true, false
	}
	s.mu.Lock()
	s.sessions++
	session := s.sessions
	s.logins++
	c.session = session
	s.mu.Unlock()
	c.lastReq, c.lastReply, c.lastSend = 0, nil, 0
	w := &bwriter{}
	w.u32(0) // root user id
	w.u64(session)
	w.u32(serverProtocol)
	w.name(serverVersion)
	return s.replyFrame(rq, session, 0, resultBody(0, w.b), 0), false, false
}

// clusterMetadata is the ClusterMetadata reply (§5.1) of a one-node,
// unclustered server: this listener, leader, healthy.
func (s *Server) clusterMetadata() []byte {
	host, port, _ := net.SplitHostPort(s.Addr())
	p, _ := strconv.Atoi(port)
	w := &bwriter{}
	str := func(v string) {
		w.u32(uint32(len(v)))
		w.b = append(w.b, v...)
	}
	str("iggy-double")
	w.u32(1)
	str("iggy-double-0")
	str(host)
	w.b = binary.LittleEndian.AppendUint16(w.b, uint16(p))
	w.b = append(w.b, 0, 0, 0, 0, 0, 0) // quic, http, websocket ports: not served
	w.b = append(w.b, 0, 0)             // role leader, status healthy
	return w.b
}
