package query

import (
	"errors"
	"slices"
)

// PageRequest describes one page of a listing.
type PageRequest struct {
	// Filter selects documents; nil matches every document.
	Filter *Filter
	// Sort orders the documents; the zero Sort orders by _id.
	Sort Sort
	// Limit is the largest number of documents on the page. The caller
	// validates it (1..1000); Page refuses values below 1.
	Limit int
	// After is the Next value of the previous page, or "" for the first page.
	After string
	// FilterText is the raw filter text, bound into cursors together with
	// Sort so that a cursor cannot be reused with another filter or sort.
	FilterText string
	// Key is the HMAC key that authenticates cursors. It must not be empty.
	Key []byte
	// Budget bounds the work of filtering and sorting (nil: unlimited).
	Budget *Budget
	// MaxBytes, when positive, is the size the page will be cut to by its
	// writer: a [Pager] keeps only the documents that may fit, going by
	// the sizes given to Add. 0: the page is bounded by Limit alone.
	MaxBytes int64
}

// entry is a matching document with its sort values and size.
type entry struct {
	doc  map[string]any
	vals []any
	size int64
}

// Page selects the documents of docs that match req.Filter and come strictly
// after the cursor req.After in req.Sort order, and returns the first
// req.Limit of them in that order. next is the cursor for the following
// page, or "" when this is the last page. Page does not modify docs; the
// returned slice is newly allocated.
//
// A cursor that does not decode, whose MAC does not verify with req.Key, or
// that was issued for another sort or filter text gives an [*Error]. Work
// past req.Budget gives [ErrTooExpensive]. A Limit below 1 or an empty Key
// is a programming error and gives an error that is neither.
//
// The documents must have distinct _id values (as the documents of one
// collection do); then paging through an unchanging set of documents returns
// every matching document exactly once.
func Page(docs []map[string]any, req PageRequest) (page []map[string]any, next string, err error) {
	p, err := NewPager(req)
	if err != nil {
		return nil, "", err
	}
	for _, d := range docs {
		if err := p.Add(d, 0); err != nil {
			return nil, "", err
		}
	}
	res, err := p.Result()
	if err != nil {
		return nil, "", err
	}
	if len(res.Docs) > 0 {
		if next, err = res.Next(len(res.Docs) - 1); err != nil {
			return nil, "", err
		}
	}
	return res.Docs, next, nil
}

// A Pager selects a page from documents given to it one at a time, so that
// a caller streaming documents from a store holds only those that may be on
// the page: at most Limit of them, and fewer when their sizes add up to
// MaxBytes before that. It is not safe for concurrent use.
type Pager struct {
	req     PageRequest
	keys    []sortKey
	binding [bindingSize]byte
	after   []any
	// heap holds the smallest matching documents after the cursor seen so
	// far, as a max-heap in sort order; bytes is the sum of their sizes.
	heap    []entry
	bytes   int64
	dropped bool // a matching document after the cursor was left out
}

// NewPager checks req (see [Page] for the errors) and returns a Pager for it.
func NewPager(req PageRequest) (*Pager, error) {
	if req.Limit < 1 {
		return nil, errors.New("query: PageRequest.Limit must be at least 1")
	}
	if len(req.Key) == 0 {
		return nil, errors.New("query: PageRequest.Key must not be empty")
	}
	p := &Pager{req: req, keys: req.Sort.keyList(), binding: cursorBinding(req.Sort, req.FilterText)}
	if req.After != "" {
		var err error
		if p.after, err = decodeCursor(req.After, req.Key, p.binding, len(p.keys)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// InKeyOrder reports whether the page is sorted by _id alone, ascending,
// with string ids: then a caller that gives the pager a collection's
// documents in id order (byte order, which is how _id strings compare)
// may start after afterID ("" for the first page), the cursor's _id, and
// stop as soon as Full says so.
func (p *Pager) InKeyOrder() (afterID string, ok bool) {
	if len(p.keys) != 1 || p.keys[0].name != idSortKey.name || p.keys[0].desc {
		return "", false
	}
	if p.after == nil {
		return "", true
	}
	afterID, ok = p.after[0].(string)
	return afterID, ok
}

// Full reports, for a page in key order (InKeyOrder) given its documents
// in that order, that no document still to come can be on it: one that
// matched was left out, and every later one sorts after it.
func (p *Pager) Full() bool {
	_, ok := p.InKeyOrder()
	return ok && p.dropped
}

// compare orders entries, charging the work to the budget.
func (p *Pager) compare(a, b entry) int { return compareValuesIn(p.keys, a.vals, b.vals, p.req.Budget) }

// Add offers the pager one document, whose size counts towards MaxBytes.
// It returns [ErrTooExpensive] once the work passes the budget; the pager
// is then of no further use.
func (p *Pager) Add(doc map[string]any, size int64) error {
	b := p.req.Budget
	if !b.charge(unitsPerDocument) {
		return ErrTooExpensive
	}
	ok, err := p.req.Filter.MatchWithin(doc, b)
	if err != nil || !ok {
		return err
	}
	e := entry{doc: doc, vals: make([]any, len(p.keys)), size: size}
	sortValues(e.vals, doc, p.keys)
	if p.after != nil && compareValuesIn(p.keys, e.vals, p.after, b) <= 0 {
		if b.Exhausted() {
			return ErrTooExpensive
		}
		return nil
	}
	p.heap = append(p.heap, e)
	p.bytes += size
	siftUp(p.heap, len(p.heap)-1, p.compare)
	// Leave out the largest while the others fill a page without it.
	for len(p.heap) > 1 && (len(p.heap) > p.req.Limit || (p.req.MaxBytes > 0 && p.bytes-p.heap[0].size >= p.req.MaxBytes)) {
		p.dropped = true
		p.bytes -= p.heap[0].size
		last := len(p.heap) - 1
		p.heap[0] = p.heap[last]
		p.heap[last] = entry{}
		p.heap = p.heap[:last]
		siftDown(p.heap, 0, p.compare)
	}
	if b.Exhausted() {
		return ErrTooExpensive
	}
	return nil
}

// Result returns the page: the documents kept, in sort order. A writer
// that cuts it shorter (to a byte bound) continues with Next of the last
// document it wrote. Result returns [ErrTooExpensive] when sorting passes
// the budget.
func (p *Pager) Result() (*Result, error) {
	slices.SortFunc(p.heap, p.compare)
	if p.req.Budget.Exhausted() {
		return nil, ErrTooExpensive
	}
	r := &Result{Docs: make([]map[string]any, len(p.heap)), vals: make([][]any, len(p.heap)),
		more: p.dropped, key: p.req.Key, binding: p.binding}
	for i, e := range p.heap {
		r.Docs[i], r.vals[i] = e.doc, e.vals
	}
	return r, nil
}

// Result is a page of documents in sort order.
type Result struct {
	Docs    []map[string]any
	vals    [][]any
	more    bool // matching documents follow the last of Docs
	key     []byte
	binding [bindingSize]byte
}

// Next returns the cursor of the page that follows Docs[i] (the After of
// the next request), or "" when no matching document follows it.
func (r *Result) Next(i int) (string, error) {
	if i == len(r.Docs)-1 && !r.more {
		return "", nil
	}
	return encodeCursor(r.key, r.binding, r.vals[i])
}

// siftUp restores the max-heap property of h above index i.
func siftUp[E any](h []E, i int, cmp func(a, b E) int) {
	for i > 0 {
		parent := (i - 1) / 2
		if cmp(h[i], h[parent]) <= 0 {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

// siftDown restores the max-heap property of h below index i.
func siftDown[E any](h []E, i int, cmp func(a, b E) int) {
	for {
		largest := i
		if l := 2*i + 1; l < len(h) && cmp(h[l], h[largest]) > 0 {
			largest = l
		}
		if r := 2*i + 2; r < len(h) && cmp(h[r], h[largest]) > 0 {
			largest = r
		}
		if largest == i {
			return
		}
		h[i], h[largest] = h[largest], h[i]
		i = largest
	}
}
