package torture

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// The checker of the history test, on small histories whose verdicts are
// known: porcupine with the register model, reduce and anomalies.
func TestRegisterHistoryChecker(t *testing.T) {
	const end = 100
	id := 0
	op := func(call, ret int64, in regInput, out regOutput) porcupine.Operation {
		id++
		return porcupine.Operation{ClientId: id % 3, Input: in, Call: call, Output: out, Return: ret, Metadata: &opMeta{id: id, asked: "n"}}
	}
	put := func(call, ret int64, v string, version int64) porcupine.Operation {
		if version == 0 {
			return op(call, end, regInput{Doc: "a", Kind: opPut, Value: v}, regOutput{Outcome: resultUnknown})
		}
		return op(call, ret, regInput{Doc: "a", Kind: opPut, Value: v}, regOutput{Outcome: resultDone, Version: version})
	}
	read := func(call, ret int64, v string, version int64) porcupine.Operation {
		return op(call, ret, regInput{Doc: "a", Kind: opRead, Concern: ReadLinearizable}, regOutput{Outcome: resultDone, Found: v != "", Value: v, Version: version})
	}
	refused := func(call, ret int64, expect int64) porcupine.Operation {
		return op(call, ret, regInput{Doc: "a", Kind: opCAS, Value: fmt.Sprint("cas", call), Expect: expect}, regOutput{Outcome: resultRefused})
	}
	for _, c := range []struct {
		name    string
		ops     []porcupine.Operation
		want    porcupine.CheckResult
		dropped int
		anomaly string
	}{
		{"a read sees the last acknowledged write", []porcupine.Operation{read(0, 1, "", 0), put(2, 3, "x", 1), read(4, 5, "x", 1)}, porcupine.Ok, 0, ""},
		{"a stale read", []porcupine.Operation{put(0, 1, "x", 1), put(2, 3, "y", 2), read(4, 5, "x", 1)}, porcupine.Illegal, 0, "stale reads"},
		{"an unknown write that took effect", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "y", 2)}, porcupine.Ok, 0, ""},
		{"an unknown write nobody saw is left out", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "x", 1), read(5, 6, "x", 1)}, porcupine.Ok, 1, ""},
		// v2 is nobody's but the unknown write's: it must stay.
		{"an unknown write filling a gap is kept", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), put(3, 4, "z", 3), read(5, 6, "z", 3)}, porcupine.Ok, 0, ""},
		{"a read of a rolled-back write", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "y", 2), put(5, 6, "z", 2)}, porcupine.Illegal, 0, "rolled-back"},
		// Refused against the unknown write, which a later read shows
		// never took effect.
		{"a refusal on a state that did not last", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "x", 1), put(3, 0, "y", 0), refused(4, 5, 1), read(6, 7, "x", 1)}, porcupine.Illegal, 0, "refused (412)"},
		{"a refusal on a state a later write shows did not last", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "x", 1), put(3, 0, "y", 0), refused(4, 5, 1), put(6, 7, "z", 2)}, porcupine.Illegal, 1, "refused (412)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ops, dropped := reduce(c.ops)
			res := porcupine.CheckOperations(registerModel([]string{"a"}), ops)
			if want := c.want == porcupine.Ok; res != want || dropped != c.dropped {
				t.Fatalf("linearizable %v with %d left out, want %v with %d", res, dropped, want, c.dropped)
			}
			if full := porcupine.CheckOperations(registerModel([]string{"a"}), c.ops); full != res {
				t.Fatalf("reduce changed the verdict: %v on the whole history, %v once reduced", full, res)
			}
			found := strings.Join(anomalies(ops), "\n")
			if (c.anomaly == "") != (found == "") || !strings.Contains(found, c.anomaly) {
				t.Fatalf("anomalies %q, want one about %q", found, c.anomaly)
			}
		})
	}
}
