package torture

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// historyOps makes operations on register "a" for the checker's tests,
// each of its own client id mod 3: op as given; put and read of value v
// at version (a put of version 0 has an unknown outcome, returning at
// the end); a compare-and-set refused; a compare-and-delete naming
// expect (done: its tombstone at expect+1; unknown: returning at the end;
// or another outcome).
func historyOps() (
	op func(call, ret int64, in regInput, out regOutput) porcupine.Operation,
	put, read func(call, ret int64, v string, version int64) porcupine.Operation,
	refused func(call, ret, expect int64) porcupine.Operation,
	del func(call, ret, expect int64, o outcome) porcupine.Operation,
) {
	const end = 100
	id := 0
	op = func(call, ret int64, in regInput, out regOutput) porcupine.Operation {
		id++
		return porcupine.Operation{ClientId: id % 3, Input: in, Call: call, Output: out, Return: ret, Metadata: &opMeta{id: id, asked: "n"}}
	}
	put = func(call, ret int64, v string, version int64) porcupine.Operation {
		if version == 0 {
			return op(call, end, regInput{Doc: "a", Kind: opPut, Value: v}, regOutput{Outcome: resultUnknown})
		}
		return op(call, ret, regInput{Doc: "a", Kind: opPut, Value: v}, regOutput{Outcome: resultDone, Version: version})
	}
	read = func(call, ret int64, v string, version int64) porcupine.Operation {
		return op(call, ret, regInput{Doc: "a", Kind: opRead, Concern: ReadLinearizable}, regOutput{Outcome: resultDone, Found: v != "", Value: v, Version: version})
	}
	refused = func(call, ret, expect int64) porcupine.Operation {
		return op(call, ret, regInput{Doc: "a", Kind: opCAS, Value: fmt.Sprint("cas", call), Expect: expect}, regOutput{Outcome: resultRefused})
	}
	del = func(call, ret, expect int64, o outcome) porcupine.Operation {
		out := regOutput{Outcome: o}
		switch o {
		case resultDone:
			out.Version = expect + 1
		case resultUnknown:
			ret = end
		}
		return op(call, ret, regInput{Doc: "a", Kind: opDelete, Expect: expect}, out)
	}
	return op, put, read, refused, del
}

// The checker of the history test, on small histories whose verdicts are
// known: porcupine with the register model, reduce and anomalies. In a run
// whose nodes purge tombstones, a register made again (or made first) may
// start at any version above its last, and goes on by one from there;
// without purges it goes on by one through its tombstone.
func TestRegisterHistoryChecker(t *testing.T) {
	op, put, read, refused, del := historyOps()
	for _, c := range []struct {
		name    string
		ops     []porcupine.Operation
		want    porcupine.CheckResult
		dropped int
		anomaly string
		purges  bool // the run purges tombstones (History.TombstonesMayBePurged)
	}{
		{"a read sees the last acknowledged write", []porcupine.Operation{read(0, 1, "", 0), put(2, 3, "x", 1), read(4, 5, "x", 1)}, porcupine.Ok, 0, "", false},
		{"a stale read", []porcupine.Operation{put(0, 1, "x", 1), put(2, 3, "y", 2), read(4, 5, "x", 1)}, porcupine.Illegal, 0, "stale reads", false},
		{"an unknown write that took effect", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "y", 2)}, porcupine.Ok, 0, "", false},
		{"an unknown write nobody saw is left out", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "x", 1), read(5, 6, "x", 1)}, porcupine.Ok, 1, "", false},
		// v2 is nobody's but the unknown write's: it must stay.
		{"an unknown write filling a gap is kept", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), put(3, 4, "z", 3), read(5, 6, "z", 3)}, porcupine.Ok, 0, "", false},
		{"a read of a rolled-back write", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "y", 2), put(5, 6, "z", 2)}, porcupine.Illegal, 0, "rolled-back", false},
		// Refused against the unknown write, which a later read shows
		// never took effect.
		{"a refusal on a state that did not last", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "x", 1), put(3, 0, "y", 0), refused(4, 5, 1), read(6, 7, "x", 1)}, porcupine.Illegal, 0, "refused (412)", false},
		{"a refusal on a state a later write shows did not last", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "x", 1), put(3, 0, "y", 0), refused(4, 5, 1), put(6, 7, "z", 2)}, porcupine.Illegal, 1, "refused (412)", false},
		// Deletes: the versions go on through the tombstone.
		{"a delete, a 404, and a put after the tombstone", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), read(4, 5, "", 0), del(6, 7, 2, resultAbsent), put(8, 9, "y", 3), read(10, 11, "y", 3)}, porcupine.Ok, 0, "", false},
		{"a read of the value an acknowledged delete removed", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), read(4, 5, "x", 1)}, porcupine.Illegal, 0, "stale reads", false},
		{"a 404 after an acknowledged put and no delete", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "", 0)}, porcupine.Illegal, 0, "stale reads", false},
		{"an unknown delete that took effect", []porcupine.Operation{put(0, 1, "x", 1), del(2, 0, 1, resultUnknown), read(3, 4, "", 0), put(5, 6, "y", 3)}, porcupine.Ok, 0, "", false},
		{"a delete refused on a version that did not last", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "x", 1), put(3, 0, "y", 0), op(4, 5, regInput{Doc: "a", Kind: opDelete, Expect: 1}, regOutput{Outcome: resultRefused}), read(6, 7, "x", 1)}, porcupine.Illegal, 0, "refused (412)", false},
		{"a 404 of a delete while the register is there", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultAbsent)}, porcupine.Illegal, 0, "", false},
		{"a read of a state the delete's version holds", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 0, "y", 0), read(5, 6, "y", 2)}, porcupine.Illegal, 0, "rolled-back", false},
		// The unknown put is not needed: the register is deleted at v2 by
		// a delete named after a read of x.
		{"an unknown write before an acknowledged delete is left out", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "x", 1), put(4, 0, "y", 0), del(5, 6, 1, resultDone), read(7, 8, "", 0)}, porcupine.Ok, 1, "", false},
		// Local reads' history: the delete's If-Match names v2 that no
		// operation of it observed; the unknown write of v2 must stay, or
		// the 404 that follows the delete has no linearization.
		{"an unknown write an unknown delete may follow is kept", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), del(3, 0, 2, resultUnknown), read(4, 5, "", 0)}, porcupine.Ok, 0, "", false},
		// A delete refused with 412 needs the register there: after the
		// tombstone at v2 only the unknown put can have made it again.
		{"an unknown write a refused delete needs is kept", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 0, "y", 0), op(5, 6, regInput{Doc: "a", Kind: opDelete, Expect: 1}, regOutput{Outcome: resultRefused})}, porcupine.Ok, 0, "", false},
		// Tombstones purged: a register made again (or made first) may
		// start at any version above its last, and goes on by one.
		{"made again above its tombstone", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 5, "y", 9), read(6, 7, "y", 9), put(8, 9, "z", 10)}, porcupine.Ok, 0, "", true},
		{"made again above its tombstone, with no purges", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 5, "y", 9)}, porcupine.Illegal, 0, "", false},
		{"made first above 1", []porcupine.Operation{put(0, 1, "x", 7), read(2, 3, "x", 7)}, porcupine.Ok, 0, "", true},
		{"made again at its tombstone's version", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 5, "y", 2)}, porcupine.Illegal, 0, "sharing a version", true},
		{"an update that does not go on by one", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 5, "y", 9), put(6, 7, "z", 11)}, porcupine.Illegal, 0, "", true},
		// The unknown put made the register again at a version only the
		// read tells; the compare-and-set and the delete go on from it.
		{"an unknown re-creation, its version read later", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 0, "y", 0), read(5, 6, "y", 9),
			op(7, 8, regInput{Doc: "a", Kind: opCAS, Value: "z", Expect: 9}, regOutput{Outcome: resultDone, Version: 10}), refused(9, 10, 1), del(11, 12, 10, resultDone), read(13, 14, "", 0)}, porcupine.Ok, 0, "", true},
		{"an unknown re-creation read below its tombstone", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 0, "y", 0), read(5, 6, "y", 2)}, porcupine.Illegal, 0, "rolled-back", true},
		// A refusal on a version only bounded is right whatever it named;
		// a put on it goes on from the bound.
		{"refusals on an unknown re-creation", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 0, "y", 0),
			op(5, 6, regInput{Doc: "a", Kind: opDelete, Expect: 1}, regOutput{Outcome: resultRefused}), refused(7, 8, 9), read(9, 10, "y", 5)}, porcupine.Ok, 0, "", true},
		{"a put after an unknown re-creation", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 0, "y", 0), put(5, 6, "z", 7), read(7, 8, "z", 7)}, porcupine.Ok, 0, "", true},
		{"an unknown re-creation, then a put", []porcupine.Operation{put(0, 1, "x", 1), del(2, 3, 1, resultDone), put(4, 0, "y", 0), read(5, 6, "y", 5), put(7, 8, "z", 6), read(9, 10, "z", 6)}, porcupine.Ok, 0, "", true},
	} {
		t.Run(c.name, func(t *testing.T) { checkHistory(t, c.ops, c.want, c.dropped, c.anomaly, c.purges) })
	}
}

// checkHistory checks ops with the register model (purges: the run
// purges tombstones), reduced and whole, and their anomalies: the
// verdict must be want, with dropped operations left out, and the
// anomalies must name anomaly ("": none).
func checkHistory(t *testing.T, ops []porcupine.Operation, want porcupine.CheckResult, dropped int, anomaly string, purges bool) {
	t.Helper()
	reduced, n := reduce(ops)
	res := porcupine.CheckOperations(registerModel([]string{"a"}, purges), reduced)
	if w := want == porcupine.Ok; res != w || n != dropped {
		t.Fatalf("linearizable %v with %d left out, want %v with %d", res, n, w, dropped)
	}
	if full := porcupine.CheckOperations(registerModel([]string{"a"}, purges), ops); full != res {
		t.Fatalf("reduce changed the verdict: %v on the whole history, %v once reduced", full, res)
	}
	found := strings.Join(anomalies(reduced), "\n")
	if (anomaly == "") != (found == "") || !strings.Contains(found, anomaly) {
		t.Fatalf("anomalies %q, want one about %q", found, anomaly)
	}
}

// madeHigher counts the puts that skipped versions no write of unknown
// outcome can account for.
func TestMadeHigherCountsPutsAboveTheNextVersion(t *testing.T) {
	op := func(in regInput, out regOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Metadata: &opMeta{}}
	}
	put := func(doc string, version int64) porcupine.Operation {
		if version == 0 {
			return op(regInput{Doc: doc, Kind: opPut, Value: "u"}, regOutput{Outcome: resultUnknown})
		}
		return op(regInput{Doc: doc, Kind: opPut, Value: fmt.Sprint(version)}, regOutput{Outcome: resultDone, Version: version})
	}
	deleted := op(regInput{Doc: "a", Kind: opDelete, Expect: 1}, regOutput{Outcome: resultDone, Version: 2})
	for _, c := range []struct {
		name string
		ops  []porcupine.Operation
		want int
	}{
		{"by one", []porcupine.Operation{put("a", 1), put("a", 2), deleted, put("a", 3)}, 0},
		{"made again above its tombstone", []porcupine.Operation{put("a", 1), deleted, put("a", 9)}, 1},
		{"a gap an unknown write fills", []porcupine.Operation{put("a", 1), put("a", 0), put("a", 3)}, 0},
		{"made first above 1", []porcupine.Operation{put("a", 7), put("b", 1)}, 1},
	} {
		if got := madeHigher(c.ops); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
