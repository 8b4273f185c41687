package lease

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		if got := Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestNextVoterSetTwoMembersInTwoSteps(t *testing.T) {
	const settle = ttl + 5*time.Second // LEASE_TTL + PEERS_REFRESH
	cur := []string{"v1", "v2", "v3"}
	target := []string{"v1", "v2", "v4"} // v3 replaced by v4: two changes
	last := time.Time{}

	// First step at once (nothing changed recently): add v4.
	now := at(0)
	next, wait := NextVoterSet(cur, target, last, now, settle)
	if !slices.Equal(next, []string{"v1", "v2", "v3", "v4"}) || wait != settle {
		t.Fatalf("step 1: %v wait %s", next, wait)
	}
	cur, last = next, now

	// Too early for the second step: unchanged, and told how long to wait.
	now = at(settle - time.Second)
	next, wait = NextVoterSet(cur, target, last, now, settle)
	if !slices.Equal(next, cur) || wait != time.Second {
		t.Fatalf("before settle: %v wait %s", next, wait)
	}

	// After settle: remove v3, done.
	now = at(settle)
	next, wait = NextVoterSet(cur, target, last, now, settle)
	if !slices.Equal(next, []string{"v1", "v2", "v4"}) || wait != 0 {
		t.Fatalf("step 2: %v wait %s", next, wait)
	}
	cur, last = next, now

	next, wait = NextVoterSet(cur, target, last, now.Add(time.Second), settle)
	if !slices.Equal(next, target) || wait != 0 {
		t.Fatalf("done: %v wait %s", next, wait)
	}
}

func TestNextVoterSetOrder(t *testing.T) {
	// Additions first in id order, then removals in id order.
	cur := []string{"c", "a", "b"}
	target := []string{"e", "a", "d"}
	var steps []string
	now := at(0)
	last := time.Time{}
	for range 10 {
		next, wait := NextVoterSet(cur, target, last, now, time.Second)
		if !slices.Equal(next, normalize(cur)) {
			steps = append(steps, fmt.Sprint(next))
			cur, last = next, now
		}
		if wait == 0 {
			break
		}
		now = now.Add(wait)
	}
	want := []string{"[a b c d]", "[a b c d e]", "[a c d e]", "[a d e]"}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	// Duplicates and order in the input do not matter.
	if next, wait := NextVoterSet([]string{"b", "a", "a"}, []string{"a", "b"}, time.Time{}, now, time.Second); !slices.Equal(next, []string{"a", "b"}) || wait != 0 {
		t.Fatalf("same set: %v %s", next, wait)
	}
}

// TestNextVoterSetMajoritiesOverlap walks random changes step by step and
// checks, by brute force, that every majority of each set shares a voter
// with every majority of the set before it.
func TestNextVoterSetMajoritiesOverlap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := []string{"a", "b", "c", "d", "e", "f", "g"}
	pick := func() []string {
		var s []string
		for _, id := range pool {
			if rng.IntN(2) == 0 {
				s = append(s, id)
			}
		}
		if len(s) == 0 {
			s = append(s, pool[rng.IntN(len(pool))])
		}
		return s
	}
	for run := 0; run < 300; run++ {
		cur, target := pick(), pick()
		now, last := at(0), time.Time{}
		for steps := 0; ; steps++ {
			if steps > len(pool)*2 {
				t.Fatalf("no convergence from %v to %v", cur, target)
			}
			next, wait := NextVoterSet(cur, target, last, now, time.Second)
			if !slices.Equal(next, normalize(cur)) {
				if !majoritiesOverlap(normalize(cur), next) {
					t.Fatalf("step %v -> %v: two majorities share no voter", cur, next)
				}
				cur, last = next, now
			}
			if wait == 0 {
				break
			}
			now = now.Add(wait)
		}
		if !slices.Equal(cur, normalize(target)) {
			t.Fatalf("ended at %v, want %v", cur, target)
		}
	}
	// The check itself can fail: two members at once break the overlap.
	if majoritiesOverlap([]string{"a", "b", "c"}, []string{"a", "d", "e"}) {
		t.Fatal("majoritiesOverlap is blind")
	}
}

// majoritiesOverlap reports whether every majority of x shares a member with
// every majority of y.
func majoritiesOverlap(x, y []string) bool {
	for _, mx := range majorities(x) {
		for _, my := range majorities(y) {
			if !slices.ContainsFunc(mx, func(id string) bool { return slices.Contains(my, id) }) {
				return false
			}
		}
	}
	return true
}

func majorities(set []string) [][]string {
	var out [][]string
	for mask := 0; mask < 1<<len(set); mask++ {
		var m []string
		for i, id := range set {
			if mask&(1<<i) != 0 {
				m = append(m, id)
			}
		}
		if len(m) >= Majority(len(set)) {
			out = append(out, m)
		}
	}
	return out
}
