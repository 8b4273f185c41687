package lease

import (
	"fmt"
	"testing"
	"time"
)

// raceSetup returns voters ids v1..vn whose record of partition 7 is an
// expired lease of "z" at epoch 4, and candidates a and b that both learned
// epoch 4 and so both propose epoch 5.
func raceSetup(t *testing.T, n int) (ids []string, vs map[string]*voter, a, b *Holder, ra, rb Request) {
	t.Helper()
	for i := 1; i <= n; i++ {
		ids = append(ids, fmt.Sprintf("v%d", i))
	}
	vs = newVoters(ids...)
	for _, v := range vs {
		v.recs[7] = Record{Partition: 7, Holder: "z", Epoch: 4, Until: at(-time.Second)}
	}
	a, b = newHolder(t, "a", ids...), newHolder(t, "b", ids...)
	a.Learn(7, 4)
	b.Learn(7, 4)
	ra, rb = a.Propose(7, at(0)), b.Propose(7, at(0))
	if ra.Epoch != 5 || rb.Epoch != 5 {
		t.Fatalf("proposals at %d and %d, want both 5", ra.Epoch, rb.Epoch)
	}
	return ids, vs, a, b, ra, rb
}

// checkRace checks that at most one of a and b holds the lease and that at
// most one majority of grants was given at epoch 5.
func checkRace(t *testing.T, label string, ids []string, vs map[string]*voter, a, b *Holder) (winner string) {
	t.Helper()
	now := at(10 * time.Millisecond)
	grants := map[string]int{}
	for _, id := range ids {
		if r := vs[id].recs[7]; r.Epoch == 5 {
			grants[r.Holder]++
		}
	}
	majorities := 0
	for who, n := range grants {
		if n >= Majority(len(ids)) {
			majorities++
			winner = who
		}
	}
	if majorities > 1 {
		t.Fatalf("%s: two majorities at one epoch: %v", label, grants)
	}
	ha, hb := a.Holds(7, now), b.Holds(7, now)
	if ha && hb {
		t.Fatalf("%s: both candidates hold epoch 5", label)
	}
	if (winner == "a") != ha || (winner == "b") != hb {
		t.Fatalf("%s: majority %q but holds a=%v b=%v", label, winner, ha, hb)
	}
	return winner
}

// TestRaceAtOneEpochAllPermutations delivers the six requests of two
// candidates racing at one epoch over three voters in every one of the 6! =
// 720 orders, each decision going straight back to its candidate.
func TestRaceAtOneEpochAllPermutations(t *testing.T) {
	type msg struct {
		from  string
		voter int
	}
	var msgs []msg
	for i := 0; i < 3; i++ {
		msgs = append(msgs, msg{"a", i}, msg{"b", i})
	}
	wins := map[string]int{}
	seen := map[string]bool{}
	permute(len(msgs), func(order []int) {
		seen[fmt.Sprint(order)] = true
		ids, vs, a, b, ra, rb := raceSetup(t, 3)
		for _, k := range order {
			m := msgs[k]
			id := ids[m.voter]
			if m.from == "a" {
				a.Observe(7, id, at(0), vs[id].decide(ra, at(time.Millisecond)))
			} else {
				b.Observe(7, id, at(0), vs[id].decide(rb, at(time.Millisecond)))
			}
		}
		wins[checkRace(t, fmt.Sprint(order), ids, vs, a, b)]++
	})
	if len(seen) != 720 {
		t.Fatalf("enumerated %d distinct orders, want 720", len(seen))
	}
	// With every message delivered someone wins each time, and both can.
	if wins[""] != 0 || wins["a"] == 0 || wins["b"] == 0 {
		t.Fatalf("outcomes %v", wins)
	}
}

// TestRaceAtOneEpochWithLoss covers every interleaving of the two
// candidates' requests over 3 and 5 voters, lost messages included.
// Deliveries to different voters commute (each voter decides on its own
// record), so an interleaving is fully described by what each voter sees:
// a then b, b then a, only a, only b, or neither: 5^n cases.
func TestRaceAtOneEpochWithLoss(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d voters", n), func(t *testing.T) {
			patterns := []string{"ab", "ba", "a", "b", ""}
			total := 1
			for i := 0; i < n; i++ {
				total *= len(patterns)
			}
			wins := map[string]int{}
			for c := 0; c < total; c++ {
				ids, vs, a, b, ra, rb := raceSetup(t, n)
				label := ""
				for i, x := 0, c; i < n; i, x = i+1, x/len(patterns) {
					pat := patterns[x%len(patterns)]
					label += fmt.Sprintf("%s:%q ", ids[i], pat)
					for _, from := range pat {
						if from == 'a' {
							a.Observe(7, ids[i], at(0), vs[ids[i]].decide(ra, at(time.Millisecond)))
						} else {
							b.Observe(7, ids[i], at(0), vs[ids[i]].decide(rb, at(time.Millisecond)))
						}
					}
				}
				wins[checkRace(t, label, ids, vs, a, b)]++
			}
			if wins["a"] == 0 || wins["b"] == 0 || wins[""] == 0 {
				t.Fatalf("outcomes %v: expected wins for each and cases with no winner", wins)
			}
			t.Logf("%d cases: a won %d, b won %d, nobody %d", total, wins["a"], wins["b"], wins[""])
		})
	}
}

// permute calls f with every permutation of 0..n-1 (Heap's algorithm).
func permute(n int, f func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var gen func(k int)
	gen = func(k int) {
		if k == 1 {
			f(p)
			return
		}
		gen(k - 1)
		for i := 0; i < k-1; i++ {
			if k%2 == 0 {
				p[i], p[k-1] = p[k-1], p[i]
			} else {
				p[0], p[k-1] = p[k-1], p[0]
			}
			gen(k - 1)
		}
	}
	gen(n)
}
