package node

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/wording"
)

// readyWaitTTLs is how long, in LEASE_TTLs from its start, a node waits to
// know a master for every partition before it says it is ready anyway
// (listing those it knows none of): a cluster that cannot elect one (no
// majority of the lease voters up) must not keep its nodes out of
// service for good.
const readyWaitTTLs = 5

// readinessOf is the readiness rule: a node that started since ago takes
// traffic once its lease voter's startup wait (startWait: one LEASE_TTL,
// none for a node of its own) is over and it knows a master for every
// partition (withoutMaster lists those it knows none of, and those it
// names itself master of without holding the lease), or once
// readyWaitTTLs LEASE_TTLs have passed. A scripted client or a load
// balancer that trusts /readyz then finds writes taken at once (before,
// the first writes after every node answered /readyz got 503 for about
// 2 s while masters were elected).
func readinessOf(since, startWait, leaseTTL time.Duration, withoutMaster []int) api.Readiness {
	switch {
	case since < startWait:
		return api.Readiness{Waiting: "its lease voter's startup wait (one LEASE_TTL)"}
	case len(withoutMaster) == 0:
		return api.Readiness{}
	case since < readyWaitTTLs*leaseTTL:
		return api.Readiness{Waiting: fmt.Sprintf("a master for %s (e.g. partition %d)", wording.Plural(len(withoutMaster), "partition"), withoutMaster[0])}
	}
	return api.Readiness{WithoutMaster: withoutMaster}
}

// readiness is the node's readiness (GET /readyz): the rule above until
// the node is first ready, and ready from then on, listing the partitions
// without a known master (a master lost later is a fault the cluster
// repairs, not a reason to take every node out of service).
type readiness struct {
	started   time.Time
	startWait time.Duration
	leaseTTL  time.Duration
	ready     atomic.Bool
	// withoutMaster lists the partitions the node knows no master of,
	// or names itself master of without holding the lease.
	withoutMaster func() []int
}

func (r *readiness) now(now time.Time) api.Readiness {
	none := r.withoutMaster()
	if r.ready.Load() {
		return api.Readiness{WithoutMaster: none}
	}
	rd := readinessOf(now.Sub(r.started), r.startWait, r.leaseTTL, none)
	if rd.Waiting == "" {
		r.ready.Store(true)
	}
	return rd
}
