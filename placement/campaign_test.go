package placement

import (
	"slices"
	"testing"

	"github.com/shoal-db/shoal/shard"
)

// A grant the voters name this node the holder of, for a partition its
// history holds, is taken back only through Retake, which has the tenure
// confirmed before it writes (seed 11110: a copy 780 changes behind took
// one back after a kill-all and rolled the others' majority writes back);
// for a partition it never held, it goes on as before, unless its store
// held nothing at start (see TestDecideNamesTheQuestionItLeavesToTheNode).
func TestAGrantTakenBackAfterARestartIsConfirmed(t *testing.T) {
	for _, c := range []struct {
		name        string
		newest      uint64
		retake      bool
		want, asked bool
	}{
		{"history here, confirmed later: campaigns through Retake", 5, true, true, true},
		{"history here, Retake declines", 5, false, false, true},
		{"nothing of it here: goes on", 0, false, true, false},
	} {
		asked := false
		in := WantInput{Self: "x", LearnedHolder: "x", NewestEpoch: c.newest, Succession: []string{"o", "x"},
			Up: func(string) bool { return true }, Lost: func(string) bool { return false }}
		if got := WantsLease(in, Answers{Retake: func([]string, func(string) bool) bool { asked = true; return c.retake }}); got != c.want || asked != c.asked {
			t.Errorf("%s: campaigns %v (Retake asked %v), want %v (asked %v)", c.name, got, asked, c.want, c.asked)
		}
	}
}

// The rule itself does no asking: it names the question the node answers,
// and only where its input cannot decide.
func TestDecideNamesTheQuestionItLeavesToTheNode(t *testing.T) {
	up := func(string) bool { return true }
	none := func(string) bool { return false }
	for _, c := range []struct {
		name string
		in   WantInput
		want Want
	}{
		{"holding", WantInput{Self: "x", Holding: true}, Want{Campaign: true}},
		{"master gone, a regular copy: the promotion rule", WantInput{Self: "r", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Regular: []string{"m", "r"}, Up: func(id string) bool { return id != "m" }, Lost: none}, Want{Ask: AskPromote}},
		{"the only copy gone, its replica waits for it unless it answers", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "o"}}, Regular: []string{"m"}, Up: func(id string) bool { return id != "m" }, Lost: none}, Want{Ask: AskTakeOver}},
		{"the only copy lost: taken over if it answers, else anyway", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m"}}, Regular: []string{"m"}, Succession: []string{"o"}, Up: func(id string) bool { return id != "m" }, Lost: func(id string) bool { return id == "m" }}, Want{Ask: AskTakeOver, Campaign: true}},
		{"named holder with history: retaken with a check", WantInput{Self: "x", LearnedHolder: "x", NewestEpoch: 3, Up: up, Lost: none}, Want{Ask: AskRetake}},
		{"never mastered, the first available", WantInput{Self: "x", Succession: []string{"x", "o"}, Up: up, Lost: none}, Want{Campaign: true}},
		{"never mastered, the first available, its store empty at start: with a check", WantInput{Self: "x", EmptyStore: true, Succession: []string{"x", "o"}, Up: up, Lost: none}, Want{Ask: AskRetake}},
		{"never mastered, not the first available", WantInput{Self: "x", EmptyStore: true, Succession: []string{"o", "x"}, Up: up, Lost: none}, Want{}},
		{"named by the voters, no history, its store empty at start: with a check", WantInput{Self: "x", EmptyStore: true, LearnedHolder: "x", Up: up, Lost: none}, Want{Ask: AskRetake}},
		{"own tenure lapsed: retaken with a check", WantInput{Self: "x", Assignment: shard.Assignment{Master: "x", Epoch: 3, Responsible: []string{"x", "r"}}, Regular: []string{"x", "r"}, NewestEpoch: 3, Up: up, Lost: none}, Want{Ask: AskRetake}},
		{"master up, a later master's writes here: the promotion rule", WantInput{Self: "r", Assignment: shard.Assignment{Master: "m", Epoch: 2, Responsible: []string{"m", "r"}}, Regular: []string{"m", "r"}, NewestEpoch: 7, Up: up, Lost: none}, Want{Ask: AskPromote}},
	} {
		if got := Decide(c.in); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A node shutting down keeps the leases it holds until it stops, and
// takes no other: not its own lapsed tenure, not a partition whose master
// is gone, not a new one (a node whose shutdown waited seconds for
// requests in flight took over 13 partitions of a node stopped before it,
// chose their replicas afresh, and left them masterless when it stopped).
func TestANodeShuttingDownTakesNoLease(t *testing.T) {
	up := func(id string) bool { return id != "m" }
	none := func(string) bool { return false }
	taking := []WantInput{
		{Self: "x", Assignment: shard.Assignment{Master: "x", Epoch: 2}, NewestEpoch: 2},
		{Self: "r", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Regular: []string{"m", "r"}, Up: up, Lost: none},
		{Self: "x", Succession: []string{"x"}, Up: up, Lost: none},
		{Self: "x", Receiving: true},
	}
	for i, in := range taking {
		if Decide(in) == (Want{}) {
			t.Fatalf("case %d: %+v takes no lease even when running", i, in)
		}
		in.Stopping = true
		if got := Decide(in); got != (Want{}) {
			t.Errorf("case %d, shutting down: %+v, want no campaign", i, got)
		}
	}
	if got := Decide(WantInput{Self: "x", Holding: true, Stopping: true}); got != (Want{Campaign: true}) {
		t.Errorf("a lease held while shutting down: %+v, want it kept", got)
	}
}

func TestWantsLeaseMovesALiveMasterOnlyByHandoff(t *testing.T) {
	up := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	lost := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	promoted := func([]string, func(string) bool, string) bool { return true }
	notPromoted := func([]string, func(string) bool, string) bool { return false }
	succession := []string{"o", "x", "y"} // o is the preferred master
	cases := []struct {
		name string
		in   WantInput
		ans  Answers
		want bool
	}{
		{"holding keeps it", WantInput{Self: "x", Holding: true, Assignment: shard.Assignment{Master: "x"}}, Answers{}, true},
		{"handing it off", WantInput{Self: "x", HandingOff: true, Assignment: shard.Assignment{Master: "x"}}, Answers{}, false},
		{"own lease lapsed", WantInput{Self: "x", Assignment: shard.Assignment{Master: "x"}, Up: up("o", "x")}, Answers{}, true},
		{"own tenure, a later epoch in this node's history: the copies decide", WantInput{Self: "x", NewestEpoch: 5, Assignment: shard.Assignment{Master: "x", Epoch: 3, Responsible: []string{"x", "r"}}, Up: up("o", "x", "r")}, Answers{Promote: notPromoted}, false},
		{"own tenure, the newest epoch this node has seen", WantInput{Self: "x", NewestEpoch: 3, Assignment: shard.Assignment{Master: "x", Epoch: 3, Responsible: []string{"x", "r"}}, Up: up("o", "x", "r")}, Answers{}, true},
		{"own lease superseded: the copies decide", WantInput{Self: "x", Superseded: true, Assignment: shard.Assignment{Master: "x", Responsible: []string{"x", "r"}}, Up: up("o", "x", "r")}, Answers{Promote: notPromoted}, false},
		{"own lease superseded, most current", WantInput{Self: "x", Superseded: true, Assignment: shard.Assignment{Master: "x", Responsible: []string{"x", "r"}}, Up: up("o", "x", "r")}, Answers{Promote: promoted}, true},
		{"master gone, an extra copy waits for the regular ones", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r", "o"}}, Up: up("o", "r")}, Answers{Promote: promoted}, false},
		{"new cluster: the preferred master", WantInput{Self: "o", Up: up("o", "x")}, Answers{}, true},
		{"new cluster: not before the preferred master", WantInput{Self: "x", Up: up("o", "x")}, Answers{}, false},
		{"new cluster: preferred master down", WantInput{Self: "x", Up: up("x")}, Answers{}, true},
		{"no master known, the partition in this node's history: wait to hear of its master", WantInput{Self: "o", NewestEpoch: 7, Up: up("o", "x")}, Answers{}, false},
		{"no master known, the voters named a live holder: wait for it", WantInput{Self: "o", LearnedHolder: "m", Up: up("o", "m")}, Answers{}, false},
		{"no master known, the voters named a holder that is down, not lost: wait for it", WantInput{Self: "o", NewestEpoch: 7, LearnedHolder: "m", Up: up("o")}, Answers{}, false},
		{"no master known, the voters named a holder down for long: still wait, the copies that count are unknown", WantInput{Self: "o", NewestEpoch: 7, LearnedHolder: "m", Lost: lost("m"), Up: up("o")}, Answers{}, false},
		{"no master known, the voters named this node: it goes on", WantInput{Self: "x", LearnedHolder: "x", Up: up("o", "x")}, Answers{}, true},
		{"preferred master, live stand-in, no handoff", WantInput{Self: "o", Assignment: shard.Assignment{Master: "s", Responsible: []string{"s", "o"}}, Up: up("o", "s")}, Answers{}, false},
		{"preferred master receiving a handoff", WantInput{Self: "o", Receiving: true, Assignment: shard.Assignment{Master: "s", Responsible: []string{"s", "o"}}, Up: up("o", "s")}, Answers{}, true},
		{"master up, the voters told of a later grant to another: still waited for (it campaigns itself if superseded; a failed campaign must not leave a live master contested)", WantInput{Self: "r", LearnedHolder: "o", Assignment: shard.Assignment{Master: "m", Epoch: 3, Responsible: []string{"m", "r"}}, Up: up("o", "m", "r")}, Answers{}, false},
		{"master up, a later master's writes in this node's history: the copies decide", WantInput{Self: "r", NewestEpoch: 7, Assignment: shard.Assignment{Master: "m", Epoch: 3, Responsible: []string{"m", "r"}}, Up: up("o", "m", "r")}, Answers{Promote: promoted}, true},
		{"master up, a later master's writes here, not the most current", WantInput{Self: "r", NewestEpoch: 7, Assignment: shard.Assignment{Master: "m", Epoch: 3, Responsible: []string{"m", "r"}}, Up: up("o", "m", "r")}, Answers{Promote: notPromoted}, false},
		{"own lease lapsed, Retake declines", WantInput{Self: "x", Assignment: shard.Assignment{Master: "x"}, Up: up("o", "x")}, Answers{Retake: func([]string, func(string) bool) bool { return false }}, false},
		{"just added, master alive", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "m", "r")}, Answers{}, false},
		{"master gone, a copy promoted", WantInput{Self: "r", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "r")}, Answers{Promote: promoted}, true},
		{"master gone, a copy not promoted", WantInput{Self: "r", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "r")}, Answers{Promote: notPromoted}, false},
		{"master gone, preferred master without a copy", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "r")}, Answers{}, false},
		{"master gone, every copy unreachable but not lost", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "x")}, Answers{}, false},
		{"master gone, the copy's lease lapsed but it is not lost", WantInput{Self: "o", Lost: lost("m"), Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "x")}, Answers{}, false},
		{"master gone, an extra copy waits for a regular one that is not lost", WantInput{Self: "o", Lost: lost("m"), Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r", "o"}}, Up: up("o")}, Answers{}, false},
		{"master merely down, its replica lost: an extra copy waits for the master", WantInput{Self: "c", Lost: lost("r"), Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r", "c"}}, Up: up("c")}, Answers{}, false},
		{"the only copy merely down (RF 1, or a restarted master naming itself alone): waited for", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m"}}, Up: up("o", "x")}, Answers{}, false},
		{"the only copy's lease over, it answers with a position this node has reached: taken over", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m"}}, Up: up("o", "x")}, Answers{TakeOver: func(m string) bool { return m == "m" }}, true},
		{"the only copy's lease over, it answers ahead of this node (or not at all): waited for", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m"}}, Up: up("o", "x")}, Answers{TakeOver: func(string) bool { return false }}, false},
		{"master gone with regular replicas: no take-over past them", WantInput{Self: "o", Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "x")}, Answers{TakeOver: func(string) bool { return true }}, false},
		{"the only copy lost: taken over", WantInput{Self: "o", Lost: lost("m"), Assignment: shard.Assignment{Master: "m", Responsible: []string{"m"}}, Up: up("o", "x")}, Answers{}, true},
		{"master gone, every copy lost", WantInput{Self: "o", Lost: lost("m", "r"), Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "x")}, Answers{}, true},
		{"master gone, every copy lost, not first", WantInput{Self: "x", Lost: lost("m", "r"), Assignment: shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, Up: up("o", "x")}, Answers{}, false},
	}
	for _, c := range cases {
		c.in.Succession = succession
		c.in.Regular = shard.WriteQuorum(2).Regular(c.in.Assignment.Responsible)
		if c.in.Up == nil {
			c.in.Up = up()
		}
		if c.in.Lost == nil {
			c.in.Lost = lost()
		}
		if c.ans.Promote == nil {
			c.ans.Promote = func([]string, func(string) bool, string) bool {
				t.Errorf("%s: the promotion rule was asked", c.name)
				return false
			}
		}
		if c.ans.TakeOver == nil {
			c.ans.TakeOver = func(string) bool { return false } // the master does not answer
		}
		if got := WantsLease(c.in, c.ans); got != c.want {
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
		l    Lapse
		id   string
		want bool
	}{
		{"nothing ended", Lapse{Holder: "m", Epoch: 4}, "m", false},
		{"the master's own lease ended", Lapse{Holder: "m", Epoch: 4, Ended: true}, "m", true},
		{"a later campaign's grant lapsed: the table's master is over too", Lapse{Holder: "r", Epoch: 5, Ended: true}, "m", true},
		{"that campaigner is over", Lapse{Holder: "r", Epoch: 5, Ended: true}, "r", true},
		{"an older lease ended: the table's master is newer", Lapse{Holder: "x", Epoch: 3, Ended: true}, "m", false},
		{"someone else", Lapse{Holder: "m", Epoch: 4, Ended: true}, "r", false},
	}
	for _, c := range cases {
		if got := c.l.Over(c.id, table); got != c.want {
			t.Errorf("%s: over(%s) = %v, want %v", c.name, c.id, got, c.want)
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
	ended := func(holder string, epoch uint64) Lapse { return Lapse{Holder: holder, Epoch: epoch, Ended: true} }
	for _, tc := range []struct {
		name       string
		own, heard Lapse
		table      uint64
		want       Lapse
	}{
		{"own record of the table's tenure", ended("node1", 4), Lapse{}, 4, ended("node1", 4)},
		{"own record older than the table's tenure, the voters say it ended", ended("node3", 3), ended("node1", 4), 4, ended("node1", 4)},
		{"own record older than the table's tenure, nothing heard", ended("node3", 3), Lapse{}, 4, ended("node3", 3)},
		{"own record older than the table's tenure, the voters heard of the same end", ended("node3", 3), ended("node3", 3), 4, ended("node3", 3)},
		{"own record not ended, the voters say it ended", Lapse{}, ended("node1", 4), 4, ended("node1", 4)},
		{"nothing anywhere", Lapse{}, Lapse{}, 4, Lapse{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KnownLapse(tc.own, tc.heard, tc.table); got != tc.want {
				t.Fatalf("KnownLapse(%+v, %+v, %d) = %+v, want %+v", tc.own, tc.heard, tc.table, got, tc.want)
			}
		})
	}
}

func TestAsksVoters(t *testing.T) {
	for _, c := range []struct {
		name   string
		a      shard.Assignment
		voter  bool
		record uint64
		stale  bool // the record was loaded at start
		want   bool
	}{
		{"no master known, nothing learned", shard.Assignment{}, true, 0, false, true},
		// seed 9106: node3 was handed the partition at epoch 3, its own
		// record said node1 at 2; it waited for node1, node1 for it.
		{"no master known, a holder in this voter's own record: asked all the same", shard.Assignment{}, true, 2, false, true},
		{"own tenure", shard.Assignment{Master: "x", Epoch: 3}, true, 3, false, false},
		{"a voter whose record is as new as the table", shard.Assignment{Master: "m", Epoch: 3, Responsible: []string{"m", "x"}}, true, 3, false, false},
		{"a voter that missed the table's grant, a regular copy", shard.Assignment{Master: "m", Epoch: 4, Responsible: []string{"m", "x"}}, true, 3, false, true},
		// seed 9728: node1 won epoch 8 while the master, node3 at 7, was
		// paused, and was killed before it wrote; restarted, its own
		// record (node1@8, loaded at start) says nothing of whether that
		// lease is over, so it took node3 for a live master and waited,
		// while node3 and node2 waited for node1 (as current, lower id).
		{"a restarted voter whose record, loaded at start, is newer than the table", shard.Assignment{Master: "m", Epoch: 7, Responsible: []string{"m", "x"}}, true, 8, true, true},
		{"a restarted voter whose record is newer than the table, no copy", shard.Assignment{Master: "m", Epoch: 7, Responsible: []string{"m", "r"}}, true, 8, true, false},
		{"not a voter, a regular copy", shard.Assignment{Master: "m", Epoch: 4, Responsible: []string{"m", "x"}}, false, 0, false, true},
		{"not a voter, no copy", shard.Assignment{Master: "m", Epoch: 4, Responsible: []string{"m", "r"}}, false, 0, false, false},
	} {
		if got := AsksVoters("x", c.a, false, c.voter, c.record, c.stale, 2); got != c.want {
			t.Errorf("%s: asks %v, want %v", c.name, got, c.want)
		}
	}
	if AsksVoters("x", shard.Assignment{}, true, true, 0, false, 2) {
		t.Error("a holder asks the voters about its own partition")
	}
}
