package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// subject is one engine under measurement with the positions it has
// assigned: seq[p] is partition p's newest sequence number (epoch 1).
type subject struct {
	e     engine
	seq   []uint64
	sizes []int // documents loaded per partition: keys d0000000..
}

func (s *subject) next(part int) pos {
	s.seq[part]++
	return pos{1, s.seq[part]}
}

// dataset builds the documents every engine loads: partition 0 holds the
// measured user's collection of n documents, partitions 1..parts-1 hold
// others documents each.
func dataset(n, parts, others, bodySize int, seed uint64) ([]doc, []int) {
	r := rand.New(rand.NewPCG(seed, 1))
	sizes := make([]int, parts)
	var docs []doc
	now := time.Now().UnixMilli()
	for p := range parts {
		sizes[p] = others
		if p == 0 {
			sizes[p] = n
		}
		for i := range sizes[p] {
			docs = append(docs, doc{part: p, key: keyOf(p, i), version: 1, pos: pos{1, uint64(i + 1)},
				updated: now, body: makeBody(r, i, bodySize)})
		}
	}
	return docs, sizes
}

// sample is what one engine did in one round of one operation.
type sample struct {
	lat     []time.Duration // per operation (per write for the grouped run)
	elapsed time.Duration
	commits int // grouped run: transactions committed
}

func (s sample) perSecond() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.lat)) / s.elapsed.Seconds()
}

// timed runs fn up to n times, and stops early once budget has passed
// (after at least 3 runs).
func timed(n int, budget time.Duration, fn func() error) (sample, error) {
	var out sample
	start := time.Now()
	for i := 0; i < n; i++ {
		if i >= 3 && time.Since(start) > budget {
			break
		}
		t := time.Now()
		if err := fn(); err != nil {
			return out, err
		}
		out.lat = append(out.lat, time.Since(t))
	}
	out.elapsed = time.Since(start)
	return out, nil
}

// bench holds the settings of the operations.
type bench struct {
	samples   int
	opTime    time.Duration
	groupTime time.Duration
	writers   int
	groupMax  int
	batch     int
	parts     int
	bodies    [][]byte
}

type operation struct {
	name, what string
	run        func(b *bench, s *subject, r *rand.Rand) (sample, error)
}

var operations = []operation{
	{"get", "point get by key", (*bench).get},
	{"replace", "replace one document, new position, durable commit", (*bench).replace},
	{"delete", "delete: write a tombstone, new position, durable commit", (*bench).delete},
	{"range10", "10 documents after a key, in key order", (*bench).range10},
	{"scan500", "500 documents after a position, in position order (catch-up)", (*bench).scan500},
	{"last", "last position of the partition", (*bench).last},
	{"batch100", "one durable commit of 100 documents across 16 partitions", (*bench).batch100},
	{"group32", "32 concurrent writers of one document each, grouped into commits", (*bench).group32},
}

func (b *bench) get(s *subject, r *rand.Rand) (sample, error) {
	return timed(b.samples, b.opTime, func() error {
		k := keyOf(0, r.IntN(s.sizes[0]))
		_, ok, err := s.e.get(0, k)
		if err == nil && !ok {
			err = fmt.Errorf("%s: %s is missing", s.e.name(), k)
		}
		return err
	})
}

func (b *bench) replace(s *subject, r *rand.Rand) (sample, error) {
	return timed(b.samples, b.opTime, func() error {
		p := s.next(0)
		return s.e.commit([]doc{{part: 0, key: keyOf(0, r.IntN(s.sizes[0])), version: int64(p.seq), pos: p,
			updated: time.Now().UnixMilli(), body: b.bodies[r.IntN(len(b.bodies))]}})
	})
}

func (b *bench) delete(s *subject, r *rand.Rand) (sample, error) {
	return timed(b.samples, b.opTime, func() error {
		p := s.next(0)
		return s.e.commit([]doc{{part: 0, key: keyOf(0, r.IntN(s.sizes[0])), version: int64(p.seq), pos: p,
			updated: time.Now().UnixMilli(), deleted: true}})
	})
}

func (b *bench) range10(s *subject, r *rand.Rand) (sample, error) {
	return timed(b.samples, b.opTime, func() error {
		after := keyOf(0, r.IntN(s.sizes[0]-10))
		docs, err := s.e.keyRange(0, after, 10)
		if err == nil && (len(docs) != 10 || docs[0].key <= after ||
			!slices.IsSortedFunc(docs, func(a, b doc) int { return compareStrings(a.key, b.key) })) {
			err = fmt.Errorf("%s: range after %s gave %d documents, or out of order", s.e.name(), after, len(docs))
		}
		return err
	})
}

func (b *bench) scan500(s *subject, r *rand.Rand) (sample, error) {
	return timed(b.samples, b.opTime, func() error {
		after := pos{1, uint64(r.IntN(s.sizes[0] - 500))}
		docs, err := s.e.scanAfter(0, after, 500)
		if err == nil && (len(docs) != 500 || !after.less(docs[0].pos) ||
			!slices.IsSortedFunc(docs, func(a, b doc) int { return comparePos(a.pos, b.pos) })) {
			err = fmt.Errorf("%s: scan after %v gave %d documents, or out of order", s.e.name(), after, len(docs))
		}
		return err
	})
}

func (b *bench) last(s *subject, r *rand.Rand) (sample, error) {
	return timed(b.samples, b.opTime, func() error {
		p, err := s.e.last(0)
		if err == nil && p != (pos{1, s.seq[0]}) {
			err = fmt.Errorf("%s: last position %v, wrote up to %v", s.e.name(), p, pos{1, s.seq[0]})
		}
		return err
	})
}

func (b *bench) batch100(s *subject, r *rand.Rand) (sample, error) {
	return timed(b.samples, b.opTime, func() error {
		docs := make([]doc, b.batch)
		now := time.Now().UnixMilli()
		for i := range docs {
			part := i % b.parts
			p := s.next(part)
			docs[i] = doc{part: part, key: keyOf(part, r.IntN(s.sizes[part])), version: int64(p.seq), pos: p,
				updated: now, body: b.bodies[r.IntN(len(b.bodies))]}
		}
		return s.e.commit(docs)
	})
}

// group32 runs b.writers writers for b.groupTime, each writing one
// document at a time (writer w to partition w mod parts) and waiting for
// it to be durable. One committer takes what waits, up to b.groupMax
// writes, assigns their positions and commits them in one transaction:
// the cross-partition group commit issue 16 asks for.
func (b *bench) group32(s *subject, r *rand.Rand) (sample, error) {
	type req struct {
		d    doc
		done chan error
	}
	reqs := make(chan *req, b.writers)
	var commits int
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		for first := range reqs {
			batch := []*req{first}
		drain:
			for len(batch) < b.groupMax {
				select {
				case q, ok := <-reqs:
					if !ok {
						break drain
					}
					batch = append(batch, q)
				default:
					break drain
				}
			}
			docs := make([]doc, len(batch))
			for i, q := range batch {
				q.d.pos = s.next(q.d.part)
				q.d.version = int64(q.d.pos.seq)
				docs[i] = q.d
			}
			err := s.e.commit(docs)
			commits++
			for _, q := range batch {
				q.done <- err
			}
		}
	}()
	var (
		mu   sync.Mutex
		out  sample
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(b.groupTime)
	for w := range b.writers {
		wr := rand.New(rand.NewPCG(r.Uint64(), uint64(w)))
		wg.Go(func() {
			part := w % b.parts
			done := make(chan error, 1)
			var lat []time.Duration
			var err error
			for time.Now().Before(deadline) && err == nil {
				t := time.Now()
				reqs <- &req{d: doc{part: part, key: keyOf(part, wr.IntN(s.sizes[part])),
					updated: t.UnixMilli(), body: b.bodies[wr.IntN(len(b.bodies))]}, done: done}
				err = <-done
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			out.lat = append(out.lat, lat...)
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	close(reqs)
	<-committed
	out.commits = commits
	return out, errors.Join(errs...)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func comparePos(a, b pos) int {
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}

func percentile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}
