package torture

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoal-db/shoal/store"
)

// RegisterVerdict is porcupine's verdict on the registers' history.
type RegisterVerdict struct {
	Result porcupine.CheckResult
	// Docs is the verdict per document.
	Docs map[string]porcupine.CheckResult
	// Why explains an Illegal verdict: the faults, where each failing
	// document's linearization stops, and the anomalies found.
	Why string
	// Path is the visualization's, when one was written.
	Path             string
	Checked, Dropped int
	Took             time.Duration
}

// CheckRegisters runs porcupine on the writes and the reads of concern
// (writes of unknown outcome that no linearization needs left out, see
// reduce), and writes the visualization to dir/history-CONCERN.html unless
// dir is empty.
func (h *History) CheckRegisters(concern ReadConcern, timeout time.Duration, dir string) (RegisterVerdict, error) {
	start := time.Now()
	model := RegisterModel(h.Docs, h.TombstonesMayBePurged)
	ops, dropped := reduce(h.with(concern))
	v := RegisterVerdict{Checked: len(ops), Dropped: dropped, Docs: map[string]porcupine.CheckResult{}}
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	v.Result, v.Took = res, time.Since(start)
	info.AddAnnotations(h.marks)
	var err error
	if dir != "" {
		v.Path = filepath.Join(dir, fmt.Sprintf("history-%s.html", concern))
		if e := porcupine.VisualizePath(model, info, v.Path); e != nil {
			err = fmt.Errorf("writing porcupine's visualization: %w", e)
		}
	}
	partitions := model.Partition(ops)
	partials := info.PartialLinearizationsOperations()
	var why []string
	for p, doc := range h.Docs {
		v.Docs[doc] = res
		if res != porcupine.Illegal {
			continue
		}
		v.Docs[doc] = porcupine.Ok
		if line := blockingOp(model, doc, partitions[p], partials[p]); line != "" {
			v.Docs[doc] = porcupine.Illegal
			why = append(why, line)
		}
	}
	if res == porcupine.Illegal {
		why = append([]string{"faults:\n" + strings.Join(h.Notes, "\n")}, why...)
		why = append(why, anomalies(ops)...)
		v.Why = strings.Join(why, "\n")
	}
	return v, err
}

// RegisterModel is the register model, each of docs (in this order)
// checked as its own partition; purges says the run's nodes purge
// tombstones (History.TombstonesMayBePurged).
func RegisterModel(docs []string, purges bool) porcupine.Model { return registerModel(docs, purges) }

// AddFinalReads appends to the history a read of each register that
// began after every client stopped (the checker's own, after healing):
// porcupine must fit them too, so that a lost write shows.
func (h *History) AddFinalReads(finals map[string]FinalRead) {
	for _, doc := range h.Docs {
		if f, ok := finals[doc]; ok {
			h.ops = append(h.ops, f.op(doc, h.end))
		}
	}
	h.end += 2
}

// FinalRead is a linearizable read of a register after healing.
type FinalRead struct {
	Node    string
	Found   bool
	Value   string
	Version int64
}

// op is f as the history's operation, a read of doc called at call.
func (f FinalRead) op(doc string, call int64) porcupine.Operation {
	return porcupine.Operation{ClientId: -1, Input: regInput{Doc: doc, Kind: opRead, Concern: ReadLinearizable},
		Call: call, Output: regOutput{Outcome: resultDone, Found: f.Found, Value: f.Value, Version: f.Version}, Return: call + 1,
		Metadata: &opMeta{id: -1, client: -1, asked: f.Node, servedBy: f.Node, status: 200}}
}

// LostRegisterWrites lists the acknowledged majority writes that the final
// state of their register does not hold: a later version, or the same
// version with another value; or absent, when no delete (acknowledged or
// of unknown outcome) named that version or a later one. An acknowledged
// delete is lost when the register ends present at its version or an
// earlier one.
func (h *History) LostRegisterWrites(finals map[string]FinalRead) []string {
	deletes := possibleDeletesOf(h.ops)
	var lost []string
	for _, op := range h.ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind == opRead || out.Outcome != resultDone || op.ClientId < 0 {
			continue
		}
		f, ok := finals[in.Doc]
		ends := describeState(regState{Exists: f.Found, Value: f.Value, Version: f.Version})
		switch {
		case !ok:
			// Not read: the failed final read fails the run on its own.
		case in.Kind == opDelete:
			if f.Found && f.Version <= out.Version {
				lost = append(lost, fmt.Sprintf("%s [%s]: the register ends %s", describeOp(op.Input, op.Output), op.Metadata, ends))
			}
		case !f.Found && !deletes.since(in.Doc, out.Version, math.MaxInt64) || f.Found && f.Version < out.Version:
			lost = append(lost, fmt.Sprintf("%s [%s]: the register ends %s", describeOp(op.Input, op.Output), op.Metadata, ends))
		case f.Found && f.Version == out.Version && f.Value != in.Value:
			lost = append(lost, fmt.Sprintf("%s [%s]: the register ends at that version with %q", describeOp(op.Input, op.Output), op.Metadata, f.Value))
		}
	}
	return lost
}

// ReadYourWrites checks the local and majority reads that sent the token
// of their client's own last acknowledged write of the register
// (X-Consistency-Token): each must return that write (its version and
// value) or a later version, or the register absent when that write was a
// delete or a delete sent before the read returned named its version or a
// later one. It returns how many it checked and those that broke the
// guarantee.
func (h *History) ReadYourWrites() (checked int, broken []string) {
	deletes := possibleDeletesOf(h.ops)
	for _, op := range h.ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind != opRead || in.Since == 0 {
			continue
		}
		checked++
		own := fmt.Sprintf("its client's write of v%d", in.Since)
		if in.SinceDeleted {
			own = fmt.Sprintf("its client's delete (tombstone v%d)", in.Since)
		}
		switch {
		case out.Found && out.Version < in.Since,
			out.Found && out.Version == in.Since && !in.SinceDeleted && out.Value != in.SinceValue,
			!out.Found && !in.SinceDeleted && !deletes.since(in.Doc, in.Since, op.Return):
			broken = append(broken, fmt.Sprintf("%s [%s, %.3fs..%.3fs] sent the token of %s", describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), secs(op.Return), own))
		}
	}
	return checked, broken
}

// MajorityReads checks the majority reads that found their register:
// each must return a state no failover rolled back. Every value is
// written once, by one write, so a rolled-back state shows as:
//   - a value no write of the register made, or one a refused write
//     carried (never applied);
//   - a version another state that stayed holds: an acknowledged write's
//     (a delete's tombstone included), a linearizable read's, or the
//     final read's (the history a later master wrote over it);
//   - a version past the register's final one (rolled back, and no
//     write made that version again), or the register ending absent
//     with no delete of that version or a later one;
//   - a version other than the one its write was acknowledged at;
//   - a version at which another majority read found another value
//     (one of the two was rolled back: both are named).
//
// A majority read may be older than the newest acknowledged write; that
// is not checked. Absent answers are not checked here (nothing in them
// names a state); read-your-writes checks those sent with a token. It
// returns how many it checked and those that broke the guarantee.
func (h *History) MajorityReads(finals map[string]FinalRead) (checked int, broken []string) {
	deletes := possibleDeletesOf(h.ops)
	stayed := map[stateAt]porcupine.Operation{} // an observation of a state that stayed
	writes := map[string]porcupine.Operation{}  // value -> the write of it
	for _, op := range h.ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		switch {
		case in.Kind != opRead:
			if in.Kind != opDelete {
				writes[in.Value] = op
			}
			if out.Outcome == resultDone {
				stayed[stateAt{in.Doc, out.Version}] = op
			}
		case in.Concern == ReadLinearizable && out.Found:
			stayed[stateAt{in.Doc, out.Version}] = op
		}
	}
	for doc, f := range finals {
		if f.Found {
			stayed[stateAt{doc, f.Version}] = f.op(doc, h.end)
		}
	}
	firstRead := map[stateAt]porcupine.Operation{} // the first majority read found at each version
	for _, op := range h.ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind != opRead || in.Concern != ReadMajority || !out.Found {
			continue
		}
		checked++
		at := stateAt{in.Doc, out.Version}
		first, seen := firstRead[at]
		if !seen {
			firstRead[at] = op
		}
		why := rolledBack(op, writes[out.Value], stayed[at], first, finals[in.Doc], deletes)
		if why != "" {
			broken = append(broken, fmt.Sprintf("%s [%s, %.3fs..%.3fs]: %s", describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), secs(op.Return), why))
		}
	}
	return checked, broken
}

// stateAt is a register's version.
type stateAt struct {
	doc     string
	version int64
}

// rolledBack says why the majority read op returned a state a failover
// rolled back ("": nothing says so), from the write of the value it read
// (zero: none), what stayed at its version and the first majority read
// found there (zero: none), the register's final read (zero: not read)
// and the deletes that may have taken effect.
func rolledBack(op, write, stayed, first porcupine.Operation, final FinalRead, deletes possibleDeletes) string {
	in, out := op.Input.(regInput), op.Output.(regOutput)
	if write.Input == nil {
		return "no write made that value"
	}
	wi, wo := write.Input.(regInput), write.Output.(regOutput)
	switch {
	case wi.Doc != in.Doc:
		return "a write of another register made that value"
	case wo.Outcome == resultRefused:
		return fmt.Sprintf("only a refused write carried that value: %s [%s]", describeOp(write.Input, write.Output), write.Metadata)
	case wo.Outcome == resultDone && wo.Version != out.Version:
		return fmt.Sprintf("its write was acknowledged at another version: %s [%s]", describeOp(write.Input, write.Output), write.Metadata)
	case stayed.Input != nil && stateOf(stayed) != (regState{Exists: true, Value: out.Value, Version: out.Version}):
		return fmt.Sprintf("the state that stayed at that version is %s: %s [%s]", describeState(stateOf(stayed)), describeOp(stayed.Input, stayed.Output), stayed.Metadata)
	case final.Node != "" && final.Found && final.Version < out.Version:
		return fmt.Sprintf("the register ends at v%d", final.Version)
	case final.Node != "" && !final.Found && !deletes.since(in.Doc, out.Version, math.MaxInt64):
		return "the register ends absent, and no delete named that version or a later one"
	case first.Input != nil && first.Output.(regOutput).Value != out.Value:
		return fmt.Sprintf("another majority read found %q at that version: %s [%s, %.3fs..%.3fs]", first.Output.(regOutput).Value,
			describeOp(first.Input, first.Output), first.Metadata, secs(first.Call), secs(first.Return))
	}
	return ""
}

// stateOf is the state an acknowledged write made, or a read found.
func stateOf(op porcupine.Operation) regState {
	in, out := op.Input.(regInput), op.Output.(regOutput)
	switch in.Kind {
	case opRead:
		return regState{Exists: out.Found, Value: out.Value, Version: out.Version}
	case opDelete:
		return regState{Version: out.Version}
	}
	return regState{Exists: true, Value: in.Value, Version: out.Version}
}

// ListResult is the list checker's count.
type ListResult struct {
	Acked, Unknown int
	// Lost are acknowledged elements that are not there, and those whose
	// delete found nothing to delete (a 404).
	Lost []ListElem
	// Deleted counts acknowledged deletes of acknowledged elements, and
	// DeleteUnknown deletes of unknown outcome (either state is right).
	Deleted, DeleteUnknown int
	// Resurrected are elements whose delete was acknowledged but that are
	// there after healing.
	Resurrected []ListElem
	// UnknownPresent counts elements of unknown outcome that took effect.
	UnknownPresent int
	// Unread counts acknowledged elements that could not be looked for.
	Unread int
}

// checkContent counts the list elements and w=1 writes against what each
// master holds after healing (copies: every copy of every document, as
// read on the healed cluster) and the keys listed in some node's rollback
// collection. With no copy read (the copies never converged, so their
// content was never compared) nothing is known to be missing: every
// acknowledged element and write counts as unread, not lost (the fault
// suite's seed 9423 reported all 6,886 elements of a run lost).
func (h *History) checkContent(copies []KeyCopies, rolledBack map[string]bool) (ListResult, W1Result) {
	present := map[string]map[string]bool{} // user -> ids (lists)
	w1 := map[string]bool{}                 // user/id
	for _, k := range copies {
		for _, c := range k.Copies {
			if c.Node != k.Master || !c.Found {
				continue
			}
			user, coll, id := splitKey(k.Key)
			switch coll {
			case listColl:
				if present[user] == nil {
					present[user] = map[string]bool{}
				}
				present[user][id] = true
			case w1Coll:
				w1[user+"/"+id] = true
			}
		}
	}
	lists, writes := h.CheckLists(present), h.CheckW1(w1, rolledBack)
	if copies == nil {
		// A delete's 404 is a loss whatever the copies hold.
		var lost []ListElem
		for _, e := range lists.Lost {
			if e.Delete == DeleteAbsent {
				lost = append(lost, e)
			}
		}
		lists.Unread, lists.Lost = len(lists.Lost)-len(lost), lost
		writes.Unread, writes.Missing = len(writes.Missing), nil
	}
	return lists, writes
}

// CheckLists compares the appended elements with present (user -> ids
// found after healing): an acknowledged element is there unless deleted,
// and one whose delete was acknowledged is not (the master's copy; the
// others are compared with it by Diverged).
func (h *History) CheckLists(present map[string]map[string]bool) ListResult {
	var r ListResult
	for _, e := range h.List {
		there := present[e.User][e.ID]
		switch {
		case e.Acked && e.Delete == DeleteDone:
			r.Acked++
			r.Deleted++
			if there {
				r.Resurrected = append(r.Resurrected, e)
			}
		case e.Acked && e.Delete == DeleteUnknown:
			r.Acked++
			r.DeleteUnknown++
		case e.Acked:
			r.Acked++
			if !there || e.Delete == DeleteAbsent {
				r.Lost = append(r.Lost, e)
			}
		default:
			r.Unknown++
			if there {
				r.UnknownPresent++
			}
		}
	}
	return r
}

// W1Result is the w=1 checker's count.
type W1Result struct {
	Acked, Unknown int
	// RolledBack counts acknowledged writes found only in a rollback
	// collection.
	RolledBack int
	// Missing are acknowledged writes neither present nor rolled back:
	// silently lost.
	Missing []W1Write
	// Unread counts acknowledged writes that could not be looked for.
	Unread int
}

// CheckW1 compares the acknowledged w=1 writes with the keys present after
// healing and those listed in some node's rollback collection (both keyed
// user/id).
func (h *History) CheckW1(present, rolledBack map[string]bool) W1Result {
	var r W1Result
	for _, w := range h.W1 {
		if !w.Acked {
			r.Unknown++
			continue
		}
		r.Acked++
		k := w.User + "/" + w.ID
		switch {
		case present[k]:
		case rolledBack[k]:
			r.RolledBack++
		default:
			r.Missing = append(r.Missing, w)
		}
	}
	return r
}

// PartitionCopies is, for one partition, the master's position and each
// responsible node's (as its own placement says).
type PartitionCopies struct {
	Partition int
	Master    string
	Positions map[string]store.Position
}

// Copy is one node's copy of a document (a local read).
type Copy struct {
	Node    string
	Found   bool
	Version int64
	Value   string
}

// KeyCopies is every responsible node's copy of one document.
type KeyCopies struct {
	Key    string // user/collection/id
	Master string
	Copies []Copy
}

// Diverged lists the partitions whose copies are not at their master's
// position and the documents whose copies differ from the master's.
func Diverged(parts []PartitionCopies, keys []KeyCopies) []string {
	var out []string
	for _, p := range parts {
		mp, ok := p.Positions[p.Master]
		if !ok {
			out = append(out, fmt.Sprintf("partition %d: no position from its master %s", p.Partition, p.Master))
			continue
		}
		var ids []string
		for id := range p.Positions {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if pos := p.Positions[id]; pos.Compare(mp) != 0 {
				out = append(out, fmt.Sprintf("partition %d: %s is at %s, its master %s at %s", p.Partition, id, pos, p.Master, mp))
			}
		}
	}
	for _, k := range keys {
		var m *Copy
		for i := range k.Copies {
			if k.Copies[i].Node == k.Master {
				m = &k.Copies[i]
			}
		}
		if m == nil {
			out = append(out, fmt.Sprintf("%s: no copy from its master %s", k.Key, k.Master))
			continue
		}
		for _, c := range k.Copies {
			if c != (Copy{Node: c.Node, Found: m.Found, Version: m.Version, Value: m.Value}) {
				out = append(out, fmt.Sprintf("%s: %s holds %s, its master %s %s", k.Key, c.Node, copyState(c), m.Node, copyState(*m)))
			}
		}
	}
	return out
}

func copyState(c Copy) string {
	return describeState(regState{Exists: c.Found, Value: c.Value, Version: c.Version})
}

// Fault is one fault the nemesis injected.
type Fault struct {
	Kind   string
	Target string
	// Start is when it was injected, Healed when it ended (restart or
	// SIGCONT sent), Recovered when the cluster was whole again, all on
	// the workload's clock.
	Start, Healed, Recovered time.Duration
}

// Outage is the longest time one client's writes failed, from its first
// failed attempt to the answer of its next acknowledged one.
type Outage struct {
	Client      string
	From, Until time.Duration
	// Recovered is false when no write of the client succeeded again
	// before it stopped.
	Recovered bool

	failed time.Duration // when its first failed write was answered
}

func (o Outage) Length() time.Duration { return o.Until - o.From }

// Outages is Unavailability of the history's writes: an outage still
// going on when the workload stopped ends there (not when the checks
// read the history).
func (h *History) Outages(faults []Fault) map[string]Outage {
	return Unavailability(h.Attempts, faults, time.Duration(h.end))
}

// Unavailability is, per fault kind, the longest outage of any client
// that began during a fault of that kind (from its start to the next
// fault's): it began when its first failed write was answered, as a write
// sent just before a fault is failed by it. One that began before the
// first fault and outlasted its start counts for the first fault.
// Outages over before the first fault are under "none".
func Unavailability(attempts []Attempt, faults []Fault, end time.Duration) map[string]Outage {
	by := map[string][]Attempt{}
	for _, a := range attempts {
		by[a.Client] = append(by[a.Client], a)
	}
	kindAt := func(t time.Duration) string {
		k := "none"
		for _, f := range faults {
			if f.Start <= t {
				k = f.Kind
			}
		}
		return k
	}
	worst := map[string]Outage{}
	note := func(o Outage) {
		k := kindAt(o.failed)
		if k == "none" && len(faults) > 0 && o.Until > faults[0].Start {
			k = faults[0].Kind
		}
		if w, ok := worst[k]; !ok || o.Length() > w.Length() || !o.Recovered && w.Recovered {
			worst[k] = o
		}
	}
	for c, as := range by {
		sort.Slice(as, func(i, j int) bool { return as[i].Call < as[j].Call })
		failing := false
		var from, failed time.Duration
		for _, a := range as {
			switch {
			case !a.OK && !failing:
				failing, from, failed = true, a.Call, a.Ret
			case a.OK && failing:
				failing = false
				note(Outage{Client: c, From: from, Until: a.Ret, Recovered: true, failed: failed})
			}
		}
		if failing {
			note(Outage{Client: c, From: from, Until: end, failed: failed})
		}
	}
	return worst
}
