package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	shoalclient "github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/metrictext"
	"github.com/shoal-db/shoal/store"
)

// Healed is a healed cluster for the checks, which read it through its
// nodes' API: the process cluster of Run, or an in-process one.
type Healed struct {
	// Nodes are the running nodes, the first asked for placements.
	Nodes []Target
	Token string
	// HTTP reaches the nodes (nil: a client with a 2 s timeout).
	HTTP *http.Client
	// Offline is the rollback collections of nodes that are not running,
	// read before they stopped.
	Offline map[string][]store.RolledBack
	// Dir receives porcupine's visualization of a failing history, and
	// of a passing one when KeepVisual.
	Dir        string
	KeepVisual bool
	// CommitLogs is the directory of the nodes' COMMIT_LOG files
	// (NODE.commits.jsonl) for the one-writer check; empty: no check.
	CommitLogs string
	// Log receives progress lines (nil: none).
	Log func(format string, args ...any)
}

func (c Healed) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}

func (c Healed) hc() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

func (c Healed) node(id string) (Target, error) {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n, nil
		}
	}
	return Target{}, fmt.Errorf("%w: %q is not running", errNoNode, id)
}

// Check runs every checker on the healed cluster: healed is when the
// last fault was healed.
func (c Healed) Check(ctx context.Context, rep *Report, h *History, healed time.Time) {
	// Convergence first: the final reads of the checks below are of a
	// settled cluster.
	keys := usedKeys(h)
	var parts []PartitionCopies
	var copies []KeyCopies
	said := time.Now()
	var at time.Duration // when every copy was at its master's position
	_, err := await(ctx, 90*time.Second, "every responsible copy at its master's position with the master's content, and no node holding writes of its own no later master has checked", func() (ok bool, why string) {
		defer func() {
			if !ok && time.Since(said) > 5*time.Second {
				said = time.Now()
				c.logf("not converged yet: %s", why)
			}
		}()
		if why = c.unreconciled(ctx); why != "" {
			at = 0
			return false, why
		}
		parts, why = c.positions(ctx, keys)
		if why != "" {
			return false, why
		}
		if d := Diverged(parts, nil); len(d) > 0 {
			at = 0
			return false, d[0]
		}
		if at == 0 {
			at = time.Since(healed)
		}
		copies, why = c.localCopies(ctx, parts, keys)
		if why != "" {
			return false, why
		}
		d := Diverged(nil, copies)
		if len(d) > 0 {
			return false, fmt.Sprintf("%d documents differ, e.g. %s", len(d), d[0])
		}
		return true, ""
	})
	rep.Convergence, rep.Compared = at, len(copies)
	if err != nil {
		rep.Convergence = time.Since(healed)
		rep.Diverged = Diverged(parts, copies)
		if len(rep.Diverged) == 0 {
			rep.Diverged = []string{err.Error()}
		}
		rep.problem("replicas did not converge: %v", err)
	}
	c.logf("every copy at its master's position %s after healing; content compared in %s", rep.Convergence.Round(time.Millisecond), (time.Since(healed) - at).Round(time.Millisecond))

	rolled, n, err := c.rollbacks(ctx)
	if err != nil {
		rep.problem("reading the rollback collections: %v", err)
	}
	rep.RolledBackDocs = n

	finals, err := c.finalReads(ctx, h)
	if err != nil {
		rep.problem("final reads of the registers: %v", err)
	}
	rep.LostRegister = h.LostRegisterWrites(finals)
	rep.ReadYourWrites.Checked, rep.ReadYourWrites.Broken = h.ReadYourWrites()
	rep.MajorityReads.Checked, rep.MajorityReads.Broken = h.MajorityReads(finals)
	h.AddFinalReads(finals)
	rep.Lists, rep.W1 = h.checkContent(copies, rolled)
	rep.Purge.Read, rep.Purge.Tombstones, rep.Purge.FullCopies = c.purgeCounters(ctx)
	if copies == nil {
		rep.problem("list elements and w=1 writes not checked: no copy's content could be read")
	}

	dir := ""
	if c.KeepVisual {
		dir = c.Dir
	}
	v, err := h.CheckRegisters(ReadLinearizable, 60*time.Second, dir)
	if err != nil {
		rep.problem("%v", err)
	}
	rep.Registers = v
	if c.CommitLogs != "" {
		if rep.Writers, err = checkWriters(c.CommitLogs); err != nil {
			rep.problem("reading the nodes' commit logs: %v", err)
		}
	}
	if dir == "" {
		keepEvidence(rep, h, c.Dir)
	}
	rep.Availability = h.Outages(rep.Executed)
	for _, a := range h.Attempts {
		if a.OK {
			rep.Ops["write ok"]++
		} else {
			rep.Ops["write failed or unknown"]++
		}
	}
	rep.Ops["register writes done"] = h.DefiniteWrites
	rep.Ops["register deletes done"] = h.Deletes
	rep.Ops["register puts made above the next version"] = h.MadeHigher
	rep.Ops["register writes unknown"] = h.UnknownWrites
	rep.Ops["compare-and-sets or -deletes refused"] = h.Refused
	rep.Ops["deletes of absent registers"] = h.Absent
	for _, c := range []ReadConcern{ReadLinearizable, ReadMajority, ReadLocal} {
		rep.Ops[string(c)+" reads"] = h.DefiniteReads[c] - h.QueryReads[c]
		rep.Ops[string(c)+" reads from query pages"] = h.QueryReads[c]
		rep.Ops[string(c)+" query pages"] = h.QueryPages[c]
	}
}

// purgeCounters sums the running nodes' counts of tombstones purged and
// full copies started (each since the node's last start), from their
// /metrics; read is how many nodes answered.
func (c Healed) purgeCounters(ctx context.Context) (read, tombstones, fullCopies int) {
	for _, n := range c.Nodes {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		text, err := metrictext.Get(rctx, c.hc(), n.URL)
		cancel()
		if err != nil {
			c.logf("reading %s's metrics: %v", n.ID, err)
			continue
		}
		p, ok1 := metrictext.Value(text, "shoal_tombstones_purged_total")
		f, ok2 := metrictext.Value(text, "shoal_replication_full_copies_total")
		if !ok1 || !ok2 {
			c.logf("%s's metrics have no shoal_tombstones_purged_total or shoal_replication_full_copies_total", n.ID)
			continue
		}
		read, tombstones, fullCopies = read+1, tombstones+int(p), fullCopies+int(f)
	}
	return read, tombstones, fullCopies
}

// keepEvidence writes porcupine's visualization of the registers' history
// into dir when the run failed, whichever check failed.
func keepEvidence(rep *Report, h *History, dir string) {
	if !rep.Failed() || dir == "" {
		return
	}
	if v, err := h.CheckRegisters(ReadLinearizable, 60*time.Second, dir); err == nil {
		rep.Registers.Path = v.Path
	}
}

func splitKey(k string) (user, coll, id string) {
	p := strings.SplitN(k, "/", 3)
	for len(p) < 3 {
		p = append(p, "")
	}
	return p[0], p[1], p[2]
}

// noNodeToAsk is why a check could not be made on a cluster with no node
// left running (a run interrupted while it was checked).
const noNodeToAsk = "no node is running to ask"

// usedKeys is every document the workload may have written, by user.
func usedKeys(h *History) map[string][]string {
	keys := map[string][]string{}
	for _, d := range h.Docs {
		keys[h.RegisterUser] = append(keys[h.RegisterUser], registerColl+"/"+d)
	}
	for _, e := range h.List {
		keys[e.User] = append(keys[e.User], listColl+"/"+e.ID)
	}
	for _, w := range h.W1 {
		keys[w.User] = append(keys[w.User], w1Coll+"/"+w.ID)
	}
	return keys
}

// unreconciled says which running node still holds, in a copy of a
// partition it no longer masters, writes of its own last tenure that no
// later master has checked (GET /v1/cluster), or why it cannot be told;
// "" when none does. Such a copy may be the only place of w=1 writes the
// node acknowledged while cut off, and it is in no responsible list until
// the partition's master takes it back as an extra copy: the master's
// first batch moves what it never had to the rollback collection. Until
// then the w=1 check would call those writes lost.
func (c Healed) unreconciled(ctx context.Context) string {
	if len(c.Nodes) == 0 {
		return noNodeToAsk
	}
	for _, n := range c.Nodes {
		st, err := shoalclient.New(n.URL, c.Token, shoalclient.WithHTTPClient(c.hc())).Cluster(ctx)
		if err != nil {
			return fmt.Sprintf("%s's cluster status: %v", n.ID, err)
		}
		if st.Partitions == nil {
			return fmt.Sprintf("%s's cluster status has no partition counts", n.ID)
		}
		if k := st.Partitions.Unreconciled[n.ID]; k > 0 {
			return fmt.Sprintf("%s holds writes of its own that no later master has checked in %d partitions", n.ID, k)
		}
	}
	return ""
}

// positions is each used partition's master and every responsible node's
// position, or why they cannot be had yet.
func (c Healed) positions(ctx context.Context, keys map[string][]string) ([]PartitionCopies, string) {
	if len(c.Nodes) == 0 {
		return nil, noNodeToAsk
	}
	seen := map[int]bool{}
	var out []PartitionCopies
	users := make([]string, 0, len(keys))
	for u := range keys {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, u := range users {
		p, err := PlacementOf(ctx, c.hc(), c.Nodes[0], c.Token, u)
		if err != nil {
			return nil, err.Error()
		}
		if seen[p.Partition] {
			continue
		}
		seen[p.Partition] = true
		pc := PartitionCopies{Partition: p.Partition, Master: p.Master, Positions: map[string]store.Position{}}
		for _, id := range p.Responsible {
			n, err := c.node(id)
			if err != nil {
				return nil, err.Error()
			}
			q, err := PlacementOf(ctx, c.hc(), n, c.Token, u)
			if err != nil {
				return nil, err.Error()
			}
			if q.Master != p.Master || q.Epoch != p.Epoch {
				return nil, fmt.Sprintf("partition %d: %s names %s at %d, %s names %s at %d", p.Partition, c.Nodes[0].ID, p.Master, p.Epoch, id, q.Master, q.Epoch)
			}
			pc.Positions[id] = q.Position
		}
		out = append(out, pc)
	}
	return out, ""
}

// localCopies is every document of every used collection in every
// responsible node's own copy, all of it, not only the keys the workload
// wrote: a copy holding a document its master lacks differs too.
func (c Healed) localCopies(ctx context.Context, parts []PartitionCopies, keys map[string][]string) ([]KeyCopies, string) {
	if len(c.Nodes) == 0 {
		return nil, noNodeToAsk
	}
	var out []KeyCopies
	for _, u := range sortedUsers(keys) {
		p, err := PlacementOf(ctx, c.hc(), c.Nodes[0], c.Token, u)
		if err != nil {
			return nil, err.Error()
		}
		var pc PartitionCopies
		for _, c := range parts {
			if c.Partition == p.Partition {
				pc = c
			}
		}
		colls := map[string]bool{}
		for _, k := range keys[u] {
			coll, _, _ := strings.Cut(k, "/")
			colls[coll] = true
		}
		for _, coll := range sortedKeys(colls) {
			held := map[string]map[string]Copy{} // node -> id -> copy
			ids := map[string]bool{}
			for _, id := range sortedKeys(pc.Positions) {
				n, err := c.node(id)
				if err != nil {
					return nil, err.Error()
				}
				docs, err := readCollection(ctx, c.hc(), n, c.Token, u, coll)
				if err != nil {
					return nil, err.Error()
				}
				held[id] = docs
				for d := range docs {
					ids[d] = true
				}
			}
			for _, d := range sortedKeys(ids) {
				kc := KeyCopies{Key: u + "/" + coll + "/" + d, Master: pc.Master}
				for _, id := range sortedKeys(held) {
					c, ok := held[id][d]
					if !ok {
						c = Copy{Node: id}
					}
					kc.Copies = append(kc.Copies, c)
				}
				out = append(out, kc)
			}
		}
	}
	return out, ""
}

func sortedUsers(keys map[string][]string) []string {
	var us []string
	for u := range keys {
		us = append(us, u)
	}
	sort.Strings(us)
	return us
}

// readCollection is node n's own copy of user's collection coll, by id:
// each document's whole content as the node answers it.
func readCollection(ctx context.Context, hc *http.Client, n Target, token, user, coll string) (map[string]Copy, error) {
	out := map[string]Copy{}
	after := ""
	for {
		u := n.URL + "/v1/users/" + user + "/collections/" + coll + "/documents?limit=1000"
		if after != "" {
			u += "&after=" + url.QueryEscape(after)
		}
		var page struct {
			Documents []json.RawMessage `json:"documents"`
			Next      string            `json:"next"`
		}
		code, err := getJSON(ctx, hc, u, token, map[string]string{"X-Read-Preference": "local"}, &page)
		if err == nil && code != 200 {
			err = fmt.Errorf("%s answered a local query of %s/%s with %d", n.ID, user, coll, code)
		}
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Documents {
			var d struct {
				ID      string `json:"_id"`
				Version int64  `json:"_version"`
			}
			if err := json.Unmarshal(raw, &d); err != nil || d.ID == "" {
				return nil, fmt.Errorf("%s's copy of %s/%s holds a document without an _id: %s", n.ID, user, coll, raw)
			}
			out[d.ID] = Copy{Node: n.ID, Found: true, Version: d.Version, Value: string(raw)}
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// rollbacks is every node's rollback collection (a stopped node's as it
// was read before it stopped): the w=1 keys (user/id) listed, and how
// many document states in all.
func (c Healed) rollbacks(ctx context.Context) (map[string]bool, int, error) {
	keys := map[string]bool{}
	n := 0
	count := func(docs []store.RolledBack) {
		for _, d := range docs {
			if d.User == "_shoal" {
				continue // tenure markers
			}
			n++
			if d.Coll == w1Coll {
				keys[d.User+"/"+d.ID] = true
			}
		}
	}
	for _, docs := range c.Offline {
		count(docs)
	}
	for _, node := range c.Nodes {
		docs, err := nodeRollbacks(ctx, c.hc(), c.Token, node)
		if err != nil {
			return keys, n, err
		}
		count(docs)
	}
	return keys, n, nil
}

// nodeRollbacks is node's rollback collection.
func nodeRollbacks(ctx context.Context, hc *http.Client, token string, node Target) ([]store.RolledBack, error) {
	l, err := shoalclient.New(node.URL, token, shoalclient.WithHTTPClient(hc)).Rollbacks(ctx, 10000)
	if code, ok := answered(err); ok {
		err = fmt.Errorf("%s answered %d", node.ID, code)
	}
	if err == nil && l.More {
		err = fmt.Errorf("%s holds more than %d rolled back documents: the list read is not whole", node.ID, len(l.RolledBack))
	}
	docs := make([]store.RolledBack, len(l.RolledBack))
	for i, d := range l.RolledBack {
		docs[i] = store.RolledBack(d) // the API's shape of the store's record
	}
	return docs, err
}

// finalReads reads every register with X-Read-Concern: linearizable.
func (c Healed) finalReads(ctx context.Context, h *History) (map[string]FinalRead, error) {
	finals := map[string]FinalRead{}
	ask := c.Nodes
	for _, doc := range h.Docs {
		_, err := await(ctx, 30*time.Second, "a linearizable read of register "+doc, func() (bool, string) {
			n := ask[len(finals)%len(ask)]
			req, _ := http.NewRequestWithContext(ctx, "GET", docURL(n, h.RegisterUser, registerColl, doc), nil)
			req.Header.Set("Authorization", "Bearer "+c.Token)
			req.Header.Set("X-Read-Concern", string(ReadLinearizable))
			resp, err := c.hc().Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			out, ok := decodeRead(resp.StatusCode, body)
			if !ok {
				return false, fmt.Sprintf("%s answered %d %s", n.ID, resp.StatusCode, body)
			}
			finals[doc] = FinalRead{Node: n.ID, Found: out.Found, Value: out.Value, Version: out.Version}
			return true, ""
		})
		if err != nil {
			return finals, err
		}
	}
	return finals, nil
}
