package torture

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The register model. A document is a register: absent, or a value at a
// version; a put writes the next version, a compare-and-set only when
// its If-Match names the current version, a compare-and-delete (DELETE
// with If-Match) makes it absent at the next version on the same
// condition (404 when it is absent), and a read returns the value and
// version or 404. Versions go on through a delete (its tombstone holds
// the next one). In a run whose nodes purge tombstones
// (any TOMBSTONE_RETENTION set), a put on an absent register
// may make it at any higher version: a node starts a key it holds no
// state of at the sequence number of the write's position once it has
// purged tombstones (store.firstVersion), above every version the key had.

type opKind int

const (
	opPut opKind = iota
	opCAS
	opRead
	opDelete // compare-and-delete
)

type ReadConcern string

const (
	ReadLinearizable ReadConcern = "linearizable"
	ReadLocal        ReadConcern = "local"
	ReadMajority     ReadConcern = "majority"
)

type outcome int

const (
	resultDone    outcome = iota // 2xx (or a read's 404)
	resultRefused                // 412: the compare-and-set or -delete did not match
	resultUnknown                // timed out, 503, 504, connection lost: may or may not have been applied
	resultAbsent                 // a delete's 404: there was nothing to delete
)

type regInput struct {
	Doc     string
	Kind    opKind
	Value   string      // put, cas
	Expect  int64       // cas, delete: the If-Match version
	Concern ReadConcern // read
	Query   bool        // read: taken from a query page of the registers' collection
	// Since (a local or majority read) is the version of the client's own last
	// acknowledged write of the register, whose X-Consistency-Token the
	// read sent (0: none), SinceValue its value; SinceDeleted says that
	// write was a delete.
	Since        int64
	SinceValue   string
	SinceDeleted bool
}

type regOutput struct {
	Outcome outcome
	Found   bool   // read
	Value   string // read
	Version int64  // read; put, cas and delete when done (a delete's: its tombstone's, Expect+1)
}

type regState struct {
	Exists  bool
	Value   string
	Version int64
	// AtLeast says Version is a lower bound: a write of unknown outcome
	// made the register again, in a run that purges tombstones, at a
	// version no answer told. The next operation that names a version
	// fixes it.
	AtLeast bool
}

// is reports whether the register can be at version v.
func (s regState) is(v int64) bool {
	return s.Version == v || s.AtLeast && v >= s.Version
}

// opMeta is an operation's details for the log and the visualization.
type opMeta struct {
	id       int
	client   int
	asked    string // the node the request went to
	servedBy string
	status   int
	err      string
}

func (m *opMeta) String() string {
	s := fmt.Sprintf("op %d, client %d, via %s", m.id, m.client, m.asked)
	if m.servedBy != "" {
		s += ", served by " + m.servedBy
	}
	if m.status != 0 {
		s += fmt.Sprintf(", status %d", m.status)
	}
	if m.err != "" {
		s += ", " + m.err
	}
	return s
}

// stepRegister is the model's step; purges says the run purges
// tombstones (a put on an absent register may make it at any higher
// version).
func stepRegister(purges bool) func(st, in, out any) (bool, any) {
	return func(st, in, out any) (bool, any) {
		s, i, o := st.(regState), in.(regInput), out.(regOutput)
		switch i.Kind {
		case opRead:
			if !o.Found {
				return !s.Exists, s
			}
			return s.Exists && s.Value == o.Value && s.is(o.Version), regState{Exists: true, Value: o.Value, Version: o.Version}
		case opPut:
			next := regState{Exists: true, Value: i.Value, Version: s.Version + 1, AtLeast: s.AtLeast || purges && !s.Exists}
			switch {
			case o.Outcome == resultUnknown:
				return true, next
			case next.AtLeast:
				next.Version, next.AtLeast = o.Version, false
				return o.Version >= s.Version+1, next
			}
			return o.Version == next.Version, next
		default: // opCAS, opDelete: on the condition of If-Match
			match := s.Exists && s.is(i.Expect)
			// A delete's next state is absent at the next version (its Value
			// is empty).
			next := regState{Exists: i.Kind == opCAS, Value: i.Value, Version: i.Expect + 1}
			switch o.Outcome {
			case resultAbsent: // a delete's 404, answered before If-Match is compared
				return i.Kind == opDelete && !s.Exists, s
			case resultRefused:
				// At a version only bounded, a refusal may be right whatever
				// it named.
				mismatch := !match || s.AtLeast
				if i.Kind == opDelete {
					return s.Exists && mismatch, s
				}
				return mismatch, s
			case resultDone:
				return match && o.Version == next.Version, next
			default:
				if match {
					return true, next
				}
				return true, s
			}
		}
	}
}

func describeOp(in, out any) string {
	i, o := in.(regInput), out.(regOutput)
	var res string
	switch o.Outcome {
	case resultUnknown:
		res = "unknown"
	case resultRefused:
		res = "412"
	case resultAbsent:
		res = "404"
	default:
		res = "v" + strconv.FormatInt(o.Version, 10)
	}
	switch i.Kind {
	case opPut:
		return fmt.Sprintf("put(%s, %q) -> %s", i.Doc, i.Value, res)
	case opCAS:
		return fmt.Sprintf("cas(%s, if v%d, %q) -> %s", i.Doc, i.Expect, i.Value, res)
	case opDelete:
		return fmt.Sprintf("delete(%s, if v%d) -> %s", i.Doc, i.Expect, res)
	}
	read := "read"
	if i.Query {
		read = "query"
	}
	if !o.Found {
		return fmt.Sprintf("%s-%s(%s) -> absent", read, i.Concern, i.Doc)
	}
	return fmt.Sprintf("%s-%s(%s) -> %q v%d", read, i.Concern, i.Doc, o.Value, o.Version)
}

func describeState(st any) string {
	s := st.(regState)
	if !s.Exists && s.Version > 0 {
		return fmt.Sprintf("deleted at v%d", s.Version)
	}
	if !s.Exists {
		return "absent"
	}
	if s.AtLeast {
		return fmt.Sprintf("%q at v%d or later", s.Value, s.Version)
	}
	return fmt.Sprintf("%q v%d", s.Value, s.Version)
}

// registerModel checks each of docs (in this order) as its own partition;
// purges says the run purges tombstones.
func registerModel(docs []string, purges bool) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			for _, op := range h {
				d := op.Input.(regInput).Doc
				by[d] = append(by[d], op)
			}
			var out [][]porcupine.Operation
			for _, d := range docs {
				out = append(out, by[d])
			}
			return out
		},
		Init:                      func() any { return regState{} },
		Step:                      stepRegister(purges),
		DescribeOperation:         describeOp,
		DescribeState:             describeState,
		DescribeOperationMetadata: func(m any) string { return m.(*opMeta).String() },
	}
}

// blockingOp says where porcupine's longest linearization of doc's history
// stops: the state reached and the operation that cannot follow it.
func blockingOp(model porcupine.Model, doc string, ops []porcupine.Operation, partials [][]porcupine.Operation) string {
	var longest []porcupine.Operation
	for _, l := range partials {
		if len(l) > len(longest) {
			longest = l
		}
	}
	if len(longest) == len(ops) {
		return "" // this document's history is linearizable
	}
	in := map[int]bool{}
	var st any = regState{}
	for _, op := range longest {
		in[op.Metadata.(*opMeta).id] = true
		_, st = model.Step(st, op.Input, op.Output)
	}
	var rest []porcupine.Operation
	for _, op := range ops {
		if !in[op.Metadata.(*opMeta).id] {
			rest = append(rest, op)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Return < rest[j].Return })
	first := rest[0]
	var tail []string
	for _, op := range longest[max(0, len(longest)-5):] {
		tail = append(tail, fmt.Sprintf("    %s [%s, %.3fs..%.3fs]", describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), secs(op.Return)))
	}
	return fmt.Sprintf("document %s: porcupine linearizes at most %d of its %d operations; the longest ends with\n%s\n  in state %s, and cannot place next\n    %s [%s, %.3fs..%.3fs]",
		doc, len(longest), len(ops), strings.Join(tail, "\n"), describeState(st), describeOp(first.Input, first.Output), first.Metadata, secs(first.Call), secs(first.Return))
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// possibleDeletes are the deletes of a history that may have taken effect
// (acknowledged, or of unknown outcome), by register.
type possibleDeletes map[string][]porcupine.Operation

func possibleDeletesOf(ops []porcupine.Operation) possibleDeletes {
	d := possibleDeletes{}
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind == opDelete && (out.Outcome == resultDone || out.Outcome == resultUnknown) {
			d[in.Doc] = append(d[in.Doc], op)
		}
	}
	return d
}

// since reports whether a delete of doc sent before until named version
// v or a later one: it may have removed the state of version v, or of a
// later one, by then.
func (d possibleDeletes) since(doc string, v, until int64) bool {
	for _, op := range d[doc] {
		if op.Input.(regInput).Expect >= v && op.Call < until {
			return true
		}
	}
	return false
}

// anomalies names, in the register's terms, reads and writes that no
// linearization can explain: a read older than a write acknowledged
// before it began, a read of a state another acknowledged write
// contradicts (rolled back), and two acknowledged writes at one version.
// Deletes are writes of an absent state at a version.
func anomalies(ops []porcupine.Operation) []string {
	const most = 8
	type write struct {
		op      porcupine.Operation
		version int64
	}
	acked := map[string][]write{}               // doc -> writes done, deletes included
	byValue := map[string]porcupine.Operation{} // value -> the write of it
	deletes := possibleDeletesOf(ops)
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind == opRead {
			continue
		}
		if in.Kind != opDelete {
			byValue[in.Value] = op
		}
		if out.Outcome == resultDone {
			acked[in.Doc] = append(acked[in.Doc], write{op, out.Version})
		}
	}
	var stale, rolledBack, twice, dirtyRefusal []string
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if (in.Kind == opCAS || in.Kind == opDelete) && out.Outcome == resultRefused {
			// Its If-Match came from a read that returned in.Expect before
			// it began, so the version was past in.Expect when it was
			// refused: a later read of in.Expect, or a later write made
			// version in.Expect+1, went back in time.
			for _, r := range ops {
				ri, ro := r.Input.(regInput), r.Output.(regOutput)
				later := ri.Doc == in.Doc && ro.Outcome == resultDone && r.Call > op.Return
				if later && (ri.Kind == opRead && ro.Found && ro.Version == in.Expect || ri.Kind != opRead && ro.Version == in.Expect+1) {
					dirtyRefusal = append(dirtyRefusal, fmt.Sprintf("  %s [%s, %.3fs..%.3fs], yet later %s [%s, %.3fs..%.3fs]",
						describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), secs(op.Return), describeOp(r.Input, r.Output), r.Metadata, secs(r.Call), secs(r.Return)))
					break
				}
			}
		}
		if in.Kind != opRead {
			continue
		}
		for _, w := range acked[in.Doc] {
			if w.op.Return >= op.Call {
				continue
			}
			gone := w.op.Input.(regInput).Kind == opDelete || deletes.since(in.Doc, w.version, op.Return)
			if out.Found && w.version > out.Version || !out.Found && !gone {
				stale = append(stale, fmt.Sprintf("  %s [%s, %.3fs..%.3fs] began after %s [%s] was acknowledged at %.3fs",
					describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), secs(op.Return), describeOp(w.op.Input, w.op.Output), w.op.Metadata, secs(w.op.Return)))
				break
			}
		}
		if !out.Found {
			continue
		}
		for _, w := range acked[in.Doc] {
			if w.version == out.Version && w.op.Input.(regInput).Value != out.Value {
				src, ok := byValue[out.Value]
				if !ok { // a value no client wrote
					rolledBack = append(rolledBack, fmt.Sprintf("  %s [%s, %.3fs] read a value no write wrote, but version %d is %s [%s]",
						describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), out.Version, describeOp(w.op.Input, w.op.Output), w.op.Metadata))
					break
				}
				rolledBack = append(rolledBack, fmt.Sprintf("  %s [%s, %.3fs] read the write %s [%s], but version %d is %s [%s]: the state read was rolled back",
					describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), describeOp(src.Input, src.Output), src.Metadata, out.Version, describeOp(w.op.Input, w.op.Output), w.op.Metadata))
				break
			}
		}
	}
	for doc, ws := range acked {
		seen := map[int64]write{}
		for _, w := range ws {
			if o, ok := seen[w.version]; ok {
				twice = append(twice, fmt.Sprintf("  %s: %s [%s] and %s [%s] were both acknowledged at version %d",
					doc, describeOp(o.op.Input, o.op.Output), o.op.Metadata, describeOp(w.op.Input, w.op.Output), w.op.Metadata, w.version))
			}
			seen[w.version] = w
		}
	}
	var out []string
	for _, k := range []struct {
		what  string
		lines []string
	}{{"stale reads (older than an acknowledged write that returned before the read began)", stale},
		{"reads of rolled-back states", rolledBack}, {"acknowledged writes sharing a version", twice},
		{"compare-and-sets or -deletes refused (412) on a version a later read still returned, or that a later write followed: the refusal compared against a state that did not last", dirtyRefusal}} {
		if len(k.lines) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s, e.g.:", len(k.lines), k.what))
		out = append(out, k.lines[:min(most, len(k.lines))]...)
	}
	return out
}

// reduce drops from a history the writes of unknown outcome that no
// linearization needs, which porcupine would otherwise try in every order
// (unknown writes are interchangeable version bumpers to it, and a few
// dozen of them make the search explode). A document's unknown write W
// goes when
//   - no operation observed its value (no read returned it), and
//   - it was invoked after every gap in the observed versions was closed:
//     let Mv be the highest version a read or an acknowledged write
//     observed, g the highest version below Mv that no operation observed
//     (if any); W was invoked after some operation observing a version
//     above g returned; and
//   - no refused compare-and-set or compare-and-delete, and no delete of
//     unknown outcome, names a version >= Mv; and
//   - Mv is not a tombstone's (an acknowledged delete's) while a
//     compare-and-delete was refused (412): a refusal needs the register
//     there, which, after a tombstone at Mv, only W can have made again.
//
// Unknown deletes are never left out. An acknowledged delete observes the
// version of its tombstone (its If-Match plus one), a 404 no version. (A
// delete's If-Match comes from a linearizable read, which the history
// of local reads leaves out: its version may be above Mv there.)
// Then H is linearizable iff H without W is: W's return is at the end of
// the history, so a linearization without it takes W last. Conversely, in
// a linearization of H where W takes effect, at version v: if v <= Mv, v
// is observed (by an operation that must come after W and would see W's
// value) or a gap (but W would have been invoked after an operation that
// observed a later version returned): neither can be; so v > Mv, and after
// W come only refused compare-and-sets and -deletes (each names a version
// below Mv, which the state without W still differs from; a refused
// delete also needs the register there, as the state without W is unless
// it is a tombstone at Mv) and unknown writes, which can go last. No delete can take effect after W: it would name
// W's version or a later one, above Mv (an acknowledged delete observes
// its tombstone's version, at most Mv; an unknown one naming Mv or above
// keeps every write), so no 404 comes after W either. So the rest is a
// linearization without W. The argument needs only that versions grow
// along a linearization, so it holds in runs that purge tombstones too,
// where a register made again skips versions: those are gaps, and the
// unknown writes invoked before the put that skipped them returned stay.
func reduce(ops []porcupine.Operation) ([]porcupine.Operation, int) {
	type docInfo struct {
		name     string
		observed map[int64]bool  // versions some operation observed
		values   map[string]bool // values some operation observed
		mv       int64
		keepAll  bool
		closedAt int64 // when the last gap below mv was closed
	}
	docs := map[string]*docInfo{}
	get := func(d string) *docInfo {
		if docs[d] == nil {
			docs[d] = &docInfo{name: d, observed: map[int64]bool{}, values: map[string]bool{}}
		}
		return docs[d]
	}
	observes := func(op porcupine.Operation) (int64, string, bool) {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		switch {
		case in.Kind == opRead && out.Found:
			return out.Version, out.Value, true
		case in.Kind != opRead && out.Outcome == resultDone:
			return out.Version, in.Value, true
		}
		return 0, "", false
	}
	for _, op := range ops {
		if v, val, ok := observes(op); ok {
			d := get(op.Input.(regInput).Doc)
			d.observed[v], d.values[val] = true, true
			d.mv = max(d.mv, v)
		}
	}
	tombAtMv, refusedDelete := map[string]bool{}, map[string]bool{}
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		d := get(in.Doc)
		refused := (in.Kind == opCAS || in.Kind == opDelete) && out.Outcome == resultRefused
		if (refused || in.Kind == opDelete && out.Outcome == resultUnknown) && in.Expect >= d.mv {
			d.keepAll = true
		}
		if in.Kind == opDelete && out.Outcome == resultDone && out.Version == d.mv {
			tombAtMv[in.Doc] = true
		}
		if in.Kind == opDelete && refused {
			refusedDelete[in.Doc] = true
		}
	}
	for doc, d := range docs {
		if tombAtMv[doc] && refusedDelete[doc] {
			d.keepAll = true
		}
	}
	for _, d := range docs {
		var gap int64
		for v := d.mv - 1; v >= 1; v-- {
			if !d.observed[v] {
				gap = v
				break
			}
		}
		d.closedAt = -1
		if gap > 0 {
			d.closedAt = int64(^uint64(0) >> 1)
			for _, op := range ops {
				if v, _, ok := observes(op); ok && op.Input.(regInput).Doc == d.name && v > gap {
					d.closedAt = min(d.closedAt, op.Return)
				}
			}
		}
	}
	var out []porcupine.Operation
	dropped := 0
	for _, op := range ops {
		in, o := op.Input.(regInput), op.Output.(regOutput)
		if d := docs[in.Doc]; (in.Kind == opPut || in.Kind == opCAS) && o.Outcome == resultUnknown && !d.keepAll && !d.values[in.Value] && op.Call > d.closedAt {
			dropped++
			continue
		}
		out = append(out, op)
	}
	return out, dropped
}
