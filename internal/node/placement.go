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

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/lease"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
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

// callPeer posts in as JSON to a signed internal endpoint of peer and
// decodes the answer into out. role names the peer in errors.
func callPeer(ctx context.Context, c *cluster.Cluster, role, peer, path string, in, out any) error {
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

// replicaTransport carries replication requests over signed internal HTTP.
type replicaTransport struct{ c *cluster.Cluster }

func (t replicaTransport) Send(ctx context.Context, replica string, r replicate.Request) (replicate.Response, error) {
	var out replicate.Response
	err := callPeer(ctx, t.c, "replica", replica, "/internal/v1/replicate", r, &out)
	return out, err
}
