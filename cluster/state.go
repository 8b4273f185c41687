package cluster

import (
	"time"

	"github.com/shoal-db/shoal/api/wire"
)

// State is what a node believes about a peer right now (the API's type).
type State = wire.State

// The member states.
const (
	Up      = wire.Up
	Suspect = wire.Suspect
	Down    = wire.Down
)

// observation is what this node has seen of a peer.
type observation struct {
	// alive: memberlist counts the peer as a live member (alive or
	// suspect in its own terms; it does not expose the difference).
	alive bool
	// lastHeard: when a heartbeat (or the join) from it last arrived.
	lastHeard time.Time
}

// stateOf decides a peer's state. A peer memberlist has declared dead, or
// that never joined, is DOWN; a live one silent for longer than suspectAfter
// is SUSPECT; otherwise UP. DOWN is never permanent: the peer is UP again as
// soon as it rejoins and is heard from.
func stateOf(o observation, now time.Time, suspectAfter time.Duration) State {
	switch {
	case !o.alive:
		return Down
	case now.Sub(o.lastHeard) > suspectAfter:
		return Suspect
	default:
		return Up
	}
}
