package torture

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Report is a run's outcome.
type Report struct {
	Seed              uint64
	Nodes             int
	ReplicationFactor int
	Network           string   // NetLoopback or NetNetns
	Store             string   // "embedded" or "mongo"
	Kinds             []string // the fault kinds the run was to inject
	Planned           []Step
	Executed          []Fault
	Faults            map[string]int // executed, by kind
	Ops               map[string]int // by outcome
	History           *History

	Registers    RegisterVerdict
	LostRegister []string
	// ReadYourWrites: local and majority reads sent with their client's
	// own last write's token, checked, and those that returned an older
	// state.
	ReadYourWrites struct {
		Checked int
		Broken  []string
	}
	// MajorityReads: majority reads that found their register, checked,
	// and those that returned a state a failover rolled back.
	MajorityReads struct {
		Checked int
		Broken  []string
	}
	Lists          ListResult
	Purge          PurgeResult
	W1             W1Result
	RolledBackDocs int // document states in the rollback collections
	Convergence    time.Duration
	Compared       int // documents whose copies were compared
	Diverged       []string
	Availability   map[string]Outage
	Writers        WritersResult // one writer per partition, from the nodes' commit logs
	// Problems are failures that are not a checker's verdict (the cluster
	// did not heal, a check could not be made).
	Problems []string

	Dir  string
	Kept bool
}

// PurgeResult is what the nodes say they purged: their counters at the
// end of the run, since each node's last start (a kill resets them), so
// a lower bound.
type PurgeResult struct {
	Retention  time.Duration // the nodes' TOMBSTONE_RETENTION; 0: their default (24h)
	Read       int           // nodes whose /metrics were read
	Tombstones int           // shoal_tombstones_purged_total, summed
	FullCopies int           // shoal_replication_full_copies_total, summed: behind a purge, or of a new store
}

func (p PurgeResult) row() string {
	retention := p.Retention.String()
	if p.Retention == 0 {
		retention = "the nodes' default (24h)"
	}
	return fmt.Sprintf("TOMBSTONE_RETENTION %s: %d tombstones purged, %d full copies started (of a copy behind a purge or a new store; summed over %d nodes, since each one's last start)", retention, p.Tombstones, p.FullCopies, p.Read)
}

// LongestOutage is the longest write outage of the run, whatever the
// fault (the zero Outage if writes never failed).
func (r *Report) LongestOutage() Outage {
	var longest Outage
	for _, o := range r.Availability {
		if o.Length() > longest.Length() {
			longest = o
		}
	}
	return longest
}

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Failures lists every checker that failed, with what it found.
func (r *Report) Failures() []string {
	var out []string
	out = append(out, r.Problems...)
	if r.Registers.Result == porcupine.Illegal {
		out = append(out, "the registers' history with linearizable reads is not linearizable:\n"+r.Registers.Why)
	}
	if r.History != nil && r.Registers.Result == porcupine.Unknown {
		out = append(out, "porcupine could not decide whether the registers' history is linearizable in its time limit: "+r.Registers.Why)
	}
	if r.History != nil && r.Registers.Result == porcupine.Ok && r.Registers.Checked == 0 {
		out = append(out, "no register operation to check")
	}
	if len(r.LostRegister) > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged majority register writes lost:\n  %s", len(r.LostRegister), strings.Join(first(r.LostRegister, 10), "\n  ")))
	}
	if b := r.ReadYourWrites.Broken; len(b) > 0 {
		out = append(out, fmt.Sprintf("%d reads sent with their client's token returned a state older than its write:\n  %s", len(b), strings.Join(first(b, 10), "\n  ")))
	}
	if b := r.MajorityReads.Broken; len(b) > 0 {
		out = append(out, fmt.Sprintf("%d majority reads returned a state a failover rolled back:\n  %s", len(b), strings.Join(first(b, 10), "\n  ")))
	}
	if len(r.Lists.Lost) > 0 {
		var l []string
		for _, e := range r.Lists.Lost {
			why := ""
			if e.Delete == DeleteAbsent {
				why = fmt.Sprintf("; its delete at %.3fs found nothing", e.DeleteCall.Seconds())
			}
			l = append(l, fmt.Sprintf("%s/%s (sent at %.3fs%s)", e.User, e.ID, e.Call.Seconds(), why))
		}
		out = append(out, fmt.Sprintf("%d acknowledged majority list elements lost: %s", len(l), strings.Join(first(l, 20), ", ")))
	}
	if len(r.Lists.Resurrected) > 0 {
		var l []string
		for _, e := range r.Lists.Resurrected {
			l = append(l, fmt.Sprintf("%s/%s (sent at %.3fs, deleted at %.3fs)", e.User, e.ID, e.Call.Seconds(), e.DeleteCall.Seconds()))
		}
		out = append(out, fmt.Sprintf("%d list elements whose majority delete was acknowledged are back: %s", len(l), strings.Join(first(l, 20), ", ")))
	}
	if len(r.W1.Missing) > 0 {
		var l []string
		for _, w := range r.W1.Missing {
			l = append(l, fmt.Sprintf("%s/%s (via %s, served by %s, at %.3fs)", w.User, w.ID, w.Via, w.ServedBy, w.Call.Seconds()))
		}
		out = append(out, fmt.Sprintf("%d acknowledged w=1 writes neither present nor in a rollback collection: %s", len(l), strings.Join(first(l, 20), ", ")))
	}
	if f := r.Writers.Failure(); f != "" {
		out = append(out, f)
	}
	if len(r.Diverged) > 0 {
		out = append(out, fmt.Sprintf("replicas did not converge:\n  %s", strings.Join(first(r.Diverged, 10), "\n  ")))
	}
	return out
}

// Failed reports whether any checker failed.
func (r *Report) Failed() bool { return len(r.Failures()) > 0 }

func first(l []string, n int) []string {
	if len(l) > n {
		return append(l[:n:n], fmt.Sprintf("... and %d more", len(l)-n))
	}
	return l
}

// Table is the report as a table, then the failures and where the
// evidence is.
func (r *Report) Table() string {
	var b strings.Builder
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "%-34s %s\n", k, fmt.Sprintf(format, args...)) }
	row("seed", "%d (%d nodes, REPLICATION_FACTOR %d, %s network, %s store)", r.Seed, r.Nodes, r.ReplicationFactor, r.Network, r.Store)
	var faults []string
	kinds := r.Kinds
	if kinds == nil {
		kinds = KindsFor(r.Network)
	}
	for _, k := range kinds {
		if _, ok := r.Faults[k]; ok || len(r.Planned) > 0 {
			faults = append(faults, fmt.Sprintf("%s %d", k, r.Faults[k]))
		}
	}
	for _, k := range sortedKeys(r.Faults) {
		if !slices.Contains(kinds, k) {
			faults = append(faults, fmt.Sprintf("%s %d", k, r.Faults[k]))
		}
	}
	row("faults", "%s (%d planned)", strings.Join(faults, ", "), len(r.Planned))
	var ops []string
	for k, n := range r.Ops {
		ops = append(ops, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(ops)
	row("operations", "%s", strings.Join(ops, ", "))
	row("lost majority register writes", "%d", len(r.LostRegister))
	row("read-your-writes (tokens)", "%d local and majority reads checked, %d returned an older state", r.ReadYourWrites.Checked, len(r.ReadYourWrites.Broken))
	row("majority reads never rolled back", "%d that found their register checked (query pages' included), %d returned a rolled-back state", r.MajorityReads.Checked, len(r.MajorityReads.Broken))
	row("lost majority list elements", "%d of %d acknowledged (%d of unknown outcome, %d of them present)%s", len(r.Lists.Lost), r.Lists.Acked, r.Lists.Unknown, r.Lists.UnknownPresent, unread(r.Lists.Unread))
	row("deleted list elements back", "%d of %d deleted (%d deletes of unknown outcome)%s; %s", len(r.Lists.Resurrected), r.Lists.Deleted, r.Lists.DeleteUnknown, unread(r.Lists.Unread), r.Purge.row())
	row("w=1 writes", "%d acknowledged, %d rolled back, %d silently lost (%d of unknown outcome)%s", r.W1.Acked, r.W1.RolledBack, len(r.W1.Missing), r.W1.Unknown, unread(r.W1.Unread))
	row("rolled back (all collections)", "%d document states", r.RolledBackDocs)
	var docs []string
	for _, d := range sortedKeys(r.Registers.Docs) {
		docs = append(docs, d+" "+verdict(r.Registers.Docs[d]))
	}
	row("linearizable (porcupine)", "%s: %s", verdict(r.Registers.Result), strings.Join(docs, ", "))
	row("", "%d operations checked, %d unknown writes left out, in %s", r.Registers.Checked, r.Registers.Dropped, r.Registers.Took.Round(time.Millisecond))
	conv := "yes"
	if len(r.Diverged) > 0 {
		conv = fmt.Sprintf("NO (%d differences)", len(r.Diverged))
	}
	row("converged", "%s: every copy at its master's position %s after healing; %d documents compared, whole", conv, r.Convergence.Round(time.Millisecond), r.Compared)
	row("one writer per partition", "%s", r.Writers.Row())
	kinds = []string{"none"}
	for _, k := range sortedKeys(r.Availability) {
		if k != "none" {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		o, ok := r.Availability[k]
		if !ok {
			continue
		}
		rec := ""
		if !o.Recovered {
			rec = ", not recovered before the end"
		}
		label := k
		if k == "none" {
			label = "before any fault"
		}
		row("longest write outage: "+label, "%s (%s, from %.3fs%s)", o.Length().Round(time.Millisecond), o.Client, o.From.Seconds(), rec)
	}
	f := r.Failures()
	if len(f) == 0 {
		row("result", "PASS")
	} else {
		row("result", "FAIL")
		for _, l := range f {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	if r.Kept {
		fmt.Fprintf(&b, "logs and data kept in %s (one NODE.log per node)", r.Dir)
		if r.Registers.Path != "" {
			fmt.Fprintf(&b, "; porcupine's visualization: %s", r.Registers.Path)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func verdict(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "yes"
	case porcupine.Illegal:
		return "NO"
	}
	return "unknown (porcupine timed out)"
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// unread says how many acknowledged writes could not be looked for, if any.
func unread(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d UNREAD (no copy could be read)", n)
}
