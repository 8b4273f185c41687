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
}

// entry is a matching document with its sort values.
type entry struct {
	doc  map[string]any
	vals []any
}

// Page selects the documents of docs that match req.Filter and come strictly
// after the cursor req.After in req.Sort order, and returns the first
// req.Limit of them in that order. next is the cursor for the following
// page, or "" when this is the last page. Page does not modify docs; the
// returned slice is newly allocated.
//
// A cursor that does not decode, whose MAC does not verify with req.Key, or
// that was issued for another sort or filter text gives an [*Error]. A Limit
// below 1 or an empty Key is a programming error and gives an error that is
// not an *Error.
//
// The documents must have distinct _id values (as the documents of one
// collection do); then paging through an unchanging set of documents returns
// every matching document exactly once.
func Page(docs []map[string]any, req PageRequest) (page []map[string]any, next string, err error) {
	if req.Limit < 1 {
		return nil, "", errors.New("query: PageRequest.Limit must be at least 1")
	}
	if len(req.Key) == 0 {
		return nil, "", errors.New("query: PageRequest.Key must not be empty")
	}
	keys := req.Sort.keyList()
	binding := cursorBinding(req.Sort, req.FilterText)
	var after []any
	if req.After != "" {
		if after, err = decodeCursor(req.After, req.Key, binding, len(keys)); err != nil {
			return nil, "", err
		}
	}

	var entries []entry
	vals := make([]any, len(keys))
	for _, d := range docs {
		if !req.Filter.Match(d) {
			continue
		}
		sortValues(vals, d, keys)
		if after != nil && compareValues(keys, vals, after) <= 0 {
			continue // vals is reused for the next document
		}
		entries = append(entries, entry{doc: d, vals: vals})
		vals = make([]any, len(keys))
	}
	compare := func(a, b entry) int { return compareValues(keys, a.vals, b.vals) }
	more := len(entries) > req.Limit
	if more {
		entries = smallest(entries, req.Limit, compare)
	} else {
		slices.SortFunc(entries, compare)
	}

	page = make([]map[string]any, len(entries))
	for i, e := range entries {
		page[i] = e.doc
	}
	if more {
		if next, err = encodeCursor(req.Key, binding, entries[len(entries)-1].vals); err != nil {
			return nil, "", err
		}
	}
	return page, next, nil
}

// smallest reorders es so that its first k elements are the k smallest in
// ascending order, and returns them. It takes O(len(es) log k) time, which
// matters when a small page is cut from many candidates.
func smallest[E any](es []E, k int, cmp func(a, b E) int) []E {
	h := es[:k]
	// Make h a max-heap, so that h[0] is the largest of the k kept.
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i, cmp)
	}
	for _, e := range es[k:] {
		if cmp(e, h[0]) < 0 {
			h[0] = e
			siftDown(h, 0, cmp)
		}
	}
	slices.SortFunc(h, cmp)
	return h
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
