package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/shoal-db/shoal/api/wire"
)

// Bounds of what a client remembers and how long it waits for a hint.
const (
	// downFor is how long a node that refused a connection (or whose
	// connection failed) is passed over by every call, unless no other
	// node is left.
	downFor = 5 * time.Second
	// lookupTimeout bounds one placement lookup: a hint is not worth the
	// whole call's time.
	lookupTimeout = 3 * time.Second
	// tableTimeout bounds one request for the placement table (one row
	// per partition: about 30 KB at the default 271 partitions, megabytes
	// at tens of thousands).
	tableTimeout = 10 * time.Second
	// tableAgain is how long a client that got no table (every node
	// failed, refused it, or does not serve it) looks up per user before
	// it asks for the table again.
	tableAgain = time.Minute
	// maxPlaces bounds the placements remembered per user (from nodes
	// that do not say the partition count), and per partition when there
	// are fewer partitions; past it the client forgets them all and
	// learns again.
	maxPlaces = 4096
)

// placement is what a client believes of where one partition lives.
type placement struct {
	master string   // the master's node id ("": not known)
	epoch  uint64   // its lease epoch, as far as known
	copies []string // node ids holding a copy (the responsible list), master first
	// stale marks a placement a call failed with: it is looked up again
	// (on another node than the one that failed) before it is used.
	stale bool
}

// routes is what a client has learnt of the cluster: which node id each
// of its URLs answers as, which nodes refuse connections, and each
// partition's placement. All of it is a hint: a wrong one costs a forward
// or a retry, never a wrong answer. Its methods decide; the Client does
// the I/O.
//
// A placement is kept per partition once a node has said the cluster's
// partition count (a placement answer's partition_count): a user's
// partition is then worked out here (wire.PartitionOf), and one lookup
// serves every user of the partition, so a client writing as many users
// looks up at most once per partition. Until then (a node too old to say
// it) placements are kept per user.
type routes struct {
	nodes []string // base URLs, in the order to prefer them
	now   func() time.Time

	mu     sync.Mutex
	ids    map[string]string    // node URL -> node id
	down   map[string]time.Time // node URL -> passed over until then
	places map[place]placement
	// partitions is the cluster's partition count (0: not known, or a
	// node's answer disagreed with the hash, and placements are kept per
	// user for good).
	partitions int
	perUser    bool // a placement answer named another partition than PartitionOf
	// noTableUntil: no table is asked for before then (the last request
	// got none).
	noTableUntil time.Time
	// tableMu is held while the table is asked for: concurrent first
	// calls wait for one request rather than each sending its own.
	tableMu sync.Mutex
}

// place is what a placement is kept under: a partition, or a user while
// the partition count is not known.
type place struct {
	partition int // -1: by user
	user      string
}

func newRoutes(nodes []string, now func() time.Time) *routes {
	return &routes{nodes: nodes, now: now, ids: map[string]string{}, down: map[string]time.Time{}, places: map[place]placement{}}
}

// placeOf is where user's placement is kept (r.mu held).
func (r *routes) placeOf(user string) place {
	if r.partitions > 0 {
		return place{partition: wire.PartitionOf(user, r.partitions)}
	}
	return place{partition: -1, user: user}
}

// learnCount takes the partition count and user's partition from a
// placement answer (r.mu held): from then on placements are kept per
// partition. An answer whose partition is not the one the hash gives
// (a cluster this client does not understand; every answer is checked,
// at the cost of one hash) keeps them per user for good.
func (r *routes) learnCount(user string, partition, count int) {
	if count <= 0 || r.perUser {
		return
	}
	if wire.PartitionOf(user, count) != partition {
		r.perUser, r.partitions = true, 0
		clear(r.places)
		return
	}
	if r.partitions != count {
		r.partitions = count
		clear(r.places) // those kept per user, or under another count
	}
}

// isDown reports whether node is passed over now (r.mu held).
func (r *routes) isDown(node string) bool {
	until, ok := r.down[node]
	return ok && r.now().Before(until)
}

// urlOf is the first of the client's nodes, in its order, that answers as
// node id, is not down and was not tried ("" if none) (r.mu held).
func (r *routes) urlOf(id string, tried map[string]bool) string {
	if id == "" {
		return ""
	}
	for _, u := range r.nodes {
		if r.ids[u] == id && !tried[u] && !r.isDown(u) {
			return u
		}
	}
	return ""
}

// allKnown reports whether every node's id is known (r.mu held).
func (r *routes) allKnown() bool {
	for _, u := range r.nodes {
		if r.ids[u] == "" {
			return false
		}
	}
	return true
}

// needsLookup reports whether a call for user should look the placement
// up before it is sent: a call for the master whose master is not known
// (or not at a known URL while some node's id is not known yet), any call
// after a failure, and a read for a copy that knows no copy's URL while
// some node's id is not known. A read for a copy of a user never looked
// up goes to the first node as it is: any node serves it, or names the
// master in a 421.
func (r *routes) needsLookup(user string, toMaster bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.nodes) < 2 {
		return false
	}
	pl, ok := r.places[r.placeOf(user)]
	switch {
	case !ok:
		return toMaster
	case pl.stale:
		return true
	case toMaster:
		return pl.master == "" || r.urlOf(pl.master, nil) == "" && !r.allKnown()
	}
	for _, id := range pl.copies {
		if r.urlOf(id, nil) != "" {
			return false
		}
	}
	return !r.allKnown()
}

// choose is the node to send a call for user to: the master (toMaster) or
// the first of the client's nodes holding a copy, when known and neither
// down nor tried by this call; otherwise the first node neither down nor
// tried; otherwise the first not tried, then the first not down (every
// node was tried: a new round).
func (r *routes) choose(user string, toMaster bool, tried map[string]bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.nodes) == 1 {
		return r.nodes[0]
	}
	if pl, ok := r.places[r.placeOf(user)]; ok {
		if toMaster {
			if u := r.urlOf(pl.master, tried); u != "" {
				return u
			}
		} else {
			for _, u := range r.nodes {
				if id := r.ids[u]; id != "" && slices.Contains(pl.copies, id) && !tried[u] && !r.isDown(u) {
					return u
				}
			}
		}
	}
	for _, ok := range []func(string) bool{
		func(u string) bool { return !tried[u] && !r.isDown(u) },
		func(u string) bool { return !tried[u] },
		func(u string) bool { return !r.isDown(u) },
	} {
		for _, u := range r.nodes {
			if ok(u) {
				return u
			}
		}
	}
	return r.nodes[0]
}

// lookupOrder is the nodes to ask for a placement, in turn: the client's
// nodes that are not down, avoid (the node a call just failed at, whose
// view is likely behind) last.
func (r *routes) lookupOrder(avoid string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var order []string
	for _, u := range r.nodes {
		if u != avoid && !r.isDown(u) {
			order = append(order, u)
		}
	}
	if avoid != "" && !r.isDown(avoid) {
		order = append(order, avoid)
	}
	return order
}

// set stores the placement of user's partition (r.mu held), forgetting
// every placement when too many are remembered.
func (r *routes) set(user string, pl placement) {
	at := r.placeOf(user)
	if _, ok := r.places[at]; !ok && len(r.places) >= max(maxPlaces, r.partitions) {
		clear(r.places)
	}
	r.places[at] = pl
}

// learnView takes node's answer to a placement lookup for user: node
// answers as servedBy, and the view replaces the placement of the user's
// partition unless it is of an older epoch than the one known (an epoch
// never goes back), or names no master. It reports whether the lookup may
// stop: the master's URL is known, or every node's id is.
func (r *routes) learnView(node, servedBy, user string, v wire.PlacementView) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heard(node, servedBy)
	r.learnCount(user, v.Partition, v.PartitionCount)
	cur, ok := r.places[r.placeOf(user)]
	if !ok || v.Master != "" && v.Epoch >= cur.epoch {
		cur = placementOf(v.Master, v.Epoch, v.Responsible)
	}
	cur.stale = false
	r.set(user, cur)
	return cur.master != "" && r.urlOf(cur.master, nil) != "" || r.allKnown()
}

// heard notes that node answered, as servedBy (r.mu held).
func (r *routes) heard(node, servedBy string) {
	if servedBy != "" {
		r.ids[node] = servedBy
	}
	delete(r.down, node)
}

// placementOf is a placement naming master at epoch, with the copies of
// responsible, the master first.
func placementOf(master string, epoch uint64, responsible []string) placement {
	pl := placement{master: master, epoch: epoch, copies: slices.Clone(responsible)}
	if master != "" && !slices.Contains(pl.copies, master) {
		pl.copies = append([]string{master}, pl.copies...)
	}
	return pl
}

// wantsTable reports whether a lookup should ask for every partition's
// placement first (GET /v1/placement): the partition count is not known
// yet, and the last request for the table is tableAgain ago or more.
func (r *routes) wantsTable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.partitions == 0 && !r.perUser && !r.now().Before(r.noTableUntil)
}

// noTable notes that a request for the table got none (r.mu not held):
// lookups ask per user for tableAgain.
func (r *routes) noTable() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noTableUntil = r.now().Add(tableAgain)
}

// learnTable takes node's placement table (node answers as servedBy): the
// partition count, and each partition's placement that names a master,
// unless one of a newer epoch is known. An answer that is not one row per
// partition (or not a table at all) counts as no table.
func (r *routes) learnTable(node, servedBy string, t wire.PlacementTable) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heard(node, servedBy)
	if t.PartitionCount <= 0 || len(t.Partitions) != t.PartitionCount {
		r.noTableUntil = r.now().Add(tableAgain)
		return
	}
	if r.perUser {
		return
	}
	if r.partitions != t.PartitionCount {
		r.partitions = t.PartitionCount
		clear(r.places)
	}
	for p, v := range t.Partitions {
		if v.Partition != p || v.Master == "" {
			continue
		}
		at := place{partition: p}
		if cur, ok := r.places[at]; ok && cur.epoch > v.Epoch {
			continue
		}
		r.places[at] = placementOf(v.Master, v.Epoch, v.Responsible)
	}
}

// learnMaster takes the master (and epoch) a 421 named for user, unless
// an epoch as new is known: the master holds a copy, and is where the
// call goes next.
func (r *routes) learnMaster(user, master string, epoch uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.places[r.placeOf(user)]; ok && cur.epoch > epoch {
		return
	}
	r.set(user, placementOf(master, epoch, nil))
}

// servedWrite takes the node that served a write of user (X-Served-By of
// a success: the master, whether the node asked forwarded it or not) as
// the user's master.
func (r *routes) servedWrite(user, servedBy string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.places[r.placeOf(user)]
	if !ok || servedBy == "" || cur.master == servedBy {
		return
	}
	cur.master, cur.stale = servedBy, false
	if !slices.Contains(cur.copies, servedBy) {
		cur.copies = append([]string{servedBy}, cur.copies...)
	}
	r.set(user, cur)
}

// answered notes that node answered.
func (r *routes) answered(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.down, node)
}

// unreachable passes node over for downFor.
func (r *routes) unreachable(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down[node] = r.now().Add(downFor)
}

// failed marks user's placement stale after a call for it failed at a
// node in a way worth trying again.
func (r *routes) failed(user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := r.placeOf(user)
	if cur, ok := r.places[at]; ok {
		cur.stale = true
		r.places[at] = cur
	}
}

// lookUp asks the client's nodes, in turn, where user's partition lives,
// until the master's URL is known (or every node's id is): each answer
// teaches the id of the node that gave it. A node that does not answer is
// passed over; an answer refusing the request (a 4xx: a token of another
// user, a name the node refuses) ends the lookup, as the call itself will
// be refused the same way and says why. The first lookup asks for every
// partition's placement at once (lookUpTable), and asks for user's only
// if that did not tell where a call for user goes (toMaster: a call for
// the master).
func (c *Client) lookUp(ctx context.Context, user string, toMaster bool, avoid string) {
	if c.routes.wantsTable() {
		c.lookUpTable(ctx, avoid)
		if !c.routes.needsLookup(user, toMaster) {
			return
		}
	}
	path := "/v1/users/" + url.PathEscape(user) + "/placement"
	for _, node := range c.routes.lookupOrder(avoid) {
		if ctx.Err() != nil {
			return
		}
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		a, err := c.try(lctx, node, call{method: http.MethodGet, path: path, want: []int{http.StatusOK}})
		cancel()
		var he *HTTPError
		switch {
		case errors.As(err, &he) && he.StatusCode < 500:
			c.routes.answered(node)
			return
		case errors.As(err, &he):
			c.routes.answered(node)
			continue
		case err != nil:
			if ctx.Err() == nil {
				c.routes.unreachable(node)
			}
			continue
		}
		var v wire.PlacementView
		if json.Unmarshal(a.body, &v) != nil {
			continue
		}
		if c.routes.learnView(node, a.header.Get(headerServedBy), user, v) {
			return
		}
	}
}

// lookUpTable asks the client's nodes, in turn, for every partition's
// placement (GET /v1/placement, an admin's call), until one answers with
// it. One request at a time: a call that waited for another's finds the
// table learnt. Got none (every node failed, or refused: a token that is
// not an admin's, a node of an older version that does not serve it), the
// client looks up per user for tableAgain before it asks again. A node
// that failed is passed over only if it could not be reached: the table
// is large, and a slow answer says nothing of the node.
func (c *Client) lookUpTable(ctx context.Context, avoid string) {
	c.routes.tableMu.Lock()
	defer c.routes.tableMu.Unlock()
	if !c.routes.wantsTable() {
		return // learnt, or given up on, by the call this one waited for
	}
	for _, node := range c.routes.lookupOrder(avoid) {
		if ctx.Err() != nil {
			return // this call's end, not the table's: ask again next time
		}
		tctx, cancel := context.WithTimeout(ctx, tableTimeout)
		a, err := c.try(tctx, node, call{method: http.MethodGet, path: "/v1/placement", want: []int{http.StatusOK}})
		cancel()
		var he *HTTPError
		switch {
		case errors.As(err, &he) && he.StatusCode < 500:
			c.routes.answered(node)
			c.routes.noTable()
			return
		case errors.As(err, &he):
			c.routes.answered(node)
			continue
		case err != nil:
			if ctx.Err() == nil && isDialError(err) {
				c.routes.unreachable(node)
			}
			continue
		}
		var t wire.PlacementTable
		if json.Unmarshal(a.body, &t) != nil {
			t = wire.PlacementTable{}
		}
		c.routes.learnTable(node, a.header.Get(headerServedBy), t)
		return
	}
	if ctx.Err() == nil {
		c.routes.noTable()
	}
}
