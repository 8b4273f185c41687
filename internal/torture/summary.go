package torture

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Summary adds up consecutive runs: the figures docs/reliability.md
// gives.
type Summary struct {
	Runs, Passed int
	Failed       []uint64 // seeds of failing runs
	Faults       map[string]int
	Ops          map[string]int

	LostRegister, LostList, SilentW1 int
	ListDeleted, ListResurrected     int
	TombstonesPurged, FullCopies     int
	ReadYourWritesChecked            int
	ReadYourWritesBroken             int
	MajorityReadsChecked             int
	MajorityReadsBroken              int
	ListAcked, W1Acked, W1RolledBack int
	ListUnread, W1Unread             int // acknowledged, but no copy could be read to look for them
	RolledBackDocs                   int
	Checked                          int // register operations porcupine checked
	Linearizable                     int // runs whose registers were linearizable

	WorstConvergence     time.Duration
	WorstConvergenceSeed uint64
	Worst                map[string]Outage // per fault kind, the longest outage of any run
	WorstSeed            map[string]uint64
}

// Add counts one run's report.
func (s *Summary) Add(r *Report) {
	if s.Faults == nil {
		s.Faults, s.Ops, s.Worst, s.WorstSeed = map[string]int{}, map[string]int{}, map[string]Outage{}, map[string]uint64{}
	}
	s.Runs++
	if r.Failed() {
		s.Failed = append(s.Failed, r.Seed)
	} else {
		s.Passed++
	}
	for k, n := range r.Faults {
		s.Faults[k] += n
	}
	for k, n := range r.Ops {
		s.Ops[k] += n
	}
	s.LostRegister += len(r.LostRegister)
	s.ReadYourWritesChecked += r.ReadYourWrites.Checked
	s.ReadYourWritesBroken += len(r.ReadYourWrites.Broken)
	s.MajorityReadsChecked += r.MajorityReads.Checked
	s.MajorityReadsBroken += len(r.MajorityReads.Broken)
	s.LostList += len(r.Lists.Lost)
	s.ListDeleted += r.Lists.Deleted
	s.ListResurrected += len(r.Lists.Resurrected)
	s.TombstonesPurged += r.Purge.Tombstones
	s.FullCopies += r.Purge.FullCopies
	s.SilentW1 += len(r.W1.Missing)
	s.ListAcked += r.Lists.Acked
	s.W1Acked += r.W1.Acked
	s.W1RolledBack += r.W1.RolledBack
	s.ListUnread += r.Lists.Unread
	s.W1Unread += r.W1.Unread
	s.RolledBackDocs += r.RolledBackDocs
	s.Checked += r.Registers.Checked
	if r.Registers.Result == porcupine.Ok && r.Registers.Checked > 0 {
		s.Linearizable++
	}
	if r.Convergence > s.WorstConvergence {
		s.WorstConvergence, s.WorstConvergenceSeed = r.Convergence, r.Seed
	}
	for k, o := range r.Availability {
		if w, ok := s.Worst[k]; !ok || o.Length() > w.Length() {
			s.Worst[k], s.WorstSeed[k] = o, r.Seed
		}
	}
}

// Table prints the summary.
func (s *Summary) Table() string {
	var b strings.Builder
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "%-34s %s\n", k, fmt.Sprintf(format, args...)) }
	row("runs", "%d: %d passed, %d failed%s", s.Runs, s.Passed, len(s.Failed), seedList(s.Failed))
	var faults []string
	for _, k := range sortedKeys(s.Faults) {
		faults = append(faults, fmt.Sprintf("%s %d", k, s.Faults[k]))
	}
	row("faults", "%s", strings.Join(faults, ", "))
	var ops []string
	for _, k := range sortedKeys(s.Ops) {
		ops = append(ops, fmt.Sprintf("%s %d", k, s.Ops[k]))
	}
	row("operations", "%s", strings.Join(ops, ", "))
	row("lost majority register writes", "%d", s.LostRegister)
	row("read-your-writes (tokens)", "%d local and majority reads checked, %d returned an older state", s.ReadYourWritesChecked, s.ReadYourWritesBroken)
	row("majority reads never rolled back", "%d that found their register checked (query pages' included), %d returned a rolled-back state", s.MajorityReadsChecked, s.MajorityReadsBroken)
	row("lost majority list elements", "%d of %d acknowledged%s", s.LostList, s.ListAcked, unread(s.ListUnread))
	row("deleted list elements back", "%d of %d deleted%s; %d tombstones purged, %d full copies started (counted since each node's last start)", s.ListResurrected, s.ListDeleted, unread(s.ListUnread), s.TombstonesPurged, s.FullCopies)
	row("w=1 writes", "%d acknowledged, %d rolled back, %d silently lost%s", s.W1Acked, s.W1RolledBack, s.SilentW1, unread(s.W1Unread))
	row("rolled back (all collections)", "%d document states", s.RolledBackDocs)
	row("linearizable (porcupine)", "%d of %d runs (%d operations checked)", s.Linearizable, s.Runs, s.Checked)
	row("slowest convergence", "%s (seed %d)", s.WorstConvergence.Round(time.Millisecond), s.WorstConvergenceSeed)
	kinds := sortedKeys(s.Worst)
	sort.SliceStable(kinds, func(i, j int) bool { return kinds[i] == "none" && kinds[j] != "none" })
	for _, k := range kinds {
		o := s.Worst[k]
		label := k
		if k == "none" {
			label = "before any fault"
		}
		row("worst write outage: "+label, "%s (seed %d, %s)", o.Length().Round(time.Millisecond), s.WorstSeed[k], o.Client)
	}
	return b.String()
}

func seedList(seeds []uint64) string {
	if len(seeds) == 0 {
		return ""
	}
	var l []string
	for _, s := range seeds {
		l = append(l, fmt.Sprint(s))
	}
	return " (seeds " + strings.Join(l, ", ") + ")"
}
