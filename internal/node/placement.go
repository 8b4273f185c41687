package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/lease"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// peerRing turns the peer list into what the lease manager and the
// replica choice need: the ring (rebuilt when the list changes) and the
// voters.
type peerRing struct {
	partitions int
	cluster    *cluster.Cluster
	log        *slog.Logger

	mu     sync.Mutex
	peers  cluster.PeerList
	ring   *shard.Ring
	voters []string
	err    string
}

// current returns the ring and voters for the peer list in force. A list
// the ring refuses (it validates before the library could panic) keeps the
// last good ring.
func (pl *peerRing) current() (*shard.Ring, []string) {
	peers := pl.cluster.Peers()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.ring == nil || !slices.Equal(peers.Peers, pl.peers.Peers) {
		members := make([]shard.Member, len(peers.Peers))
		for i, p := range peers.Peers {
			members[i] = shard.Member{ID: p.ID, Sharding: p.Sharding, Replica: p.Replica, Voter: p.Voter}
		}
		r, err := shard.NewRing(members, pl.partitions)
		switch {
		case err != nil && pl.err != err.Error():
			pl.err = err.Error()
			pl.log.Error("the peer list cannot be placed; keeping the previous placement", "err", err)
		case err == nil:
			pl.ring, pl.peers, pl.voters, pl.err = r, peers, shard.Voters(members), ""
		}
	}
	// Voters follow the same list as the ring: a list the ring refused
	// changes neither.
	return pl.ring, pl.voters
}

// Ring is the ring in force (nil before any list could be placed).
func (pl *peerRing) Ring() *shard.Ring {
	r, _ := pl.current()
	return r
}

// Voters are the lease voters of the peer list in force.
func (pl *peerRing) Voters() []string {
	_, v := pl.current()
	return v
}

// tableGossip spreads the partition table: the whole table in every
// push-pull, single changes as broadcasts.
type tableGossip struct {
	table *shard.Table
	log   *slog.Logger
}

func (g tableGossip) LocalState() []byte { return shard.EncodeAssignments(g.table.Snapshot()) }

func (g tableGossip) Merge(data []byte) {
	if _, err := g.table.MergeEncoded(data); err != nil {
		g.log.Warn("unreadable partition table from gossip", "err", logsafe.Clip(err.Error()))
	}
}

// peerSender sends a request to a peer (cluster.Cluster.Send).
type peerSender interface {
	Send(peer string, req *http.Request, sign bool) (*http.Response, error)
}

// peers is the cluster as handoffs and promotion use it: the member states
// gossip sees, and signed calls to peers (callPeer).
type peers interface {
	peerSender
	States() map[string]cluster.State
}

// callPeer posts in as JSON to a signed internal endpoint of peer and
// decodes the answer into out. role names the peer in errors.
func callPeer(ctx context.Context, c peerSender, role, peer, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://peer"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Send(peer, req, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s answered %s", role, peer, resp.Status)
	}
	if err := decodeAnswer(resp.Body, out); err != nil {
		return fmt.Errorf("%s %s: unreadable answer: %w", role, peer, err)
	}
	return nil
}

// maxAnswerBytes bounds a peer's answer to an internal call: lease
// decisions for every one of up to 65,536 partitions (about 8 MB) fit.
const maxAnswerBytes = 32 << 20

// decodeAnswer decodes one JSON value of at most maxAnswerBytes from a
// peer's answer into out, refusing anything after it.
func decodeAnswer(r io.Reader, out any) error {
	lr := &io.LimitedReader{R: r, N: maxAnswerBytes + 1}
	d := json.NewDecoder(lr)
	if err := d.Decode(out); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("the answer is longer than %d bytes", maxAnswerBytes)
		}
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		if lr.N <= 0 {
			return fmt.Errorf("the answer is longer than %d bytes", maxAnswerBytes)
		}
		return errors.New("the answer has data after its JSON value")
	}
	return nil
}

// leaseTransport carries lease batches to voters over signed internal HTTP.
type leaseTransport struct{ c *cluster.Cluster }

func (t leaseTransport) Vote(ctx context.Context, voter string, b lease.Batch) ([]lease.Decision, error) {
	var ds []lease.Decision
	err := callPeer(ctx, t.c, "voter", voter, "/internal/v1/lease", b, &ds)
	return ds, err
}

// replicaTransport carries replication requests to replicas: over a
// replication stream to each (replicastream.go) when the cluster can sign
// one, else, or for a replica that cannot take one, as signed internal
// HTTP requests in the binary form (/internal/v3/replicate). A peer that
// answers 404 route-not-found to that runs an older version: it gets JSON
// on /internal/v1/replicate until v1Retry has passed, then the binary form
// is tried again (the peer may have been upgraded meanwhile); a peer that
// does not switch to a stream is sent requests one by one for as long.
type replicaTransport struct {
	c   peerSender
	now func() time.Time

	mu       sync.Mutex
	v1Only   map[string]time.Time // peer -> when to try the binary form again
	noStream map[string]time.Time // peer -> when to try a stream again
	streams  map[string]*replicaStream
	closed   bool
}

// v1Retry is how long a peer that did not know /internal/v3/replicate is
// sent JSON before the binary form is tried again (and one that did not
// take a stream, requests one by one).
const v1Retry = time.Minute

func newReplicaTransport(c peerSender, now func() time.Time) *replicaTransport {
	return &replicaTransport{c: c, now: now, v1Only: map[string]time.Time{}, noStream: map[string]time.Time{},
		streams: map[string]*replicaStream{}}
}

func (t *replicaTransport) Send(ctx context.Context, replica string, r replicate.Request) (replicate.Response, error) {
	if t.jsonOnly(replica) {
		return t.sendJSON(ctx, replica, r)
	}
	body, err := replicate.AppendRequest(nil, r)
	if err != nil {
		return replicate.Response{}, err
	}
	if sp, ok := t.c.(streamPeer); ok {
		resp, err := t.sendStream(ctx, sp, replica, body)
		if !errors.Is(err, errNoStream) {
			return resp, err
		}
	}
	return t.sendBinary(ctx, replica, body, r)
}

// sendBinary sends one request over HTTP in the binary form (r is the
// same request, for JSON).
func (t *replicaTransport) sendBinary(ctx context.Context, replica string, body []byte, r replicate.Request) (replicate.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://peer/internal/v3/replicate", bytes.NewReader(body))
	if err != nil {
		return replicate.Response{}, err
	}
	req.Header.Set("Content-Type", replicate.ContentTypeBinary)
	resp, err := t.c.Send(replica, req, true)
	if err != nil {
		return replicate.Response{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		// Only a router that has no such route (an older version) makes
		// the binary form wait; any other 404 is an error.
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if !bytes.Contains(head, []byte(api.TypeRouteNotFound)) {
			return replicate.Response{}, fmt.Errorf("replica %s answered %s", replica, resp.Status)
		}
		resp.Body.Close() // now, not after the JSON call below
		t.mu.Lock()
		t.v1Only[replica] = t.now().Add(v1Retry)
		t.mu.Unlock()
		return t.sendJSON(ctx, replica, r)
	}
	if resp.StatusCode != http.StatusOK {
		return replicate.Response{}, fmt.Errorf("replica %s answered %s", replica, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err == nil && len(data) > maxAnswerBytes {
		err = fmt.Errorf("the answer is longer than %d bytes", maxAnswerBytes)
	}
	var out replicate.Response
	if err == nil {
		out, err = replicate.ReadResponse(data)
	}
	if err != nil {
		return replicate.Response{}, fmt.Errorf("replica %s: unreadable answer: %w", replica, err)
	}
	return out, nil
}

// jsonOnly reports whether replica is sent JSON for now.
func (t *replicaTransport) jsonOnly(replica string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stillUntil(t.v1Only, replica)
}

// stillUntil reports whether the time m holds for replica is still to
// come, forgetting it once it has passed. t.mu is held.
func (t *replicaTransport) stillUntil(m map[string]time.Time, replica string) bool {
	until, ok := m[replica]
	if ok && !t.now().Before(until) {
		delete(m, replica)
		return false
	}
	return ok
}

func (t *replicaTransport) sendJSON(ctx context.Context, replica string, r replicate.Request) (replicate.Response, error) {
	var out replicate.Response
	err := callPeer(ctx, t.c, "replica", replica, "/internal/v1/replicate", r, &out)
	return out, err
}

// shipperMastership tells the shipper which partitions this node masters
// and who replicates them.
type shipperMastership struct{ n *Node }

func (m shipperMastership) Epoch(p int) (uint64, bool) { return m.n.writable(p) }
func (m shipperMastership) Replicas(p int) []string    { return m.n.replicasOf(p) }
func (m shipperMastership) Copies() int                { return m.n.copies() }
func (m shipperMastership) Counted(p int, epoch uint64, replicas []string) []string {
	return m.n.countedOf(p, epoch, replicas)
}

// shipperSource is this node's copy of the partitions it masters, as the
// shipper reads it: positions and documents from the partition writer,
// scans from the store.
type shipperSource struct{ n *Node }

func (s shipperSource) Last(p int) store.Position { return s.n.writer.Position(p) }
func (s shipperSource) EpochStart(p int, epoch uint64) store.Position {
	return s.n.writer.EpochStart(p, epoch)
}
func (s shipperSource) Epochs(p int, epoch uint64) []store.EpochStart {
	return s.n.writer.Epochs(p, epoch)
}
func (s shipperSource) Horizon(p int) store.Position { return s.n.writer.Horizon(p) }
func (s shipperSource) Get(ctx context.Context, p int, key string) (*store.Doc, error) {
	return s.n.writer.Get(ctx, p, key)
}
func (s shipperSource) Scan(ctx context.Context, p int, after store.Position, limit int) ([]*store.Doc, error) {
	return s.n.store.ScanAfter(ctx, p, after, limit)
}
func (s shipperSource) ScanKeys(ctx context.Context, p int, afterKey string, limit int) ([]*store.Doc, error) {
	return s.n.store.ScanKeys(ctx, p, afterKey, limit)
}
func (s shipperSource) Count(ctx context.Context, p int, after store.Position) (int64, error) {
	return s.n.store.CountAfter(ctx, p, after)
}

// copyMetrics counts catch-ups and full copies; a chunk sent to a
// partition's preferred master counts as a move.
type copyMetrics struct {
	metrics *api.Metrics
	place   *peerRing
}

func (c copyMetrics) FullCopyStarted(p int) { c.metrics.ObserveFullCopy(p) }
func (c copyMetrics) Copied(replica string, p int, docs int, bytes int64) {
	c.metrics.ObserveCopied(c.place.Ring().Owner(p) == replica, docs, bytes)
}
