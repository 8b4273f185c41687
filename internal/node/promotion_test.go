package node

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// A tenure's check asks the UP regular copies of its list; when the list
// names no other copy (a grant taken back after a restart, before the
// table knew the list), it asks every UP member, and only those holding
// the partition count (seed 11110: a tenure so taken back had nobody to
// ask).
func TestATenuresCheckAsksEveryMemberWhenItsListNamesNoOther(t *testing.T) {
	states := map[string]cluster.State{"x": cluster.Up, "a": cluster.Up, "b": cluster.Down, "c": cluster.Up}
	for _, tc := range []struct {
		name     string
		regular  []string
		members  []string
		everyone bool
	}{
		{"the regular copies up", []string{"x", "a", "b"}, []string{"a"}, false},
		{"a list of this node alone", []string{"x"}, []string{"a", "c"}, true},
		{"no list", nil, []string{"a", "c"}, true},
	} {
		got := confirmAsks("x", tc.regular, states)
		if !slices.Equal(got.members, tc.members) || got.everyone != tc.everyone {
			t.Errorf("%s: asks %v (everyone %v), want %v (everyone %v)", tc.name, got.members, got.everyone, tc.members, tc.everyone)
		}
	}
}

// A tenure won soon after a campaign by a checked rule (the promotion
// rule, a take-over, a retake) takes no write until it is confirmed; a
// lapsed lease renewed at its epoch continues a tenure that could already
// write in this run, and leaves one still to be confirmed so. A restarted
// node's tenure is checked even at the epoch its table names (the table
// learned it from the others; its voters grant that epoch as a renewal).
func TestATenureTakenBackTakesNoWriteUntilConfirmed(t *testing.T) {
	ttl := time.Second
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	b := newTenureChecks(ttl)

	// Won by a retake: checked until confirmed.
	b.campaign(6, at(0))
	if b.confirmed(6, 9, at(100*time.Millisecond)) {
		t.Error("a tenure won by a retake takes writes before its check is registered")
	}
	if !b.won(6, tenureCheck{epoch: 9, won: at(100 * time.Millisecond)}) || b.confirmed(6, 9, at(200*time.Millisecond)) {
		t.Error("a tenure won by a retake takes writes before it is confirmed")
	}
	// Its lease lapses and is renewed at its epoch: still to be confirmed.
	b.campaign(6, at(3*time.Second))
	if b.won(6, tenureCheck{epoch: 9, won: at(3 * time.Second)}) || b.confirmed(6, 9, at(10*time.Second)) {
		t.Error("an unconfirmed tenure renewed after a lapse takes writes unconfirmed")
	}
	b.confirm(6, 9)
	if !b.confirmed(6, 9, at(10*time.Second)) {
		t.Error("a confirmed tenure takes no writes")
	}
	// Confirmed, then lapsed and renewed at its epoch: continues, told of
	// the win or not (renewed within one round).
	b.campaign(6, at(20*time.Second))
	if !b.confirmed(6, 9, at(20*time.Second)) {
		t.Error("a confirmed tenure renewed within one round after a lapse waits for a check it needs not")
	}
	if b.won(6, tenureCheck{epoch: 9, won: at(20 * time.Second)}) || !b.confirmed(6, 9, at(20*time.Second)) {
		t.Error("a confirmed tenure renewed after a lapse waits for a check it needs not")
	}

	// A tenure won with no checked campaign (a new partition, a handoff
	// received) writes at once, and so after a lapse.
	if b.won(7, tenureCheck{epoch: 1, won: at(0)}) || !b.confirmed(7, 1, at(0)) {
		t.Error("a tenure won without a checked campaign waits for a check")
	}
	// A campaign long before the win does not make it checked.
	b.campaign(8, at(0))
	if b.won(8, tenureCheck{epoch: 4, won: at(3 * time.Second)}) || !b.confirmed(8, 4, at(3*time.Second)) {
		t.Error("a campaign two LEASE_TTL before the win made it checked")
	}

	// After a restart (a new book), the epoch the table names is checked.
	restarted := newTenureChecks(ttl)
	restarted.campaign(6, at(0))
	if !restarted.won(6, tenureCheck{epoch: 9, won: at(50 * time.Millisecond)}) || restarted.confirmed(6, 9, at(time.Second)) {
		t.Error("a restarted node takes writes at the epoch its table names without a check")
	}
	restarted.drop(6)
	if _, ok := restarted.due()[6]; ok {
		t.Error("a dropped check is still due")
	}
}

// A retake does not contest a copy up that answered with a later master's
// writes (it campaigns by the promotion rule; two candidates each granted
// by its own voter first split the votes); a copy ahead within the tenure
// the table names waits for this node instead, so this node campaigns.
func TestARetakeDefersToACopyHoldingALaterMastersWrites(t *testing.T) {
	table := shard.NewTable(16)
	table.Merge(shard.Assignment{Partition: 6, Master: "x", Epoch: 2, Responsible: []string{"x", "a"}, Revision: 1})
	pr := newPromotion(&promotionDeps{self: "x", leaseTTL: time.Minute, log: slog.New(slog.DiscardHandler), table: table})
	own := store.Position{Epoch: 2, Seq: 1}
	up := func(string) bool { return true }
	if !pr.mayRetake(6, own, []string{"x", "a"}, up) {
		t.Fatal("a retake with no copy heard: not campaigned for")
	}
	for _, c := range []struct {
		heard store.Position
		want  bool
	}{
		{store.Position{Epoch: 2, Seq: 1}, true},
		{store.Position{Epoch: 2, Seq: 5}, true},
		{store.Position{Epoch: 7, Seq: 21}, false},
	} {
		pr.mu.Lock()
		a := pr.asks[6]
		a.heard["a"] = heardPosition{pos: c.heard, at: a.since.Add(time.Millisecond)}
		pr.mu.Unlock()
		if got := pr.mayRetake(6, own, []string{"x", "a"}, up); got != c.want {
			t.Errorf("at %s, a copy heard at %s: campaigns %v, want %v", own, c.heard, got, c.want)
		}
	}
}
