package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// pos is where a change sits in its partition's history (store.Position).
type pos struct{ epoch, seq uint64 }

func (p pos) less(o pos) bool {
	return p.epoch < o.epoch || (p.epoch == o.epoch && p.seq < o.seq)
}

// doc is one stored document state or tombstone, in the shape the store
// keeps (store.Doc): the key is user/collection/id, the body JSON.
type doc struct {
	part    int
	key     string
	version int64
	pos     pos
	deleted bool
	updated int64  // unix milliseconds
	body    []byte // JSON object; nil for a tombstone
}

// engine is what the spike measures of each candidate: the access paths the
// partition writer, the replicas and the read paths use. Commit is one
// durable transaction (or batch) and may carry documents of several
// partitions; callers serialise commits, as Shoal's writer does.
type engine interface {
	name() string
	// load bulk-writes the initial documents (not measured per operation).
	load(docs []doc) error
	// get reads one document or tombstone by key; ok is false if absent.
	get(part int, key string) (d doc, ok bool, err error)
	// commit writes the documents' new states durably, in one transaction.
	commit(docs []doc) error
	// keyRange reads up to n documents of a partition with a key after
	// afterKey, in key order.
	keyRange(part int, afterKey string, n int) ([]doc, error)
	// scanAfter reads up to n documents and tombstones of a partition
	// whose position is after the given one, in position order (catch-up).
	scanAfter(part int, after pos, n int) ([]doc, error)
	// last is the newest position stored in a partition.
	last(part int) (pos, error)
	close() error
}

// docKey is store.DocKey.
func docKey(user, coll, id string) string { return user + "/" + coll + "/" + id }

// userOf names the user whose documents fill a partition: partition 0
// holds the measured user's collection, the others hold other users.
func userOf(part int) string {
	if part == 0 {
		return "big"
	}
	return fmt.Sprintf("u%02d", part)
}

func keyOf(part, i int) string { return docKey(userOf(part), "items", fmt.Sprintf("d%07d", i)) }

// makeBody returns a JSON object of about size bytes.
func makeBody(r *rand.Rand, i, size int) []byte {
	const letters = "abcdefghijklmnopqrstuvwxyz "
	pad := size - 120
	if pad < 0 {
		pad = 0
	}
	var b strings.Builder
	for range pad {
		b.WriteByte(letters[r.IntN(len(letters))])
	}
	body, err := json.Marshal(map[string]any{
		"name":   fmt.Sprintf("item %d", i),
		"n":      i,
		"price":  float64(r.IntN(100000)) / 100,
		"tags":   []string{"a", "b", fmt.Sprintf("t%d", i%10)},
		"active": i%2 == 0,
		"text":   b.String(),
	})
	if err != nil {
		panic(err)
	}
	return body
}
