package store

import (
	"container/list"
	"sync"
)

// cache is a bounded, least-recently-used cache of document states keyed by
// partition and store key (one key can be in every partition: the tenure
// marker is). It holds tombstones and "absent" entries too, so the writer
// can decide inserts without asking the store.
//
// Only a partition's writer puts entries; readers fill misses through
// fill, which refuses when a commit to the partition began since the reader
// looked at the store (see Writer.Get). That keeps the cache coherent with
// the store without locking readers out.
type cache struct {
	mu       sync.Mutex
	budget   int
	used     int
	entries  map[cacheKey]*list.Element
	lru      list.List // front = most recent
	disabled bool
}

// cacheKey is a document's key in one partition.
type cacheKey struct {
	partition int
	key       string
}

type cacheEntry struct {
	key  cacheKey
	doc  *Doc // nil: the store holds no record of key
	size int
}

func newCache(budget int64) *cache {
	return &cache{budget: int(budget), entries: map[cacheKey]*list.Element{}, disabled: budget <= 0}
}

// get returns the cached state of key: found reports whether the cache knows
// it; doc is nil when the key is known to be absent from the store.
func (c *cache) get(partition int, key string) (doc *Doc, found bool) {
	if c.disabled {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[cacheKey{partition, key}]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).doc, true
}

// put records the state of key (doc nil: absent).
func (c *cache) put(partition int, key string, doc *Doc) {
	if c.disabled {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(cacheKey{partition, key}, doc)
}

// fill records a state read from the store, but only while valid() still
// holds, checked under the cache lock.
func (c *cache) fill(partition int, key string, doc *Doc, valid func() bool) {
	if c.disabled {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{partition, key}
	if _, ok := c.entries[k]; ok || !valid() {
		return
	}
	c.putLocked(k, doc)
}

func (c *cache) putLocked(key cacheKey, doc *Doc) {
	size := len(key.key) + 64
	if doc != nil {
		size += doc.Size
	}
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*cacheEntry)
		c.used += size - e.size
		e.doc, e.size = doc, size
		c.lru.MoveToFront(el)
	} else {
		c.entries[key] = c.lru.PushFront(&cacheEntry{key: key, doc: doc, size: size})
		c.used += size
	}
	for c.used > c.budget && c.lru.Len() > 0 {
		el := c.lru.Back()
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.entries, e.key)
		c.used -= e.size
	}
}

// forget drops key, so the next access asks the store.
func (c *cache) forget(partition int, key string) {
	if c.disabled {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{partition, key}
	if el, ok := c.entries[k]; ok {
		c.used -= el.Value.(*cacheEntry).size
		c.lru.Remove(el)
		delete(c.entries, k)
	}
}
