package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/shoal-db/shoal/api/query"
	"github.com/shoal-db/shoal/internal/logsafe"
)

// defaultMaxPageBytes bounds a query page when Config.MaxPageBytes is 0.
const defaultMaxPageBytes = 4 << 20

func (s *Server) queryBudget() int64 {
	if s.cfg.QueryBudget > 0 {
		return s.cfg.QueryBudget
	}
	return query.DefaultBudget
}

func (s *Server) maxPageBytes() int64 {
	if s.cfg.MaxPageBytes > 0 {
		return s.cfg.MaxPageBytes
	}
	return defaultMaxPageBytes
}

// endedProblem answers a request whose context ended before its answer was
// ready (which the client, gone, will rarely read).
func endedProblem(ctx context.Context) *Problem {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return problem(http.StatusGatewayTimeout, TypeTimeout, "Timeout", "the request's deadline passed before its answer was ready")
	}
	return problem(499, TypeTimeout, "Client closed request", "the request was cancelled")
}

// Page envelope: {"documents":[doc,doc,...],"next":"..."}.
const (
	pageHead     = `{"documents":[`
	pageTail     = "]}\n"
	pageNextHead = `],"next":"`
	pageNextTail = "\"}\n"
)

// maxCursorBytes bounds a page's cursor (next): it comes back in the
// next request's URL, which the node reads only up to its header limit
// (1 MiB, Go's default), and through a forward. Sort values of up to
// about 48 KiB fit.
const maxCursorBytes = 64 << 10

// pageTailLen is the length of what ends a page whose cursor is next.
func pageTailLen(next string) int64 {
	if next == "" {
		return int64(len(pageTail))
	}
	return int64(len(pageNextHead) + len(next) + len(pageNextTail))
}

// writePage streams a query page to w: each document is encoded alone and
// written before the next is encoded, so the page is never held encoded.
// The page ends before the document that would take it past maxBytes,
// envelope and cursor included, unless it is the first: a page holds at
// least one document, however large. next then continues after the last
// document written.
func (s *Server) writePage(w http.ResponseWriter, res *query.Result, maxBytes int64) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// As a document's size is measured (doc.Size): a page of
	// MAX_PAGE_BYTES and its last document fit an answer between nodes
	// (cluster.MaxInternalAnswer), which "<" escaped as \u003c need not.
	enc.SetEscapeHTML(false)
	written := int64(len(pageHead))
	next := ""
	for i, d := range res.Docs {
		buf.Reset()
		if err := enc.Encode(d); err != nil {
			s.abortPage(w, i, err)
			return
		}
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		n, err := res.Next(i)
		if err != nil {
			s.abortPage(w, i, err)
			return
		}
		if len(n) > maxCursorBytes {
			// The page ends before this document: the cursor after it
			// could not be sent back.
			if i == 0 {
				writeProblem(w, badRequest(TypeInvalidQuery, fmt.Sprintf("document %q has sort values too large to page past (a cursor of %d bytes, at most %d): sort by a field with smaller values, or by _id (the default)",
					logsafe.ClipTo(fmt.Sprint(d["_id"]), 64), len(n), maxCursorBytes)))
				return
			}
			break
		}
		sep := int64(min(i, 1))
		if i > 0 && written+sep+int64(len(b))+pageTailLen(n) > maxBytes {
			break
		}
		if i == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, err = w.Write([]byte(pageHead))
		} else {
			_, err = w.Write([]byte{','})
		}
		if err == nil {
			_, err = w.Write(b)
		}
		if err != nil {
			return // the client went away
		}
		written += sep + int64(len(b))
		next = n
	}
	if len(res.Docs) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(pageHead + pageTail))
		return
	}
	if next == "" {
		w.Write([]byte(pageTail))
		return
	}
	w.Write([]byte(pageNextHead + next + pageNextTail))
}

// abortPage gives up on a page that cannot be written: with a problem if
// nothing is sent yet, else by breaking the connection, so that the client
// does not take a cut page for a whole one.
func (s *Server) abortPage(w http.ResponseWriter, i int, err error) {
	s.log.Error("a query page could not be encoded", "documents_written", i, "err", err)
	if i == 0 {
		writeProblem(w, problem(http.StatusInternalServerError, TypeInternal, "Internal error", "the node could not encode the page; its log says why"))
		return
	}
	panic(http.ErrAbortHandler)
}
