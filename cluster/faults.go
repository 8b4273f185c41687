package cluster

import (
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Faults cuts links between nodes, for tests. It sits behind the same
// interfaces production uses (the HTTP transport of node-to-node calls and
// memberlist's Transport); a nil *Faults cuts nothing. A cut is symmetric
// and enforced by the sender on both sides, for gossip and HTTP alike, so a
// cut node looks to the others exactly like a network partition.
type Faults struct {
	mu       sync.RWMutex
	cut      map[[2]string]bool
	callsCut map[[2]string]bool // node-to-node HTTP only; gossip still flows
	// replicationCut: from -> to pairs whose replication calls (batches
	// and copies) fail once the calls let through are used up; every
	// other call and gossip still flows.
	replicationCut map[[2]string]int // from -> to: calls still let through
	byAddr         map[string]string // gossip address -> node id
	// stateMuted: nodes whose partition-table state (broadcasts and
	// push-pull) is lost on its way out; membership gossip still flows.
	stateMuted map[string]bool
	// leaseCut: from -> to pairs whose lease calls (/internal/v1/lease:
	// campaigns, renewals, queries) fail; every other call still flows.
	leaseCut map[[2]string]bool
}

// NewFaults returns an empty fault table.
func NewFaults() *Faults {
	return &Faults{cut: map[[2]string]bool{}, callsCut: map[[2]string]bool{}, replicationCut: map[[2]string]int{}, byAddr: map[string]string{}, stateMuted: map[string]bool{}, leaseCut: map[[2]string]bool{}}
}

// MuteState loses every partition-table update node sends from now on,
// broadcast or in a push-pull, as if each packet that carried one were
// lost; its membership gossip and its calls still go through, so the
// others see it UP. It is how a test holds a change node made to its
// table back from the others (a master that dies before its broadcast
// leaves).
func (f *Faults) MuteState(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stateMuted[node] = true
}

// stateMutedFor reports whether node's table updates are lost.
func (f *Faults) stateMutedFor(node string) bool {
	if f == nil {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.stateMuted[node]
}

// CutCalls stops the node-to-node calls between a and b (both ways) but
// not their gossip: each still sees the other UP.
func (f *Faults) CutCalls(a, b string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callsCut[pair(a, b)] = true
}

// callsBlocked reports whether node-to-node calls between a and b fail.
func (f *Faults) callsBlocked(a, b string) bool {
	if f == nil {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cut[pair(a, b)] || f.callsCut[pair(a, b)]
}

// CutReplication makes every replication call from to to fail as not
// sent (batches and copies, /internal/*/replicate), in that direction
// only; lease rounds, position requests and gossip still go through. It
// is how a test keeps a replica from ever hearing of its partition while
// it stays on the master's list.
func (f *Faults) CutReplication(from, to string) { f.CutReplicationAfter(from, to, 0) }

// CutReplicationAfter is CutReplication once calls more replication calls
// from to to have gone through: how a test stops a copy part way.
func (f *Faults) CutReplicationAfter(from, to string, calls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replicationCut[[2]string{from, to}] = calls
}

// replicationBlocked reports whether a call from to to on path is a
// replication call CutReplication cut (and counts one that goes through
// a cut still to come).
func (f *Faults) replicationBlocked(from, to, path string) bool {
	if f == nil || !strings.HasPrefix(path, "/internal/") || !strings.HasSuffix(path, "/replicate") {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	left, ok := f.replicationCut[[2]string{from, to}]
	if !ok {
		return false
	}
	if left > 0 {
		f.replicationCut[[2]string{from, to}] = left - 1
		return false
	}
	return true
}

// CutLease makes every lease call from to to fail as not sent
// (campaigns, renewals and queries, /internal/v1/lease), in that
// direction only; replication and every other call still go through. It
// is how a test keeps a voter on a list of copies its master has since
// replaced (the voter misses the renewals that carry the new one).
func (f *Faults) CutLease(from, to string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaseCut[[2]string{from, to}] = true
}

// leaseBlocked reports whether a call from to to on path is a lease call
// CutLease cut.
func (f *Faults) leaseBlocked(from, to, path string) bool {
	if f == nil || path != "/internal/v1/lease" {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.leaseCut[[2]string{from, to}]
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Cut stops all traffic between nodes a and b.
func (f *Faults) Cut(a, b string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut[pair(a, b)] = true
}

// Heal restores traffic between a and b.
func (f *Faults) Heal(a, b string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.cut, pair(a, b))
	delete(f.callsCut, pair(a, b))
}

// HealAll restores every link, and unmutes every node's table updates
// (MuteState).
func (f *Faults) HealAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut, f.callsCut, f.replicationCut, f.stateMuted, f.leaseCut = map[[2]string]bool{}, map[[2]string]bool{}, map[[2]string]int{}, map[string]bool{}, map[[2]string]bool{}
}

// Isolate cuts node a from every node in others.
func (f *Faults) Isolate(a string, others []string) {
	for _, b := range others {
		if b != a {
			f.Cut(a, b)
		}
	}
}

// IsCut reports whether traffic between a and b is cut.
func (f *Faults) IsCut(a, b string) bool {
	if f == nil {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cut[pair(a, b)]
}

// nameGossipAddr records which node listens on a gossip address.
func (f *Faults) nameGossipAddr(addr, node string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byAddr[addr] = node
}

func (f *Faults) nodeAt(addr string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.byAddr[addr]
}

// ErrLinkCut is what a cut link looks like to the sender.
var ErrLinkCut = errors.New("network link cut (fault injection)")

// faultyTransport wraps memberlist's transport and drops what crosses a cut
// link.
type faultyTransport struct {
	memberlist.NodeAwareTransport
	self   string
	faults *Faults
}

func (t *faultyTransport) blocked(addr string) bool {
	to := t.faults.nodeAt(addr)
	return to != "" && t.faults.IsCut(t.self, to)
}

func (t *faultyTransport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	if t.blocked(addr.Addr) {
		return time.Now(), nil // UDP: silently lost
	}
	return t.NodeAwareTransport.WriteToAddress(b, addr)
}

func (t *faultyTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *faultyTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.blocked(addr.Addr) {
		return nil, ErrLinkCut
	}
	return t.NodeAwareTransport.DialAddressTimeout(addr, timeout)
}

func (t *faultyTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}
