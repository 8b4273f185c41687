package applybatch

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate/applyrule"
)

// fakeTx is a partition copy in memory: its state, its stored documents
// in position order, and the writes the driver made.
type fakeTx struct {
	st      State
	docs    []*record.Doc
	scanErr error
	calls   []string
	record  *[2]record.Position // the staged record: applied, horizon
	kept    []string            // keys saved for rollback
}

func (f *fakeTx) note(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeTx) Load() error                      { return nil }
func (f *fakeTx) State() State                     { return f.st }
func (f *fakeTx) Stage(pos record.Position)        { f.note("stage %s", pos) }
func (f *fakeTx) SeeEpoch(e uint64)                { f.st.EpochSeen = max(f.st.EpochSeen, e) }
func (f *fakeTx) SetRestoring(e uint64)            { f.st.Restoring = e }
func (f *fakeTx) SetChain(c []record.EpochStart)   { f.st.Chain = c }
func (f *fakeTx) RecopyDone()                      { f.st.Recopy = false }
func (f *fakeTx) CapCommitted(pos record.Position) { f.note("cap committed %s", pos) }
func (f *fakeTx) SaveRecord(applied, horizon record.Position) {
	f.record = &[2]record.Position{applied, horizon}
}
func (f *fakeTx) ScanAfter(after record.Position, limit int) ([]*record.Doc, error) {
	if f.scanErr != nil {
		return nil, f.scanErr
	}
	var out []*record.Doc
	for _, d := range f.docs {
		if d.Pos.Compare(after) > 0 && len(out) < limit {
			out = append(out, d)
		}
	}
	return out, nil
}
func (f *fakeTx) SaveRollback(docs []*record.Doc, epoch uint64, start record.Position) error {
	for _, d := range docs {
		f.kept = append(f.kept, d.Key)
	}
	return nil
}
func (f *fakeTx) ForgetHistory(horizon record.Position, seen uint64) {
	f.note("forget history")
	f.st.Applied, f.st.Held, f.st.Horizon, f.st.EpochSeen, f.st.Recopy, f.st.Chain = record.Position{}, record.Position{}, horizon, seen, true, nil
	f.SaveRecord(record.Position{}, horizon)
}
func (f *fakeTx) ApplyRun(docs []*record.Doc, last record.Position) (record.Position, error) {
	for _, d := range docs {
		f.docs = append(f.docs, d)
		last = applyrule.MaxPosition(last, d.Pos)
	}
	f.note("apply %d", len(docs))
	return last, nil
}
func (f *fakeTx) ApplyFull(b *record.Batch, _ []record.EpochStart, last record.Position) (record.Position, error) {
	return f.ApplyRun(b.Docs, last)
}
func (f *fakeTx) Overwrite(docs []*record.Doc, absent []string) error {
	f.note("overwrite %d, remove %d", len(docs), len(absent))
	return nil
}
func (f *fakeTx) LastPosition() (record.Position, error) { return f.st.Last, nil }
func (f *fakeTx) SyncRecord() error                      { f.note("sync"); return nil }
func (f *fakeTx) Advance(applied, last, horizon, committed record.Position) {
	f.st.Applied, f.st.Held, f.st.Last, f.st.Horizon = applied, applied, last, horizon
	f.note("advance %s", applied)
}

func pos(e, s uint64) record.Position { return record.Position{Epoch: e, Seq: s} }

func doc(key string, p record.Position) *record.Doc { return &record.Doc{Key: key, Pos: p} }

// A copy at (1, 5) of epoch 1, its chain naming epoch 1 from the start.
func copyAt5() *fakeTx {
	return &fakeTx{
		st:   State{Held: pos(1, 5), Applied: pos(1, 5), Last: pos(1, 5), EpochSeen: 1, Chain: []record.EpochStart{{Epoch: 1}}},
		docs: []*record.Doc{doc("a", pos(1, 4)), doc("b", pos(1, 5))},
	}
}

// The driver carries out the rules in their order: what it refuses
// touches nothing, a refusal that saw a newer epoch records it, a newer
// master's first batch is checked, and what diverged is kept and its keys
// asked back.
func TestRunCarriesOutTheRulesInOrder(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name       string
		tx         func() *fakeTx
		batch      record.Batch
		err        error
		applied    record.Position
		calls      []string
		record     *[2]record.Position
		kept       []string
		restoring  uint64
		chainEpoch uint64 // the newest epoch of the chain after
	}{{
		name: "the lease holder takes nothing",
		tx: func() *fakeTx {
			f := copyAt5()
			f.st.Master = true
			return f
		},
		batch: record.Batch{Epoch: 2, From: pos(1, 5), UpTo: pos(2, 1), Docs: []*record.Doc{doc("c", pos(2, 1))}},
		err:   ErrIsMaster, applied: pos(1, 5), chainEpoch: 1,
	}, {
		name:  "a superseded master's batch is refused and nothing is staged",
		tx:    func() *fakeTx { f := copyAt5(); f.st.EpochSeen = 3; return f },
		batch: record.Batch{Epoch: 2, From: pos(1, 5), UpTo: pos(2, 1)},
		err:   ErrStaleEpoch, applied: pos(1, 5), chainEpoch: 1,
	}, {
		name:    "a run that follows on is applied and recorded",
		tx:      copyAt5,
		batch:   record.Batch{Epoch: 1, From: pos(1, 5), UpTo: pos(1, 6), Docs: []*record.Doc{doc("c", pos(1, 6))}},
		applied: pos(1, 6), calls: []string{"stage 1.6", "apply 1", "advance 1.6"},
		record: &[2]record.Position{pos(1, 6), {}}, chainEpoch: 1,
	}, {
		name:  "a gap of the same master records nothing",
		tx:    copyAt5,
		batch: record.Batch{Epoch: 1, From: pos(1, 7), UpTo: pos(1, 8), Docs: []*record.Doc{doc("c", pos(1, 8))}},
		err:   ErrGap, applied: pos(1, 5), calls: []string{"stage 1.8"}, chainEpoch: 1,
	}, {
		name: "a gap of a newer master records its epoch as seen",
		tx: func() *fakeTx {
			f := copyAt5()
			f.st.Held, f.st.Applied, f.st.Last = pos(1, 3), pos(1, 3), pos(1, 3)
			f.docs = f.docs[:1]
			f.docs[0].Pos = pos(1, 3)
			return f
		},
		batch: record.Batch{Epoch: 2, EpochStart: pos(1, 5), From: pos(2, 4), UpTo: pos(2, 5), Docs: []*record.Doc{doc("c", pos(2, 5))}},
		err:   ErrGap, applied: pos(1, 3), calls: []string{"stage 2.5"},
		record: &[2]record.Position{pos(1, 3), {}}, chainEpoch: 1,
	}, {
		name:    "a newer master whose history holds everything held is followed",
		tx:      copyAt5,
		batch:   record.Batch{Epoch: 2, EpochStart: pos(1, 5), From: pos(1, 5), UpTo: pos(2, 1), Docs: []*record.Doc{doc("c", pos(2, 1))}},
		applied: pos(2, 1), calls: []string{"stage 2.1", "apply 1", "advance 2.1"},
		record: &[2]record.Position{pos(2, 1), {}}, chainEpoch: 2,
	}, {
		name: "changes the newer master never had are kept and asked back",
		tx: func() *fakeTx {
			f := copyAt5()
			f.docs = append(f.docs, doc("x", pos(1, 6)), doc("y", pos(1, 7)))
			f.st.Held, f.st.Applied, f.st.Last = pos(1, 7), pos(1, 7), pos(1, 7)
			return f
		},
		batch: record.Batch{Epoch: 2, EpochStart: pos(1, 5), From: pos(1, 5), UpTo: pos(2, 1), Docs: []*record.Doc{doc("c", pos(2, 1))}},
		err:   ErrDiverged, applied: pos(1, 5), calls: []string{"stage 2.1", "cap committed 1.5"},
		record: &[2]record.Position{pos(1, 7), {}}, kept: []string{"x", "y"}, restoring: 2, chainEpoch: 1,
	}, {
		// A removed key may be one whose tombstone the master purged.
		name: "a restore takes the master's horizon, durably, before it removes anything",
		tx: func() *fakeTx {
			f := copyAt5()
			f.st.Restoring, f.st.EpochSeen = 2, 2
			return f
		},
		batch:   record.Batch{Epoch: 2, Restore: true, From: pos(1, 4), UpTo: pos(1, 4), Absent: []string{"k"}, Horizon: pos(1, 3)},
		applied: pos(1, 4), calls: []string{"stage 1.4", "sync", "advance 1.5", "overwrite 0, remove 1", "sync", "advance 1.4"},
		record: &[2]record.Position{pos(1, 4), pos(1, 3)}, restoring: 2, chainEpoch: 1,
	}, {
		name:  "a check that fails is refused and done again by the next batch",
		tx:    func() *fakeTx { f := copyAt5(); f.scanErr = errors.New("store down"); return f },
		batch: record.Batch{Epoch: 2, EpochStart: pos(1, 5), From: pos(1, 5), UpTo: pos(2, 1), Docs: []*record.Doc{doc("c", pos(2, 1))}},
		err:   errors.New("store down"), calls: []string{"stage 2.1"},
		record: &[2]record.Position{pos(1, 5), {}}, restoring: 2, chainEpoch: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.tx()
			b := tc.batch
			r := Run(f, &b, log)
			if (tc.err == nil) != (r.Err == nil) || tc.err != nil && r.Err.Error() != tc.err.Error() {
				t.Fatalf("error %v, want %v", r.Err, tc.err)
			}
			if r.Applied != tc.applied {
				t.Errorf("applied %s, want %s", r.Applied, tc.applied)
			}
			if !slices.Equal(f.calls, tc.calls) {
				t.Errorf("calls %q, want %q", f.calls, tc.calls)
			}
			if (f.record == nil) != (tc.record == nil) || f.record != nil && *f.record != *tc.record {
				t.Errorf("record staged %v, want %v", f.record, tc.record)
			}
			if !slices.Equal(f.kept, tc.kept) {
				t.Errorf("kept for rollback %q, want %q", f.kept, tc.kept)
			}
			if f.st.Restoring != tc.restoring {
				t.Errorf("restoring %d, want %d", f.st.Restoring, tc.restoring)
			}
			if got := f.st.Chain[len(f.st.Chain)-1].Epoch; got != tc.chainEpoch {
				t.Errorf("the chain's newest epoch is %d, want %d", got, tc.chainEpoch)
			}
		})
	}
}
