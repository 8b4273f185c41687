package shard

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/buraksezer/consistent"
)

func sharding(ids ...string) []Member {
	ms := make([]Member, len(ids))
	for i, id := range ids {
		ms[i] = Member{ID: id, Sharding: true}
	}
	return ms
}

func mustRing(t testing.TB, members []Member, partitions int) *Ring {
	t.Helper()
	r, err := NewRing(members, partitions)
	if err != nil {
		t.Fatalf("NewRing(%v, %d): %v", members, partitions, err)
	}
	return r
}

func TestNewRingValidation(t *testing.T) {
	many := make([]string, MaxRingMembers+1)
	for i := range many {
		many[i] = fmt.Sprintf("n%d", i)
	}
	cases := []struct {
		name       string
		members    []Member
		partitions int
		want       error
		hint       string // part of the message that says what to change
	}{
		{"zero partitions", sharding("a"), 0, ErrPartitionCount, "between 1 and"},
		{"negative partitions", sharding("a"), -5, ErrPartitionCount, "between 1 and"},
		{"too many partitions", sharding("a"), MaxPartitionCount + 1, ErrPartitionCount, "between 1 and"},
		{"no members", nil, 271, ErrNoShardingMember, `"sharding": true`},
		{"no sharding member", []Member{{ID: "a", Replica: true, Voter: true}}, 271, ErrNoShardingMember, `"sharding": true`},
		{"more members than partitions", sharding("a", "b", "c"), 2, ErrTooManyMembers, "at most 2 sharding members"},
		{"more than MaxRingMembers", sharding(many...), MaxPartitionCount, ErrTooManyMembers, `"sharding": false`},
		{"empty id", sharding("a", ""), 271, ErrInvalidMemberID, "give every peer an id"},
		{"empty id of a non-sharding member", append(sharding("a"), Member{}), 271, ErrInvalidMemberID, "empty id"},
		{"NUL in id", sharding("a\x00b"), 271, ErrInvalidMemberID, "NUL"},
		{"duplicate id", sharding("a", "b", "a"), 271, ErrDuplicateMemberID, `"a" appears more than once`},
		{"duplicate id, one not sharding", append(sharding("a"), Member{ID: "a", Replica: true}), 271, ErrDuplicateMemberID, "more than once"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewRing(c.members, c.partitions)
			if !errors.Is(err, c.want) {
				t.Fatalf("NewRing = %v, %v; want error %v", r, err, c.want)
			}
			if r != nil {
				t.Errorf("NewRing returned a ring with error %v", err)
			}
			if !strings.Contains(err.Error(), c.hint) {
				t.Errorf("error %q does not contain %q", err, c.hint)
			}
		})
	}
}

func TestNewRingEdges(t *testing.T) {
	// As many members as partitions, one partition, one member: all valid.
	for _, c := range []struct {
		ids        []string
		partitions int
	}{
		{[]string{"a"}, 1},
		{[]string{"a", "b"}, 2},
		{[]string{"a", "b", "c", "d", "e"}, 5},
		{[]string{"only"}, MaxPartitionCount},
	} {
		r := mustRing(t, sharding(c.ids...), c.partitions)
		checkRing(t, r, c.ids, c.partitions)
	}
}

// checkRing checks that every partition has an owner among ids.
func checkRing(t testing.TB, r *Ring, ids []string, partitions int) {
	t.Helper()
	if r.Partitions() != partitions || len(r.Owners()) != partitions {
		t.Fatalf("ring has %d partitions, %d owners; want %d", r.Partitions(), len(r.Owners()), partitions)
	}
	want := slices.Sorted(slices.Values(ids))
	if got := r.Members(); !slices.Equal(got, want) {
		t.Fatalf("Members() = %v, want %v", got, want)
	}
	for p, o := range r.Owners() {
		if !slices.Contains(ids, o) || r.Owner(p) != o {
			t.Fatalf("partition %d owned by %q (Owner: %q), not one of %v", p, o, r.Owner(p), ids)
		}
	}
}

func TestRingOnlyShardingMembers(t *testing.T) {
	members := []Member{
		{ID: "a", Sharding: true},
		{ID: "b", Replica: true, Voter: true},
		{ID: "c", Sharding: true, Replica: true},
	}
	r := mustRing(t, members, 271)
	checkRing(t, r, []string{"a", "c"}, 271)
	// The non-sharding member does not change the placement at all.
	if want := mustRing(t, sharding("a", "c"), 271).Owners(); !slices.Equal(r.Owners(), want) {
		t.Error("a non-sharding member changed the ring")
	}
}

func TestRingOwnerOutOfRange(t *testing.T) {
	r := mustRing(t, sharding("a", "b"), 7)
	for _, p := range []int{-1, 7, 1 << 40} {
		if got := r.Owner(p); got != "" {
			t.Errorf("Owner(%d) = %q, want \"\"", p, got)
		}
	}
}

func TestRingCopies(t *testing.T) {
	r := mustRing(t, sharding("a", "b"), 7)
	r.Owners()[0] = "x"
	r.Members()[0] = "x"
	if r.Owner(0) == "x" || r.Members()[0] == "x" {
		t.Error("Owners/Members expose the ring's own slices")
	}
}

// TestRingIsStable pins the placement of a few member sets. These owners
// are what every node of a running cluster computes: if this test fails,
// upgrading one node would make it disagree with the others about who
// masters what. Change it only together with a migration plan.
func TestRingIsStable(t *testing.T) {
	cases := []struct {
		ids    []string
		digest uint64 // Hash of the owners joined by ","
		first  string // owners of partitions 0..7
	}{
		{[]string{"node-1", "node-2", "node-3"}, 0xd346dfab501ca92, "node-1 node-1 node-3 node-2 node-2 node-2 node-1 node-1"},
		{[]string{"a", "b", "c", "d", "e"}, 0x7e0353cc7f73e08a, "c a e c e b b b"},
	}
	for _, c := range cases {
		r := mustRing(t, sharding(c.ids...), DefaultPartitionCount)
		owners := r.Owners()
		digest := Hash([]byte(strings.Join(owners, ",")))
		first := strings.Join(owners[:8], " ")
		if digest != c.digest || first != c.first {
			t.Errorf("%v: owners digest %#x, first %q; want %#x, %q", c.ids, digest, first, c.digest, c.first)
		}
	}
}

func TestRingOrderIndependent(t *testing.T) {
	sets := [][]string{
		{"node1", "node2", "node3"},
		{"node-1", "node-2", "node-11"},
		{"a", "b", "c", "d"},
		{"n-1", "n-10", "n-11", "n-100"},
	}
	for _, ids := range sets {
		want := mustRing(t, sharding(ids...), DefaultPartitionCount).Owners()
		count := 0
		for perm := range permutations(ids) {
			got := mustRing(t, sharding(perm...), DefaultPartitionCount).Owners()
			if !slices.Equal(got, want) {
				t.Fatalf("members %v give different owners than %v", perm, ids)
			}
			count++
		}
		t.Logf("%v: %d orders, identical owners", ids, count)
	}
}

// permutations yields every ordering of ids (Heap's algorithm).
func permutations(ids []string) func(func([]string) bool) {
	return func(yield func([]string) bool) {
		a := slices.Clone(ids)
		c := make([]int, len(a))
		if !yield(slices.Clone(a)) {
			return
		}
		for i := 0; i < len(a); {
			if c[i] < i {
				if i%2 == 0 {
					a[0], a[i] = a[i], a[0]
				} else {
					a[c[i]], a[i] = a[i], a[c[i]]
				}
				if !yield(slices.Clone(a)) {
					return
				}
				c[i]++
				i = 0
			} else {
				c[i] = 0
				i++
			}
		}
	}
}

// TestRingNamesDoNotCollide checks the terminator: no virtual-node key of
// one member is a key of another, even when one id is a prefix of another.
func TestRingNamesDoNotCollide(t *testing.T) {
	ids := []string{"node-1", "node-11", "node-111", "node-2", "n", "n1"}
	seen := map[string]string{}
	for _, id := range ids {
		for i := range VirtualNodes {
			key := fmt.Sprintf("%s%d", ringNameOf(id), i) // the library's key format
			if other, ok := seen[key]; ok {
				t.Fatalf("virtual node key %q of %q is also one of %q", key, id, other)
			}
			seen[key] = id
		}
	}
	// Without the terminator they would.
	if fmt.Sprintf("%s%d", "node-1", 10) != fmt.Sprintf("%s%d", "node-11", 0) {
		t.Fatal("premise of the terminator no longer holds")
	}
}

// fnvHasher is consistent's view of the user hash: Hash itself.
type fnvHasher struct{}

func (fnvHasher) Sum64(b []byte) uint64 { return Hash(b) }

func TestPartitionOfMatchesConsistent(t *testing.T) {
	for _, partitions := range []int{1, 7, DefaultPartitionCount, 4096} {
		c := consistent.New(nil, consistent.Config{Hasher: fnvHasher{}, PartitionCount: partitions, ReplicationFactor: VirtualNodes, Load: 1.25})
		for i := range 2000 {
			user := fmt.Sprintf("user-%d", i)
			if got, want := PartitionOf(user, partitions), c.FindPartitionID([]byte(user)); got != want {
				t.Fatalf("PartitionOf(%q, %d) = %d, consistent's FindPartitionID = %d", user, partitions, got, want)
			}
		}
	}
	// fnvHasher is plain FNV-1a.
	h := fnv.New64a()
	h.Write([]byte("alice"))
	if (fnvHasher{}).Sum64([]byte("alice")) != h.Sum64() {
		t.Fatal("Hash is not FNV-1a")
	}
}

func TestMix64IsABijectionOnSamples(t *testing.T) {
	seen := map[uint64]uint64{}
	for i := range uint64(1 << 16) {
		for _, x := range []uint64{i, i << 48, ^i} {
			y := mix64(x)
			if prev, ok := seen[y]; ok && prev != x {
				t.Fatalf("mix64(%#x) = mix64(%#x)", x, prev)
			}
			seen[y] = x
		}
	}
}

// idFamilies are the member-id styles the placement tests use.
func idFamilies(n int) map[string][]string {
	fam := map[string][]string{}
	rng := rand.New(rand.NewSource(int64(n)))
	for i := 1; i <= n; i++ {
		fam["nodeN"] = append(fam["nodeN"], fmt.Sprintf("node%d", i))
		fam["node-N"] = append(fam["node-N"], fmt.Sprintf("node-%d", i))
		fam["n-N"] = append(fam["n-N"], fmt.Sprintf("n-%d", i))
		fam["shoal-N.example"] = append(fam["shoal-N.example"], fmt.Sprintf("shoal-%d.example", i))
		fam["random"] = append(fam["random"], fmt.Sprintf("%08x", rng.Uint32()))
	}
	return fam
}

func loads(owners []string) map[string]int {
	l := map[string]int{}
	for _, o := range owners {
		l[o]++
	}
	return l
}

// sortedKeys returns m's keys in order, so logs and failures are stable.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestRingSpread reports partitions per member and validates them against
// a bound: the ring has no load bound of its own (see Ring), so this is
// where an uneven spread would show.
func TestRingSpread(t *testing.T) {
	const maxRatio, minRatio = 1.5, 0.5
	for _, n := range []int{3, 4, 5, 10} {
		families := idFamilies(n)
		for _, name := range sortedKeys(families) {
			ids := families[name]
			r := mustRing(t, sharding(ids...), DefaultPartitionCount)
			l := loads(r.Owners())
			lo, hi := DefaultPartitionCount, 0
			for _, id := range ids {
				lo, hi = min(lo, l[id]), max(hi, l[id])
			}
			avg := float64(DefaultPartitionCount) / float64(n)
			t.Logf("%2d members %-16s partitions per member min %3d max %3d (average %.1f, max/avg %.2f)", n, name, lo, hi, avg, float64(hi)/avg)
			if float64(hi) > maxRatio*avg || float64(lo) < minRatio*avg {
				t.Errorf("%d members %s: partitions per member %d..%d, outside %.1f..%.1f times the average %.1f",
					n, name, lo, hi, minRatio, maxRatio, avg)
			}
		}
	}
}

// TestRingMoves checks the property that keeps rebalancing cheap: a joining
// member takes about 1/N of the partitions and nothing else moves; a leaving
// member's partitions move and nothing else does.
func TestRingMoves(t *testing.T) {
	for _, n := range []int{3, 5, 10} {
		families := idFamilies(n + 1)
		for _, name := range sortedKeys(families) {
			ids := families[name]
			newcomer := ids[n]
			old := mustRing(t, sharding(ids[:n]...), DefaultPartitionCount).Owners()
			grown := mustRing(t, sharding(ids...), DefaultPartitionCount).Owners()

			moved := 0
			for p := range old {
				if old[p] == grown[p] {
					continue
				}
				moved++
				if grown[p] != newcomer {
					t.Errorf("%d -> %d %s: partition %d moved from %s to %s, not to the new member %s",
						n, n+1, name, p, old[p], grown[p], newcomer)
				}
			}
			frac := float64(moved) / float64(len(old))
			want := 1 / float64(n+1)
			t.Logf("%2d -> %2d %-16s moved %.3f (%3d of %d; 1/%d = %.3f)", n, n+1, name, frac, moved, len(old), n+1, want)
			if frac < 0.6*want || frac > 1.4*want {
				t.Errorf("%d -> %d %s: %.3f of the partitions moved, want %.3f..%.3f", n, n+1, name, frac, 0.6*want, 1.4*want)
			}

			// Remove each member of the grown set in turn.
			for _, gone := range ids {
				rest := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == gone })
				shrunk := mustRing(t, sharding(rest...), DefaultPartitionCount).Owners()
				for p := range grown {
					if grown[p] != shrunk[p] && grown[p] != gone {
						t.Errorf("%d -> %d %s, %s removed: partition %d moved from %s to %s",
							n+1, n, name, gone, p, grown[p], shrunk[p])
					}
					if shrunk[p] == gone {
						t.Errorf("%s removed but still owns partition %d", gone, p)
					}
				}
			}
		}
	}
}

// libraryOwners builds a consistent ring the way NewRing does, but with the
// given hasher and load, for comparing NewRing's choices with the
// alternatives (see the Ring documentation).
func libraryOwners(t testing.TB, ids []string, partitions int, h consistent.Hasher, load float64) []string {
	t.Helper()
	sorted := slices.Sorted(slices.Values(ids))
	ms := make([]consistent.Member, len(sorted))
	for i, id := range sorted {
		ms[i] = ringNameOf(id)
	}
	c := consistent.New(ms, consistent.Config{Hasher: h, PartitionCount: partitions, ReplicationFactor: VirtualNodes, Load: load})
	owners := make([]string, partitions)
	for p := range owners {
		owners[p] = strings.TrimSuffix(c.GetPartitionOwner(p).String(), ringNameTerminator)
	}
	return owners
}

func maxOverAverage(owners []string, ids []string) (maxRatio, minRatio float64) {
	l := loads(owners)
	avg := float64(len(owners)) / float64(len(ids))
	lo, hi := len(owners), 0
	for _, id := range ids {
		lo, hi = min(lo, l[id]), max(hi, l[id])
	}
	return float64(hi) / avg, float64(lo) / avg
}

// TestRingDesignChoices measures what the Ring documentation claims about
// the alternatives NewRing does not take.
func TestRingDesignChoices(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	const sets, n = 100, 10
	rng := rand.New(rand.NewSource(1))
	var plainSum, plainWorst, mixedSum, mixedWorst float64
	plainEmpty := 0
	for s := range sets {
		ids := make([]string, n)
		for i := range ids {
			if s%2 == 0 {
				ids[i] = fmt.Sprintf("%x", rng.Uint32())
			} else {
				ids[i] = fmt.Sprintf("node-%d", s*n+i)
			}
		}
		plain, plainMin := maxOverAverage(libraryOwners(t, ids, DefaultPartitionCount, fnvHasher{}, DefaultPartitionCount), ids)
		mixed, _ := maxOverAverage(mustRing(t, sharding(ids...), DefaultPartitionCount).Owners(), ids)
		if plainMin == 0 {
			plainEmpty++
		}
		plainSum, plainWorst = plainSum+plain, max(plainWorst, plain)
		mixedSum, mixedWorst = mixedSum+mixed, max(mixedWorst, mixed)
	}
	t.Logf("%d sets of %d members, %d partitions, %d virtual nodes: busiest member / average:", sets, n, DefaultPartitionCount, VirtualNodes)
	t.Logf("  FNV-1a alone:       mean %.2f worst %.2f (%d sets with a member owning nothing)", plainSum/sets, plainWorst, plainEmpty)
	t.Logf("  FNV-1a + finaliser: mean %.2f worst %.2f", mixedSum/sets, mixedWorst)
	if mixedSum >= plainSum {
		t.Errorf("the finaliser no longer improves the spread: revisit the Ring documentation")
	}

	// Bounded load (the library's default 1.25) moves partitions between
	// old members when one joins.
	worst := 0
	for _, m := range []int{3, 5, 10} {
		for name, ids := range idFamilies(m + 1) {
			before := libraryOwners(t, ids[:m], DefaultPartitionCount, ringHasher{}, 1.25)
			after := libraryOwners(t, ids, DefaultPartitionCount, ringHasher{}, 1.25)
			between := 0
			for p := range before {
				if before[p] != after[p] && after[p] != ids[m] {
					between++
				}
			}
			worst = max(worst, between)
			t.Logf("  load 1.25: %2d -> %2d %-16s %3d of %d partitions moved between old members", m, m+1, name, between, DefaultPartitionCount)
		}
	}
	if worst == 0 {
		t.Errorf("bounded load no longer moves partitions between old members: revisit the Ring documentation")
	}
}

// TestAssignRecoversLibraryPanics calls the library with inputs NewRing's
// validation refuses, to check the last line of defence: an error, never a
// panic.
func TestAssignRecoversLibraryPanics(t *testing.T) {
	for _, c := range []struct {
		ids        []string
		partitions int
	}{
		{[]string{"a", "b", "c"}, 2}, // more members than partitions
		{[]string{}, 5},              // no member
	} {
		owners, err := assign(c.ids, c.partitions)
		if !errors.Is(err, errLibraryPanic) || !errors.Is(err, ErrRingBuild) || owners != nil {
			t.Errorf("assign(%v, %d) = %v, %v; want the library's panic as an error", c.ids, c.partitions, owners, err)
		}
	}
}
