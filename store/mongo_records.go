package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/shoal-db/shoal/store/engine"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The mongo engine's records (engine.Records): lease business in the
// leases collection (one document per kind), the partitions' records in
// an applied log, the meta in meta, rolled back states in rollback.

const (
	leaseCollection      = "leases"
	metaCollection       = "meta"
	partitionsCollection = "partitions"
)

// All votes live in one document, so recording any number of them is one
// small write (a collection of one record per partition would cost the
// embedded store a scan per record).
type leaseVotesDoc struct {
	ID    string      `bson:"_id"`
	Votes []LeaseVote `bson:"votes"`
}

// voterSetDoc is the lease voter set this node last applied, and when: a
// change of the voter set goes one member at a time, and a restarted node
// must resume from where it was rather than jump to the peer list's set.
type voterSetDoc struct {
	ID      string    `bson:"_id"`
	Voters  []string  `bson:"voters"`
	Changed time.Time `bson:"changed"`
}

// tenureList is one partition's TenureList as stored.
type tenureList struct {
	Partition int      `bson:"p"`
	Epoch     uint64   `bson:"e"`
	Replicas  []string `bson:"r"`
	Seq       uint64   `bson:"s,omitempty"`
	Counted   int      `bson:"n,omitempty"`
}

// All lists live in one document, like the lease votes: one small write
// records any number of them.
type tenureListsDoc struct {
	ID    string       `bson:"_id"`
	Lists []tenureList `bson:"lists"`
}

// The records of the partitions (applied position, newest epoch seen,
// horizon) are kept as a log: every SaveRecords inserts one document
// holding the records changed since the previous one, and every
// appliedCompactEvery entries a full snapshot starts the log again in the
// other of two collections, and the first is dropped (dropping a table is
// cheap; deleting hundreds of documents stalled replication for ~50 ms). A
// replica applying a request that spans many partitions so records them
// all in one insert (on the embedded store an insert costs about a
// millisecond, while replacing a document costs a scan). Older data
// directories hold one document per partition in the partitions
// collection; they are read first, and the log overrides them.
const appliedCompactEvery = 512

// appliedCollections are the two collections the log alternates between.
var appliedCollections = [2]string{"applied_log_0", "applied_log_1"}

type appliedEntry struct {
	Seq   int64        `bson:"_id"`
	Parts []appliedDoc `bson:"parts"`
}

// appliedLog is where the applied log stands (under mongoEngine.logMu).
type appliedLog struct {
	seq   int64 // the last entry's _id (0: not read yet)
	since int   // entries since the last snapshot
	cur   int   // the collection the log is written to
}

// SaveRecords writes one entry of the applied log: the changed records,
// or a snapshot of all of them every appliedCompactEvery entries.
func (m *mongoEngine) SaveRecords(ctx context.Context, changed []appliedDoc, all func() []appliedDoc) error {
	m.logMu.Lock()
	defer m.logMu.Unlock()
	if err := m.loadSeq(ctx); err != nil {
		return err
	}
	l := &m.log
	snapshot := l.since >= appliedCompactEvery
	entry := appliedEntry{Seq: l.seq + 1, Parts: changed}
	into := l.cur
	if snapshot {
		entry.Parts, into = all(), 1-into
	}
	err := m.s.timed("applied_save", func() error {
		if _, err := m.s.db.Collection(appliedCollections[into]).InsertOne(ctx, entry); err != nil {
			return fmt.Errorf("%w: recording the applied positions: %v", ErrUnavailable, err)
		}
		return nil
	})
	if err != nil {
		// The insert may have landed after all: learn the log's last _id
		// again rather than collide with it for ever.
		l.seq = 0
		return err
	}
	l.seq++
	l.since++
	if snapshot {
		// The snapshot holds every record: the other collection can go. If
		// dropping it fails, it is merely read again (and overridden by
		// the snapshot's higher _id) at the next start.
		l.since, l.cur = 0, into
		_ = m.s.timed("applied_compact", func() error {
			return m.s.db.Collection(appliedCollections[1-into]).Drop(ctx)
		})
	}
	return nil
}

// loadSeq learns, once, the _id of the log's last entry and how many
// entries follow the last snapshot.
func (m *mongoEngine) loadSeq(ctx context.Context) error {
	l := &m.log
	if l.seq != 0 {
		return nil
	}
	for i, name := range appliedCollections {
		var last appliedEntry
		err := m.s.db.Collection(name).FindOne(ctx, bson.D{},
			options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}}).SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&last)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return fmt.Errorf("%w: reading the applied log: %v", ErrUnavailable, err)
		}
		if last.Seq > l.seq {
			l.seq, l.cur = last.Seq, i
		}
	}
	// Unknown how many entries follow the last snapshot: write one soon.
	l.since = appliedCompactEvery
	return nil
}

// Meta reads the store's meta.
func (m *mongoEngine) Meta(ctx context.Context) (meta engine.Meta, ok bool, err error) {
	err = m.s.timed("meta", func() error {
		err := m.s.db.Collection(metaCollection).FindOne(ctx, bson.D{{Key: "_id", Value: "cluster"}}).Decode(&meta)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading the partition count: %v", ErrUnavailable, err)
		}
		ok = true
		return nil
	})
	return meta, ok, err
}

// noteOpened records when the store was last opened, in a document of
// its own in the meta collection: a journaled write at once, so that a
// MongoDB that cannot journal (6.0 or older run with --nojournal) refuses
// the node at start, not at its first write (an existing store's indexes
// exist, and nothing else writes before then).
func (m *mongoEngine) noteOpened(ctx context.Context) error {
	return m.s.timed("meta_opened", func() error {
		_, err := m.s.db.Collection(metaCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: "opened"}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "at", Value: time.Now().UTC()}}}}, options.UpdateOne().SetUpsert(true))
		if err != nil {
			return fmt.Errorf("%w: recording when the store was opened (a MongoDB run without its journal refuses every write Shoal makes: run it with its journal): %v", ErrUnavailable, err)
		}
		return nil
	})
}

// CreateMeta records meta unless some is recorded already.
func (m *mongoEngine) CreateMeta(ctx context.Context, meta engine.Meta) (created bool, err error) {
	err = m.s.timed("meta_create", func() error {
		doc := append(bson.D{{Key: "_id", Value: "cluster"}}, toD(meta)...)
		_, err := m.s.db.Collection(metaCollection).InsertOne(ctx, doc)
		if mongo.IsDuplicateKeyError(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: recording the partition count: %v", ErrUnavailable, err)
		}
		created = true
		return nil
	})
	return created, err
}

// LeaseVotes loads every vote this node has recorded as a lease voter.
func (m *mongoEngine) LeaseVotes(ctx context.Context) (map[int]LeaseVote, error) {
	var doc leaseVotesDoc
	if err := m.readLeaseDoc(ctx, "lease_votes", "votes", "lease votes", &doc); err != nil {
		return map[int]LeaseVote{}, err
	}
	out := make(map[int]LeaseVote, len(doc.Votes))
	for _, v := range doc.Votes {
		out[v.Partition] = v
	}
	return out, nil
}

// SaveLeaseVotes replaces the recorded votes with votes (every partition's),
// durably, before the voter answers. The caller serialises calls.
func (m *mongoEngine) SaveLeaseVotes(ctx context.Context, votes map[int]LeaseVote) error {
	doc := leaseVotesDoc{ID: "votes", Votes: make([]LeaseVote, 0, len(votes))}
	for _, v := range votes {
		doc.Votes = append(doc.Votes, v)
	}
	sort.Slice(doc.Votes, func(i, j int) bool { return doc.Votes[i].Partition < doc.Votes[j].Partition })
	return m.writeLeaseDoc(ctx, "lease_votes_save", "votes", "lease votes", doc)
}

// VoterSet returns the voter set this node last applied (nil if none).
func (m *mongoEngine) VoterSet(ctx context.Context) ([]string, time.Time, error) {
	var doc voterSetDoc
	err := m.readLeaseDoc(ctx, "voter_set", "voter-set", "the voter set", &doc)
	return doc.Voters, doc.Changed, err
}

// SaveVoterSet records the voter set this node applies from now on.
func (m *mongoEngine) SaveVoterSet(ctx context.Context, voters []string, changed time.Time) error {
	return m.writeLeaseDoc(ctx, "voter_set_save", "voter-set", "the voter set",
		voterSetDoc{ID: "voter-set", Voters: voters, Changed: changed.UTC()})
}

// readLeaseDoc reads the document id of the lease collection (what a node
// keeps of its own lease business, one document per kind) into doc, timed
// as op; a missing document leaves doc as it is. what names it in errors.
func (m *mongoEngine) readLeaseDoc(ctx context.Context, op, id, what string, doc any) error {
	return m.s.timed(op, func() error {
		err := m.s.db.Collection(leaseCollection).FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading %s: %v", ErrUnavailable, what, err)
		}
		return nil
	})
}

// writeLeaseDoc replaces (or creates) the document id of the lease
// collection with doc, durably, timed as op.
func (m *mongoEngine) writeLeaseDoc(ctx context.Context, op, id, what string, doc any) error {
	return m.s.timed(op, func() error {
		if _, err := m.s.db.Collection(leaseCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, doc,
			options.Replace().SetUpsert(true)); err != nil {
			return fmt.Errorf("%w: recording %s: %v", ErrUnavailable, what, err)
		}
		return nil
	})
}

// TenureReplicas loads the replica list this node last gave each
// partition it mastered. A node restarted after a tenure names these
// replicas again rather than itself alone: a copy that holds majority
// writes must keep its slot until the replicas chosen after it hold them
// too.
func (m *mongoEngine) TenureLists(ctx context.Context) (map[int]TenureList, error) {
	var doc tenureListsDoc
	if err := m.readLeaseDoc(ctx, "tenure_replicas", "tenure-replicas", "the replica lists of this node's tenures", &doc); err != nil {
		return map[int]TenureList{}, err
	}
	out := make(map[int]TenureList, len(doc.Lists))
	for _, l := range doc.Lists {
		out[l.Partition] = TenureList{Epoch: l.Epoch, Replicas: l.Replicas, Seq: l.Seq, Counted: l.Counted}
	}
	return out, nil
}

// SaveTenureReplicas replaces the recorded replica lists with lists, durably.
func (m *mongoEngine) SaveTenureLists(ctx context.Context, lists map[int]TenureList) error {
	doc := tenureListsDoc{ID: "tenure-replicas", Lists: make([]tenureList, 0, len(lists))}
	for p, l := range lists {
		doc.Lists = append(doc.Lists, tenureList{Partition: p, Epoch: l.Epoch, Replicas: l.Replicas, Seq: l.Seq, Counted: l.Counted})
	}
	slices.SortFunc(doc.Lists, func(a, b tenureList) int { return a.Partition - b.Partition })
	return m.writeLeaseDoc(ctx, "tenure_replicas_save", "tenure-replicas", "the replica lists of this node's tenures", doc)
}

// SaveRollback keeps rolled back states, one record per key and position:
// inserts, not upserts, so one kept by an earlier attempt is a duplicate
// to skip, and inserts cost the embedded store no scan.
func (m *mongoEngine) SaveRollback(ctx context.Context, states []RolledBack) error {
	if len(states) == 0 {
		return nil
	}
	recs := make([]any, len(states))
	for i, r := range states {
		recs[i] = append(bson.D{{Key: "_id", Value: fmt.Sprintf("%s@%s", DocKey(r.User, r.Coll, r.ID), r.Position)}}, toD(r)...)
	}
	return m.s.timed("rollback_save", func() error {
		_, err := m.s.db.Collection(rollbackCollection).InsertMany(ctx, recs, options.InsertMany().SetOrdered(false))
		if err != nil && !onlyDuplicates(err) {
			return fmt.Errorf("%w: keeping %d rolled back documents: %v", ErrUnavailable, len(states), err)
		}
		return nil
	})
}

// Rollbacks lists the rolled back document states this node keeps, oldest
// first, at most limit.
func (m *mongoEngine) Rollbacks(ctx context.Context, limit int) ([]RolledBack, error) {
	var out []RolledBack
	err := m.s.timed("rollbacks", func() error {
		cur, err := m.s.db.Collection(rollbackCollection).Find(ctx, bson.D{},
			options.Find().SetSort(bson.D{{Key: "at", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer closeCursor(ctx, cur)
		for cur.Next(ctx) {
			var r RolledBack
			if err := cur.Decode(&r); err != nil {
				return err
			}
			if r.Body != nil {
				r.Body = normalizeBSON(r.Body)
			}
			out = append(out, r)
		}
		return cur.Err()
	})
	return out, err
}

// LoadRecords reads every partition's record: the per-partition documents
// of older data directories, overridden by the log, in order.
func (m *mongoEngine) LoadRecords(ctx context.Context) (map[int]appliedDoc, error) {
	out := map[int]appliedDoc{}
	cur, err := m.s.db.Collection(partitionsCollection).Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("%w: reading applied positions: %v", ErrUnavailable, err)
	}
	for cur.Next(ctx) {
		var d appliedDoc
		if err := cur.Decode(&d); err != nil {
			closeCursor(ctx, cur)
			return nil, err
		}
		out[d.Partition] = d
	}
	err = cur.Err()
	closeCursor(ctx, cur)
	if err != nil {
		// Some records unread: the positions the rest claim are not this
		// node's.
		return nil, fmt.Errorf("%w: reading applied positions: %v", ErrUnavailable, err)
	}
	var entries []appliedEntry
	for _, name := range appliedCollections {
		cur, err := m.s.db.Collection(name).Find(ctx, bson.D{})
		if err != nil {
			return nil, fmt.Errorf("%w: reading the applied log: %v", ErrUnavailable, err)
		}
		for cur.Next(ctx) {
			var e appliedEntry
			if err := cur.Decode(&e); err != nil {
				closeCursor(ctx, cur)
				return nil, err
			}
			entries = append(entries, e)
		}
		err = cur.Err()
		closeCursor(ctx, cur)
		if err != nil {
			return nil, fmt.Errorf("%w: reading the applied log: %v", ErrUnavailable, err)
		}
	}
	// Oldest first, across both collections.
	slices.SortFunc(entries, func(a, b appliedEntry) int { return int(a.Seq - b.Seq) })
	for _, e := range entries {
		for _, d := range e.Parts {
			out[d.Partition] = d
		}
	}
	return out, nil
}
