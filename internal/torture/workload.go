package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoal-db/shoal/api"
)

// Target is a node the clients send requests to.
type Target struct {
	ID, URL string
}

// WorkloadOptions says which clients to run.
type WorkloadOptions struct {
	Token string
	// RegisterUser owns the registers (all in one partition, so that the
	// nemesis can aim at its master).
	RegisterUser string
	// Clients of each kind: registers (majority puts, compare-and-sets
	// and -deletes after a linearizable read, linearizable and majority
	// reads and query pages, local reads; local and majority ones with
	// the token of their own last write), w=1
	// writers (each key written once), list appenders (one user each, one
	// document per element, majority writes; every third step also
	// deletes one of its acknowledged elements, at random, with a
	// majority delete).
	RegisterClients, W1Clients, ListClients int
	// TombstonesMayBePurged says the nodes may purge tombstones during the
	// run (a TOMBSTONE_RETENTION is set: Config.tombstonesMayBePurged): a
	// register made again may start at any higher version
	// (History.TombstonesMayBePurged).
	TombstonesMayBePurged bool
	// W1Users is how many users the w=1 keys are spread over (default 4).
	W1Users int
	// Seed seeds the clients' choices.
	Seed uint64
	// Dial reaches the nodes (nil: net.Dialer's); a Cluster's Dial.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Timeouts of one request: a write waits X-Write-Timeout for its copies
// on the master, plus the forwarding; a paused node holds a request until
// the client gives up.
const (
	writeTimeout  = 2 * time.Second
	writeDeadline = 6 * time.Second
	readDeadline  = 4 * time.Second
	// avoidFor is how long a client avoids a node that failed it, as a
	// driver's server selection does, so that a paused node does not hold
	// every client.
	avoidFor = 5 * time.Second
	// retryBackoff is how long a client waits after a failed write.
	retryBackoff = 50 * time.Millisecond
)

// Collections the workload writes.
const (
	registerColl = "registers"
	w1Coll       = "w1"
	listColl     = "list"
)

// Workload runs the clients and records what they did.
type Workload struct {
	targets []Target
	o       WorkloadOptions
	// aimed, while set, is the node half the majority reads and query
	// pages go to (Aim).
	aimed atomic.Pointer[Target]
	// docs are the registers of the current round; every round has its
	// own, so that porcupine checks each round's apart (an unknown write
	// may take effect at any later time, and a long history with many of
	// them is beyond its search).
	docs atomic.Pointer[[]string]
	t0   time.Time

	stopping  atomic.Bool
	wg        sync.WaitGroup
	nDefinite atomic.Int64
	nAcked    atomic.Int64 // writes of any kind acknowledged
	nRegister atomic.Int64 // register writes acknowledged: the registers' partition takes writes
	nClients  atomic.Int64
	nReady    atomic.Int64 // clients that had a write acknowledged
	nextID    atomic.Int64

	mu         sync.Mutex
	queryPages map[ReadConcern]int // query pages of the registers recorded, by read concern
	all        []string            // every round's registers, in order
	ops        []porcupine.Operation
	marks      []porcupine.Annotation
	notes      []string
	w1         []W1Write
	list       []ListElem
	attempts   []Attempt
}

// W1Write is a w=1 write of a key written only once.
type W1Write struct {
	User, ID string
	Acked    bool // 200/201: the master had it
	Unknown  bool // no answer, or a 5xx: it may have been applied
	Via      string
	ServedBy string
	Call     time.Duration
}

// ListElem is an element appended to a user's list with a majority write.
type ListElem struct {
	User, ID string
	Acked    bool
	Unknown  bool
	Call     time.Duration
	// Delete is how the element's one majority delete was answered, if it
	// was sent (only acknowledged elements are deleted), and DeleteCall
	// when.
	Delete     ListDelete
	DeleteCall time.Duration
}

// ListDelete is the outcome of a list element's delete.
type ListDelete int

const (
	NotDeleted    ListDelete = iota // never sent, or answered no (a 4xx other than 404)
	DeleteDone                      // 204: the element is gone for good
	DeleteUnknown                   // no answer, or a 5xx: it may have been applied
	DeleteAbsent                    // 404: the element was not there
)

// listDeleteEvery: a list appender deletes one of its elements every
// this many appends.
const listDeleteEvery = 3

// Attempt is one write attempt of one client, for availability.
type Attempt struct {
	Client    string
	Call, Ret time.Duration
	OK        bool // the cluster answered it (done, or a 412 on a compare-and-set)
}

// NewWorkload prepares clients for targets; round 1's registers are set.
func NewWorkload(targets []Target, o WorkloadOptions) *Workload {
	if o.W1Users < 1 {
		o.W1Users = 4
	}
	w := &Workload{targets: targets, o: o, t0: time.Now(), queryPages: map[ReadConcern]int{}}
	w.Round(1)
	return w
}

// Round makes the register clients use new documents from now on.
func (w *Workload) Round(r int) {
	docs := []string{fmt.Sprintf("a%d", r), fmt.Sprintf("b%d", r), fmt.Sprintf("c%d", r)}
	w.mu.Lock()
	w.all = append(w.all, docs...)
	w.mu.Unlock()
	w.docs.Store(&docs)
}

// Docs is the current round's registers.
func (w *Workload) Docs() []string { return *w.docs.Load() }

// Since is the time since the workload's clock started.
func (w *Workload) Since() time.Duration { return time.Since(w.t0) }

func (w *Workload) now() int64 { return int64(time.Since(w.t0)) }

// Aim sends half the majority reads and query pages to node id from now
// on ("": none again): an isolated master keeps the writes it took while
// its lease lasted, which a failover rolls back, and a majority read
// there is where one would show them.
func (w *Workload) Aim(id string) {
	for _, t := range w.targets {
		if t.ID == id {
			w.aimed.Store(&t)
			return
		}
	}
	w.aimed.Store(nil)
}

// Mark notes a fault (or the end of one) on the timeline.
func (w *Workload) Mark(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.marks = append(w.marks, porcupine.Annotation{Tag: "faults", Start: w.now(), Description: what})
	w.notes = append(w.notes, fmt.Sprintf("%8.3fs %s", time.Since(w.t0).Seconds(), what))
}

// Definite counts the register operations of known outcome so far.
func (w *Workload) Definite() int { return int(w.nDefinite.Load()) }

// Acked counts the writes of any kind acknowledged so far.
func (w *Workload) Acked() int { return int(w.nAcked.Load()) }

// RegisterAcked counts the register writes acknowledged so far.
func (w *Workload) RegisterAcked() int { return int(w.nRegister.Load()) }

// Start starts the clients; their requests end with ctx. Stop stops them.
func (w *Workload) Start(ctx context.Context) {
	w.t0 = time.Now()
	c := 0
	for _, k := range []struct {
		kind string
		n    int
	}{{"register", w.o.RegisterClients}, {"w1", w.o.W1Clients}, {"list", w.o.ListClients}} {
		kind := k.kind
		for i := 0; i < k.n; i++ {
			cl := &client{id: c, name: fmt.Sprintf("%s-%d", kind, i), rng: rand.New(rand.NewPCG(w.o.Seed, uint64(c))),
				hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, DialContext: w.o.Dial}}, avoid: map[string]time.Time{}, own: map[string]ownWrite{}}
			c++
			w.nClients.Add(1)
			w.wg.Add(1)
			go w.run(ctx, kind, i, cl)
		}
	}
}

// Ready is how many of the clients had a write acknowledged, of how many.
func (w *Workload) Ready() (int, int) { return int(w.nReady.Load()), int(w.nClients.Load()) }

// Stop stops the clients once their requests in flight are answered.
func (w *Workload) Stop() {
	w.stopping.Store(true)
	w.wg.Wait()
}

// client is one client: it sends one request at a time to a random node,
// avoiding for a while a node that just failed it.
type client struct {
	id       int
	name     string
	rng      *rand.Rand
	hc       *http.Client
	avoid    map[string]time.Time
	attempts []Attempt
	ready    bool // had a write acknowledged
	// own is the client's last acknowledged write of each register, with
	// the X-Consistency-Token its answer carried; lastToken is the token
	// of its last acknowledged register write of all (every register is
	// in one partition, so a copy holding it holds every own write
	// before).
	own       map[string]ownWrite
	lastToken string
}

// ownWrite is a client's acknowledged write of a register.
type ownWrite struct {
	token   string
	version int64
	value   string
	deleted bool
}

func (w *Workload) run(ctx context.Context, kind string, i int, cl *client) {
	defer w.wg.Done()
	defer cl.hc.CloseIdleConnections()
	defer func() {
		w.mu.Lock()
		w.attempts = append(w.attempts, cl.attempts...)
		w.mu.Unlock()
	}()
	var kept []int // a list appender's acknowledged elements not deleted yet (indexes in w.list)
	for seq := 0; !w.stopping.Load() && ctx.Err() == nil; seq++ {
		switch kind {
		case "register":
			w.registerOp(ctx, cl, seq)
		case "w1":
			user := fmt.Sprintf("w1-u%d", cl.rng.IntN(w.o.W1Users))
			w.w1Write(ctx, cl, user, fmt.Sprintf("k%d-%d", i, seq))
		default:
			if at, acked := w.listAppend(ctx, cl, w.listUser(i), fmt.Sprintf("e%06d", seq)); acked {
				kept = append(kept, at)
			}
			if seq%listDeleteEvery == listDeleteEvery-1 && len(kept) > 0 && !w.stopping.Load() && ctx.Err() == nil {
				j := cl.rng.IntN(len(kept))
				w.listDelete(ctx, cl, kept[j])
				kept = slices.Delete(kept, j, j+1)
			}
		}
	}
}

// listUser is list appender i's user. The first appends in the
// registers' user (a collection of its own), so that the partition the
// nemesis aims at holds list elements and their tombstones too: with
// tombstones purged, a master cut off longer than TOMBSTONE_RETENTION
// comes back having purged deletes its successor may not have.
func (w *Workload) listUser(i int) string {
	if i == 0 && w.o.RegisterUser != "" {
		return w.o.RegisterUser
	}
	return fmt.Sprintf("list-%d", i)
}

func (w *Workload) registerOp(ctx context.Context, cl *client, seq int) {
	docs := *w.docs.Load()
	doc := docs[cl.rng.IntN(len(docs))]
	value := fmt.Sprintf("c%d-%d", cl.id, seq)
	switch r := cl.rng.IntN(100); {
	case r < 30:
		w.write(ctx, cl, regInput{Doc: doc, Kind: opPut, Value: value})
	case r < 50:
		// Compare-and-set on the version a linearizable read returns.
		if o, ok := w.read(ctx, cl, doc, ReadLinearizable); ok && o.Found {
			w.write(ctx, cl, regInput{Doc: doc, Kind: opCAS, Value: value, Expect: o.Version})
		}
	case r < 60:
		// Compare-and-delete, likewise: the register is absent until a put
		// makes it again, at the version after its tombstone's (or, once
		// its partition purged tombstones, at a higher one). One in ten
		// operations: at one in twenty, a short run (CI's, under the race
		// detector, about 80 register operations) sent none now and then.
		if o, ok := w.read(ctx, cl, doc, ReadLinearizable); ok && o.Found {
			w.write(ctx, cl, regInput{Doc: doc, Kind: opDelete, Expect: o.Version})
		}
	case r < 75:
		w.read(ctx, cl, doc, ReadLinearizable)
	case r < 78:
		w.query(ctx, cl, ReadLinearizable)
	case r < 80:
		w.query(ctx, cl, ReadMajority)
	case r < 90:
		// A state a majority holds, from any copy: never one a failover
		// rolls back (History.MajorityReads).
		w.read(ctx, cl, doc, ReadMajority)
	case r < 98:
		w.read(ctx, cl, doc, ReadLocal)
	default:
		w.query(ctx, cl, ReadLocal)
	}
}

// query reads the registers' collection with a query page of the read
// concern and records what it returned as a read of that concern of each
// register of the current round the page covers: its state, or absent
// (the earlier rounds' histories are left to grow no more, so that
// porcupine checks each round's apart). A page answers as a whole within
// its call and return, so each register's state in a linearizable page
// must fit that register's history there (not a snapshot of all of them
// at one instant, which the query does not promise); a majority page's
// must be states that stayed (History.MajorityReads). A local or
// majority page sends the token of the client's last write of any
// register, so each register's state in it is the client's own last
// write of it or later (History.ReadYourWrites). A failed query is not
// recorded.
func (w *Workload) query(ctx context.Context, cl *client, concern ReadConcern) {
	docs := w.Docs()
	n, aimed := w.aim(cl, concern)
	meta := opMeta{client: cl.id, asked: n.ID} // each read it makes gets an id of its own
	url := n.URL + "/v1/users/" + w.o.RegisterUser + "/collections/" + registerColl + "/documents?limit=1000"
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+w.o.Token)
	req.Header.Set("X-Read-Concern", string(concern))
	// An aimed page sends none: the isolated master is behind a token of
	// its successor's, and would answer 503 instead of what it holds.
	withToken := concern != ReadLinearizable && cl.lastToken != "" && !aimed
	if withToken {
		req.Header.Set("X-Consistency-Token", cl.lastToken)
	}
	call := w.now()
	status, hdr, body, err := w.do(cl, n, req, readDeadline)
	ret := w.now()
	if err != nil || status != 200 {
		return
	}
	meta.status, meta.servedBy = status, hdr.Get("X-Served-By")
	var page struct {
		Documents []struct {
			ID      string `json:"_id"`
			V       string `json:"v"`
			Version int64  `json:"_version"`
		} `json:"documents"`
		Next string `json:"next"`
	}
	if json.Unmarshal(body, &page) != nil {
		return
	}
	got := map[string]regOutput{}
	last := ""
	for _, d := range page.Documents {
		if d.Version == 0 {
			return // not a register's answer
		}
		got[d.ID] = regOutput{Outcome: resultDone, Found: true, Value: d.V, Version: d.Version}
		last = max(last, d.ID)
	}
	w.mu.Lock()
	w.queryPages[concern]++
	w.mu.Unlock()
	for _, doc := range docs {
		if page.Next != "" && doc > last {
			continue // on a later page
		}
		m := meta
		m.id = int(w.nextID.Add(1))
		in := regInput{Doc: doc, Kind: opRead, Concern: concern, Query: true}
		if own, ok := cl.own[doc]; ok && withToken {
			in.Since, in.SinceValue, in.SinceDeleted = own.version, own.value, own.deleted
		}
		w.record(porcupine.Operation{ClientId: cl.id, Input: in, Call: call, Output: got[doc], Return: ret, Metadata: &m}, true)
	}
}

// aim picks the node a read of the concern goes to: for a majority read,
// at random one time in two the node aimed at, if any (Aim); else any
// (pick).
func (w *Workload) aim(cl *client, concern ReadConcern) (n Target, aimed bool) {
	if t := w.aimed.Load(); t != nil && concern == ReadMajority && cl.rng.IntN(2) == 0 {
		return *t, true
	}
	return w.pick(cl), false
}

func (w *Workload) pick(cl *client) Target {
	var ok []Target
	for _, n := range w.targets {
		if time.Now().After(cl.avoid[n.ID]) {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		ok = w.targets
	}
	return ok[cl.rng.IntN(len(ok))]
}

func (w *Workload) record(op porcupine.Operation, definite bool) {
	w.mu.Lock()
	w.ops = append(w.ops, op)
	w.mu.Unlock()
	if definite {
		w.nDefinite.Add(1)
	}
}

func docURL(n Target, user, coll, id string) string {
	return n.URL + "/v1/users/" + user + "/collections/" + coll + "/documents/" + id
}

// put sends a PUT of {"v": value} with the write concern; it returns
// the status, headers and error of the answer.
func (w *Workload) put(ctx context.Context, cl *client, n Target, url, value, concern string) (int, http.Header, error) {
	status, hdr, _, err := w.send(ctx, cl, n, "PUT", url, valueBody(value), concern, 0)
	return status, hdr, err
}

// valueBody is the body of a PUT of value: {"v": value}.
func valueBody(value string) []byte {
	body, _ := json.Marshal(map[string]string{"v": value})
	return body
}

// send sends a write (a PUT with body, or a DELETE) with the write
// concern, and If-Match when ifMatch is positive.
func (w *Workload) send(ctx context.Context, cl *client, n Target, method, url string, body []byte, concern string, ifMatch int64) (int, http.Header, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.o.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Write-Concern", concern)
	req.Header.Set("X-Write-Timeout", writeTimeout.String())
	if ifMatch > 0 {
		req.Header.Set("If-Match", strconv.Quote(strconv.FormatInt(ifMatch, 10)))
	}
	return w.do(cl, n, req, writeDeadline)
}

// attempt records a write attempt. After a failed one the client backs
// off a little, as a driver does: a node that refuses connections would
// otherwise make it spin.
func (w *Workload) attempt(ctx context.Context, cl *client, call, ret time.Duration, ok bool) {
	cl.attempts = append(cl.attempts, Attempt{Client: cl.name, Call: call, Ret: ret, OK: ok})
	if ok && !cl.ready {
		cl.ready = true
		w.nReady.Add(1)
	}
	if !ok {
		t := time.NewTimer(retryBackoff)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// write puts in.Value, with If-Match for a compare-and-set, or deletes
// the register with If-Match, as a majority write through a random node.
// A write refused before it was sent (the connection was refused) is not
// recorded in the history: it was never invoked; it counts as a failed
// attempt.
func (w *Workload) write(ctx context.Context, cl *client, in regInput) {
	n := w.pick(cl)
	meta := &opMeta{id: int(w.nextID.Add(1)), client: cl.id, asked: n.ID}
	url := docURL(n, w.o.RegisterUser, registerColl, in.Doc)
	method, body := "PUT", valueBody(in.Value)
	if in.Kind == opDelete {
		method, body = "DELETE", nil
	}
	call := w.now()
	status, hdr, answer, err := w.send(ctx, cl, n, method, url, body, "majority", in.Expect) // a put's Expect is 0: no If-Match
	ret := w.now()
	if unsent(err) {
		w.attempt(ctx, cl, time.Duration(call), time.Duration(ret), false)
		return
	}
	out := regOutput{Outcome: resultUnknown}
	meta.status = status
	if err != nil {
		meta.err = err.Error()
	} else {
		meta.servedBy = hdr.Get("X-Served-By")
	}
	switch {
	case err != nil:
	case in.Kind == opDelete && status == 204:
		// Its tombstone holds the version after the one it named.
		out = regOutput{Outcome: resultDone, Version: in.Expect + 1}
		w.nAcked.Add(1)
		w.nRegister.Add(1)
	case in.Kind == opDelete && status == 404 && notFound(answer):
		out = regOutput{Outcome: resultAbsent}
	case in.Kind != opDelete && (status == 200 || status == 201):
		v, perr := strconv.ParseInt(strings.Trim(hdr.Get("ETag"), `"`), 10, 64)
		if perr != nil {
			meta.err = "no version in the ETag " + hdr.Get("ETag")
			break
		}
		out = regOutput{Outcome: resultDone, Version: v}
		w.nAcked.Add(1)
		w.nRegister.Add(1)
	case status == 412 && (in.Kind == opCAS || in.Kind == opDelete):
		out = regOutput{Outcome: resultRefused}
	}
	w.attempt(ctx, cl, time.Duration(call), time.Duration(ret), out.Outcome != resultUnknown)
	if tok := hdr.Get("X-Consistency-Token"); out.Outcome == resultDone && tok != "" {
		cl.own[in.Doc] = ownWrite{token: tok, version: out.Version, value: in.Value, deleted: in.Kind == opDelete}
		cl.lastToken = tok
	}
	if out.Outcome == resultUnknown {
		ret = -1 // pending: returns at the end of the history
	}
	w.record(porcupine.Operation{ClientId: cl.id, Input: in, Call: call, Output: out, Return: ret, Metadata: meta}, out.Outcome != resultUnknown)
}

// w1Write writes key id of user once, with write concern 1.
func (w *Workload) w1Write(ctx context.Context, cl *client, user, id string) {
	n := w.pick(cl)
	call := w.Since()
	status, hdr, err := w.put(ctx, cl, n, docURL(n, user, w1Coll, id), id, "1")
	ret := w.Since()
	rec := W1Write{User: user, ID: id, Via: n.ID, Call: call}
	if rec.Acked, rec.Unknown = writeOutcome(status, err); rec.Acked {
		rec.ServedBy = hdr.Get("X-Served-By")
		w.nAcked.Add(1)
	}
	w.attempt(ctx, cl, call, ret, rec.Acked)
	if rec.Acked || rec.Unknown {
		w.mu.Lock()
		w.w1 = append(w.w1, rec)
		w.mu.Unlock()
	}
}

// listAppend appends element id to user's list with a majority write;
// at is where it is recorded in w.list, if acknowledged.
func (w *Workload) listAppend(ctx context.Context, cl *client, user, id string) (at int, acked bool) {
	n := w.pick(cl)
	call := w.Since()
	status, _, err := w.put(ctx, cl, n, docURL(n, user, listColl, id), id, "majority")
	ret := w.Since()
	rec := ListElem{User: user, ID: id, Call: call}
	if rec.Acked, rec.Unknown = writeOutcome(status, err); rec.Acked {
		w.nAcked.Add(1)
	}
	w.attempt(ctx, cl, call, ret, rec.Acked)
	if rec.Acked || rec.Unknown {
		w.mu.Lock()
		at = len(w.list)
		w.list = append(w.list, rec)
		w.mu.Unlock()
	}
	return at, rec.Acked
}

// listDelete deletes the acknowledged list element at (in w.list) with a
// majority delete, once: deleted, it must stay gone on every copy, its
// tombstone purged or not (CheckLists).
func (w *Workload) listDelete(ctx context.Context, cl *client, at int) {
	w.mu.Lock()
	e := w.list[at]
	w.mu.Unlock()
	n := w.pick(cl)
	call := w.Since()
	status, _, answer, err := w.send(ctx, cl, n, "DELETE", docURL(n, e.User, listColl, e.ID), nil, "majority", 0)
	ret := w.Since()
	if unsent(err) {
		w.attempt(ctx, cl, call, ret, false)
		return
	}
	d := DeleteUnknown
	switch {
	case err != nil || status >= 500:
	case status == 204:
		d = DeleteDone
		w.nAcked.Add(1)
	case status < 300: // no other success is ever answered: not counted either way
	case status == 404 && notFound(answer):
		d = DeleteAbsent
	default: // refused before it was applied
		d = NotDeleted
	}
	w.attempt(ctx, cl, call, ret, d == DeleteDone || d == DeleteAbsent)
	w.mu.Lock()
	w.list[at].Delete, w.list[at].DeleteCall = d, call
	w.mu.Unlock()
}

// writeOutcome sorts a write's answer: acknowledged (200, 201), unknown
// (a 5xx, or an error after it may have been sent), or neither: never
// applied (refused before it was sent, or answered no).
func writeOutcome(status int, err error) (acked, unknown bool) {
	switch {
	case unsent(err) || err == nil && status < 500 && status != 201 && status != 200:
		return false, false
	case err == nil && (status == 200 || status == 201):
		return true, false
	}
	return false, true
}

// unsent reports whether err means the request never left: the
// connection could not be made.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// read reads doc through a random node; a failed read is not recorded
// (ok false): it returned nothing to check.
func (w *Workload) read(ctx context.Context, cl *client, doc string, concern ReadConcern) (regOutput, bool) {
	n, aimed := w.aim(cl, concern)
	meta := &opMeta{id: int(w.nextID.Add(1)), client: cl.id, asked: n.ID}
	req, _ := http.NewRequestWithContext(ctx, "GET", docURL(n, w.o.RegisterUser, registerColl, doc), nil)
	req.Header.Set("Authorization", "Bearer "+w.o.Token)
	req.Header.Set("X-Read-Concern", string(concern))
	in := regInput{Doc: doc, Kind: opRead, Concern: concern}
	// An aimed read sends no token (as an aimed page).
	if own, ok := cl.own[doc]; ok && concern != ReadLinearizable && !aimed {
		// Read your writes: the copy that answers holds this client's
		// last write of the register, or a later state (a linearizable
		// read promises more).
		req.Header.Set("X-Consistency-Token", own.token)
		in.Since, in.SinceValue, in.SinceDeleted = own.version, own.value, own.deleted
	}
	call := w.now()
	status, hdr, body, err := w.do(cl, n, req, readDeadline)
	ret := w.now()
	if err != nil {
		return regOutput{}, false
	}
	meta.status, meta.servedBy = status, hdr.Get("X-Served-By")
	out, ok := decodeRead(status, body)
	if !ok {
		return regOutput{}, false
	}
	w.record(porcupine.Operation{ClientId: cl.id, Input: in, Call: call, Output: out, Return: ret, Metadata: meta}, true)
	return out, true
}

// decodeRead is a register read's answer: ok is false when it says
// nothing about the register (an error).
func decodeRead(status int, body []byte) (regOutput, bool) {
	switch status {
	case 200:
		var d struct {
			V       string `json:"v"`
			Version int64  `json:"_version"`
		}
		if json.Unmarshal(body, &d) != nil || d.Version == 0 {
			return regOutput{}, false
		}
		return regOutput{Outcome: resultDone, Found: true, Value: d.V, Version: d.Version}, true
	case 404:
		if !notFound(body) {
			return regOutput{}, false
		}
		return regOutput{Outcome: resultDone}, true
	}
	return regOutput{}, false
}

// notFound reports whether a 404's body says the document does not exist
// (and not, say, that the route does not).
func notFound(body []byte) bool {
	var p struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(body, &p) == nil && p.Type == api.TypeNotFound
}

// do sends req to n and reads the answer; a node that does not answer is
// avoided for a while.
func (w *Workload) do(cl *client, n Target, req *http.Request, timeout time.Duration) (int, http.Header, []byte, error) {
	cl.hc.Timeout = timeout
	resp, err := cl.hc.Do(req)
	if err != nil {
		cl.avoid[n.ID] = time.Now().Add(avoidFor)
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		cl.avoid[n.ID] = time.Now().Add(avoidFor)
		return resp.StatusCode, resp.Header, nil, err
	}
	return resp.StatusCode, resp.Header, body, nil
}

// History is what the clients did, once they stopped.
type History struct {
	RegisterUser string
	Docs         []string
	// TombstonesMayBePurged says the nodes may have purged tombstones during
	// the run: a register made again may start at any version above its
	// last (the register model allows it then, and only then).
	TombstonesMayBePurged bool
	// MadeHigher counts the acknowledged puts that made their register at
	// a version further above the register's next lower version seen in
	// the history than its writes of unknown outcome could fill: made
	// (again) above the next version, as a node does once it purged
	// tombstones. A figure for the report, which may count low: every
	// unknown write of the register, at any time, counts as able to fill
	// a version.
	MadeHigher     int
	ops            []porcupine.Operation
	marks          []porcupine.Annotation
	Notes          []string
	end            int64
	DefiniteWrites int
	Deletes        int // of DefiniteWrites, the acknowledged deletes
	DeletesSent    int // compare-and-deletes sent, whatever their outcome
	UnknownWrites  int
	Refused        int
	Absent         int                 // deletes answered 404: the register was absent
	QueryPages     map[ReadConcern]int // query pages, each a read of every register it covers
	QueryReads     map[ReadConcern]int // the reads they make
	DefiniteReads  map[ReadConcern]int
	UnknownWhy     map[string]int // why writes have an unknown outcome
	W1             []W1Write
	List           []ListElem
	Attempts       []Attempt // sorted by Call
}

// History is the record so far; call it after Stop.
func (w *Workload) History() *History {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := &History{RegisterUser: w.o.RegisterUser, TombstonesMayBePurged: w.o.TombstonesMayBePurged, Docs: slices.Clone(w.all), marks: slices.Clone(w.marks), Notes: slices.Clone(w.notes), end: w.now() + 1,
		DefiniteReads: map[ReadConcern]int{}, UnknownWhy: map[string]int{}, W1: slices.Clone(w.w1), List: slices.Clone(w.list), Attempts: slices.Clone(w.attempts)}
	sort.Slice(h.Attempts, func(i, j int) bool { return h.Attempts[i].Call < h.Attempts[j].Call })
	h.QueryPages, h.QueryReads = maps.Clone(w.queryPages), map[ReadConcern]int{}
	for _, op := range w.ops {
		if op.Return < 0 {
			op.Return = h.end
		}
		h.ops = append(h.ops, op)
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind == opDelete {
			h.DeletesSent++
		}
		switch {
		case in.Kind == opRead:
			h.DefiniteReads[in.Concern]++
			if in.Query {
				h.QueryReads[in.Concern]++
			}
		case out.Outcome == resultUnknown:
			h.UnknownWrites++
			h.UnknownWhy[unknownReason(op.Metadata.(*opMeta))]++
		case out.Outcome == resultRefused:
			h.Refused++
		case out.Outcome == resultAbsent:
			h.Absent++
		default:
			h.DefiniteWrites++
			if in.Kind == opDelete {
				h.Deletes++
			}
		}
	}
	h.MadeHigher = madeHigher(h.ops)
	return h
}

// madeHigher counts the acknowledged puts of ops at a version more than
// one above their register's next lower version that ops show (an
// acknowledged write's or a read's; 0 if none), beyond what the
// register's writes of unknown outcome could fill (one version each).
func madeHigher(ops []porcupine.Operation) int {
	seen := map[string][]int64{} // doc -> versions shown
	unknown := map[string]int64{}
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		switch {
		case in.Kind == opRead && out.Found, in.Kind != opRead && out.Outcome == resultDone:
			seen[in.Doc] = append(seen[in.Doc], out.Version)
		case in.Kind != opRead && out.Outcome == resultUnknown:
			unknown[in.Doc]++
		}
	}
	for _, vs := range seen {
		slices.Sort(vs)
	}
	n := 0
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind != opPut || out.Outcome != resultDone {
			continue
		}
		var below int64
		if i, _ := slices.BinarySearch(seen[in.Doc], out.Version); i > 0 {
			below = seen[in.Doc][i-1]
		}
		if out.Version-below > 1+unknown[in.Doc] {
			n++
		}
	}
	return n
}

// Counts sums the register history up.
func (h *History) Counts() string {
	var why []string
	for k, n := range h.UnknownWhy {
		why = append(why, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(why)
	return fmt.Sprintf("%d writes done (%d of them deletes, %d puts made above the next version), %d compare-and-sets or -deletes refused, %d deletes of absent registers, %d writes of unknown outcome (%s), %d linearizable reads, %d more from %d query pages, %d majority reads, %d more from %d query pages, and %d local reads, %d more from %d query pages",
		h.DefiniteWrites, h.Deletes, h.MadeHigher, h.Refused, h.Absent, h.UnknownWrites, strings.Join(why, ", "),
		h.DefiniteReads[ReadLinearizable]-h.QueryReads[ReadLinearizable], h.QueryReads[ReadLinearizable], h.QueryPages[ReadLinearizable],
		h.DefiniteReads[ReadMajority]-h.QueryReads[ReadMajority], h.QueryReads[ReadMajority], h.QueryPages[ReadMajority],
		h.DefiniteReads[ReadLocal]-h.QueryReads[ReadLocal], h.QueryReads[ReadLocal], h.QueryPages[ReadLocal])
}

// unknownReason classes why a write's outcome is unknown.
func unknownReason(m *opMeta) string {
	switch {
	case strings.Contains(m.err, "Client.Timeout"):
		return "client timeout"
	case m.err != "":
		return "connection lost"
	}
	return strconv.Itoa(m.status)
}

// with is the history of the writes and the reads of one concern.
func (h *History) with(concern ReadConcern) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range h.ops {
		if in := op.Input.(regInput); in.Kind != opRead || in.Concern == concern {
			out = append(out, op)
		}
	}
	return out
}

// Len is the number of register operations recorded.
func (h *History) Len() int { return len(h.ops) }
