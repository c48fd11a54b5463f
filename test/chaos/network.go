// Package chaos is kgate's fault campaign: a cluster of bin/kgate processes
// under a producing and consuming workload, a nemesis that kills, pauses and
// partitions nodes, and a checker that judges the recorded history alone
// (see docs/chaos.md). This file is the network the nemesis cuts.
package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Network is a set of per-node proxies standing between kgate nodes on
// their Raft port (which also carries forwarded Kafka requests) and their
// gossip port (TCP and UDP). Every node advertises its proxies' addresses,
// so every byte one node sends another passes a proxy, which knows the
// sending node and drops the link when the nemesis has cut it.
//
// A TCP proxy learns who dialled it from the kernel: the dialling socket's
// port is looked up in /proc/net/tcp and its inode among the file
// descriptors of the nodes' processes. A gossip UDP packet is known by its
// source port, which is the sending node's own gossip port.
type Network struct {
	mu      sync.Mutex
	pids    map[int]int     // process id -> node
	udpPort map[int]int     // real gossip port -> node
	cut     map[[2]int]bool // {from, to} -> link cut (kept symmetric)
	hole    map[[2]int]bool // {from, to} -> link black-holed (kept symmetric)
	// changed is closed and replaced whenever a black hole ends, to wake
	// the copies it holds.
	changed chan struct{}
	closed  chan struct{} // closed by Close
	conns   map[*proxyConn]bool
	proxies []*Proxy

	// unknownWhy counts connections whose sender was not found, by why
	// (sender); refused and closed count those refused because a link of
	// their target was down, and those open when one went down.
	unknownWhy                    map[string]int
	unknownRefused, unknownClosed int
	dropped                       int // datagrams dropped on cut links
	wg                            sync.WaitGroup
}

// NewNetwork returns a network with every link up.
func NewNetwork() *Network {
	return &Network{pids: map[int]int{}, udpPort: map[int]int{}, cut: map[[2]int]bool{}, hole: map[[2]int]bool{},
		changed: make(chan struct{}), closed: make(chan struct{}), conns: map[*proxyConn]bool{}}
}

// SetProcess records that node runs as process pid (after each start).
func (nw *Network) SetProcess(node, pid int) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for p, n := range nw.pids {
		if n == node {
			delete(nw.pids, p)
		}
	}
	nw.pids[pid] = node
}

// Forget drops node's process (it left the cluster for good).
func (nw *Network) Forget(node int) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for p, n := range nw.pids {
		if n == node {
			delete(nw.pids, p)
		}
	}
}

// Cut cuts the links between a and b both ways and closes their open
// connections; it returns once no byte passes between them any more.
func (nw *Network) Cut(a, b int) {
	nw.mu.Lock()
	nw.cut[[2]int{a, b}], nw.cut[[2]int{b, a}] = true, true
	var drop []*proxyConn
	for c := range nw.conns {
		if (c.from == a && c.to == b) || (c.from == b && c.to == a) {
			drop = append(drop, c)
		}
	}
	drop = append(drop, nw.unknownTo(a, b)...)
	nw.mu.Unlock()
	for _, c := range drop {
		c.close()
	}
}

// unknownTo takes the open connections of an unknown sender to a or b,
// counted as closed: one of them may come from the far side of a link
// going down, and unknown, it cannot be held or cut alone (nw.mu held).
func (nw *Network) unknownTo(a, b int) []*proxyConn {
	var drop []*proxyConn
	for c := range nw.conns {
		if c.from < 0 && (c.to == a || c.to == b) {
			drop = append(drop, c)
			delete(nw.conns, c)
			nw.unknownClosed++
		}
	}
	return drop
}

// linkDown reports whether a link of node is cut or black-holed (nw.mu
// held).
func (nw *Network) linkDown(node int) bool {
	for k := range nw.cut {
		if k[0] == node {
			return true
		}
	}
	for k := range nw.hole {
		if k[0] == node {
			return true
		}
	}
	return false
}

// Split cuts every link between the nodes of side and the others of all.
func (nw *Network) Split(side, all []int) {
	in := map[int]bool{}
	for _, n := range side {
		in[n] = true
	}
	for _, a := range side {
		for _, b := range all {
			if !in[b] {
				nw.Cut(a, b)
			}
		}
	}
}

// Isolate cuts every link of node with the others.
func (nw *Network) Isolate(node int, others []int) {
	for _, o := range others {
		if o != node {
			nw.Cut(node, o)
		}
	}
}

// BlackHole makes the links between a and b stop passing bytes without
// closing anything, as a network that drops every packet: open
// connections stay open and hold what was sent (the senders' writes block
// once the buffers fill), new connections are accepted and reach the far
// node only once healed, gossip datagrams are dropped. Only the nodes'
// timeouts can notice. When healed, what was held is delivered in order,
// as TCP's retransmissions would deliver it.
func (nw *Network) BlackHole(a, b int) {
	nw.mu.Lock()
	nw.hole[[2]int{a, b}], nw.hole[[2]int{b, a}] = true, true
	drop := nw.unknownTo(a, b)
	nw.mu.Unlock()
	for _, c := range drop {
		c.close()
	}
}

// Heal restores every link.
func (nw *Network) Heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.cut = map[[2]int]bool{}
	if len(nw.hole) > 0 {
		nw.hole = map[[2]int]bool{}
		close(nw.changed)
		nw.changed = make(chan struct{})
	}
}

// UnknownSenders is what the proxies did with connections of an unknown
// sender.
type UnknownSenders struct {
	Total int
	// Why counts them by why the sender was not found.
	Why map[string]int
	// Refused were refused because a link of their target node was down
	// (cut or black-holed); Closed were open when one went down. Neither
	// can carry a byte across a down link, whoever sent them.
	Refused, Closed int
}

// NoNode is the reason of connections whose dialling socket a live
// process that is no node holds: something the harness does not know of
// dials the nodes' proxies.
const NoNode = "dialling socket held by a process that is no node"

// Unknowns reports the connections of an unknown sender.
func (nw *Network) Unknowns() UnknownSenders {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	total := 0
	for _, n := range nw.unknownWhy {
		total += n
	}
	return UnknownSenders{Total: total, Why: maps.Clone(nw.unknownWhy), Refused: nw.unknownRefused, Closed: nw.unknownClosed}
}

// Dropped is how many gossip datagrams cut links have dropped.
func (nw *Network) Dropped() int {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.dropped
}

// refuseUnknown reports whether a connection of an unknown sender to node
// is refused, and counts it.
func (nw *Network) refuseUnknown(node int) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.linkDown(node) {
		nw.unknownRefused++
		return true
	}
	return false
}

func (nw *Network) isCut(from, to int) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.cut[[2]int{from, to}]
}

// passable waits while the link from-to is black-holed; false if done
// closed first.
func (nw *Network) passable(from, to int, done <-chan struct{}) bool {
	for {
		nw.mu.Lock()
		holed, changed := nw.hole[[2]int{from, to}], nw.changed
		nw.mu.Unlock()
		if !holed {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}

// Close stops every proxy and waits for their goroutines.
func (nw *Network) Close() {
	nw.mu.Lock()
	ps := nw.proxies
	select {
	case <-nw.closed:
	default:
		close(nw.closed)
	}
	var cs []*proxyConn
	for c := range nw.conns {
		cs = append(cs, c)
	}
	nw.mu.Unlock()
	for _, p := range ps {
		p.ln.Close()
		if p.udp != nil {
			p.udp.Close()
		}
	}
	for _, c := range cs {
		c.close()
	}
	nw.wg.Wait()
}

// Proxy forwards one node's port (TCP, and UDP for gossip) from Addr to
// the node's real address.
type Proxy struct {
	nw     *Network
	to     int
	target string
	ln     net.Listener
	udp    *net.UDPConn
	Addr   string
}

// Listen starts a proxy for node to, whose real listener is target, on a
// free loopback port; withUDP also forwards UDP datagrams (gossip) on the
// same port number.
func (nw *Network) Listen(to int, target string, withUDP bool) (*Proxy, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p := &Proxy{nw: nw, to: to, target: target, ln: ln, Addr: ln.Addr().String()}
		if withUDP {
			ua, _ := net.ResolveUDPAddr("udp", p.Addr)
			u, err := net.ListenUDP("udp", ua)
			if err != nil {
				ln.Close()
				continue
			}
			p.udp = u
			if tp, err := strconv.Atoi(target[strings.LastIndexByte(target, ':')+1:]); err == nil {
				nw.mu.Lock()
				nw.udpPort[tp] = to
				nw.mu.Unlock()
			}
		}
		nw.mu.Lock()
		nw.proxies = append(nw.proxies, p)
		nw.mu.Unlock()
		nw.wg.Add(1)
		go p.acceptLoop()
		if p.udp != nil {
			nw.wg.Add(1)
			go p.udpLoop()
		}
		return p, nil
	}
	return nil, errors.New("no free TCP+UDP loopback port for a proxy")
}

func (p *Proxy) acceptLoop() {
	defer p.nw.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.nw.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(in net.Conn) {
	defer p.nw.wg.Done()
	from := p.nw.sender(in)
	if from >= 0 && p.nw.isCut(from, p.to) {
		in.Close()
		return
	}
	// An unknown sender may be on the far side of any down link of the
	// target: refused then, as a cut link refuses.
	if from < 0 && p.nw.refuseUnknown(p.to) {
		in.Close()
		return
	}
	// A connection made into a black hole reaches nobody until it heals:
	// the far node sees nothing of it (as a dropped SYN would leave it).
	if from >= 0 && !p.nw.passable(from, p.to, p.nw.closed) {
		in.Close()
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	c := &proxyConn{nw: p.nw, from: from, to: p.to, in: in, out: out, done: make(chan struct{})}
	nw := p.nw
	nw.mu.Lock()
	if (from >= 0 && nw.cut[[2]int{from, p.to}]) || (from < 0 && nw.linkDown(p.to)) { // cut while dialling
		nw.mu.Unlock()
		c.close()
		return
	}
	nw.conns[c] = true
	nw.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { c.copy(out, in, from, p.to); c.close(); done <- struct{}{} }()
	go func() { c.copy(in, out, p.to, from); c.close(); done <- struct{}{} }()
	<-done
	<-done
	nw.mu.Lock()
	delete(nw.conns, c)
	nw.mu.Unlock()
}

func (p *Proxy) udpLoop() {
	defer p.nw.wg.Done()
	target, err := net.ResolveUDPAddr("udp", p.target)
	if err != nil {
		return
	}
	buf := make([]byte, 64*1024)
	for {
		n, src, err := p.udp.ReadFromUDP(buf)
		if err != nil {
			return
		}
		p.nw.mu.Lock()
		from, ok := p.nw.udpPort[src.Port]
		cut := ok && (p.nw.cut[[2]int{from, p.to}] || p.nw.hole[[2]int{from, p.to}])
		if cut {
			p.nw.dropped++
		}
		p.nw.mu.Unlock()
		if cut {
			continue
		}
		_, _ = p.udp.WriteToUDP(buf[:n], target)
	}
}

type proxyConn struct {
	nw       *Network
	from, to int
	in, out  net.Conn
	once     sync.Once
	done     chan struct{} // closed by close
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.in.Close()
		c.out.Close()
	})
}

// copy forwards src to dst, the bytes of the link from-to, holding each
// chunk (and reading no more) while the link is black-holed.
func (c *proxyConn) copy(dst, src net.Conn, from, to int) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if from >= 0 && to >= 0 && !c.nw.passable(from, to, c.done) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// sender finds the node whose process holds the other end of an accepted
// connection, or -1 (counted, with why, in unknownWhy).
func (nw *Network) sender(c net.Conn) int {
	ra, ok1 := c.RemoteAddr().(*net.TCPAddr)
	la, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return -1
	}
	// /proc/net/tcp is no snapshot: read while sockets come and go, it
	// may skip one; look again before giving up.
	inode, state, err := socketInode(ra, la)
	for try := 0; err != nil && try < 2; try++ {
		inode, state, err = socketInode(ra, la)
	}
	why := "dialling socket not in /proc/net/tcp (closed and reset)"
	if err == nil {
		nw.mu.Lock()
		pids := make(map[int]int, len(nw.pids))
		for p, n := range nw.pids {
			pids[p] = n
		}
		nw.mu.Unlock()
		want := fmt.Sprintf("socket:[%s]", inode)
		for pid, node := range pids {
			if ownsSocket(pid, want) {
				return node
			}
		}
		why = socketOwner(inode, state, want)
	}
	nw.mu.Lock()
	if nw.unknownWhy == nil {
		nw.unknownWhy = map[string]int{}
	}
	nw.unknownWhy[why]++
	nw.mu.Unlock()
	return -1
}

// tcpStates names the states of /proc/net/tcp's st column.
var tcpStates = map[string]string{"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
	"05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}

// socketOwner says why a dialling socket belongs to no node: its process
// closed it (inode 0: no file descriptor is left), or another process
// holds it, or nobody.
func socketOwner(inode, state, want string) string {
	st := tcpStates[state]
	if st == "" {
		st = state
	}
	if inode == "0" {
		return "dialling socket closed by its process (" + st + ")"
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ownsSocket(pid, want) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			return fmt.Sprintf("%s (%s, pid %d)", NoNode, strings.TrimSpace(string(comm)), pid)
		}
	}
	return "dialling socket held by no process (" + st + ")"
}

// socketInode finds in /proc/net/tcp the inode and state of the socket
// whose local address is local and whose peer is remote.
func socketInode(local, remote *net.TCPAddr) (inode, state string, err error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	want := procAddr(local) + " " + procAddr(remote)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		if fields[1]+" "+fields[2] == want {
			return fields[9], fields[3], nil
		}
	}
	return "", "", fmt.Errorf("no socket %s in /proc/net/tcp", want)
}

// procAddr spells an IPv4 address as /proc/net/tcp does: the address as a
// little-endian hex word, the port as big-endian hex.
func procAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}

func ownsSocket(pid int, want string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
			return true
		}
	}
	return false
}
