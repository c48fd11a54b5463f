package admin

import (
	"net/http"

	"github.com/kgate/kgate/cluster"
)

// snapshot streams a Raft snapshot of this node's applied state as a
// snapshot file (GET /v1/snapshot; `kgate snapshot save`).
func (s *Server) snapshot(w http.ResponseWriter, _ *http.Request) {
	meta, data, err := s.node.OpenSnapshot()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	defer data.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := cluster.WriteSnapshotFile(w, meta, data); err != nil {
		// The status line is gone; a short body is what the client sees,
		// and it checks the size the header announced.
		s.log.Warn("snapshot download failed", "err", err)
	}
}
