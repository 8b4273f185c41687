// Package wire holds the JSON shapes of Shoal's public HTTP API: the
// answers of the health, placement and admin routes, and the problem
// details of errors (RFC 9457) with their types. The server (api) writes
// them and the Go client (client) reads them, so the two cannot differ.
//
// It imports nothing of Shoal's but its value types (record): a program
// that uses the client does not build the server, its store or its
// membership (internal/purity.TestDependencyRules).
package wire

import (
	"fmt"
	"slices"
	"time"

	"github.com/shoal-db/shoal/record"
)

// Problem is an RFC 9457 problem detail. Type is stable: clients branch on
// it, never on Title or Detail.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Current is the current version, on a failed If-Match.
	Current *int64 `json:"current_version,omitempty"`
	// RetryAfter is the wait in seconds the server asks for with a 503,
	// sent as the Retry-After header, not in the body: a decoded
	// problem's is 0 (the client gives the header as
	// HTTPError.RetryAfter).
	RetryAfter int `json:"-"`
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// The problem types Shoal answers with.
const (
	TypeInvalidName        = "urn:shoal:problem:invalid-name"
	TypeInvalidDocument    = "urn:shoal:problem:invalid-document"
	TypeInvalidFilter      = "urn:shoal:problem:invalid-filter"
	TypeInvalidQuery       = "urn:shoal:problem:invalid-query"
	TypeQueryTooExpensive  = "urn:shoal:problem:query-too-expensive"
	TypeInvalidHeader      = "urn:shoal:problem:invalid-header"
	TypeUnauthorized       = "urn:shoal:problem:unauthorized"
	TypeForbidden          = "urn:shoal:problem:forbidden"
	TypeNotFound           = "urn:shoal:problem:not-found"
	TypeRouteNotFound      = "urn:shoal:problem:route-not-found"
	TypeMethodNotAllowed   = "urn:shoal:problem:method-not-allowed"
	TypeAlreadyExists      = "urn:shoal:problem:already-exists"
	TypePreconditionFailed = "urn:shoal:problem:precondition-failed"
	TypeBodyTooLarge       = "urn:shoal:problem:body-too-large"
	TypeDocumentTooLarge   = "urn:shoal:problem:document-too-large"
	TypeUnavailable        = "urn:shoal:problem:unavailable"
	TypeTimeout            = "urn:shoal:problem:timeout"
	TypeInternal           = "urn:shoal:problem:internal"
)

// PlacementView is the answer of GET /v1/users/{user}/placement.
type PlacementView struct {
	User      string `json:"user"`
	Partition int    `json:"partition"`
	// PartitionCount is the cluster's partition count (on GET
	// /v1/users/{user}/placement; absent from older nodes): with it a
	// client works out any user's partition itself (shard.PartitionOf)
	// and keeps what it learns of placement per partition, not per user.
	PartitionCount  int               `json:"partition_count,omitempty"`
	PreferredMaster string            `json:"preferred_master"`
	Master          string            `json:"master"`
	Epoch           uint64            `json:"epoch"`
	Responsible     []string          `json:"responsible"`
	Succession      []string          `json:"succession"`
	States          map[string]string `json:"states"`
	// Position is how far this node holds the partition's history.
	Position record.Position `json:"position"`
	// Replicas is each replica's acknowledged position, when this node is
	// the master.
	Replicas []ReplicaLag `json:"replicas,omitempty"`
}

// NodeStatus is the answer of GET /healthz (status "ok") and of
// GET /readyz when the node takes traffic (status "ready").
type NodeStatus struct {
	Node   string `json:"node"`
	Status string `json:"status"`
	// WithoutMaster, on /readyz, lists the partitions the node knows no
	// master of: a node is ready once it knows a master for every
	// partition, or five LEASE_TTLs after it started (then they are
	// listed here, and writes to them answer 503 until one is elected).
	WithoutMaster []int `json:"without_master,omitempty"`
}

// RollbackList is the answer of GET /v1/admin/rollback: the answering
// node's rollback collection, oldest first.
type RollbackList struct {
	Node       string       `json:"node"`
	RolledBack []RolledBack `json:"rolled_back"`
	// More says the collection holds more than the limit asked for: the
	// list is its oldest documents only.
	More bool `json:"more"`
}

// ClusterAnswer is the answer of GET /v1/cluster: the membership view
// and, per node, how many partitions it masters as this node's partition
// table says.
type ClusterAnswer struct {
	View
	Partitions *PartitionSummary `json:"partitions,omitempty"`
	// PartitionTable is, with ?partitions=1 only, every partition as this
	// node sees it (index = partition): the master and epoch
	// GET /v1/users/{user}/placement names for a user in it, the preferred
	// master, the responsible list and, where this node holds a copy, how
	// far it holds the partition's history. Like the placement it names
	// this node the master of a partition whose lease it holds even before
	// its partition table says so, so for a moment it may differ from the
	// counts in Partitions, which are the table's alone.
	PartitionTable []PartitionView `json:"partition_table,omitempty"`
	Voters         *VoterStatus    `json:"voters,omitempty"`
	// Replication is the progress of every replica of the partitions this
	// node masters that is behind or catching up (all of them with ?all=1).
	Replication []ReplicaLag `json:"replication,omitempty"`
	// Moves are the partitions moving from this node to their preferred
	// master; with ?moves=all, from every member that answered.
	Moves []MoveStatus `json:"moves,omitempty"`
	// MovesUnknown, with ?moves=all, names the members whose moves are
	// not in Moves and why (not UP, or no answer in time).
	MovesUnknown []MovesUnknown `json:"moves_unknown,omitempty"`
}

// MovesUnknown is a member whose moves a ?moves=all answer lacks.
type MovesUnknown struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// VoterStatus is the lease voter set: the one in use and, while a change is
// applied one member at a time, the one it is heading for.
type VoterStatus struct {
	Current  []string `json:"current"`
	Target   []string `json:"target"`
	Changing bool     `json:"changing"`
}

// PartitionSummary counts, per node, the partitions it masters according to
// the answering node's partition table.
type PartitionSummary struct {
	Count         int            `json:"count"`
	Masters       map[string]int `json:"masters"`
	WithoutMaster int            `json:"without_master"`
	// Copies is, per node, how many partitions it holds a copy of as a
	// replica (the responsible lists, masters excluded).
	Copies map[string]int `json:"copies,omitempty"`
	// Unreconciled is, for the answering node only, how many partitions
	// it no longer masters hold writes of its last tenure in its copy
	// that no later master has checked: the first batch of a later master
	// moves what that master never had (w=1 writes) to the rollback
	// collection. Until then the copy may be their only place, whatever
	// the responsible lists say.
	Unreconciled map[string]int `json:"unreconciled,omitempty"`
}

// HoldsNothing reports whether this summary, a node's answer to
// GET /v1/cluster, shows node id holding nothing: every partition has a
// master (a partition without one may yet need the copy id holds), and id
// masters none, holds no copy and no unreconciled writes; moving is how
// many partitions move from id (when the answer is id's own; 0
// otherwise). Otherwise it says what id still holds.
func (ps *PartitionSummary) HoldsNothing(id string, moving int) (bool, string) {
	if ps == nil {
		return false, "no partition counts given"
	}
	masters, held, unreconciled := ps.Masters[id], ps.Copies[id], ps.Unreconciled[id]
	if masters == 0 && held == 0 && unreconciled == 0 && moving == 0 && ps.WithoutMaster == 0 && ps.Count > 0 {
		return true, "holds nothing"
	}
	progress := fmt.Sprintf("masters %d partitions, holds %d copies", masters, held)
	if unreconciled > 0 {
		progress += fmt.Sprintf(", %d partitions with writes of its own no later master has checked", unreconciled)
	}
	if moving > 0 {
		progress += fmt.Sprintf(", %d partitions moving from it", moving)
	}
	if ps.WithoutMaster > 0 {
		progress += fmt.Sprintf(" (%d partitions without a master)", ps.WithoutMaster)
	}
	return false, progress
}

// MoveStatus is one partition moving from this node, its master, to its
// preferred master: the receiver is copied the partition (phase copying),
// catches up with live changes (catching-up), waits for a free handoff slot
// (ready), then is handed the lease (handing-over).
type MoveStatus struct {
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	Phase     string `json:"phase"`
	// DocumentsCopied of DocumentsTotal are delivered by the copy in
	// progress (total 0: not counted).
	DocumentsCopied int64 `json:"documents_copied"`
	DocumentsTotal  int64 `json:"documents_total"`
	// Behind is how many changes the receiver still lacks.
	Behind uint64 `json:"behind"`
}

// PartitionView is one partition as the answering node sees it: a row of
// GET /v1/cluster?partitions=1 (ClusterAnswer.PartitionTable), and the
// part of GET /v1/users/{user}/placement that describes the user's
// partition (PartitionView.Placement). Both routes build it with
// PartitionViewOf, so they cannot disagree.
type PartitionView struct {
	Partition int    `json:"partition"`
	Master    string `json:"master"`
	Epoch     uint64 `json:"epoch"`
	// PreferredMaster is the partition's owner on the ring.
	PreferredMaster string   `json:"preferred_master"`
	Responsible     []string `json:"responsible"`
	// Position is how far the answering node holds the partition's
	// history, given only where it holds a copy: it masters the partition
	// or is on its responsible list (see Server.positionHere).
	Position *record.Position `json:"position,omitempty"`
}

// PlacementTable is the answer of GET /v1/placement (an admin's call):
// every partition's placement as the answering node sees it, read from
// its memory. A client routing for many users learns every partition's
// master from it at once (a user's partition is PartitionOf(user,
// PartitionCount)).
type PlacementTable struct {
	PartitionCount int `json:"partition_count"`
	// Partitions holds one entry per partition, in partition order;
	// Position is never set.
	Partitions []PartitionView `json:"partitions"`
}

// Placement is the placement answer with v's fields filled in; the user,
// succession, states, position and replicas are the caller's.
func (v PartitionView) Placement() PlacementView {
	return PlacementView{Partition: v.Partition, PreferredMaster: v.PreferredMaster, Master: v.Master, Epoch: v.Epoch,
		Responsible: slices.Clone(v.Responsible)}
}

// View is this node's view of the cluster, as GET /v1/cluster shows it.
type View struct {
	Node     string         `json:"node"`
	Version  string         `json:"version"`
	PeerList PeerListStatus `json:"peer_list"`
	Members  []MemberStatus `json:"members"`
}

// PeerListStatus says where the peer list came from and whether the last
// load was refused.
type PeerListStatus struct {
	Source   string     `json:"source"`
	LoadedAt *time.Time `json:"loaded_at,omitempty"`
	Peers    int        `json:"peers"`
	Refusal  *Refusal   `json:"refusal"`
}

// MemberStatus is one peer (or one unknown gossiping node) as seen from here.
type MemberStatus struct {
	ID             string     `json:"id"`
	State          State      `json:"state"`
	Self           bool       `json:"self"`
	InPeerList     bool       `json:"in_peer_list"`
	URL            string     `json:"url,omitempty"`
	PublicURL      string     `json:"public_url,omitempty"`
	Gossip         string     `json:"gossip,omitempty"`
	Sharding       bool       `json:"sharding"`
	Replica        bool       `json:"replica"`
	Voter          bool       `json:"voter"`
	FreeBytes      *uint64    `json:"free_bytes,omitempty"`
	Version        string     `json:"version,omitempty"`
	Incarnation    int64      `json:"incarnation,omitempty"`
	LastHeard      *time.Time `json:"last_heard,omitempty"`
	LastHeardMsAgo *int64     `json:"last_heard_ms_ago,omitempty"`
}

// Refusal records a peer list that was not taken.
type Refusal struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// State is what a node believes about a peer right now.
type State string

// The member states.
const (
	Up      State = "UP"
	Suspect State = "SUSPECT"
	Down    State = "DOWN"
)

// ReplicaLag is one replica's progress in one partition the answering
// node masters: GET /v1/cluster's replication and the placement's
// replicas.
type ReplicaLag struct {
	Replica   string          `json:"replica"`
	Partition int             `json:"partition"`
	Acked     record.Position `json:"acked"`
	Behind    uint64          `json:"behind"`
	// LagMs is how long ago the oldest change the replica has not
	// acknowledged was committed (0 when it is up to date).
	LagMs   int64 `json:"lag_ms"`
	CatchUp bool  `json:"catching_up"`
	// Copying: a catch-up or full copy is streaming documents to the
	// replica; Copied of ToCopy are delivered (ToCopy 0: not counted).
	Copying bool  `json:"copying,omitempty"`
	Copied  int64 `json:"copied,omitempty"`
	ToCopy  int64 `json:"to_copy,omitempty"`
}

// RolledBack is one document state a replica set aside when it rolled
// back writes its new master never had: the state, where it stood in the
// old history, and the new epoch that replaced it.
type RolledBack struct {
	Partition  int             `json:"partition"`
	User       string          `json:"user"`
	Coll       string          `json:"collection"`
	ID         string          `json:"id"`
	Version    int64           `json:"version"`
	Position   record.Position `json:"position"`
	Deleted    bool            `json:"deleted"`
	Body       map[string]any  `json:"body,omitempty"`
	NewEpoch   uint64          `json:"new_epoch"`
	EpochStart record.Position `json:"new_epoch_start"`
	At         time.Time       `json:"rolled_back_at"`
}
