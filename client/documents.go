package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
}

// ReadOptions are the headers of a read; the zero value reads the first
// copy that answers (read concern local).
type ReadOptions struct {
	// Concern is X-Read-Concern: "local", "majority" or "linearizable".
	Concern string
	// Preference is X-Read-Preference: "master" or "local" ("": the
	// node's routing).
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
)

// Create stores a new document (POST): with the id the body's _id gives,
// or one the node generates. ErrConflict when that _id exists.
func (c *Client) Create(ctx context.Context, user, coll string, doc any, o WriteOptions) (Document, error) {
	return c.document(ctx, http.MethodPost, collectionPath(user, coll)+"/documents", doc, o.headers(), http.StatusCreated)
}

// Get reads a document; ErrNotFound when there is none.
func (c *Client) Get(ctx context.Context, user, coll, id string, o ReadOptions) (Document, error) {
	return c.document(ctx, http.MethodGet, documentPath(user, coll, id), nil, o.headers(), http.StatusOK)
}

// Put creates or replaces a document whole; created says which it did.
func (c *Client) Put(ctx context.Context, user, coll, id string, doc any, o WriteOptions) (d Document, created bool, err error) {
	d, err = c.document(ctx, http.MethodPut, documentPath(user, coll, id), doc, o.headers(), http.StatusOK, http.StatusCreated)
	return d, err == nil && d.status == http.StatusCreated, err
}

// Patch applies a JSON merge patch (RFC 7396: null removes a field) to an
// existing document; ErrNotFound when there is none.
func (c *Client) Patch(ctx context.Context, user, coll, id string, patch any, o WriteOptions) (Document, error) {
	return c.document(ctx, http.MethodPatch, documentPath(user, coll, id), patch, o.headers(), http.StatusOK)
}

// Delete deletes a document and returns the consistency token of its
// deletion; ErrNotFound when there is none.
func (c *Client) Delete(ctx context.Context, user, coll, id string, o WriteOptions) (token string, err error) {
	resp, err := c.send(ctx, http.MethodDelete, documentPath(user, coll, id), "", nil, o.headers(), http.StatusNoContent)
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
			resp, err := c.send(ctx, http.MethodGet, path, v.Encode(), nil, o.headers(), http.StatusOK)
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
	resp, err := c.send(ctx, http.MethodGet, path, "", nil, nil, http.StatusOK)
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

// document sends a request whose answer is a document.
func (c *Client) document(ctx context.Context, method, path string, body any, headers map[string]string, want ...int) (Document, error) {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return Document{}, err
		}
	}
	resp, err := c.send(ctx, method, path, "", data, headers, want...)
	if err != nil {
		return Document{}, err
	}
	var fields map[string]any
	if err := decodeJSON(resp.body, &fields); err != nil || fields == nil {
		return Document{}, &AnswerError{Method: method, Path: path, What: "document", ContentType: resp.header.Get("Content-Type"), Err: err, Missing: "a JSON object"}
	}
	d := documentOf(fields, resp.header.Get("X-Consistency-Token"))
	d.status = resp.status
	return d, nil
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

// sent is an answer of one of the wanted statuses, read whole.
type sent struct {
	status int
	header http.Header
	body   []byte
}

// send sends a request to path (with the query string query and the JSON
// body, if any) and returns its answer when its status is one of want;
// any other status is an *HTTPError.
func (c *Client) send(ctx context.Context, method, path, query string, body []byte, headers map[string]string, want ...int) (sent, error) {
	u := c.base + path
	if query != "" {
		u += "?" + query
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return sent{}, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return sent{}, err
	}
	defer resp.Body.Close()
	ok := false
	for _, w := range want {
		ok = ok || resp.StatusCode == w
	}
	if !ok {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return sent{}, newHTTPError(method, path, resp, b)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return sent{}, &bodyError{err}
	}
	return sent{status: resp.StatusCode, header: resp.Header, body: b}, nil
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
