package cluster

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/hashicorp/memberlist"
)

// peersFile, in the data directory, holds the gossip addresses of the
// cluster's other nodes as this node last knew them. A node started again
// that finds no one through its --join seeds (they may have left the
// cluster since it joined through them) contacts these, as Consul's agents
// rejoin the members in their Serf snapshot. Without it such a node stayed
// alone in gossip until another node's periodic push-pull reached it (30 s):
// it followed the Raft leader but could name no broker, and its clients
// waited (the fault campaign's crash-compaction, 41 s).
const peersFile = "gossip-peers.json"

// savedPeer is one node of the peers file.
type savedPeer struct {
	ID   int32  `json:"id"`
	Addr string `json:"gossip_addr"`
}

// readPeers returns the peers saved in dir: none without a file or when it
// cannot be read (it is a hint; the --join seeds still apply).
func readPeers(dir string) []savedPeer {
	b, err := os.ReadFile(filepath.Join(dir, peersFile))
	if err != nil {
		return nil
	}
	var ps []savedPeer
	if json.Unmarshal(b, &ps) != nil {
		return nil
	}
	return ps
}

// writePeers replaces the peers file (a reader sees the old list or the
// new, never part of one).
func writePeers(dir string, ps []savedPeer) error {
	b, err := json.Marshal(ps)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, peersFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, peersFile))
}

// peersToSave lists, by node id, the other nodes of this cluster that
// gossip knows and that may be found again: those alive and those still in
// the Raft configuration (down now, they may come back), not those that
// left; and, from prev, the voters gossip does not know yet (a node started
// again may meet a node outside the cluster first: its list must not
// forget the voters it still has to find). ok is false while there is
// nothing worth saving: no cluster yet, or gossip alone (a node just
// started again knows no one, and must not forget whom it knew).
func (n *Node) peersToSave(prev []savedPeer) (ps []savedPeer, ok bool) {
	if n.gossip == nil || n.clusterID() == "" || n.gossip.ml.NumMembers() <= 1 {
		return nil, false
	}
	inConfig := map[int32]bool{}
	if fut := n.raft.GetConfiguration(); fut.Error() == nil {
		for _, s := range fut.Configuration().Servers {
			if id, err := strconv.Atoi(string(s.ID)); err == nil {
				inConfig[int32(id)] = true
			}
		}
	}
	ours := n.clusterID()
	for _, m := range n.gossip.snapshot() { // sorted by node id
		if m.meta.ID == n.cfg.NodeID || m.meta.ClusterID != ours || m.meta.Leaving || m.state == memberlist.StateLeft {
			continue
		}
		if alive(m.state) || inConfig[m.meta.ID] {
			ps = append(ps, savedPeer{ID: m.meta.ID, Addr: m.gossipAddr})
		}
	}
	for _, p := range prev {
		if _, known := n.gossip.memberByID(p.ID); !known && inConfig[p.ID] && p.ID != n.cfg.NodeID {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b savedPeer) int { return cmp.Compare(a.ID, b.ID) })
	return ps, true
}

// savePeers writes the peers file when the list differs from saved, the
// one last written (or read at start), and updates saved. A failed write
// (a full disk) is logged once and tried again at the list's next change.
func (n *Node) savePeers(saved *[]savedPeer) {
	ps, ok := n.peersToSave(*saved)
	if !ok || slices.Equal(ps, *saved) {
		return
	}
	if err := writePeers(n.cfg.DataDir, ps); err != nil {
		n.log.Warn("saving the cluster's gossip addresses", "err", err)
	}
	*saved = ps
	n.savedPeers.Store(&ps)
}

// savedAddr is the gossip address saved for node id, if any.
func (n *Node) savedAddr(id int32) (string, bool) {
	if ps := n.savedPeers.Load(); ps != nil {
		for _, p := range *ps {
			if p.ID == id {
				return p.Addr, true
			}
		}
	}
	return "", false
}

// seeds are the addresses a node alone in gossip contacts: its --join
// seeds, then the saved peers not among them.
func (n *Node) seeds(saved []savedPeer) []string {
	out := slices.Clone(n.cfg.Join)
	for _, p := range saved {
		if !slices.Contains(out, p.Addr) {
			out = append(out, p.Addr)
		}
	}
	return out
}
