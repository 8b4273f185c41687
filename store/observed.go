package store

import (
	"context"
	"time"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/store/engine"
)

// fullEngine is an engine that stores documents and records, and may
// defer the disk (the embedded one).
type fullEngine interface {
	engine.Documents
	engine.Records
	engine.Deferring
}

// observed reports every call to an engine that does not report its own
// (the embedded one) to the store's observer, under the operation names
// the mongo engine reports (shoal_store_operation_duration_seconds), and
// "sync" for engine.Deferring.Sync, which the mongo engine has no use for.
type observed struct {
	e     fullEngine
	timed func(op string, fn func() error) error
}

func (o observed) Get(ctx context.Context, partition int, key string) (d *record.Doc, err error) {
	err = o.timed("get", func() error { d, err = o.e.Get(ctx, partition, key); return err })
	return d, err
}

func (o observed) Commit(ctx context.Context, partition int, writes []engine.Write) error {
	return o.timed("commit", func() error { return o.e.Commit(ctx, partition, writes) })
}

func (o observed) InsertNew(ctx context.Context, partition int, docs []*record.Doc) (held map[string]bool, err error) {
	err = o.timed("insert_new", func() error { held, err = o.e.InsertNew(ctx, partition, docs); return err })
	return held, err
}

func (o observed) CommitDeferred(ctx context.Context, partition int, writes []engine.Write) error {
	return o.timed("commit", func() error { return o.e.CommitDeferred(ctx, partition, writes) })
}

func (o observed) InsertNewDeferred(ctx context.Context, partition int, writes []engine.Write) (held map[string]bool, err error) {
	err = o.timed("insert_new", func() error { held, err = o.e.InsertNewDeferred(ctx, partition, writes); return err })
	return held, err
}

func (o observed) Sync(ctx context.Context) error {
	return o.timed("sync", func() error { return o.e.Sync(ctx) })
}

func (o observed) Remove(ctx context.Context, partition int, keys []string) error {
	return o.timed("remove", func() error { return o.e.Remove(ctx, partition, keys) })
}

func (o observed) Last(ctx context.Context, partition int) (p record.Position, err error) {
	err = o.timed("last_position", func() error { p, err = o.e.Last(ctx, partition); return err })
	return p, err
}

func (o observed) ScanAfter(ctx context.Context, partition int, after record.Position, limit int) (docs []*record.Doc, err error) {
	err = o.timed("scan_after", func() error { docs, err = o.e.ScanAfter(ctx, partition, after, limit); return err })
	return docs, err
}

func (o observed) CountAfter(ctx context.Context, partition int, after record.Position) (n int64, err error) {
	err = o.timed("count_after", func() error { n, err = o.e.CountAfter(ctx, partition, after); return err })
	return n, err
}

func (o observed) ScanKeys(ctx context.Context, partition int, afterKey string, limit int) (docs []*record.Doc, err error) {
	err = o.timed("scan_keys", func() error { docs, err = o.e.ScanKeys(ctx, partition, afterKey, limit); return err })
	return docs, err
}

func (o observed) KeyRange(ctx context.Context, partition int, after, upTo string) (docs []*record.Doc, err error) {
	err = o.timed("key_range", func() error { docs, err = o.e.KeyRange(ctx, partition, after, upTo); return err })
	return docs, err
}

// Each is observed with fn's time in it, as the mongo engine's scan_each.
func (o observed) Each(ctx context.Context, partition int, scope engine.Scope, fn func(*record.Doc) error) error {
	op := "scan_user"
	if scope.Coll != "" {
		op = "scan_each"
	}
	var fnErr error
	err := o.timed(op, func() error {
		return o.e.Each(ctx, partition, scope, func(d *record.Doc) error {
			fnErr = fn(d)
			return fnErr
		})
	})
	if fnErr != nil {
		return fnErr // fn's own error is not the store's
	}
	return err
}

func (o observed) Collections(ctx context.Context, partition int, user string) (out []engine.CollectionCount, err error) {
	err = o.timed("collections", func() error { out, err = o.e.Collections(ctx, partition, user); return err })
	return out, err
}

func (o observed) Tombstones(ctx context.Context, partition int, from, before time.Time, limit int) (docs []*record.Doc, err error) {
	err = o.timed("tombstones", func() error { docs, err = o.e.Tombstones(ctx, partition, from, before, limit); return err })
	return docs, err
}

func (o observed) PurgeTombstones(ctx context.Context, partition int, tombstones []*record.Doc) (n int, err error) {
	err = o.timed("purge", func() error { n, err = o.e.PurgeTombstones(ctx, partition, tombstones); return err })
	return n, err
}

func (o observed) Partitions(ctx context.Context) (map[int]bool, error) { return o.e.Partitions(ctx) }

func (o observed) LoadRecords(ctx context.Context) (map[int]engine.PartitionRecord, error) {
	return o.e.LoadRecords(ctx)
}

func (o observed) SaveRecords(ctx context.Context, changed []engine.PartitionRecord, all func() []engine.PartitionRecord) error {
	return o.timed("applied_save", func() error { return o.e.SaveRecords(ctx, changed, all) })
}

func (o observed) LeaseVotes(ctx context.Context) (votes map[int]record.LeaseVote, err error) {
	err = o.timed("lease_votes", func() error { votes, err = o.e.LeaseVotes(ctx); return err })
	return votes, err
}

func (o observed) SaveLeaseVotes(ctx context.Context, votes map[int]record.LeaseVote) error {
	return o.timed("lease_votes_save", func() error { return o.e.SaveLeaseVotes(ctx, votes) })
}

func (o observed) VoterSet(ctx context.Context) (voters []string, changed time.Time, err error) {
	err = o.timed("voter_set", func() error { voters, changed, err = o.e.VoterSet(ctx); return err })
	return voters, changed, err
}

func (o observed) SaveVoterSet(ctx context.Context, voters []string, changed time.Time) error {
	return o.timed("voter_set_save", func() error { return o.e.SaveVoterSet(ctx, voters, changed) })
}

func (o observed) TenureLists(ctx context.Context) (lists map[int]engine.TenureList, err error) {
	err = o.timed("tenure_replicas", func() error { lists, err = o.e.TenureLists(ctx); return err })
	return lists, err
}

func (o observed) SaveTenureLists(ctx context.Context, lists map[int]engine.TenureList) error {
	return o.timed("tenure_replicas_save", func() error { return o.e.SaveTenureLists(ctx, lists) })
}

func (o observed) Meta(ctx context.Context) (m engine.Meta, ok bool, err error) {
	err = o.timed("meta", func() error { m, ok, err = o.e.Meta(ctx); return err })
	return m, ok, err
}

func (o observed) CreateMeta(ctx context.Context, m engine.Meta) (created bool, err error) {
	err = o.timed("meta_create", func() error { created, err = o.e.CreateMeta(ctx, m); return err })
	return created, err
}

func (o observed) SaveRollback(ctx context.Context, states []engine.RolledBack) error {
	return o.timed("rollback_save", func() error { return o.e.SaveRollback(ctx, states) })
}

func (o observed) Rollbacks(ctx context.Context, limit int) (out []engine.RolledBack, err error) {
	err = o.timed("rollbacks", func() error { out, err = o.e.Rollbacks(ctx, limit); return err })
	return out, err
}
