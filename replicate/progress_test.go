package replicate

import (
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// TestProgressStages walks one replica's copy of a partition through its
// stages by the transitions the sender makes, with no I/O.
func TestProgressStages(t *testing.T) {
	pos := func(seq uint64) store.Position { return store.Position{Epoch: 2, Seq: seq} }
	run := func(from, upTo uint64) queuedRun {
		return queuedRun{Batch: store.Batch{Partition: 0, Epoch: 2, From: pos(from), UpTo: pos(upTo)}}
	}
	now := time.Unix(1000, 0)
	type step struct {
		name  string
		do    func(pr *progress)
		stage Stage
		check func(t *testing.T, pr *progress)
	}
	queued := func(n int) func(t *testing.T, pr *progress) {
		return func(t *testing.T, pr *progress) {
			t.Helper()
			if pr.queued != n || (n == 0) != (len(pr.queue) == 0) {
				t.Fatalf("queued %d documents in %d runs, want %d", pr.queued, len(pr.queue), n)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a probe answered streams, and an overflow sends it to a catch-up", []step{
			{"new", func(*progress) {}, StageProbe, nil},
			{"queued while probing", func(pr *progress) { pr.enqueue(run(0, 3), 3, 10, now) }, StageProbe, func(t *testing.T, pr *progress) {
				queued(3)(t, pr)
				if !pr.behindSince.Equal(now) {
					t.Fatalf("behind since %v, want since the change queued at %v", pr.behindSince, now)
				}
			}},
			{"applied", func(pr *progress) { pr.applied(pos(3), pos(3), pos(1)) }, StageStream, func(t *testing.T, pr *progress) {
				if pr.acked != pos(3) || !pr.behindSince.IsZero() || pr.told != pos(1) {
					t.Fatalf("acked %s, told %s, behind since %v", pr.acked, pr.told, pr.behindSince)
				}
			}},
			{"queued", func(pr *progress) { pr.enqueue(run(3, 8), 5, 10, now) }, StageStream, queued(8)},
			{"overflow", func(pr *progress) { pr.enqueue(run(8, 11), 3, 10, now) }, StageCatchUp, queued(0)},
			{"nothing queues while it waits", func(pr *progress) { pr.enqueue(run(11, 12), 1, 10, now) }, StageCatchUp, queued(0)},
			{"the copy starts", func(pr *progress) { pr.copyStarted(9) }, StageCopying, func(t *testing.T, pr *progress) {
				if pr.toCopy != 9 || pr.copied != 0 {
					t.Fatalf("copying %d of %d", pr.copied, pr.toCopy)
				}
			}},
			{"runs queue behind the copy", func(pr *progress) { pr.enqueue(run(11, 12), 1, 10, now) }, StageCopying, queued(1)},
			{"a chunk", func(pr *progress) {
				if !pr.chunkDelivered(4) {
					t.Fatal("a copy nothing cut short stopped")
				}
			}, StageCopying, nil},
			{"the copy reaches its target", func(pr *progress) { pr.caughtUp(false); pr.copyEnded() }, StageStream, queued(1)},
		}},
		{"a failure cuts a copy short, and the next waits out a rest that grows", []step{
			{"answered with a gap", func(pr *progress) { pr.gap(pos(1)) }, StageCatchUp, nil},
			{"the copy starts", func(pr *progress) { pr.copyStarted(0) }, StageCopying, nil},
			{"a batch in flight is lost", func(pr *progress) { pr.failed() }, StageCopying, nil},
			{"the next chunk says stop", func(pr *progress) {
				if pr.chunkDelivered(2) {
					t.Fatal("a copy cut short went on")
				}
			}, StageCopying, nil},
			{"it fails", func(pr *progress) { pr.copyFailed(now); pr.copyEnded() }, StageCatchUp, func(t *testing.T, pr *progress) {
				if pr.rested(now.Add(99*time.Millisecond)) || !pr.rested(now.Add(100*time.Millisecond)) {
					t.Fatalf("rests until %v after the first failure, want 100 ms", pr.restUntil.Sub(now))
				}
			}},
			{"and again", func(pr *progress) { pr.copyStarted(0); pr.copyFailed(now); pr.copyEnded() }, StageCatchUp, func(t *testing.T, pr *progress) {
				if got := pr.restUntil.Sub(now); got != 200*time.Millisecond {
					t.Fatalf("rests %v after the second failure in a row, want 200 ms", got)
				}
			}},
			{"a copy that gets there ends the rests", func(pr *progress) { pr.copyStarted(0); pr.caughtUp(false); pr.copyEnded() }, StageStream, func(t *testing.T, pr *progress) {
				if pr.failures != 0 || !pr.rested(now) {
					t.Fatalf("%d failures in a row left, resting until %v", pr.failures, pr.restUntil)
				}
			}},
		}},
		{"a replica that asks for a full copy gets one until one is done", []step{
			{"queued", func(pr *progress) { pr.enqueue(run(0, 2), 2, 10, now) }, StageProbe, queued(2)},
			{"asks", func(pr *progress) { pr.askedForFullCopy(pos(1)) }, StageCatchUp, func(t *testing.T, pr *progress) {
				queued(0)(t, pr)
				if !pr.needsFullCopy(store.Position{}) {
					t.Fatal("no full copy after the replica asked for one")
				}
			}},
			{"a catch-up done is not a full copy", func(pr *progress) { pr.copyStarted(0); pr.caughtUp(false); pr.copyEnded() }, StageStream, func(t *testing.T, pr *progress) {
				if !pr.needsFullCopy(store.Position{}) {
					t.Fatal("the replica's request was forgotten by a catch-up")
				}
			}},
			{"the full copy done", func(pr *progress) { pr.copyStarted(0); pr.caughtUp(true); pr.copyEnded() }, StageStream, func(t *testing.T, pr *progress) {
				if pr.needsFullCopy(store.Position{}) {
					t.Fatal("a full copy is still asked for after one was done")
				}
				if !pr.needsFullCopy(pos(2)) {
					t.Fatal("a replica behind the tombstone horizon gets no full copy")
				}
			}},
		}},
		{"a divergence or a refusal drops the queue", []step{
			{"applied short of the committed position", func(pr *progress) {
				pr.behindSince = now
				pr.applied(pos(2), pos(5), store.Position{})
			}, StageStream, func(t *testing.T, pr *progress) {
				if !pr.behindSince.Equal(now) {
					t.Fatalf("behind since %v, want still %v", pr.behindSince, now)
				}
			}},
			{"queued", func(pr *progress) { pr.enqueue(run(2, 5), 3, 10, now) }, StageStream, queued(3)},
			{"diverged", func(pr *progress) { pr.diverged(pos(1)) }, StageCatchUp, queued(0)},
			{"caught up", func(pr *progress) { pr.copyStarted(0); pr.caughtUp(false); pr.copyEnded() }, StageStream, nil},
			{"queued again", func(pr *progress) { pr.enqueue(run(5, 6), 1, 10, now) }, StageStream, queued(1)},
			{"refused: a later master", func(pr *progress) { pr.refusedTheMaster() }, StageCatchUp, queued(0)},
			{"the queue falls short", func(pr *progress) { pr.copyStarted(0); pr.copyEnded(); pr.queueFallsShort() }, StageCatchUp, nil},
			{"a tombstone horizon passed mid-copy starts over", func(pr *progress) { pr.copyStarted(0); pr.startOver(); pr.copyEnded() }, StageCatchUp, nil},
			{"answers are remembered by epoch", func(pr *progress) { pr.answered(3, 1); pr.answered(2, 2) }, StageCatchUp, func(t *testing.T, pr *progress) {
				if pr.heard != 3 || pr.ackedAt != 2 {
					t.Fatalf("heard epoch %d in answer %d, want epoch 3 and the latest answer, 2", pr.heard, pr.ackedAt)
				}
			}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := &progress{}
			for _, s := range tc.steps {
				s.do(pr)
				if got := pr.stage(); got != s.stage {
					t.Fatalf("after %q: stage %s, want %s", s.name, got, s.stage)
				}
				if s.check != nil {
					s.check(t, pr)
				}
			}
		})
	}
}
