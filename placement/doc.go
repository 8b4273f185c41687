// Package placement holds a node's pure decisions about the partitions it
// masters or copies: whether to campaign for a partition's lease
// ([Decide], whose verdict may name a question the node answers itself:
// [Want.Settle], [WantsLease]), what the node knows of a lease that lapsed ([KnownLapse],
// [Lapse.Over]), whether to ask the voters about it ([AsksVoters]), which
// replicas count while newcomers replace regular copies
// ([KeepReplacedCopies], [DecideReplacement], [NearlyCaughtUp],
// [SwapsDue]), what a master names after a restart ([TenureAssignment]),
// and how copies that may hold unreconciled writes are kept and checked
// ([UnreconciledCopy], [ShouldAskCheck], [WithCopiesToCheck]).
//
// Each decision takes narrow inputs and returns an answer. Nothing here
// does I/O, starts a goroutine or reads the clock (an instant is an
// argument): internal/node gathers the inputs (gossip states, lease
// records, acknowledged positions) and acts on the answers, so the rules
// are table-tested on their own. Dependencies point one way: placement
// imports only the standard library, shard and record, never the store and
// its driver (internal/purity.TestDependencyRules checks).
package placement
