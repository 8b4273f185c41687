package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Document is a document as a node answers it: its fields, _id and
// _version among them, with its id, version and the consistency token of
// the state answered (pass it in ReadOptions.After to read your writes on
// any copy).
type Document struct {
	ID      string
	Version int64
	Fields  map[string]any
	Token   string
	status  int // the answer's status code
}

// Decode decodes the document's fields into v (a struct with json tags,
// say), as encoding/json would the document's JSON.
func (d Document) Decode(v any) error {
	b, err := json.Marshal(d.Fields)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// WriteOptions are the headers of a write; the zero value is the node's
// defaults (write concern 1, the default write timeout, unconditional).
type WriteOptions struct {
	// Concern is X-Write-Concern: "1", "majority" or "all" ("": 1).
	Concern string
	// Timeout is X-Write-Timeout: how long the node waits for the write
	// concern (0: its default, 5s).
	Timeout time.Duration
	// IfMatch makes the write conditional on the document's version
	// ("3", or "*" for any existing version); 412 (ErrPreconditionFailed)
	// when it does not match.
	IfMatch string
	// Minimal asks the node to answer with the write's headers alone
	// (Prefer: return=minimal): the Document returned has its ID, Version
	// and Token, and no Fields. It saves the node writing the document
	// back and the client reading it.
	Minimal bool
}

// ReadOptions are the headers of a read; the zero value reads the first
// copy that answers (read concern local).
type ReadOptions struct {
	// Concern is X-Read-Concern: "local", "majority" or "linearizable".
	Concern string
	// Preference is X-Read-Preference: "master", "nearest" (this node's
	// copy if it holds one, else another) or "local" (only this node's
	// copy; 421, ErrMisdirected, if it holds none) ("": the node's
	// routing, master first). A client of several nodes sends nearest and
	// local reads to the first of its nodes that holds a copy, and
	// follows a 421 to the master it names; the others to the master.
	Preference string
	// After is X-Consistency-Token: a token a write or read answered; the
	// copy that answers holds at least that state (read your writes).
	After string
}

// Query is a page of a collection's documents: Filter in MongoDB's query
// syntax (a map or a JSON string; nil: every document), Sort as the API
// takes it ("-stars,title"), Limit per page (0: the node's default, 100).
type Query struct {
	Filter any
	Sort   string
	Limit  int
}

// Collection is a user's collection and how many documents it holds.
type Collection struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Sentinels of the document calls' errors (an *HTTPError matches them
// with errors.Is, by its status code).
var (
	ErrConflict           = errors.New("conflict (409)")            // POST with an _id that exists
	ErrPreconditionFailed = errors.New("precondition failed (412)") // If-Match did not match
	ErrTimeout            = errors.New("timeout (504)")             // the write concern was not confirmed in time: the write may or may not be applied
	ErrMisdirected        = errors.New("misdirected (421)")         // the node holds no copy the request asks for (X-Read-Preference: local); the error names the master
)

// Create stores a new document (POST): with the id the body's _id gives,
// or one the node generates. ErrConflict when that _id exists. The
// document is sent as encoding/json encodes doc, but a valid
// json.RawMessage as it is (its spaces count towards the node's
// MAX_BODY_BYTES); so for Put and Patch.
func (c *Client) Create(ctx context.Context, user, coll string, doc any, o WriteOptions) (Document, error) {
	return c.document(ctx, o.call(http.MethodPost, user, collectionPath(user, coll)+"/documents", http.StatusCreated), doc)
}

// Get reads a document; ErrNotFound when there is none.
func (c *Client) Get(ctx context.Context, user, coll, id string, o ReadOptions) (Document, error) {
	return c.document(ctx, o.call(user, documentPath(user, coll, id), ""), nil)
}

// Put creates or replaces a document whole; created says which it did.
func (c *Client) Put(ctx context.Context, user, coll, id string, doc any, o WriteOptions) (d Document, created bool, err error) {
	d, err = c.document(ctx, o.call(http.MethodPut, user, documentPath(user, coll, id), http.StatusOK, http.StatusCreated), doc)
	return d, err == nil && d.status == http.StatusCreated, err
}

// Patch applies a JSON merge patch (RFC 7396: null removes a field) to an
// existing document; ErrNotFound when there is none.
func (c *Client) Patch(ctx context.Context, user, coll, id string, patch any, o WriteOptions) (Document, error) {
	return c.document(ctx, o.call(http.MethodPatch, user, documentPath(user, coll, id), http.StatusOK), patch)
}

// Delete deletes a document and returns the consistency token of its
// deletion; ErrNotFound when there is none.
func (c *Client) Delete(ctx context.Context, user, coll, id string, o WriteOptions) (token string, err error) {
	resp, err := c.send(ctx, o.call(http.MethodDelete, user, documentPath(user, coll, id), http.StatusNoContent))
	if err != nil {
		return "", err
	}
	return resp.header.Get("X-Consistency-Token"), nil
}

// Documents iterates over the documents of a collection that match q, page
// after page (each page one request, following the answer's cursor), until
// the last page or the first error, which it yields and then stops.
func (c *Client) Documents(ctx context.Context, user, coll string, q Query, o ReadOptions) iter.Seq2[Document, error] {
	return func(yield func(Document, error) bool) {
		v := url.Values{}
		switch f := q.Filter.(type) {
		case nil:
		case string:
			v.Set("filter", f)
		default:
			b, err := json.Marshal(f)
			if err != nil {
				yield(Document{}, err)
				return
			}
			v.Set("filter", string(b))
		}
		if q.Sort != "" {
			v.Set("sort", q.Sort)
		}
		if q.Limit > 0 {
			v.Set("limit", strconv.Itoa(q.Limit))
		}
		path := collectionPath(user, coll) + "/documents"
		for {
			resp, err := c.send(ctx, o.call(user, path, v.Encode()))
			if err != nil {
				yield(Document{}, err)
				return
			}
			var page struct {
				Documents []map[string]any `json:"documents"`
				Next      string           `json:"next"`
			}
			if err := decodeJSON(resp.body, &page); err != nil {
				yield(Document{}, &AnswerError{Method: http.MethodGet, Path: path, What: "query page", ContentType: resp.header.Get("Content-Type"), Err: err})
				return
			}
			for _, f := range page.Documents {
				if !yield(documentOf(f, ""), nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			v.Set("after", page.Next)
		}
	}
}

// Collections lists the user's collections with their document counts.
func (c *Client) Collections(ctx context.Context, user string) ([]Collection, error) {
	path := "/v1/users/" + url.PathEscape(user) + "/collections"
	resp, err := c.send(ctx, ReadOptions{}.call(user, path, ""))
	if err != nil {
		return nil, err
	}
	var out struct {
		Collections []Collection `json:"collections"`
	}
	if err := decodeJSON(resp.body, &out); err != nil {
		return nil, &AnswerError{Method: http.MethodGet, Path: path, What: "collection list", ContentType: resp.header.Get("Content-Type"), Err: err}
	}
	return out.Collections, nil
}

// document sends k (with body, if any, as its JSON) and decodes its
// answer, a document.
func (c *Client) document(ctx context.Context, k call, body any) (Document, error) {
	if raw, ok := body.(json.RawMessage); ok && len(raw) > 0 && json.Valid(raw) {
		k.body = raw // sent as it is, without the copy json.Marshal compacts it into
	} else if body != nil {
		var err error
		if k.body, err = json.Marshal(body); err != nil {
			return Document{}, err
		}
	}
	resp, err := c.send(ctx, k)
	if err != nil {
		return Document{}, err
	}
	if resp.header.Get("Preference-Applied") == "return=minimal" {
		return minimalDocument(k, resp)
	}
	var fields map[string]any
	if err := decodeJSON(resp.body, &fields); err != nil || fields == nil {
		return Document{}, &AnswerError{Method: k.method, Path: k.path, What: "document", ContentType: resp.header.Get("Content-Type"), Err: err, Missing: "a JSON object"}
	}
	d := documentOf(fields, resp.header.Get("X-Consistency-Token"))
	d.status = resp.status
	return d, nil
}

// minimalDocument is the Document of a write answered with its headers
// alone (WriteOptions.Minimal): the id from Location (a create) or the
// call's path, the version from ETag.
func minimalDocument(k call, resp sent) (Document, error) {
	bad := func(missing string, err error) (Document, error) {
		return Document{}, &AnswerError{Method: k.method, Path: k.path, What: "minimal answer", ContentType: resp.header.Get("Content-Type"), Err: err, Missing: missing}
	}
	if len(resp.body) != 0 {
		return bad("an empty body", nil)
	}
	where := k.path
	if loc := resp.header.Get("Location"); loc != "" {
		u, err := url.Parse(loc)
		if err != nil {
			return bad("a document path in Location", err)
		}
		where = u.EscapedPath()
	}
	id, err := url.PathUnescape(where[strings.LastIndexByte(where, '/')+1:])
	if err != nil || id == "" {
		return bad("a document id at the end of "+where, err)
	}
	tag, err := strconv.Unquote(resp.header.Get("ETag"))
	if err != nil {
		return bad("an ETag", err)
	}
	version, err := strconv.ParseInt(tag, 10, 64)
	if err != nil {
		return bad("a version in ETag", err)
	}
	return Document{ID: id, Version: version, Token: resp.header.Get("X-Consistency-Token"), status: resp.status}, nil
}

// documentOf is the Document of a document's JSON fields.
func documentOf(fields map[string]any, token string) Document {
	d := Document{Fields: fields, Token: token}
	d.ID, _ = fields["_id"].(string)
	if v, ok := fields["_version"].(json.Number); ok {
		d.Version, _ = v.Int64()
	}
	return d
}

// decodeJSON decodes b into v, numbers as json.Number (64-bit integers
// stay exact, as the node keeps them).
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// call is a write of user's data at path, answered by one of want: sent
// to the partition's master.
func (o WriteOptions) call(method, user, path string, want ...int) call {
	return call{method: method, path: path, headers: o.headers(), want: want, user: user, toMaster: true}
}

// call is a read of user's data at path (with the query string query):
// sent to the partition's master, but with preference nearest or local,
// to a copy.
func (o ReadOptions) call(user, path, query string) call {
	return call{method: http.MethodGet, path: path, query: query, headers: o.headers(), want: []int{http.StatusOK}, user: user,
		toMaster: o.Preference != "nearest" && o.Preference != "local"}
}

func (o WriteOptions) headers() map[string]string {
	h := map[string]string{}
	if o.Concern != "" {
		h["X-Write-Concern"] = o.Concern
	}
	if o.Timeout > 0 {
		h["X-Write-Timeout"] = o.Timeout.String()
	}
	if o.IfMatch != "" {
		m := o.IfMatch
		if m != "*" && !strings.HasPrefix(m, `"`) {
			m = strconv.Quote(m)
		}
		h["If-Match"] = m
	}
	if o.Minimal {
		h["Prefer"] = "return=minimal"
	}
	return h
}

func (o ReadOptions) headers() map[string]string {
	h := map[string]string{}
	if o.Concern != "" {
		h["X-Read-Concern"] = o.Concern
	}
	if o.Preference != "" {
		h["X-Read-Preference"] = o.Preference
	}
	if o.After != "" {
		h["X-Consistency-Token"] = o.After
	}
	return h
}

func collectionPath(user, coll string) string {
	return "/v1/users/" + url.PathEscape(user) + "/collections/" + url.PathEscape(coll)
}

func documentPath(user, coll, id string) string {
	return collectionPath(user, coll) + "/documents/" + url.PathEscape(id)
}
