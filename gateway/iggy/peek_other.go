//go:build !unix

package iggy

import "net"

// peerClosed cannot inspect sockets here; the idle ping covers it.
func peerClosed(net.Conn) (closed, known bool) { return false, false }
