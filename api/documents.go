package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/shoal-db/shoal/api/doc"
	"github.com/shoal-db/shoal/api/query"
	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/internal/readall"
	"github.com/shoal-db/shoal/store"
)

const (
	headerConsistencyToken = "X-Consistency-Token"
	defaultQueryLimit      = 100
	maxQueryLimit          = 1000
)

// eraseChunk bounds how many documents an erase of a user reads, and
// deletes in one commit, at a time.
var eraseChunk = 500

// readBody reads a request body up to the configured limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Problem) {
	tooLarge := problem(http.StatusRequestEntityTooLarge, TypeBodyTooLarge, "Body too large",
		fmt.Sprintf("the body is larger than MAX_BODY_BYTES (%d bytes); split the document or raise the limit", s.cfg.MaxBodyBytes))
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, tooLarge
	}
	data, err := readall.Sized(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), r.ContentLength)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tooLarge
	}
	if err != nil {
		return nil, badRequest(TypeInvalidDocument, "the body could not be read: "+err.Error())
	}
	return data, nil
}

// bodyProblem answers a body that doc.ParseBody or doc.ParsePatch refused;
// what is "document" or "merge patch".
func bodyProblem(err error, what string) *Problem {
	var le *doc.LimitError
	if errors.As(err, &le) {
		return documentTooLarge(le, what)
	}
	return badRequest(TypeInvalidDocument, err.Error())
}

// documentTooLarge answers a document over MAX_DOCUMENT_FIELDS or
// MAX_DOCUMENT_BYTES. what is "document" or "merge patch" (the body sent
// is over), or "patched" (the document a patch would make is). It is a
// type of its own, not body-too-large: the body may be small and still
// make a document too large, and what to do differs (split the document,
// not the request).
func documentTooLarge(le *doc.LimitError, what string) *Problem {
	setting, is, becomes := "MAX_DOCUMENT_BYTES", "is", "make the document"
	size := fmt.Sprintf("%d bytes as compact JSON", le.Have)
	if le.Fields {
		setting, is, becomes = "MAX_DOCUMENT_FIELDS", "has", "give the document"
		size = fmt.Sprintf("%d fields (object keys and array elements, at every depth)", le.Have)
	}
	advice := "split it into several documents"
	if what == "merge patch" {
		advice = "send it as several smaller patches"
	}
	detail := fmt.Sprintf("the %s %s %s, more than %s (%d): %s, or raise %s",
		what, is, size, setting, le.Max, advice, setting)
	if what == "patched" {
		detail = fmt.Sprintf("applying the patch would %s %s, more than %s (%d); the document is unchanged: remove fields in the same patch, split the document, or raise %s",
			becomes, size, setting, le.Max, setting)
	}
	return problem(http.StatusRequestEntityTooLarge, TypeDocumentTooLarge, "Document too large", detail)
}

// ifMatch parses an If-Match header: a version number spelt as in the
// ETag we send ("3"; the quotes may be left out), or "*" (any existing version). want is -1 when the
// header is absent, 0 for "*".
//
// A weak entity tag (W/"3") is a failed precondition, not a malformed
// header: If-Match compares entity tags strongly (RFC 9110, section
// 13.1.1), so a weak tag never matches, whatever the document's version.
func ifMatch(r *http.Request) (want int64, prob *Problem) {
	h := strings.TrimSpace(r.Header.Get("If-Match"))
	if h == "" {
		return -1, nil
	}
	if h == "*" {
		return 0, nil
	}
	if strings.HasPrefix(h, "W/") {
		return 0, problem(http.StatusPreconditionFailed, TypePreconditionFailed, "Precondition failed",
			fmt.Sprintf("If-Match %q is a weak entity tag, and If-Match compares tags strongly (RFC 9110), so it never matches: send the ETag as it was given, e.g. \"3\"", logsafe.ClipTo(h, 64)))
	}
	tag := h
	if len(tag) >= 2 && tag[0] == '"' && tag[len(tag)-1] == '"' {
		tag = tag[1 : len(tag)-1]
	}
	// Only the version as we spell it in an ETag matches it: not +3, 03 or
	// a stray quote.
	v, err := strconv.ParseInt(tag, 10, 64)
	if err != nil || v < 1 || strconv.FormatInt(v, 10) != tag {
		return 0, badRequest(TypeInvalidHeader, fmt.Sprintf("If-Match %q is not a document version: send the ETag of the version you read, e.g. \"3\"", logsafe.ClipTo(h, 64)))
	}
	return v, nil
}

// checkVersion enforces If-Match against the current state (nil or a
// tombstone when the document does not exist).
func checkVersion(want int64, cur *store.Doc) error {
	if want < 0 {
		return nil
	}
	if cur == nil || cur.Deleted {
		return problem(http.StatusPreconditionFailed, TypePreconditionFailed, "Precondition failed",
			"If-Match was given but the document does not exist")
	}
	if want != 0 && cur.Version != want {
		p := problem(http.StatusPreconditionFailed, TypePreconditionFailed, "Precondition failed",
			fmt.Sprintf("If-Match asked for version %d but the document is at version %d; read it again and retry", want, cur.Version))
		v := cur.Version
		p.Current = &v
		return p
	}
	return nil
}

func exists(cur *store.Doc) bool { return cur != nil && !cur.Deleted }

// render is a document as clients see it: its body with _id and _version.
func render(d *store.Doc) map[string]any {
	out := make(map[string]any, len(d.Body)+2)
	for k, v := range d.Body {
		out[k] = v
	}
	out["_id"] = d.ID
	out["_version"] = d.Version
	return out
}

func consistencyToken(partition int, d *store.Doc) string {
	return strconv.Itoa(partition) + ":" + d.Pos.String()
}

func documentPath(user, coll, id string) string {
	return "/v1/users/" + url.PathEscape(user) + "/collections/" + url.PathEscape(coll) + "/documents/" + url.PathEscape(id)
}

// writeDocument answers with a document and the headers that go with it.
func writeDocument(w http.ResponseWriter, status, partition int, d *store.Doc) {
	documentHeaders(w.Header(), partition, d)
	writeJSON(w, status, render(d))
}

// documentHeaders sets the headers every answer with a document carries.
func documentHeaders(h http.Header, partition int, d *store.Doc) {
	h.Set("ETag", strconv.Quote(strconv.FormatInt(d.Version, 10)))
	h.Set(headerConsistencyToken, consistencyToken(partition, d))
}

// writeWritten answers a write with the document written, or, when the
// request asked for it with Prefer: return=minimal (RFC 7240), with its
// headers alone (ETag, X-Consistency-Token, Location when created) and an
// empty body: the client saves reading back what it sent.
func writeWritten(w http.ResponseWriter, r *http.Request, status, partition int, d *store.Doc) {
	// The answer depends on Prefer either way (RFC 7240, section 2).
	w.Header().Add("Vary", "Prefer")
	if !prefersMinimal(r) {
		writeDocument(w, status, partition, d)
		return
	}
	h := w.Header()
	documentHeaders(h, partition, d)
	h.Set("Preference-Applied", "return=minimal")
	h.Set("Content-Length", "0")
	w.WriteHeader(status)
}

func (s *Server) createDocument(w http.ResponseWriter, r *http.Request) {
	user, coll := chi.URLParam(r, "user"), chi.URLParam(r, "coll")
	data, prob := s.readBody(w, r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	body, id, err := doc.ParseBody(data, s.limits)
	if err != nil {
		writeProblem(w, bodyProblem(err, "document"))
		return
	}
	fresh := id == ""
	if fresh {
		id = doc.NewID()
	}
	p := s.partitionOf(user)
	cmp := s.compareFor(r, p)
	res := s.writer.Do(r.Context(), store.Op{Partition: p, User: user, Coll: coll, ID: id, Fresh: fresh,
		Mutate: func(cur *store.Doc) (store.Next, error) {
			cmp.saw(cur)
			if exists(cur) {
				return store.Next{}, problem(http.StatusConflict, TypeAlreadyExists, "Already exists",
					fmt.Sprintf("document %q already exists in %s; use PUT to replace it", id, coll))
			}
			return store.Next{Body: body, Size: len(data)}, nil
		}})
	if res.Err != nil {
		if prob := cmp.settle(r.Context(), res.Err); prob != nil {
			writeProblem(w, prob)
			return
		}
		s.storeError(w, r, res.Err)
		return
	}
	if prob := s.confirmWrite(r, p, res.Doc.Pos, res.Doc.Pos); prob != nil {
		writeProblem(w, prob)
		return
	}
	w.Header().Set("Location", documentPath(user, coll, id))
	writeWritten(w, r, http.StatusCreated, p, res.Doc)
}

func (s *Server) getDocument(w http.ResponseWriter, r *http.Request) {
	user, coll, id := chi.URLParam(r, "user"), chi.URLParam(r, "coll"), chi.URLParam(r, "id")
	p := s.partitionOf(user)
	d, err := s.writer.Get(r.Context(), p, store.DocKey(user, coll, id))
	if err == nil {
		noteReadPosition(r, d.Pos) // a tombstone's too: the delete's position
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.Deleted) {
		writeProblem(w, notFound(fmt.Sprintf("no document %q in collection %q", id, coll)))
		return
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeDocument(w, http.StatusOK, p, d)
}

func (s *Server) putDocument(w http.ResponseWriter, r *http.Request) {
	user, coll, id := chi.URLParam(r, "user"), chi.URLParam(r, "coll"), chi.URLParam(r, "id")
	want, prob := ifMatch(r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	data, prob := s.readBody(w, r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	body, bodyID, err := doc.ParseBody(data, s.limits)
	if err != nil {
		writeProblem(w, bodyProblem(err, "document"))
		return
	}
	if bodyID != "" && bodyID != id {
		writeProblem(w, badRequest(TypeInvalidDocument, fmt.Sprintf("the body's _id %q differs from the id in the URL %q", bodyID, id)))
		return
	}
	p := s.partitionOf(user)
	created := false
	cmp := s.compareFor(r, p)
	res := s.writer.Do(r.Context(), store.Op{Partition: p, User: user, Coll: coll, ID: id,
		Mutate: func(cur *store.Doc) (store.Next, error) {
			cmp.saw(cur)
			if err := checkVersion(want, cur); err != nil {
				return store.Next{}, err
			}
			created = !exists(cur)
			return store.Next{Body: body, Size: len(data)}, nil
		}})
	if res.Err != nil {
		if prob := cmp.settle(r.Context(), res.Err); prob != nil {
			writeProblem(w, prob)
			return
		}
		s.storeError(w, r, res.Err)
		return
	}
	if prob := s.confirmWrite(r, p, res.Doc.Pos, res.Doc.Pos); prob != nil {
		writeProblem(w, prob)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", documentPath(user, coll, id))
	}
	writeWritten(w, r, status, p, res.Doc)
}

func (s *Server) patchDocument(w http.ResponseWriter, r *http.Request) {
	user, coll, id := chi.URLParam(r, "user"), chi.URLParam(r, "coll"), chi.URLParam(r, "id")
	want, prob := ifMatch(r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	data, prob := s.readBody(w, r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	patch, patchID, err := doc.ParsePatch(data, s.limits)
	if err != nil {
		writeProblem(w, bodyProblem(err, "merge patch"))
		return
	}
	if patchID != "" && patchID != id {
		writeProblem(w, badRequest(TypeInvalidDocument, fmt.Sprintf("the patch's _id %q differs from the id in the URL %q; ids cannot change", patchID, id)))
		return
	}
	p := s.partitionOf(user)
	cmp := s.compareFor(r, p)
	res := s.writer.Do(r.Context(), store.Op{Partition: p, User: user, Coll: coll, ID: id,
		Mutate: func(cur *store.Doc) (store.Next, error) {
			cmp.saw(cur)
			if !exists(cur) {
				return store.Next{}, notFound(fmt.Sprintf("no document %q in collection %q to patch", id, coll))
			}
			if err := checkVersion(want, cur); err != nil {
				return store.Next{}, err
			}
			merged, err := doc.MergePatch(cur.Body, patch)
			if err != nil {
				return store.Next{}, err
			}
			// The limits hold for the document stored, whatever its route:
			// patches that each fit MAX_BODY_BYTES must not add up to more.
			// A document stored under larger limits stays readable, and
			// takes any patch that leaves it within these.
			size, err := s.limits.Check(merged)
			var le *doc.LimitError
			if errors.As(err, &le) {
				return store.Next{}, documentTooLarge(le, "patched")
			}
			return store.Next{Body: merged, Size: size.Bytes}, nil
		}})
	if res.Err != nil {
		if prob := cmp.settle(r.Context(), res.Err); prob != nil {
			writeProblem(w, prob)
			return
		}
		s.storeError(w, r, res.Err)
		return
	}
	if prob := s.confirmWrite(r, p, res.Doc.Pos, res.Doc.Pos); prob != nil {
		writeProblem(w, prob)
		return
	}
	writeWritten(w, r, http.StatusOK, p, res.Doc)
}

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request) {
	user, coll, id := chi.URLParam(r, "user"), chi.URLParam(r, "coll"), chi.URLParam(r, "id")
	want, prob := ifMatch(r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	p := s.partitionOf(user)
	cmp := s.compareFor(r, p)
	res := s.writer.Do(r.Context(), store.Op{Partition: p, User: user, Coll: coll, ID: id,
		Mutate: func(cur *store.Doc) (store.Next, error) {
			cmp.saw(cur)
			if !exists(cur) {
				return store.Next{}, notFound(fmt.Sprintf("no document %q in collection %q", id, coll))
			}
			if err := checkVersion(want, cur); err != nil {
				return store.Next{}, err
			}
			return store.Next{Delete: true}, nil
		}})
	if res.Err != nil {
		if prob := cmp.settle(r.Context(), res.Err); prob != nil {
			writeProblem(w, prob)
			return
		}
		s.storeError(w, r, res.Err)
		return
	}
	if prob := s.confirmWrite(r, p, res.Doc.Pos, res.Doc.Pos); prob != nil {
		writeProblem(w, prob)
		return
	}
	w.Header().Set(headerConsistencyToken, consistencyToken(p, res.Doc))
	w.WriteHeader(http.StatusNoContent)
}

// errPageFull ends the scan of a page in key order once it is full.
var errPageFull = errors.New("the page is full")

func (s *Server) queryDocuments(w http.ResponseWriter, r *http.Request) {
	user, coll := chi.URLParam(r, "user"), chi.URLParam(r, "coll")
	q := r.URL.Query() // checkQuery refused a query string that does not parse
	for k := range q {
		switch k {
		case "filter", "sort", "limit", "after":
		default:
			writeProblem(w, badRequest(TypeInvalidQuery, fmt.Sprintf("unknown query parameter %q: use filter, sort, limit and after", k)))
			return
		}
	}
	limit := defaultQueryLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxQueryLimit {
			writeProblem(w, badRequest(TypeInvalidQuery, fmt.Sprintf("limit %q must be a whole number from 1 to %d", v, maxQueryLimit)))
			return
		}
		limit = n
	}
	filterText := q.Get("filter")
	filter, err := query.ParseFilter(filterText)
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidFilter, err.Error()))
		return
	}
	sort, err := query.ParseSort(q.Get("sort"))
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidQuery, err.Error()))
		return
	}
	pager, err := query.NewPager(query.PageRequest{Filter: filter, Sort: sort, Limit: limit,
		After: q.Get("after"), FilterText: filterText, Key: s.cursorKeyFor(user, coll),
		Budget: query.NewBudget(s.queryBudget()), MaxBytes: s.maxPageBytes()})
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidQuery, err.Error()))
		return
	}
	// Documents are evaluated as they come from the store, and only those
	// that may be on the page are kept. The evaluation stops when the
	// request's context ends (the client went away, or the node forwarding
	// it gave up) and when the work passes the budget. Sorted by _id (the
	// default), they come in that order from after the cursor, and the
	// evaluation stops once the page is full: a page costs what it reads
	// up to its last match, not the collection.
	ctx := r.Context()
	scanned := 0
	afterID, inKeyOrder := pager.InKeyOrder()
	err = s.store.ScanEach(ctx, s.partitionOf(user), user, coll, afterID, func(d *store.Doc) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.queryHook != nil {
			s.queryHook(ctx)
		}
		scanned++
		if err := pager.Add(render(d), int64(d.Size)); err != nil {
			return err
		}
		if pager.Full() {
			return errPageFull
		}
		return nil
	})
	if errors.Is(err, errPageFull) {
		err = nil
	}
	var res *query.Result
	if err == nil {
		res, err = pager.Result()
	}
	switch {
	case errors.Is(err, query.ErrTooExpensive):
		advice := "or sort on smaller fields; a smaller limit does not help, since with a sort other than _id every document of the collection is evaluated"
		if inKeyOrder {
			advice = "or make it match more of the documents it reads: sorted by _id a page reads documents in _id order until it holds limit matches"
		}
		writeProblem(w, problem(http.StatusBadRequest, TypeQueryTooExpensive, "Query too expensive", fmt.Sprintf(
			"the query needs more than the %d work units QUERY_BUDGET allows (it stopped after reading %d documents): "+
				"narrow the filter (fewer or simpler $regex patterns, which cost in proportion to the text they read; fewer $or and $in alternatives) %s",
			s.queryBudget(), scanned, advice)))
	case err != nil && ctx.Err() != nil:
		writeProblem(w, endedProblem(ctx))
	case err != nil:
		s.storeError(w, r, err)
	default:
		s.writePage(w, res, s.maxPageBytes())
	}
}

func (s *Server) listCollections(w http.ResponseWriter, r *http.Request) {
	user := chi.URLParam(r, "user")
	colls, err := s.store.Collections(r.Context(), s.partitionOf(user), user)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"collections": colls})
}

// errAlreadyGone marks a document deleted between the scan and its turn in
// the writer during an erase; it is not an error for the caller.
var errAlreadyGone = errors.New("already deleted")

// errChunkFull stops an erase's read once it has a chunk of ids.
var errChunkFull = errors.New("chunk full")

// eraseUser deletes every live document of the user, collection by
// collection, a chunk at a time (eraseChunk): it holds the ids of one
// chunk, never the user's documents.
func (s *Server) eraseUser(w http.ResponseWriter, r *http.Request) {
	user := chi.URLParam(r, "user")
	p := s.partitionOf(user)
	colls, err := s.store.Collections(r.Context(), p, user)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	var held int64 // live documents when the erase began
	for _, c := range colls {
		held += c.Count
	}
	deleted := 0
	var first, last store.Position // the oldest and newest deletions, for the write concern
	for _, c := range colls {
		for after := ""; ; {
			var ids []string
			err := s.store.ScanEach(r.Context(), p, user, c.Name, after, func(d *store.Doc) error {
				if ids = append(ids, d.ID); len(ids) == eraseChunk {
					return errChunkFull
				}
				return nil
			})
			if err != nil && !errors.Is(err, errChunkFull) {
				s.storeError(w, r, fmt.Errorf("erased %d documents of %d, then: %w", deleted, held, err))
				return
			}
			if len(ids) == 0 {
				break
			}
			ops := make([]store.Op, len(ids))
			for i, id := range ids {
				ops[i] = store.Op{Partition: p, User: user, Coll: c.Name, ID: id,
					Mutate: func(cur *store.Doc) (store.Next, error) {
						if !exists(cur) {
							return store.Next{}, errAlreadyGone
						}
						return store.Next{Delete: true}, nil
					}}
			}
			for _, res := range s.writer.DoAll(r.Context(), ops) {
				switch {
				case res.Err == nil:
					deleted++
					if res.Doc.Pos.Compare(last) > 0 {
						last = res.Doc.Pos
					}
					if deleted == 1 || res.Doc.Pos.Compare(first) < 0 {
						first = res.Doc.Pos
					}
				case errors.Is(res.Err, errAlreadyGone):
				default:
					s.storeError(w, r, fmt.Errorf("erased %d documents of %d, then: %w", deleted, held, res.Err))
					return
				}
			}
			if len(ids) < eraseChunk {
				break
			}
			after = ids[len(ids)-1]
		}
	}
	if deleted > 0 {
		if prob := s.confirmWrite(r, p, first, last); prob != nil {
			writeProblem(w, prob)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": deleted})
}

// placement says where a user's data lives: partition (and the cluster's
// partition count), preferred master, current master and epoch,
// responsible list, succession, and each member's state as this node
// sees it.
func (s *Server) placement(w http.ResponseWriter, r *http.Request) {
	user := chi.URLParam(r, "user")
	p := s.partitionOf(user)
	v := s.placementView(p)
	v.User, v.Position, v.PartitionCount = user, s.writer.Applied(p), s.cfg.PartitionCount
	if s.cfg.Replication != nil {
		for _, l := range s.cfg.Replication.Lags() {
			if l.Partition == p {
				v.Replicas = append(v.Replicas, l.ReplicaLag)
			}
		}
	}
	writeJSON(w, http.StatusOK, v)
}
