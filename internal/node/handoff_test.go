package node

import (
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

func TestWantsPartitionMovesALiveMasterOnlyByHandoff(t *testing.T) {
	up := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	lost := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	promoted := func([]string, func(string) bool) bool { return true }
	notPromoted := func([]string, func(string) bool) bool { return false }
	succession := []string{"o", "x", "y"} // o is the preferred master
	cases := []struct {
		name string
		in   wantInput
		want bool
	}{
		{"holding keeps it", wantInput{self: "x", holding: true, a: shard.Assignment{Master: "x"}}, true},
		{"handing it off", wantInput{self: "x", handingOff: true, a: shard.Assignment{Master: "x"}}, false},
		{"own lease lapsed", wantInput{self: "x", a: shard.Assignment{Master: "x"}, up: up("o", "x")}, true},
		{"own tenure, a later epoch in this node's history: the copies decide", wantInput{self: "x", newestEpoch: 5, promote: notPromoted, a: shard.Assignment{Master: "x", Epoch: 3, Responsible: []string{"x", "r"}}, up: up("o", "x", "r")}, false},
		{"own tenure, the newest epoch this node has seen", wantInput{self: "x", newestEpoch: 3, a: shard.Assignment{Master: "x", Epoch: 3, Responsible: []string{"x", "r"}}, up: up("o", "x", "r")}, true},
		{"own lease superseded: the copies decide", wantInput{self: "x", superseded: true, promote: notPromoted, a: shard.Assignment{Master: "x", Responsible: []string{"x", "r"}}, up: up("o", "x", "r")}, false},
		{"own lease superseded, most current", wantInput{self: "x", superseded: true, promote: promoted, a: shard.Assignment{Master: "x", Responsible: []string{"x", "r"}}, up: up("o", "x", "r")}, true},
		{"master gone, an extra copy waits for the regular ones", wantInput{self: "o", promote: promoted, a: shard.Assignment{Master: "m", Responsible: []string{"m", "r", "o"}}, up: up("o", "r")}, false},
		{"new cluster: the preferred master", wantInput{self: "o", up: up("o", "x")}, true},
		{"new cluster: not before the preferred master", wantInput{self: "x", up: up("o", "x")}, false},
		{"new cluster: preferred master down", wantInput{self: "x", up: up("x")}, true},
		{"no master known, the partition in this node's history: wait to hear of its master", wantInput{self: "o", newestEpoch: 7, up: up("o", "x")}, false},
		{"no master known, the voters named a live holder: wait for it", wantInput{self: "o", learnedHolder: "m", up: up("o", "m")}, false},
		{"no master known, the voters named a holder that is down, not lost: wait for it", wantInput{self: "o", newestEpoch: 7, learnedHolder: "m", up: up("o")}, false},
		{"no master known, the voters named a holder down for long: still wait, the copies that count are unknown", wantInput{self: "o", newestEpoch: 7, learnedHolder: "m", lost: lost("m"), up: up("o")}, false},
		{"no master known, the voters named this node: it goes on", wantInput{self: "x", learnedHolder: "x", up: up("o", "x")}, true},
		{"preferred master, live stand-in, no handoff", wantInput{self: "o", a: shard.Assignment{Master: "s", Responsible: []string{"s", "o"}}, up: up("o", "s")}, false},
		{"preferred master receiving a handoff", wantInput{self: "o", receiving: true, a: shard.Assignment{Master: "s", Responsible: []string{"s", "o"}}, up: up("o", "s")}, true},
		{"just added, master alive", wantInput{self: "o", a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "m", "r")}, false},
		{"master gone, a copy promoted", wantInput{self: "r", promote: promoted, a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "r")}, true},
		{"master gone, a copy not promoted", wantInput{self: "r", promote: notPromoted, a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "r")}, false},
		{"master gone, preferred master without a copy", wantInput{self: "o", a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "r")}, false},
		{"master gone, every copy unreachable but not lost", wantInput{self: "o", a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "x")}, false},
		{"master gone, the copy's lease lapsed but it is not lost", wantInput{self: "o", lost: lost("m"), a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "x")}, false},
		{"master gone, an extra copy waits for a regular one that is not lost", wantInput{self: "o", lost: lost("m"), a: shard.Assignment{Master: "m", Responsible: []string{"m", "r", "o"}}, up: up("o")}, false},
		{"master merely down, its replica lost: an extra copy waits for the master", wantInput{self: "c", lost: lost("r"), a: shard.Assignment{Master: "m", Responsible: []string{"m", "r", "c"}}, up: up("c")}, false},
		{"the only copy merely down (RF 1, or a restarted master naming itself alone): waited for", wantInput{self: "o", a: shard.Assignment{Master: "m", Responsible: []string{"m"}}, up: up("o", "x")}, false},
		{"the only copy's lease over, it answers with a position this node has reached: taken over", wantInput{self: "o", takeOver: func(m string) bool { return m == "m" }, a: shard.Assignment{Master: "m", Responsible: []string{"m"}}, up: up("o", "x")}, true},
		{"the only copy's lease over, it answers ahead of this node (or not at all): waited for", wantInput{self: "o", takeOver: func(string) bool { return false }, a: shard.Assignment{Master: "m", Responsible: []string{"m"}}, up: up("o", "x")}, false},
		{"master gone with regular replicas: no take-over past them", wantInput{self: "o", takeOver: func(string) bool { return true }, a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "x")}, false},
		{"the only copy lost: taken over", wantInput{self: "o", lost: lost("m"), a: shard.Assignment{Master: "m", Responsible: []string{"m"}}, up: up("o", "x")}, true},
		{"master gone, every copy lost", wantInput{self: "o", lost: lost("m", "r"), a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "x")}, true},
		{"master gone, every copy lost, not first", wantInput{self: "x", lost: lost("m", "r"), a: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up: up("o", "x")}, false},
	}
	for _, c := range cases {
		c.in.succession = succession
		c.in.regular = shard.WriteQuorum(2).Regular(c.in.a.Responsible)
		if c.in.up == nil {
			c.in.up = up()
		}
		if c.in.lost == nil {
			c.in.lost = lost()
		}
		if got := wantsPartition(c.in); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A voter's record of a lease that ended with nobody after it passes over
// the holder, and the master the table names at that epoch or before.
func TestLapseIsOverForTheHolderAndEarlierMasters(t *testing.T) {
	table := shard.Assignment{Master: "m", Epoch: 4}
	cases := []struct {
		name string
		l    lapse
		id   string
		want bool
	}{
		{"nothing ended", lapse{holder: "m", epoch: 4}, "m", false},
		{"the master's own lease ended", lapse{holder: "m", epoch: 4, ended: true}, "m", true},
		{"a later campaign's grant lapsed: the table's master is over too", lapse{holder: "r", epoch: 5, ended: true}, "m", true},
		{"that campaigner is over", lapse{holder: "r", epoch: 5, ended: true}, "r", true},
		{"an older lease ended: the table's master is newer", lapse{holder: "x", epoch: 3, ended: true}, "m", false},
		{"someone else", lapse{holder: "m", epoch: 4, ended: true}, "r", false},
	}
	for _, c := range cases {
		if got := c.l.over(c.id, table); got != c.want {
			t.Errorf("%s: over(%s) = %v, want %v", c.name, c.id, got, c.want)
		}
	}
}

// A replica replacing a regular copy takes its slot only once it holds
// what that copy held; until then the replaced copy keeps counting and the
// newcomer follows as an extra copy (issue 11, case 2). Before, the
// newcomer took the counted slot at once and, empty, could promote itself.
func TestAReplacementReplicaCountsOnlyOnceCaughtUp(t *testing.T) {
	yes := func([]string, []string) bool { return true }
	no := func([]string, []string) bool { return false }
	cases := []struct {
		name            string
		current, chosen []string
		copies          int
		caughtUp        func([]string, []string) bool
		want            []string
	}{
		{"unchanged", []string{"r"}, []string{"r"}, 2, no, []string{"r"}},
		{"a first replica counts at once: it replaces nobody", nil, []string{"r"}, 2, no, []string{"r"}},
		{"replacement still copying: the old copy keeps its slot", []string{"old"}, []string{"new"}, 2, no, []string{"old", "new"}},
		{"replacement caught up: it takes the slot", []string{"old"}, []string{"new"}, 2, yes, []string{"new"}},
		{"RF 3, one of two replaced", []string{"a", "old"}, []string{"a", "new"}, 3, no, []string{"a", "old", "new"}},
		{"extra copies after the regular ones stay after", []string{"old", "x"}, []string{"new", "x"}, 2, no, []string{"old", "new", "x"}},
	}
	for _, c := range cases {
		if got := keepReplacedCopies(c.current, c.chosen, c.copies, c.caughtUp); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Newcomers replace regular copies once they hold what those held; when
// they are nearly there but the replaced copies keep taking live changes
// ahead of them (seed 2002: a removed node, kept as a regular replica
// after handing a partition over, acknowledged each batch before the
// newcomer did for two minutes of writes), the master pauses writes to
// let them reach it instead of waiting for a moment they are level.
func TestANewcomerBehindAMovingReplacedCopyIsCaughtUpUnderAPause(t *testing.T) {
	at := func(e, s uint64) ack { return ack{pos: store.Position{Epoch: e, Seq: s}, known: true} }
	unknown := ack{}
	last := store.Position{Epoch: 6, Seq: 1416}
	cases := []struct {
		name      string
		newcomers []ack
		replaced  []ack
		want      replaceStep
	}{
		{"level with the replaced copy and the master", []ack{at(6, 1416)}, []ack{at(6, 1416)}, replaceNow},
		{"level with the replaced copy, behind the master in this tenure", []ack{at(6, 1400)}, []ack{at(6, 1400)}, replaceNow},
		{"one change behind a replaced copy that took it first", []ack{at(6, 1415)}, []ack{at(6, 1416)}, replacePaused},
		{"a batch behind, within the handoff margin", []ack{at(6, 1300)}, []ack{at(6, 1416)}, replacePaused},
		{"far behind: keep the replaced copy", []ack{at(6, 1000)}, []ack{at(6, 1416)}, replaceKeep},
		{"in an older epoch: keep", []ack{at(5, 676)}, []ack{at(6, 1416)}, replaceKeep},
		{"not heard from yet: keep", []ack{unknown}, []ack{at(6, 1416)}, replaceKeep},
		{"replaced copy not heard from, newcomer at the master", []ack{at(6, 1416)}, []ack{unknown}, replaceNow},
		{"one of two newcomers behind", []ack{at(6, 1416), at(6, 1410)}, []ack{at(6, 1416)}, replacePaused},
		{"one of two newcomers far behind", []ack{at(6, 1416), at(6, 10)}, []ack{at(6, 1416)}, replaceKeep},
	}
	for _, c := range cases {
		if got := decideReplacement(6, last, c.newcomers, c.replaced); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A voter's own record of a lease is the fastest sign that a master is
// gone, unless a later tenure happened without it: seed 4101 paused node3,
// the master at epoch 3; node1 won epoch 4 from the two other voters, saw
// a copy ahead and released it; node3, resumed, still held its own record
// of epoch 3 (ended: its own lease) and took node1, the table's master at
// 4, as alive, while node2 waited for node3, the most current copy: nobody
// campaigned for over a minute. A record older than the table's epoch is
// stale: what a majority of the voters said stands instead.
func TestAStaleVoterRecordDefersToTheVoters(t *testing.T) {
	ended := func(holder string, epoch uint64) lapse { return lapse{holder: holder, epoch: epoch, ended: true} }
	for _, tc := range []struct {
		name       string
		own, heard lapse
		table      uint64
		want       lapse
	}{
		{"own record of the table's tenure", ended("node1", 4), lapse{}, 4, ended("node1", 4)},
		{"own record older than the table's tenure, the voters say it ended", ended("node3", 3), ended("node1", 4), 4, ended("node1", 4)},
		{"own record older than the table's tenure, nothing heard", ended("node3", 3), lapse{}, 4, ended("node3", 3)},
		{"own record older than the table's tenure, the voters heard of the same end", ended("node3", 3), ended("node3", 3), 4, ended("node3", 3)},
		{"own record not ended, the voters say it ended", lapse{}, ended("node1", 4), 4, ended("node1", 4)},
		{"nothing anywhere", lapse{}, lapse{}, 4, lapse{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := knownLapse(tc.own, tc.heard, tc.table); got != tc.want {
				t.Fatalf("knownLapse(%+v, %+v, %d) = %+v, want %+v", tc.own, tc.heard, tc.table, got, tc.want)
			}
		})
	}
}

// A handoff carries the writes of the tenure it ended, not an older one's:
// a majority write committed at (1, 50) by a master paused past its lease,
// rolled back when another node took over from (1, 40), must not be
// answered "ok" because this node later held the partition again and
// handed it over at (3, 60) (the reviewer's scenario; positions compare
// across epochs).
func TestAHandoffCarriesOnlyItsOwnTenuresWrites(t *testing.T) {
	h := newHandoffs(nil)
	h.handed[7] = store.Position{Epoch: 3, Seq: 60}
	for _, tc := range []struct {
		pos  store.Position
		want bool
	}{
		{store.Position{Epoch: 3, Seq: 59}, true},
		{store.Position{Epoch: 3, Seq: 60}, true},
		{store.Position{Epoch: 3, Seq: 61}, false},
		{store.Position{Epoch: 1, Seq: 50}, false},
	} {
		if got := h.HandedOver(7, tc.pos); got != tc.want {
			t.Errorf("HandedOver(7, %s) = %v, want %v", tc.pos, got, tc.want)
		}
	}
	if h.HandedOver(6, store.Position{Epoch: 3, Seq: 1}) {
		t.Error("a partition never handed over counts as handed over")
	}
}

// A partition whose paused swap failed is not paused again before its
// retry time: a newcomer that cannot catch up within the pause would stall
// the partition's writes every round (found in review).
func TestAFailedPausedSwapWaitsBeforeTheNext(t *testing.T) {
	now := time.Unix(100, 0)
	due := []pausedSwap{{partition: 1}, {partition: 2}, {partition: 3}}
	retryAt := map[int]time.Time{1: now.Add(time.Second), 2: now.Add(-time.Second)}
	got := swapsDue(due, retryAt, now)
	if len(got) != 2 || got[0].partition != 2 || got[1].partition != 3 {
		t.Fatalf("due %+v, want partitions 2 and 3", got)
	}
	if _, ok := retryAt[2]; ok {
		t.Fatal("a passed retry time stays")
	}
	if _, ok := retryAt[1]; !ok {
		t.Fatal("a retry time to come was dropped")
	}
}

func TestAsksVoters(t *testing.T) {
	for _, c := range []struct {
		name   string
		a      shard.Assignment
		voter  bool
		record uint64
		want   bool
	}{
		{"no master known, nothing learned", shard.Assignment{}, true, 0, true},
		// seed 9106: node3 was handed the partition at epoch 3, its own
		// record said node1 at 2; it waited for node1, node1 for it.
		{"no master known, a holder in this voter's own record: asked all the same", shard.Assignment{}, true, 2, true},
		{"own tenure", shard.Assignment{Master: "x", Epoch: 3}, true, 3, false},
		{"a voter whose record is as new as the table", shard.Assignment{Master: "m", Epoch: 3, Responsible: []string{"m", "x"}}, true, 3, false},
		{"a voter that missed the table's grant, a regular copy", shard.Assignment{Master: "m", Epoch: 4, Responsible: []string{"m", "x"}}, true, 3, true},
		{"not a voter, a regular copy", shard.Assignment{Master: "m", Epoch: 4, Responsible: []string{"m", "x"}}, false, 0, true},
		{"not a voter, no copy", shard.Assignment{Master: "m", Epoch: 4, Responsible: []string{"m", "r"}}, false, 0, false},
	} {
		if got := asksVoters("x", c.a, false, c.voter, c.record, 2); got != c.want {
			t.Errorf("%s: asks %v, want %v", c.name, got, c.want)
		}
	}
	if asksVoters("x", shard.Assignment{}, true, true, 0, 2) {
		t.Error("a holder asks the voters about its own partition")
	}
}

// A node restarted after its tenure names the replicas it recorded for
// that tenure or a later one of its own that had no write; a list recorded
// for an older tenure may name copies that lack this one's writes, so it
// names itself alone then.
func TestTenureAssignment(t *testing.T) {
	for _, c := range []struct {
		name      string
		replicas  []string
		listEpoch uint64
		want      []string
	}{
		{"the tenure's list", []string{"b", "c"}, 5, []string{"a", "b", "c"}},
		{"a later tenure's list (no write in it)", []string{"b", "d"}, 6, []string{"a", "b", "d"}},
		{"an older tenure's list", []string{"b", "c"}, 4, []string{"a"}},
		{"no list", nil, 0, []string{"a"}},
		{"a list naming the master", []string{"b", "a", "b"}, 5, []string{"a", "b"}},
	} {
		a := tenureAssignment("a", 3, 5, store.TenureList{Epoch: c.listEpoch, Replicas: c.replicas})
		if a.Master != "a" || a.Epoch != 5 || a.Partition != 3 || !slices.Equal(a.Responsible, c.want) {
			t.Errorf("%s: %+v, want responsible %v", c.name, a, c.want)
		}
	}
}
