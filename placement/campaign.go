package placement

import (
	"slices"
	"strconv"

	"github.com/shoal-db/shoal/shard"
)

// WantInput is what one node knows of one partition when deciding whether
// to campaign for its lease.
type WantInput struct {
	Self       string
	Assignment shard.Assignment // the partition table's entry
	// Regular is the part of the responsible list that write concerns
	// count (shard.WriteQuorum): the master and the first copies-1
	// replicas (an incoming copy or a draining replica kept meanwhile come
	// after them).
	Regular    []string
	Succession []string // ring order: the preferred master first
	Holding    bool     // this node holds the lease now
	HandingOff bool     // this node is handing it to another
	Receiving  bool     // another node is handing it to this one
	Superseded bool     // the voters know of a later holder than this node
	// Stopping: this node is shutting down. It keeps the leases it holds
	// until it stops and takes no other: a partition it took now would
	// be masterless a moment later.
	Stopping bool
	// NewestEpoch is the newest epoch of the partition in this node's own
	// history (its store, a master's batches, its tenures): one later than
	// the tenure the table names (this node's own or another's) means
	// another master came after it, even when nobody has told the lease
	// holder so yet (a full restart).
	NewestEpoch uint64
	// EmptyStore: this node's store held nothing at start (no lease
	// record, no tenure, no history): a new node, or one whose data
	// directory was emptied. Its knowing nothing of a partition says
	// nothing of whether the partition has history.
	EmptyStore bool
	// LearnedHolder is the holder of the newest grant of the partition
	// the voters told this node of (its own records, if a voter; answers
	// to its requests and queries), "" if none.
	LearnedHolder string
	Up            func(id string) bool
	// Lost says a node's copy is gone for good (DOWN past
	// REPLICA_REPLACE_AFTER, or out of the cluster), not merely
	// unreachable now.
	Lost func(id string) bool
}

// Ask names a question the campaign rule leaves to the node, when its
// input alone does not decide: the node answers it with its own state, and
// answering may have effects (a check registered, a goroutine woken).
type Ask int

const (
	// AskNothing: Want.Campaign is the answer.
	AskNothing Ask = iota
	// AskPromote: the master is gone (or superseded) and this node holds
	// one of the regular copies: it campaigns if the promotion rule says so
	// among them (Answers.Promote).
	AskPromote
	// AskTakeOver: the gone master was the only regular copy and this
	// node holds none: it campaigns if gossip still reaches the master and
	// it answered, since its lease ended, with a position this node's copy
	// has reached (Answers.TakeOver); otherwise Want.Campaign is the
	// answer.
	AskTakeOver
	// AskRetake: this node's own tenure lapsed (or it names itself master
	// from its tenure record after a restart), or the voters name it the
	// holder while its table names no master (its history holds the
	// partition, or its store held nothing at start), or, its store empty
	// at start, it takes a partition for new: it campaigns only with its
	// tenure to be confirmed (Answers.Retake). After a restart the node cannot tell a
	// grant it won by the promotion rule and never confirmed (its copy may
	// be behind the copies that hold the majority writes), or a vote its
	// own voter recorded for a campaign that failed, from a tenure that
	// merely took no write; nor, from a grant, whether a later master came
	// between its tenure and the new one.
	AskRetake
)

func (a Ask) String() string {
	switch a {
	case AskNothing:
		return "nothing"
	case AskPromote:
		return "promote"
	case AskTakeOver:
		return "take over"
	case AskRetake:
		return "retake"
	}
	return "Ask(" + strconv.Itoa(int(a)) + ")"
}

// Want is the campaign rule's verdict for one partition.
type Want struct {
	Ask Ask
	// Campaign is the answer when Ask is AskNothing, and with AskTakeOver
	// the answer when the node does not take over.
	Campaign bool
}

// Answers are the node's answers to the rule's questions (Ask), each asked
// only when the verdict names it. Promote must be set; a nil TakeOver
// takes nothing over, and a nil Retake takes the grant back unchecked.
type Answers struct {
	// Promote answers AskPromote: named is the master the table names
	// when this node sees it up or is that master (the other copies wait
	// for it while it is up), "" otherwise; the promotion rule gives it
	// ties.
	Promote  func(regular []string, up func(string) bool, named string) bool
	TakeOver func(master string) bool
	// Retake answers AskRetake: regular and up as for Promote (a copy up
	// and ahead is not contested: it campaigns by the promotion rule).
	Retake func(regular []string, up func(string) bool) bool
}

// Settle answers w's question, if any, and says whether the node
// campaigns.
func (w Want) Settle(in WantInput, ans Answers) bool {
	switch w.Ask {
	case AskPromote:
		// The named master gives itself ties even when its own voter
		// record says its tenure is over: the copies that see it up wait
		// for it.
		named := in.Assignment.Master
		if named != in.Self && named != "" && !in.Up(named) {
			named = ""
		}
		return ans.Promote(in.Regular, in.Up, named)
	case AskTakeOver:
		return ans.TakeOver != nil && ans.TakeOver(in.Assignment.Master) || w.Campaign
	case AskRetake:
		return ans.Retake == nil || ans.Retake(in.Regular, in.Up)
	}
	return w.Campaign
}

// WantsLease applies the campaign rule (Decide) and settles its verdict
// with the node's answers.
func WantsLease(in WantInput, ans Answers) bool { return Decide(in).Settle(in, ans) }

// Decide is the campaign rule. Only one of these moves a partition's
// lease while its master lives: an orderly handoff (the master keeps its
// lease until it hands it over). Otherwise:
//   - a node shutting down takes no lease (it keeps those it holds until
//     it stops);
//   - a master keeps what it holds, and takes back a lease of its own that
//     lapsed, with the new tenure confirmed (AskRetake), unless the voters
//     told it of a later holder or its own history holds a later epoch
//     than that tenure (a later master's batches reached it: after a full
//     restart nobody has told it yet, and its copy may lack that master's
//     writes);
//   - a partition nobody ever mastered goes to the first available node of
//     its succession (the preferred master first), with its tenure
//     confirmed when that node's store held nothing at start (it may have
//     lost the partition with its data directory);
//   - when the master is gone, or superseded (the voters told it of a
//     later grant, or this node's history holds a later master's writes:
//     after a full restart the table may name a master from its tenure
//     record that a stand-in followed), the regular copies (those write
//     concerns count) decide
//     by the promotion rule: the most current one campaigns, ties going to
//     the master the table names while it is up (the others wait for it:
//     after a full restart nothing says its lease ended);
//   - a node without a regular copy campaigns when the gone master was
//     the only regular copy and still answers with a position this node
//     has reached; otherwise only when every copy, the gone master's
//     too, is lost (not merely unreachable, or its lease lapsed), in
//     succession order (the partition starts again without their
//     history).
func Decide(in WantInput) Want {
	yes, no := Want{Campaign: true}, Want{}
	a := in.Assignment
	switch {
	case in.Holding:
		return yes
	case in.Stopping, in.HandingOff:
		return no
	case in.Receiving:
		return yes
	case a.Master == in.Self && !in.Superseded && in.NewestEpoch <= a.Epoch:
		// Its own tenure, lapsed (or named from its tenure record after a
		// restart): taken back only with the new tenure confirmed. Nothing
		// here says no later master came between: a voter whose record
		// names that master, loaded at start, grants a later epoch over it
		// and its grant does not say whom it replaced (a full restart
		// after a failover, node1 restarted first, lost 30 majority
		// writes in CI so). A renewal of the same epoch needs no check.
		return Want{Ask: AskRetake}
	case a.Master == "":
		// No master known. A partition that was mastered may look so
		// after a full restart, until the former master, which names
		// itself from its own tenure record, is heard from: campaigning
		// as for a new partition then, the preferred master could win
		// with a copy it was still being sent and roll the others'
		// majority writes back (the fault suite's seed 5000).
		switch {
		case in.LearnedHolder == in.Self:
			// The voters named this node: its own campaign, or its own
			// tenure before a restart that took no write. With history
			// here, only with the tenure confirmed: the fault suite's seed
			// 11110 lost 523 majority writes when a copy 780 changes
			// behind took a grant back after a kill-all and wrote at once.
			// So too for a node whose store held nothing at start: it may
			// be named for its own campaigns alone, granted by its own
			// voter.
			if in.NewestEpoch > 0 || in.EmptyStore {
				return Want{Ask: AskRetake}
			}
			return yes
		case in.LearnedHolder != "":
			// Another node held it: wait for it to name itself, even if
			// it is down for long. Without the table this node does not
			// know which copies count: the first node of the succession
			// could be one still being sent its copy while the full
			// copies are up (TestAFullRestartDuringAHandoffCopyLosesNoMajorityWrite).
			return no
		case in.NewestEpoch > 0:
			// This node's history holds the partition, but nobody has
			// named its master yet: wait for the table (the node asks
			// the voters who held it: AsksVoters).
			return no
		}
		// Never mastered, as far as this node knows: the first available
		// node of the succession campaigns. A node whose store held
		// nothing at start only with its tenure confirmed: it may merely
		// have lost the partition with its data directory, restarted
		// first after a full restart, its own voter granting it a new
		// epoch every round until one passes the partition's, and a
		// voter whose record was loaded at start granting it over that
		// record (the voters keep the list of the copies that hold the
		// writes, and the check hears them).
		if !shard.FirstAvailable(in.Succession, in.Self, in.Up) {
			return no
		}
		if in.EmptyStore {
			return Want{Ask: AskRetake}
		}
		return yes
	case a.Master != in.Self && in.Up(a.Master) && in.NewestEpoch <= a.Epoch:
		// A live master is waited for, unless this node holds a later
		// master's writes: the table names a master from its tenure record
		// after a full restart, and that master, behind, defers to the
		// copies ahead (a restart without the stand-in had no master).
		return Want{Campaign: in.Receiving}
	case slices.Contains(in.Regular, in.Self):
		return Want{Ask: AskPromote}
	}
	otherwise := Want{Campaign: lostEverywhere(in)}
	if len(in.Regular) <= 1 && a.Master != "" {
		// The master was the only regular copy, its lease is over and it
		// does not take it back (the voters told it of a later campaign,
		// one that may never have won), but it still answers: a node whose
		// copy holds everything the master holds may take its place (the
		// fault suite's seed 9005: otherwise nobody campaigned at all).
		otherwise.Ask = AskTakeOver
	}
	return otherwise
}

// lostEverywhere is the last case of the campaign rule: a node campaigns
// for a partition whose master is gone only when every copy is lost, in
// takeover order.
func lostEverywhere(in WantInput) bool {
	a := in.Assignment
	for _, id := range a.Responsible {
		// The master is waited for too, even when it was the only
		// regular copy: with REPLICATION_FACTOR 1 it acknowledged
		// majority writes alone, a restarted master names itself alone
		// until it has chosen its replicas again, and one whose replicas
		// were lost holds what they held.
		if id == in.Self {
			continue
		}
		if !in.Lost(id) {
			return false // a copy may still come back: wait for it
		}
	}
	return shard.FirstAvailable(shard.TakeoverOrder(a.Responsible, in.Succession), in.Self, in.Up)
}

// Lapse is what a node knows of a partition's last lease: its holder and
// epoch, and whether it ended with nobody after it (lease.Record.Ended),
// by its own voter record or, for a node that is not a voter, by what a
// majority of the voters said (see AsksVoters).
type Lapse struct {
	Holder string
	Epoch  uint64
	Ended  bool
}

// KnownLapse is what a node knows of a partition's last lease: its own
// voter record (own), unless that is older than the tenure the partition
// table names (table: a later grant happened without this voter, which
// was paused or cut off), or it has none; then what a majority of the
// voters said (heard), when that is newer.
func KnownLapse(own, heard Lapse, table uint64) Lapse {
	switch {
	case own.Ended && own.Epoch >= table:
		return own
	case heard.Ended && (heard.Epoch >= table || !own.Ended || heard.Epoch > own.Epoch):
		return heard
	case own.Ended:
		return own
	}
	return heard
}

// Over reports whether node id's tenure of the partition is over by this
// lapse: it is the holder whose lease ended, or the master the
// table names at that epoch or before (a later campaign got a grant here
// and lapsed too, so the table's master is not coming back either).
func (l Lapse) Over(id string, a shard.Assignment) bool {
	return l.Ended && (id == l.Holder || id == a.Master && a.Epoch <= l.Epoch)
}

// AsksVoters says whether node self asks the voters about a partition
// (whether its lease is over, and who held it: the heard side of
// KnownLapse): a is its table's entry, holding whether it holds the lease,
// voter whether it is a voter, recordEpoch the epoch of its own voter
// record of the partition and recordStale whether that record was loaded
// at start (granted before a restart: it says nothing of whether its
// lease is over, lease.Record.Ended).
func AsksVoters(self string, a shard.Assignment, holding, voter bool, recordEpoch uint64, recordStale bool, copies int) bool {
	switch {
	case holding || a.Master == self:
		return false
	case a.Master == "":
		// No master known (a new cluster, or a full restart): the voters'
		// answers teach the last holder, if any. The campaign rule waits
		// for a holder named, and a holder that took no write (so has no
		// tenure record to name itself from) learns that it is the one.
		// Asked even when a holder is known: a voter's own record may
		// name an earlier one (it missed the last grant), and waiting for
		// that one, which waits for the last holder, nobody campaigned
		// (the fault suite's seed 9106).
		return true
	case voter && recordEpoch >= a.Epoch && !recordStale:
		// A voter knows from its own record, unless the table names a
		// later tenure than it recorded (it missed that grant: see
		// KnownLapse), or its record was loaded at start: then it never
		// sees that lease end (nobody renews it here), and a record
		// newer than the table's master is not a sign that master is
		// gone (the grant may not have reached a majority). It asks, as
		// if it were not a voter (the fault suite's seed 9728: a voter
		// restarted with its own grant of a later epoch than the
		// table's master took that master, whose lease was over, for
		// alive, while the others waited for it).
		return false
	}
	return slices.Contains(shard.WriteQuorum(copies).Regular(a.Responsible), self)
}
