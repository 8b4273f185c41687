// Package record holds the plain values that the store keeps and the
// decision packages reason about: where a write sits in its partition's
// history ([Position]), a document version ([Doc]), a run of history
// shipped to a replica ([Batch]) with its master's tenures ([EpochStart]),
// and what a lease voter keeps durably ([LeaseVote]).
//
// It is a leaf: it does no I/O and imports only the standard library, so
// pure decision code (lease) uses these values without building the store
// or its MongoDB driver. Dependencies point one way: store imports record
// (store.Position, store.Doc, store.Batch, store.EpochStart and
// store.LeaseVote are aliases of these types), and
// record imports nothing of this module.
package record
