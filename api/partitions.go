package api

import (
	"net/http"
	"slices"

	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// PartitionViewOf is partition a.Partition as node self sees it, from its
// partition table's assignment a, the ring's preferred master of the
// partition, and self's own lease of it (held, at epoch). A lease held
// here names self as the master at the lease's epoch whatever a says: the
// table hears of a tenure, self's own included, only after the lease is
// won, so it may lag the lease. The responsible list is the table's.
func PartitionViewOf(self string, a shard.Assignment, preferred string, epoch uint64, held bool) PartitionView {
	v := PartitionView{Partition: a.Partition, Master: a.Master, Epoch: a.Epoch, PreferredMaster: preferred,
		Responsible: slices.Clone(a.Responsible)}
	if held {
		v.Master, v.Epoch = self, epoch
	}
	return v
}

// standalone is partition p on a node that places nothing (no Placer):
// every request is served here, so it masters every partition alone.
func (s *Server) standalone(p int) PartitionView {
	return PartitionViewOf(s.cfg.NodeID, shard.Assignment{Partition: p, Master: s.cfg.NodeID, Responsible: []string{s.cfg.NodeID}},
		s.cfg.NodeID, 0, false)
}

// placementView is partition p as GET /v1/users/{user}/placement describes
// it, before the user, position and replicas are added.
func (s *Server) placementView(p int) PlacementView {
	if s.cfg.Placement != nil {
		return s.cfg.Placement.Placement(p)
	}
	v := s.standalone(p).Placement()
	v.Succession, v.States = []string{s.cfg.NodeID}, map[string]string{s.cfg.NodeID: "UP"}
	return v
}

// partitionTable is every partition as this node sees it, each with its
// position where this node holds a copy: in-memory state only (the
// partition table, the ring, the leases and the writer's positions, which
// it reads from the store once, at start), no store read per partition.
func (s *Server) partitionTable() []PartitionView {
	out := s.partitionRows()
	for i := range out {
		out[i].Position = s.positionHere(out[i])
	}
	return out
}

// partitionRows is every partition as this node sees it, without
// positions.
func (s *Server) partitionRows() []PartitionView {
	if s.cfg.Placement != nil {
		return s.cfg.Placement.Partitions()
	}
	out := make([]PartitionView, s.cfg.PartitionCount)
	for p := range out {
		out[p] = s.standalone(p)
	}
	return out
}

// positionHere is how far this node holds v's partition's history (as its
// master, its last write; as a replica, what replication brought it), or
// nil when v says this node holds no copy of it: a copy left from an
// earlier responsible list may be stale, and is not reported as the
// partition's.
func (s *Server) positionHere(v PartitionView) *store.Position {
	if s.writer == nil || (v.Master != s.cfg.NodeID && !slices.Contains(v.Responsible, s.cfg.NodeID)) {
		return nil
	}
	pos := s.writer.Applied(v.Partition)
	return &pos
}

// placementTable answers GET /v1/placement (an admin's call): every
// partition's master, epoch, preferred master and responsible list as
// this node sees them, with the partition count, for a client that routes
// for many users (a user's token routes for one, and asks for its own
// placement). In-memory state only, like partitionTable, without the
// positions.
func (s *Server) placementTable(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, PlacementTable{PartitionCount: s.cfg.PartitionCount, Partitions: s.partitionRows()})
}
