package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// Routing headers.
const (
	// headerHop marks a request one node forwarded to another; a node that
	// receives it never forwards it again. Forwards are signed (see
	// forwardedOnly): a client cannot set it.
	headerHop    = "X-Shoal-Hop"
	headerMaster = "X-Shoal-Master"
	headerEpoch  = "X-Shoal-Epoch"
)

// Leases is what routing needs from the node's lease holder.
type Leases interface {
	// Holds reports whether this node may accept writes for partition
	// now, and at which epoch.
	Holds(partition int) (epoch uint64, ok bool)
	// LikelyMaster is the node's best guess of the partition's master when
	// the table names none: the live holder in its own voter record, or
	// the preferred master.
	LikelyMaster(partition int) string
}

// TypeMisdirected is the problem type of a 421 answer.
const TypeMisdirected = "urn:shoal:problem:not-master"

// forwardedHeaders are the request headers a forwarded request keeps.
var forwardedHeaders = []string{"Authorization", "Content-Type", "If-Match", "Prefer", "X-Write-Concern", "X-Write-Timeout",
	headerConsistencyToken, headerReadPreference, headerReadConcern, "Accept"}

// clustered reports whether requests may need to go to another node.
func (s *Server) clustered() bool {
	return s.cfg.Cluster != nil && s.cfg.Leases != nil && s.cfg.Table != nil
}

// misdirected answers 421 with the master and epoch this node believes in.
func (s *Server) misdirected(w http.ResponseWriter, partition int) {
	a := s.cfg.Table.Get(partition)
	if a.Master != "" {
		w.Header().Set(headerMaster, a.Master)
		w.Header().Set(headerEpoch, strconv.FormatUint(a.Epoch, 10))
	}
	detail := fmt.Sprintf("node %s is not the master of partition %d; the master it knows of is %q at epoch %d", s.cfg.NodeID, partition, a.Master, a.Epoch)
	if _, held := s.cfg.Leases.Holds(partition); held && a.Master == s.cfg.NodeID {
		detail = fmt.Sprintf("node %s holds the lease of partition %d (epoch %d) but cannot take writes yet: its tenure is being confirmed or its replica list recorded; retry shortly", s.cfg.NodeID, partition, a.Epoch)
	}
	writeProblem(w, problem(http.StatusMisdirectedRequest, TypeMisdirected, "Not the master", detail))
}

// route serves a request here when this node masters the partition, and
// otherwise forwards it to the master (at most one hop). A forwarded
// request that reaches a node that is not the master gets 421 with the
// master that node believes in; the forwarding node learns from it and
// retries once. No master reachable: 503 with Retry-After.
//
// While the partition's lease is being handed to another node, the request
// waits for the handoff to end; a write that was already queued here when
// the lease moved is forwarded to the new master rather than refused.
func (s *Server) route(w http.ResponseWriter, r *http.Request, partition int, local http.HandlerFunc) {
	if !s.clustered() {
		local(w, r)
		return
	}
	s.waitHandoff(r.Context(), partition)
	if r.Header.Get(headerHop) != "" {
		if _, ok := s.cfg.Leases.Holds(partition); !ok {
			s.misdirected(w, partition)
			return
		}
		// A forwarded write that finds the lease gone meanwhile answers 421
		// (see storeError), so the forwarding node learns and retries.
		s.awaitWritable(r.Context(), partition, time.Now().Add(routeWait))
		local(w, r.WithContext(context.WithValue(r.Context(), rerouteKey{}, &reroute{hop: true, partition: partition})))
		return
	}
	var body []byte
	if r.Body != nil && r.Method != http.MethodGet {
		var prob *Problem
		if body, prob = s.readBody(w, r); prob != nil {
			writeProblem(w, prob)
			return
		}
	}
	// Serve here while this node masters the partition; otherwise forward
	// to the master the table names (or the best guess). A 421 teaches the
	// table the master that node believes in; a master that is unknown,
	// was just tried or does not answer is waited out until the table
	// learns a new one (gossip, a handoff, an election), for up to
	// routeWait.
	deadline := time.Now().Add(routeWait)
	tried := map[string]int{}
	why := "no master is known"
	var lastErr error // for the log only: it names internal URLs
	for {
		if _, ok := s.cfg.Leases.Holds(partition); ok {
			s.awaitWritable(r.Context(), partition, deadline)
			if s.serveLocal(w, r, partition, body, local) {
				return
			}
			// The lease moved while the write waited in this node's
			// queue: nothing was written; send it to the new master.
			s.waitHandoff(r.Context(), partition)
		}
		master := s.masterGuess(partition)
		usable := master != "" && master != s.cfg.NodeID && tried[master] < 2
		if usable {
			tried[master]++
			timeout := forwardTimeoutFor(r)
			resp, done, err := s.forward(r.Context(), r, master, body, timeout)
			switch {
			case err != nil && errors.Is(err, context.Canceled) && r.Context().Err() == nil:
				// The master took the request and did not answer in time:
				// the write may have been applied.
				writeProblem(w, problem(http.StatusGatewayTimeout, TypeTimeout, "Timeout",
					fmt.Sprintf("the master %s did not answer within %s; the write may or may not have been applied: read the document to find out", master, timeout)))
				return
			case err != nil && !errors.Is(err, cluster.ErrNotSent):
				// The master may have got it: retrying could apply it twice.
				s.log.Warn("forwarding a write failed after the master may have received it", "partition", partition, "master", master, "err", clipError(err))
				writeProblem(w, problem(http.StatusGatewayTimeout, TypeTimeout, "Outcome unknown",
					fmt.Sprintf("forwarding to the master %s failed after it may have received the write; it may or may not have been applied: read the document to find out (an admin sees the nodes' states at GET /v1/cluster)", master)))
				return
			case err != nil:
				s.log.Debug("forwarding failed", "partition", partition, "master", master, "err", clipError(err))
				why, lastErr = fmt.Sprintf("%s did not answer", master), err
			case resp.StatusCode == http.StatusMisdirectedRequest:
				s.learn(partition, resp.Header)
				resp.Body.Close()
				done()
				why = fmt.Sprintf("%s is not the master either", master)
				continue
			default:
				relay(w, resp)
				done()
				return
			}
		}
		if !s.awaitTable(r.Context(), deadline) {
			break
		}
	}
	// The answer names nodes, never their URLs or the network's errors:
	// those are for the operator, in the log.
	s.log.Warn("no reachable master", "partition", partition, "why", why, "err", clipError(lastErr))
	writeProblem(w, unavailable(fmt.Sprintf("partition %d has no reachable master right now (%s; a new one is chosen within LEASE_TTL): retry shortly; an admin sees the nodes' states at GET /v1/cluster", partition, why)))
}

// masterGuess is the master to send a partition's request to: the one the
// table names or, when it names none or this node's own lapsed tenure,
// the lease holder's best guess.
func (s *Server) masterGuess(partition int) string {
	if m := s.cfg.Table.Get(partition).Master; m != "" && m != s.cfg.NodeID {
		return m
	}
	return s.cfg.Leases.LikelyMaster(partition)
}

// awaitWritable waits, while this node holds the partition's lease in a
// tenure not yet writable (a promotion not yet confirmed, a replica list
// not yet recorded: see internal/node), until it is writable, the lease
// goes, or deadline passes. A forwarded write is answered 421 when its
// node cannot take it, and the node that forwarded it tries a master only
// twice: a new master answering 421 for the moments its tenure needs
// failed writes sent through other nodes (503 after routeWait).
func (s *Server) awaitWritable(ctx context.Context, partition int, deadline time.Time) {
	c, ok := s.cfg.Leases.(Confirmer)
	if !ok || !s.clustered() {
		return
	}
	for {
		if _, held := s.cfg.Leases.Holds(partition); !held {
			return
		}
		if _, writable := c.Writable(partition); writable || !s.awaitTable(ctx, deadline) {
			return
		}
	}
}

// awaitTable waits until the partition table changes, 100 ms pass or ctx
// ends; false once deadline has passed or ctx has ended.
func (s *Server) awaitTable(ctx context.Context, deadline time.Time) bool {
	left := time.Until(deadline)
	if left <= 0 || ctx.Err() != nil {
		return false
	}
	select {
	case <-s.cfg.Table.Changed():
	case <-time.After(min(left, 100*time.Millisecond)):
	case <-ctx.Done():
	}
	return true
}

// maxLoggedError bounds how much of an error a log line carries (a
// forwarding error quotes the request's URL, query string included).
const maxLoggedError = 300

// clipError is err's text for a log line, clipped ("" for nil).
func clipError(err error) string {
	if err == nil {
		return ""
	}
	return logsafe.ClipTo(err.Error(), maxLoggedError)
}

// serveLocal serves a write here from its buffered body. It reports false,
// having answered nothing, when the partition's lease was gone by the time
// the change reached the writer (see storeError).
func (s *Server) serveLocal(w http.ResponseWriter, r *http.Request, partition int, body []byte, local http.HandlerFunc) bool {
	rr := &reroute{partition: partition}
	lr := r.WithContext(context.WithValue(r.Context(), rerouteKey{}, rr))
	lr.Body = io.NopCloser(bytes.NewReader(body))
	local(w, lr)
	return !rr.notMaster
}

// routeWait bounds how long a request waits for its partition's master to
// become known and reachable before it is answered 503.
const routeWait = 2 * time.Second

// reroute marks a write served locally: if the partition's lease is gone
// by the time its change reaches the writer, the handler leaves the answer
// to route (which forwards it to the new master) instead of refusing it.
type reroute struct {
	partition int
	hop       bool // a forwarded request: answer 421 instead
	notMaster bool // set by storeError: nothing was written or answered
}

type rerouteKey struct{}

// storeError answers a failed write or read. A write that found this node
// no longer master is rerouted (see route) rather than refused.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) {
	if rr, ok := r.Context().Value(rerouteKey{}).(*reroute); ok && errors.Is(err, store.ErrNotMaster) {
		if rr.hop {
			s.misdirected(w, rr.partition)
			return
		}
		rr.notMaster = true
		return
	}
	writeProblem(w, storeProblem(err))
}

// waitHandoff waits (bounded by handoffWait) while the partition's lease is
// being handed to another node.
func (s *Server) waitHandoff(ctx context.Context, partition int) {
	if s.cfg.Handoffs == nil {
		return
	}
	s.cfg.Handoffs.Wait(ctx, partition, handoffWait)
}

// handoffWait bounds how long a request waits for a handoff to end.
const handoffWait = 5 * time.Second

// learn takes the master a 421 answer names.
func (s *Server) learn(partition int, h http.Header) {
	master, epoch := h.Get(headerMaster), h.Get(headerEpoch)
	e, err := strconv.ParseUint(epoch, 10, 64)
	if master == "" || err != nil {
		return
	}
	// Only the master and epoch are learned: the master's own gossip brings
	// its responsible list.
	if s.cfg.Table.Merge(shard.Assignment{Partition: partition, Master: master, Epoch: e}) {
		s.log.Debug("learned a master from a 421", "partition", partition, "master", master, "epoch", e)
	}
}

// forwardTimeout bounds how long a forwarded write waits for the master to
// start answering (a paused master still accepts connections).
const forwardTimeout = 10 * time.Second

// forwardTimeoutFor is how long the forwarded write r waits for the
// master's answer: forwardTimeout, or longer when its write concern may
// take longer (the master answers once the copies confirm, and giving up
// first would close the connection and so cancel the master's wait),
// counting the routing wait a new master may spend before its tenure is
// writable (awaitWritable).
func forwardTimeoutFor(r *http.Request) time.Duration {
	return max(forwardTimeout, routeWait+writeTimeout(r)+2*time.Second)
}

// forward sends r to node with the client's own credentials, marked as a
// hop (and with marks, header and value pairs) and signed as a
// node-to-node call (so node believes the marks). The
// timeout covers the wait for the whole answer (cluster.Send reads it to
// check its seal); cancel releases the request once it is relayed.
func (s *Server) forward(parent context.Context, r *http.Request, node string, body []byte, timeout time.Duration, marks ...string) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(parent)
	timer := time.AfterFunc(timeout, cancel)
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://placeholder"+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, nil, err
	}
	for _, h := range forwardedHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	req.Header.Set(headerHop, s.cfg.NodeID)
	for i := 0; i+1 < len(marks); i += 2 {
		req.Header.Set(marks[i], marks[i+1])
	}
	resp, err := s.cfg.Cluster.Send(node, req, true)
	if err != nil || !timer.Stop() {
		cancel()
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("%s did not answer within %s", node, timeout)
		}
		return nil, nil, err
	}
	return resp, cancel, nil
}

// forwardedOnly keeps the routing marks (X-Shoal-Hop, and the signature
// headers that vouch for it) only on a request another node of the cluster
// signed: a forward. From any other request, a client's, every X-Shoal-*
// header is removed before routing, so a client cannot make a node serve
// a request as a forward (421 instead of forwarding it, or a read served
// by this node's copy whatever it asked). A forward's body, at most
// MAX_BODY_BYTES as any body, is read to check its signature, and the
// answer to a forward is sealed (cluster.Signer.SealAnswers).
func (s *Server) forwardedOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(headerHop) != "" && r.Header.Get(cluster.HeaderSignature) != "" && s.cfg.Cluster != nil &&
			s.cfg.Cluster.Signer() != nil && r.ContentLength >= 0 && r.ContentLength <= s.cfg.MaxBodyBytes {
			signer := s.cfg.Cluster.Signer()
			_, err := signer.VerifyRequest(r, s.cfg.MaxBodyBytes)
			if err == nil {
				// The forwarding node checks that the answer is this
				// node's to its request: every answer, the token's
				// refusal included (this runs before requireAuth).
				sealed, finish := signer.SealAnswers(w, r)
				next.ServeHTTP(sealed, r)
				finish()
				return
			}
			if errors.Is(err, cluster.ErrBodyUnreadable) {
				writeProblem(w, badRequest(TypeInvalidDocument, "the body could not be read: "+err.Error()))
				return
			}
		}
		for k := range r.Header {
			if len(k) >= len("X-Shoal-") && strings.EqualFold(k[:len("X-Shoal-")], "X-Shoal-") {
				delete(r.Header, k)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// relay copies a forwarded answer to the client (its seal, checked by
// cluster.Send, is the nodes' own).
func relay(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for k, v := range resp.Header {
		if k != cluster.HeaderAnswerSignature {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// readTimeout bounds the wait for one node's answer to a read.
func (s *Server) readTimeout() time.Duration {
	if s.cfg.ReadTryTimeout > 0 {
		return s.cfg.ReadTryTimeout
	}
	return 500 * time.Millisecond
}

// queryTryTimeout bounds the wait for one copy's answer to a query (or a
// list of collections) forwarded to it: its work, bounded by QUERY_BUDGET
// and the page, may take seconds, and a try given up cancels it there
// and has the next copy start it over.
const queryTryTimeout = 30 * time.Second

// Read headers.
const (
	headerReadPreference = "X-Read-Preference"
)

// readToken parses the X-Consistency-Token a read presents: the position
// of a write ("partition:epoch.seq") that the serving copy must hold.
func readToken(r *http.Request, partition int) (*store.Position, *Problem) {
	v := r.Header.Get(headerConsistencyToken)
	if v == "" {
		return nil, nil
	}
	var p int
	var pos store.Position
	if _, err := fmt.Sscanf(v, "%d:%d.%d", &p, &pos.Epoch, &pos.Seq); err != nil || fmt.Sprintf("%d:%s", p, pos) != v {
		return nil, badRequest(TypeInvalidHeader, fmt.Sprintf("X-Consistency-Token %q is not a token a write returned", logsafe.ClipTo(v, 64)))
	}
	if p != partition {
		return nil, badRequest(TypeInvalidHeader, fmt.Sprintf("X-Consistency-Token %q belongs to partition %d, not to this user's partition %d", logsafe.ClipTo(v, 64), p, partition))
	}
	return &pos, nil
}

// readPreference is the request's X-Read-Preference: "" (master),
// master, nearest or local.
func readPreference(r *http.Request) (string, *Problem) {
	switch pref := r.Header.Get(headerReadPreference); pref {
	case "", "master", "nearest", "local":
		return pref, nil
	default:
		return "", badRequest(TypeInvalidHeader, fmt.Sprintf("X-Read-Preference %q: use master, nearest or local", logsafe.ClipTo(pref, 64)))
	}
}

// readOutcome is what serving a read from this node's copy came to.
type readOutcome int

const (
	readAnswered     readOutcome = iota // an answer was written
	readNotMaster                       // it needs the master, and this node is not: nothing written
	readBehind                          // the copy lacks the consistency token's position: nothing written
	readNotCommitted                    // a replica that does not know the state to be majority-held: nothing written
	readUnconfirmed                     // the master's tenure is not confirmed yet: nothing written
)

// answerMiss answers a read this node could not serve from its copy.
func (s *Server) answerMiss(w http.ResponseWriter, partition int, o readOutcome) {
	switch o {
	case readNotMaster:
		s.misdirected(w, partition)
	case readBehind:
		writeProblem(w, unavailable(fmt.Sprintf("this node's copy of partition %d is behind the consistency token; another copy has it", partition)))
	case readUnconfirmed:
		writeProblem(w, unavailable(fmt.Sprintf("node %s has just become the master of partition %d and is still asking the other copies whether one is ahead of it; it serves linearizable reads once its tenure is confirmed: retry shortly", s.cfg.NodeID, partition)))
	case readNotCommitted:
		writeProblem(w, unavailable(fmt.Sprintf("this node's copy of partition %d does not know its state to be on a majority of copies yet; the master or another copy can serve this majority read", partition)))
	}
}

// readTry is one node a read is sent to; asMaster marks the try aimed at
// the partition's master.
type readTry struct {
	node     string
	asMaster bool
}

// routeRead serves a read from a copy of the partition, under the read
// concern it asks for (X-Read-Concern; see readconcern.go).
//
// The copies are its responsible list, master first (with
// X-Read-Preference: nearest, this node first when it holds one; with
// local, only this node's copy, 421 if it has none). The try aimed at the
// master is marked as such: a node that is not the master answers it 421
// with the master it knows (after a handoff, the new one), and this node
// learns it and tries there, as a write does. Each remote try is bounded
// by READ_TRY_TIMEOUT (plus the wait for a majority, for the majority and
// linearizable concerns); a timeout, connection error or 5xx moves on to
// the next copy. A linearizable read is served by the master only, never
// by a replica (see routeMasterRead). A read that presents
// X-Consistency-Token is served only by a copy holding that position (one
// that is behind answers 503, so the next is tried).
func (s *Server) routeRead(w http.ResponseWriter, r *http.Request, partition int, tryTimeout time.Duration, local http.HandlerFunc) {
	token, prob := readToken(r, partition)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	pref, prob := readPreference(r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	concern, prob := readConcern(r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	if concern == ConcernLinearizable && (pref == "nearest" || pref == "local") {
		writeProblem(w, badRequest(TypeInvalidHeader, fmt.Sprintf("X-Read-Concern: linearizable is served by the partition's master only, and X-Read-Preference %q asks for another copy: leave X-Read-Preference out (or use master)", pref)))
		return
	}
	// serveHere answers from this node's copy.
	serveHere := func(asMaster bool) readOutcome {
		if token != nil && s.writer.Applied(partition).Compare(*token) < 0 {
			return readBehind
		}
		return s.serveConcern(w, r, partition, concern, asMaster, local)
	}
	if !s.clustered() {
		serveHere(false) // a single node's copy is the only one, and current
		return
	}
	_, master := s.cfg.Leases.Holds(partition)
	a := s.cfg.Table.Get(partition)
	// A copy this node holds by the table, even as a master whose tenure
	// just ended (the list is replaced by a guess below).
	listed := slices.Contains(a.Responsible, s.cfg.NodeID)
	if a.Master == "" || (a.Master == s.cfg.NodeID && !master) {
		// Unknown, or this node's own lapsed tenure.
		a.Master, a.Responsible = s.cfg.Leases.LikelyMaster(partition), nil
		if a.Master == s.cfg.NodeID {
			a.Master = ""
		}
	}
	copies := slices.Clone(a.Responsible)
	if len(copies) == 0 && a.Master != "" {
		copies = []string{a.Master}
	}
	if master && !slices.Contains(copies, s.cfg.NodeID) {
		copies = append([]string{s.cfg.NodeID}, copies...)
	}
	holdsCopy := master || listed || slices.Contains(copies, s.cfg.NodeID)
	if r.Header.Get(headerHop) != "" {
		// Another node sent it here: serve it or say why not (421, 503),
		// never send it on.
		asMaster := r.Header.Get(headerReadFrom) == "master" || concern == ConcernLinearizable
		if (asMaster && !master) || !holdsCopy {
			s.misdirected(w, partition)
			return
		}
		s.answerMiss(w, partition, serveHere(asMaster))
		return
	}
	if pref == "local" {
		if !holdsCopy {
			s.misdirected(w, partition)
			return
		}
		s.answerMiss(w, partition, serveHere(false))
		return
	}
	if concern == ConcernLinearizable {
		s.routeMasterRead(w, r, partition, serveHere)
		return
	}
	var tries []readTry
	if pref == "nearest" && holdsCopy {
		tries = append(tries, readTry{node: s.cfg.NodeID, asMaster: master})
	}
	for _, n := range copies {
		if !slices.ContainsFunc(tries, func(t readTry) bool { return t.node == n }) {
			tries = append(tries, readTry{node: n, asMaster: n == a.Master || (n == s.cfg.NodeID && master)})
		}
	}
	timeout := tryTimeout
	if concern != ConcernLocal {
		timeout += concernWait
	}
	var lastErr error // for the log only: it names internal URLs
	redirects := 0
	for i := 0; i < len(tries); i++ {
		try := tries[i]
		if try.node == s.cfg.NodeID {
			if serveHere(try.asMaster) == readAnswered {
				return
			}
			continue
		}
		var marks []string
		if try.asMaster {
			marks = []string{headerReadFrom, "master"}
		}
		resp, done, err := s.forward(r.Context(), r, try.node, nil, timeout, marks...)
		if err == nil && resp.StatusCode < 500 && resp.StatusCode != http.StatusMisdirectedRequest {
			relay(w, resp)
			done()
			return
		}
		if err == nil {
			if resp.StatusCode == http.StatusMisdirectedRequest {
				s.learn(partition, resp.Header)
				// The master moved (a handoff, a failover): try the one
				// it names, as the master, before any other copy.
				if next := s.cfg.Table.Get(partition).Master; try.asMaster && redirects < 2 && next != "" && next != try.node {
					redirects++
					tries = slices.Insert(tries, i+1, readTry{node: next, asMaster: true})
				}
			}
			resp.Body.Close()
			done()
			err = fmt.Errorf("%s answered %d", try.node, resp.StatusCode)
		}
		lastErr = err
		s.log.Debug("read try failed; trying the next copy", "partition", partition, "node", try.node, "err", clipError(err))
	}
	tried := "no copy is known"
	if len(tries) > 0 {
		names := make([]string, len(tries))
		for i, t := range tries {
			names[i] = t.node
		}
		tried = "tried " + strings.Join(names, ", ")
	}
	s.log.Warn("no copy answered a read", "partition", partition, "tried", tried, "err", clipError(lastErr))
	writeProblem(w, unavailable(fmt.Sprintf("no copy of partition %d answered (%s): retry shortly; an admin sees the nodes' states at GET /v1/cluster", partition, tried)))
}

// routeMasterRead serves a linearizable read: here while this node holds
// the partition's lease, else at the master the table names (a 421 teaches
// the table a newer one), waiting up to routeWait for a master to become
// known and reachable; never at a replica. No master in time: 503 with
// Retry-After.
func (s *Server) routeMasterRead(w http.ResponseWriter, r *http.Request, partition int, serveHere func(asMaster bool) readOutcome) {
	deadline := time.Now().Add(routeWait)
	tried := map[string]int{}
	why := "no master is known"
	var lastErr error // for the log only: it names internal URLs
	for {
		if _, ok := s.cfg.Leases.Holds(partition); ok {
			switch o := serveHere(true); o {
			case readAnswered:
				return
			case readBehind:
				s.answerMiss(w, partition, o)
				return
			case readUnconfirmed:
				why = "this node's new tenure is not confirmed yet"
			default:
				// The lease ended during the read: find the new master.
				why = "this node's lease ended during the read"
			}
		}
		master := s.masterGuess(partition)
		if master != "" && master != s.cfg.NodeID && tried[master] < 2 {
			tried[master]++
			resp, done, err := s.forward(r.Context(), r, master, nil, s.readTimeout()+concernWait, headerReadFrom, "master")
			switch {
			case err != nil:
				why, lastErr = fmt.Sprintf("%s did not answer", master), err
			case resp.StatusCode == http.StatusMisdirectedRequest:
				s.learn(partition, resp.Header)
				resp.Body.Close()
				done()
				why = fmt.Sprintf("%s is not the master", master)
				continue
			default:
				relay(w, resp)
				done()
				return
			}
		}
		if !s.awaitTable(r.Context(), deadline) {
			break
		}
	}
	s.log.Warn("no master served a linearizable read", "partition", partition, "why", why, "err", clipError(lastErr))
	writeProblem(w, unavailable(fmt.Sprintf("partition %d has no master that can serve a linearizable read right now (%s; a new one is chosen within LEASE_TTL): retry shortly, or read with X-Read-Concern: majority or local, which copies can serve", partition, why)))
}
