package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Key layout (all integers big-endian, so byte order is numeric order):
//
//	'd' part(2) key            -> version(8) epoch(8) seq(8) updated(8) deleted(1) body
//	'p' part(2) epoch(8) seq(8) -> key                 (the position index)
//
// A partition's documents are one contiguous key range, in key order (the
// store's key order is byte order, as here); its history is another, in
// position order. Replacing a document deletes its old position entry in
// the same batch, so the position index holds one entry per key.
type pebbleEngine struct {
	db    *pebble.DB
	cache interface{ Unref() }
}

func openPebble(dir string, cacheBytes int64) (*pebbleEngine, error) {
	cache := pebble.NewCache(cacheBytes)
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache})
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("pebble: opening %s: %w", dir, err)
	}
	return &pebbleEngine{db: db, cache: cache}, nil
}

func (e *pebbleEngine) name() string { return "pebble" }

func partPrefix(kind byte, part int) []byte {
	return []byte{kind, byte(part >> 8), byte(part)}
}

func pDocKey(part int, key string) []byte {
	return append(partPrefix('d', part), key...)
}

func pPosKey(part int, p pos) []byte {
	k := partPrefix('p', part)
	k = binary.BigEndian.AppendUint64(k, p.epoch)
	return binary.BigEndian.AppendUint64(k, p.seq)
}

const pHeader = 33

func pEncode(d doc) []byte {
	v := make([]byte, pHeader, pHeader+len(d.body))
	binary.BigEndian.PutUint64(v[0:], uint64(d.version))
	binary.BigEndian.PutUint64(v[8:], d.pos.epoch)
	binary.BigEndian.PutUint64(v[16:], d.pos.seq)
	binary.BigEndian.PutUint64(v[24:], uint64(d.updated))
	if d.deleted {
		v[32] = 1
	}
	return append(v, d.body...)
}

func pDecode(part int, key string, v []byte) (doc, error) {
	if len(v) < pHeader {
		return doc{}, fmt.Errorf("pebble: value of %s is %d bytes", key, len(v))
	}
	d := doc{
		part:    part,
		key:     key,
		version: int64(binary.BigEndian.Uint64(v[0:])),
		pos:     pos{binary.BigEndian.Uint64(v[8:]), binary.BigEndian.Uint64(v[16:])},
		updated: int64(binary.BigEndian.Uint64(v[24:])),
		deleted: v[32] == 1,
	}
	if !d.deleted {
		d.body = bytes.Clone(v[pHeader:])
	}
	return d, nil
}

func (e *pebbleEngine) load(docs []doc) error {
	b := e.db.NewBatch()
	for i, d := range docs {
		if err := e.put(b, d, nil); err != nil {
			return err
		}
		if (i+1)%1000 == 0 || i == len(docs)-1 {
			if err := b.Commit(pebble.Sync); err != nil {
				return err
			}
			b = e.db.NewBatch()
		}
	}
	return nil
}

// put adds d's new state to b, with no old state to remove when old is nil.
func (e *pebbleEngine) put(b *pebble.Batch, d doc, old *pos) error {
	if old != nil {
		if err := b.Delete(pPosKey(d.part, *old), nil); err != nil {
			return err
		}
	}
	if err := b.Set(pDocKey(d.part, d.key), pEncode(d), nil); err != nil {
		return err
	}
	return b.Set(pPosKey(d.part, d.pos), []byte(d.key), nil)
}

func (e *pebbleEngine) get(part int, key string) (doc, bool, error) {
	v, closer, err := e.db.Get(pDocKey(part, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return doc{}, false, nil
	}
	if err != nil {
		return doc{}, false, err
	}
	defer closer.Close()
	d, err := pDecode(part, key, v)
	return d, err == nil, err
}

// oldPos reads the position a key holds now, without its body.
func (e *pebbleEngine) oldPos(part int, key string) (*pos, error) {
	v, closer, err := e.db.Get(pDocKey(part, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	if len(v) < pHeader {
		return nil, fmt.Errorf("pebble: value of %s is %d bytes", key, len(v))
	}
	return &pos{binary.BigEndian.Uint64(v[8:]), binary.BigEndian.Uint64(v[16:])}, nil
}

func (e *pebbleEngine) commit(docs []doc) error {
	b := e.db.NewBatch()
	defer b.Close()
	// Positions written earlier in this batch (a key written twice).
	inBatch := map[string]pos{}
	for _, d := range docs {
		id := string(pDocKey(d.part, d.key))
		var old *pos
		if p, ok := inBatch[id]; ok {
			old = &p
		} else {
			var err error
			if old, err = e.oldPos(d.part, d.key); err != nil {
				return err
			}
		}
		if err := e.put(b, d, old); err != nil {
			return err
		}
		inBatch[id] = d.pos
	}
	return b.Commit(pebble.Sync)
}

func (e *pebbleEngine) keyRange(part int, afterKey string, n int) ([]doc, error) {
	prefix := partPrefix('d', part)
	lower := prefix
	if afterKey != "" {
		lower = append(pDocKey(part, afterKey), 0) // the first key after afterKey
	}
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: partPrefix('d', part+1)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []doc
	for ok := it.First(); ok && len(out) < n; ok = it.Next() {
		d, err := pDecode(part, string(it.Key()[len(prefix):]), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, it.Error()
}

func (e *pebbleEngine) scanAfter(part int, after pos, n int) ([]doc, error) {
	lower := pPosKey(part, after)
	lower = append(lower, 0) // the first key after the position itself
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: partPrefix('p', part+1)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []doc
	for ok := it.First(); ok && len(out) < n; ok = it.Next() {
		d, found, err := e.get(part, string(it.Value()))
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("pebble: position index names %q, which is absent", it.Value())
		}
		out = append(out, d)
	}
	return out, it.Error()
}

func (e *pebbleEngine) last(part int) (pos, error) {
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: partPrefix('p', part), UpperBound: partPrefix('p', part+1)})
	if err != nil {
		return pos{}, err
	}
	defer it.Close()
	if !it.Last() {
		return pos{}, it.Error()
	}
	k := it.Key()[3:]
	return pos{binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])}, nil
}

func (e *pebbleEngine) close() error {
	err := e.db.Close()
	e.cache.Unref()
	return err
}
