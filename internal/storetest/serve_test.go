package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shoal-db/shoal/internal/freeport"
)

// serveForTest runs Serve on a port and directory of the test's own
// until it ends, and a client of it.
func serveForTest(t *testing.T) (*mongo.Client, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	ports, err := freeport.Find(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, dir, slog.New(slog.DiscardHandler)) }()
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Disconnect(context.Background())
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return client, dir
}

// awaitIDIndex waits until SQLite plans FerretDB's lookup by _id in
// collection coll of database db with the index Serve adds, not a scan.
func awaitIDIndex(t *testing.T, dir, db, coll string) {
	t.Helper()
	ctx := context.Background()
	// A connection of its own each time: one opened before the index
	// may keep planning with the schema it read first.
	plan := func() (string, error) {
		sdb, err := sql.Open("sqlite", "file:"+filepath.Join(dir, db+".sqlite"))
		if err != nil {
			return "", err
		}
		defer sdb.Close()
		var table string
		if err := sdb.QueryRowContext(ctx, `SELECT table_name FROM _ferretdb_collections WHERE name = ?`, coll).Scan(&table); err != nil {
			return "", err
		}
		rows, err := sdb.QueryContext(ctx, fmt.Sprintf(`EXPLAIN QUERY PLAN SELECT _ferretdb_sjson FROM "%s" WHERE _ferretdb_sjson->'$._id' = ?`, table), `"k07"`)
		if err != nil {
			return "", err
		}
		defer rows.Close()
		var plan strings.Builder
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				return "", err
			}
			plan.WriteString(detail + "; ")
		}
		return plan.String(), rows.Err()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := plan()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p, "USING INDEX") && strings.Contains(p, "_shoal_id") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lookup by _id in %s.%s is planned as %q after 10 s", db, coll, p)
		}
		time.Sleep(50 * time.Millisecond) // another process's schema: nothing to be notified by
	}
}

func insertKeys(t *testing.T, coll *mongo.Collection, n int) {
	t.Helper()
	for i := range n {
		if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: fmt.Sprintf("k%02d", i)}, {Key: "v", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
}

// A FerretDB run by Serve looks a document up by _id through an index:
// SQLite plans the query FerretDB makes for {_id: <string>} with the index
// Serve added to the collection's table, not a scan. So are collections
// made after a stats command (FerretDB runs ANALYZE, whose tables cannot
// be indexed), and a database dropped and made again works.
func TestServeLooksIDsUpThroughAnIndex(t *testing.T) {
	ctx := context.Background()
	client, dir := serveForTest(t)
	coll := client.Database("db").Collection("p0001")
	insertKeys(t, coll, 50)
	awaitIDIndex(t, dir, "db", "p0001")
	var got bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "k07"}}).Decode(&got); err != nil || got["v"] != int32(7) {
		t.Fatalf("k07 through the index: %v, %v", got, err)
	}

	if err := client.Database("db").RunCommand(ctx, bson.D{{Key: "dbStats", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	insertKeys(t, client.Database("db").Collection("p0002"), 10)
	awaitIDIndex(t, dir, "db", "p0002")

	if err := client.Database("db").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	insertKeys(t, client.Database("db").Collection("p0003"), 10)
	if n, err := client.Database("db").Collection("p0003").CountDocuments(ctx, bson.D{}); err != nil || n != 10 {
		t.Fatalf("a database made again after a drop holds %d documents (%v), not 10", n, err)
	}
	awaitIDIndex(t, dir, "db", "p0003")
}
