package record

// LeaseVote is what a lease voter keeps durably for one partition: the
// highest epoch it has granted and to whom. The grant's expiry is not kept:
// a voter that restarts grants nothing for one lease TTL, by which time
// every lease it granted before has expired.
//
// The bson field names are the stored format (the store's lease votes
// document): changing them would lose every vote recorded before.
type LeaseVote struct {
	Partition int    `bson:"p"`
	Holder    string `bson:"h"`
	Epoch     uint64 `bson:"e"`
	// List is the newest list of regular copies a holder renewed with
	// (CopyList); it outlives the grant it came with until a later one.
	List *CopyList `bson:"l,omitempty"`
}
