package node

import (
	"time"

	"github.com/shoal-db/shoal/record"
)

// tenureChecks is which tenures of this node must be confirmed before they
// take writes (lease.ConfirmOnLists), with no I/O: a tenure won soon after
// a campaign by the promotion rule, a take-over or a retake is checked;
// the others, and a lapsed lease renewed at the epoch of a tenure that
// could already write in this run, are not. Times are passed in.
type tenureChecks struct {
	ttl time.Duration // LEASE_TTL
	// campaigned: when this node last campaigned for a partition by a
	// rule whose tenure is checked; a lease won within two LEASE_TTL of it
	// was won by that rule.
	campaigned map[int]time.Time
	// pending: tenures won so that take no writes (and ship nothing) until
	// the copies, asked again since the win, show none is ahead. A check
	// outlives a lapse of its lease: a renewal at its epoch does not
	// confirm it.
	pending map[int]tenureCheck
	// settled: the epoch of each partition's tenure that could take writes
	// in this run of the node (confirmed, or won with no check needed).
	settled map[int]uint64
}

// tenureCheck is a tenure waiting to be confirmed.
type tenureCheck struct {
	epoch    uint64
	won      time.Time
	previous string // the master the table named before: its lease is over
	// lists: the latest lists of copies of the previous tenure that the
	// voters which granted this one keep, read at the win (before this
	// tenure's own list can replace them on the voters).
	lists []*record.CopyList
}

func newTenureChecks(ttl time.Duration) tenureChecks {
	return tenureChecks{ttl: ttl, campaigned: map[int]time.Time{}, pending: map[int]tenureCheck{}, settled: map[int]uint64{}}
}

// campaign notes that this node campaigns for p at now by a rule whose
// tenure is checked.
func (b *tenureChecks) campaign(p int, now time.Time) { b.campaigned[p] = now }

// won is told of a tenure of p this node starts at c.epoch (c.won is now);
// it reports whether c was registered as a check. A tenure still to be
// confirmed stays so; one at the epoch that could already write in this
// run continues (nobody was granted a later epoch meanwhile: a voter of
// every majority would have refused the renewal). Any other is checked if
// this node campaigned for it so within two LEASE_TTL, even at the epoch
// its table names: after a restart the table learns that epoch from the
// others, and a node whose history ends before it proposes exactly that
// epoch, which its voters grant as a renewal.
func (b *tenureChecks) won(p int, c tenureCheck) bool {
	at, campaigned := b.campaigned[p]
	delete(b.campaigned, p)
	if pending, ok := b.pending[p]; ok && pending.epoch == c.epoch {
		return false
	}
	if b.settled[p] == c.epoch {
		return false
	}
	if !campaigned || c.won.Sub(at) > 2*b.ttl {
		b.settled[p] = c.epoch
		return false
	}
	b.pending[p] = c
	return true
}

// confirmed reports whether this node's tenure of p at epoch may take
// writes at now: not while its check is pending, nor from a campaign that
// registers one until the win is told (won runs after the round that won
// it), for two LEASE_TTL at most if it won nothing. A settled tenure
// continues: a lapsed lease renewed at its epoch within one round is not
// even reported as won.
func (b *tenureChecks) confirmed(p int, epoch uint64, now time.Time) bool {
	if c, ok := b.pending[p]; ok && c.epoch == epoch {
		return false
	}
	if b.settled[p] == epoch {
		return true
	}
	at, ok := b.campaigned[p]
	return !ok || now.Sub(at) > 2*b.ttl
}

// confirm settles p's pending tenure at epoch.
func (b *tenureChecks) confirm(p int, epoch uint64) {
	if c, ok := b.pending[p]; ok && c.epoch == epoch {
		delete(b.pending, p)
		b.settled[p] = epoch
	}
}

// drop forgets p's pending check: its tenure is over (it stepped down, or
// it holds a later epoch now).
func (b *tenureChecks) drop(p int) { delete(b.pending, p) }

// due is a copy of the pending checks.
func (b *tenureChecks) due() map[int]tenureCheck {
	out := make(map[int]tenureCheck, len(b.pending))
	for p, c := range b.pending {
		out[p] = c
	}
	return out
}
