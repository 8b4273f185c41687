package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shoal-db/shoal/internal/storetest"
	"github.com/shoal-db/shoal/store/engine"
	"github.com/shoal-db/shoal/store/engine/enginetest"
)

// The MongoDB engine passes the engines' conformance suite, on a FerretDB
// reached by URI (with its indexes).
func TestTheMongoEngineConforms(t *testing.T) {
	t.Run("uri", func(t *testing.T) {
		mongo := storetest.Start(t)
		n := 0
		enginetest.Run(t, func(t *testing.T) enginetest.Engine {
			ctx := context.Background()
			n++
			s, err := Open(ctx, Options{URI: mongo.URI, Database: "conform" + string(rune('a'+n))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(ctx) })
			return s.docs.(*mongoEngine)
		})
	})
}

// Every write the mongo engine makes waits until MongoDB's journal holds
// it (j: true). A standalone mongod, as `docker-compose.yml` runs, answers
// a write with its default write concern before its journal holds it (the
// journal is flushed every 100 ms): a crash of the mongod in between takes
// away a lease vote, a replica's applied position or a document that Shoal
// already counted as durable. Seen on the wire: each command the driver
// sends, through a recording proxy.
func TestEveryMongoWriteWaitsForTheJournal(t *testing.T) {
	ctx := context.Background()
	uri, sent := storetest.Start(t).Recording(t)
	s, err := Open(ctx, Options{URI: uri, Database: "journal"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.CheckPartitionCount(ctx, "n1", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveLeaseVotes(ctx, map[int]LeaseVote{1: {Partition: 1, Holder: "n1", Epoch: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveVoterSet(ctx, []string{"n1", "n2", "n3"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTenureReplicas(ctx, map[int]TenureList{1: {Epoch: 3, Replicas: []string{"n2"}, Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(s, 2, WriterOptions{})
	defer w.Close(ctx)
	for _, op := range []Op{
		{Partition: 1, User: "u", Coll: "c", ID: "a", Fresh: true, Mutate: put(map[string]any{"v": int64(1)})},
		{Partition: 1, User: "u", Coll: "c", ID: "a", Mutate: put(map[string]any{"v": int64(2)})},
		{Partition: 1, User: "u", Coll: "c", ID: "a", Mutate: func(*Doc) (Next, error) { return Next{Delete: true}, nil }},
	} {
		if res := w.Do(ctx, op); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	writes := map[string]int{}
	for _, cmd := range sent() {
		name := cmd.Index(0).Key()
		if readCommands[name] {
			continue
		}
		writes[name]++
		if !journaled(cmd) {
			t.Errorf("a %s without j: true in its write concern: %s", name, cmd)
		}
	}
	if writes["insert"] == 0 || writes["update"] == 0 || writes["createIndexes"] == 0 {
		t.Fatalf("the store sent too few kinds of write to check: %v", writes)
	}
	t.Logf("writes checked: %v", writes)
}

// readCommands are the commands the driver sends that write nothing:
// reads and handshakes.
var readCommands = map[string]bool{"find": true, "aggregate": true, "count": true, "distinct": true, "getMore": true, "killCursors": true,
	"listCollections": true, "listIndexes": true, "listDatabases": true, "hello": true, "isMaster": true, "ismaster": true,
	"ping": true, "buildInfo": true, "endSessions": true, "saslStart": true, "saslContinue": true}

// journaled reports whether a command asks for the journal (j: true).
func journaled(cmd bson.Raw) bool {
	j, err := cmd.LookupErr("writeConcern", "j")
	return err == nil && j.Boolean()
}

// A MONGO_URI that asks for writes answered before they are stored
// durably is refused at start, saying what to remove; the URI's w is kept
// with the journal.
func TestAMongoURIAskingForLessThanTheJournalIsRefused(t *testing.T) {
	ctx := context.Background()
	uri := storetest.Start(t).URI
	for _, c := range []struct{ query, says string }{
		{"journal=false", "remove journal=false"},
		{"w=0", "remove w=0"},
	} {
		s, err := Open(ctx, Options{URI: uri + "?" + c.query, Database: "refused"})
		if err == nil {
			s.Close(ctx)
			t.Fatalf("a store opened on %s", c.query)
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.query, err)
		}
	}
	co, err := mongoClientOptions(uri + "?w=majority")
	if err != nil {
		t.Fatal(err)
	}
	if wc := co.WriteConcern; wc.W != "majority" || wc.Journal == nil || !*wc.Journal {
		t.Fatalf("w=majority became %+v", wc)
	}
}

// A store opened on a MongoDB makes a journaled write at once, also when
// it exists already (its indexes then exist, and nothing else writes at
// start): a MongoDB run without its journal refuses every such write, and
// the node should learn that when it starts, not at its first write.
func TestOpeningAMongoStoreWritesToItsJournalAtOnce(t *testing.T) {
	ctx := context.Background()
	mongo := storetest.Start(t)
	first, err := Open(ctx, Options{URI: mongo.URI, Database: "opened"})
	if err != nil {
		t.Fatal(err)
	}
	first.Close(ctx)
	uri, sent := mongo.Recording(t)
	s, err := Open(ctx, Options{URI: uri, Database: "opened"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for _, cmd := range sent() {
		if !readCommands[cmd.Index(0).Key()] && journaled(cmd) {
			return
		}
	}
	t.Fatalf("opening an existing store sent no journaled write: %d commands", len(sent()))
}

// A commit of more replacements than FerretDB's connection pool holds
// (100) completes: FerretDB 1.24 keeps a pooled SQLite connection for
// every statement of an update command until the command ends, so one
// update of 100 statements or more waited for a connection for good, and
// every other operation on that database with it (the fault suite's seed
// 2755: a node's store took no write for minutes). The engine sends its
// bulk writes in pieces.
func TestACommitOfManyReplacementsCompletesOnFerretDB(t *testing.T) {
	s := openMongoStore(t)
	eng := s.docs.(*mongoEngine)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Each statement holds its connection only when it finds the document
	// it replaces: the documents exist first.
	for _, version := range []int64{1, 2} {
		writes := make([]engine.Write, 150)
		for i := range writes {
			d := doc(fmt.Sprintf("d%03d", i), 1, uint64(i+1), version, false)
			writes[i] = engine.Write{Doc: d} // replacements (upserts), as a retry or a copied chunk sends
		}
		if err := eng.Commit(ctx, 0, writes); err != nil {
			t.Fatalf("committing 150 replacements (version %d): %v", version, err)
		}
	}
	if n, err := eng.CountAfter(ctx, 0, Position{}); err != nil || n != 150 {
		t.Fatalf("%d documents stored (%v), want 150", n, err)
	}
}

// A scan whose context ends while its cursor is open closes the cursor on
// the server all the same. The driver sends no killCursors with a context
// that has ended, so the cursor stayed open on the server (on MongoDB until
// its idle timeout; on FerretDB 1.24 holding one of its 100 pooled SQLite
// connections for as long as the node's connection lives), and a node
// whose scans were cut short often enough took no write at all.
func TestAScanCutShortClosesItsCursor(t *testing.T) {
	s := openMongoStore(t)
	eng := s.docs.(*mongoEngine)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	writes := make([]engine.Write, 40)
	for i := range writes {
		writes[i] = engine.Write{Doc: doc(fmt.Sprintf("d%03d", i), 1, uint64(i+1), 1, false), Insert: true}
	}
	if err := eng.Commit(ctx, 0, writes); err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		scanCtx, stop := context.WithCancel(ctx)
		n := 0
		err := eng.Each(scanCtx, 0, engine.Scope{User: "u"}, func(*Doc) error {
			if n++; n == scanFirstBatch {
				stop() // the caller went away with the first batch read
			}
			return nil
		})
		stop()
		if err == nil {
			t.Fatalf("scan %d: read all %d documents after its context ended", i, n)
		}
	}
	d := doc("after", 1, 41, 1, false)
	if err := eng.Commit(ctx, 0, []engine.Write{{Doc: d, Insert: true}}); err != nil {
		t.Fatalf("a write after 150 scans cut short: %v", err)
	}
}

// Commits of replacements to many partitions at once complete on FerretDB.
// Each statement of an update command holds one of FerretDB's 100 pooled
// SQLite connections until the command ends (see the test above), so
// twelve commands at once (of the engine's sixteen write slots) of forty
// replacements each waited for connections each other held, for good. The
// likely cause of the fault suite's seed 2753, where a node's store took
// no write from 3 s after its FerretDB came back (its partitions' writers
// had queued changes meanwhile, and committed them at once).
func TestConcurrentCommitsOfReplacementsCompleteOnFerretDB(t *testing.T) {
	s := openMongoStore(t)
	eng := s.docs.(*mongoEngine)
	// Under -race the two rounds take about 20 s; a stall holds until
	// the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const partitions, perCommit = 12, 40
	commitAll := func(version int64) error {
		errs := make(chan error, partitions)
		for p := range partitions {
			go func() {
				writes := make([]engine.Write, perCommit)
				for i := range writes {
					writes[i] = engine.Write{Doc: doc(fmt.Sprintf("d%03d", i), 1, uint64(i+1)+uint64(version)*perCommit, version, false)}
				}
				errs <- eng.Commit(ctx, p, writes)
			}()
		}
		var err error
		for range partitions {
			err = errors.Join(err, <-errs)
		}
		return err
	}
	// The first round creates the documents; the second replaces them,
	// and a statement holds its connection only when it finds the
	// document it replaces.
	for version := range int64(2) {
		if err := commitAll(version + 1); err != nil {
			t.Fatalf("committing %d replacements to each of %d partitions at once (version %d): %v", perCommit, partitions, version+1, err)
		}
	}
}

// Reading the partitions' records at start fails when the read is cut
// between two batches of its cursor, rather than handing back the records
// read so far as all of them: the node would claim the older positions
// they hold as its own.
func TestRecordsCutShortAreNotLoaded(t *testing.T) {
	ctx := context.Background()
	m := storetest.Start(t)
	s := openMongoAt(t, m.URI)
	// More log entries than a cursor's first batch (101): reading them
	// all takes a getMore.
	const entries = 150
	var all []appliedDoc
	for i := 1; i <= entries; i++ {
		d := appliedDoc{Partition: i % 3, Epoch: 2, Seq: uint64(i), Seen: 2}
		all = append(all, d)
		if err := s.records.SaveRecords(ctx, []appliedDoc{d}, func() []appliedDoc { return all }); err != nil {
			t.Fatal(err)
		}
	}
	cut := openMongoAt(t, m.Cutting(t, func(cmd bson.Raw) bool { return cmd.Index(0).Key() == "getMore" }))
	recs, err := cut.records.LoadRecords(ctx)
	if err == nil {
		for p := range 3 {
			if want := uint64(entries - (entries-p)%3); recs[p].Seq != want {
				t.Errorf("partition %d: loaded 2.%d from a read cut short, stored 2.%d", p, recs[p].Seq, want)
			}
		}
	}
	if err == nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a read of the records cut between two batches: %v, want the store unavailable", err)
	}
}
