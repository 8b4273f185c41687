// Package lease decides who is master of a partition. Its decisions are
// pure logic in the manner of etcd raft and CockroachDB leases: each takes
// narrow inputs (a record, a request, the time) and returns a decision, does
// no I/O, starts no goroutines and reads no clock (every instant is an
// argument): voter.go, holder.go, voterset.go, position.go. The driver that
// does the I/O is [Manager] (manager.go): it reads the clock (ManagerConfig.Now),
// sends batches to the voters through a [Transport], persists votes and the
// voter set through a [VoteStore], and runs the rounds on its own goroutine;
// it stays thin, and tests give it a fake clock and transport.
//
// # The pieces
//
//   - Voter side: [Decide] rules on one [Request] against the voter's
//     [Record] for the partition; [DecideRelease] ends a lease early when its
//     holder steps down. The driver serialises decisions per partition,
//     persists the returned record (a compare-and-swap on the previous one)
//     and only then replies with the [Decision].
//   - Candidate side: a [Holder] per node tracks, per partition, the epochs it
//     has learned and proposed, the attempt in flight and how long its lease
//     is valid. [Holder.Propose] and [Holder.RenewalsDue] produce requests,
//     [Holder.Observe] takes the voters' decisions, and [Holder.Holds] says
//     whether the node may accept writes right now.
//   - [NextVoterSet] moves the voter set towards a new one a member at a time.
//   - [MayCampaign] is the promotion rule: who may try to take a partition
//     whose master is gone; [ConfirmTenure] whether a tenure won by it may
//     take writes, on positions heard since the win.
//   - [Record.Ended]: whether a lease is over with nobody after it, so that
//     its holder counts as gone.
//
// # Why two nodes never hold one partition at the same time
//
// Nothing here compares instants taken on two different clocks. Each side
// measures one interval on its own clock, and the only assumption is that
// clock rates differ from real time by at most some small ρ (the drift
// margin covers it); offsets between clocks are irrelevant.
//
//  1. A voter grants to at most one holder at a time, on its own clock. It
//     grants candidate C only when its record names no other holder whose
//     Until is still ahead, and a grant sets Until = receipt + TTL. Records
//     live in the voter's store and survive a restart; a voter that lost them,
//     or that has just become a voter, grants nothing for one TTL, by which
//     time every grant it may have forgotten has passed its Until.
//  2. The holder stops first. It counts its lease from the instant it sent
//     the request (before any voter received it) and for TTL - margin on its
//     own monotonic clock. If each clock's rate is within ρ of real time, an
//     interval the holder measures as TTL - margin is at most
//     (TTL-margin)/(1-ρ) long in real time and a voter's TTL is at least
//     TTL/(1+ρ), so with margin >= 2ρ·TTL the holder's deadline falls before
//     every granting voter's Until. Message delay only widens the gap.
//  3. Any two majorities of one voter set share a voter, and so do majorities
//     of two sets that differ by one member ([NextVoterSet] changes one member
//     at a time, at least TTL + the peer-list refresh apart, so no lease
//     granted under the older set is still counted when the next step lands).
//     If A holds the lease and B later gathers a majority, some voter granted
//     both: by 1 it granted B only after A's Until, by 2 after A's deadline,
//     and B starts holding only once that grant reaches it. So B's lease
//     begins after A's ended.
//
// # Why the epoch fences
//
// A voter's recorded epoch never decreases, and it grants a holder other than
// the recorded one only a strictly higher epoch. Because successive holders'
// majorities share a voter, each new holder's epoch is higher than every
// earlier holder's: an epoch names one tenure of one node. Writes and
// replication batches carry it, and replicas and the store refuse anything
// older than the newest epoch they have seen. So a master that checked
// [Holder.Holds], was then paused past its deadline and wrote afterwards is
// refused wherever its successor has already been: a pause costs
// availability, never an acknowledged write. A candidate never proposes an
// epoch twice, even after losing with it: a lost epoch may be recorded for
// another candidate somewhere, and late grants of the lost attempt can never
// be taken for grants of a new one.
//
// Caveat: the epoch argument needs the records to survive. A voter whose
// store was wiped forgets the epochs it recorded, and if the other voters of
// a later majority never saw the latest epoch either, a new holder could be
// granted an epoch some earlier holder already used (one after the other,
// never at the same time: the wait in 1 still holds). The driver narrows this
// by feeding the holder every epoch it sees elsewhere ([Holder.Learn]: the
// partition table, its own applied position, replication batches).
//
// # What the clocks must do
//
// The holder measures on its monotonic clock (time.Now() values, never
// persisted). A voter's Until outlives a restart, so the voter measures on
// the wall clock, which must be slewed rather than stepped: a step back only
// delays the next grant, but a step forward ends leases early on that voter.
//
// # Choices where the design is silent
//
//   - A renewal from the recorded holder at the recorded epoch is granted even
//     after its Until has passed, provided nobody replaced the record; see
//     [Decide] for why that is safe.
//   - Renew on a request only picks the refusal code. A renewal that meets the
//     conditions of a new grant (for example at a voter just added to the set,
//     or one whose records were lost) is granted like one, so adding a voter
//     does not cost every master its lease.
//   - A holder whose lease lapsed keeps renewing its epoch (rather than taking
//     a new one) until it learns of a higher epoch.
//   - An orderly handoff releases the lease on the voters ([Holder.StepDown],
//     [DecideRelease]) so the next master need not wait for the TTL.
package lease
