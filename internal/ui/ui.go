// Package ui is the node's dashboard: a page of plain HTML, CSS and
// JavaScript under /ui/, embedded in the binary (no build step, nothing
// fetched from elsewhere). The files need no token: they hold no data.
// Everything the page shows it asks the node's API for, with the admin
// token the user pastes into it (kept in the browser's sessionStorage and
// sent as Authorization: Bearer): GET /v1/cluster?all=1&partitions=1
// about once a second (members, the ring, replication, moves, voters),
// GET /v1/admin/rollback, and the document routes for the document
// browser.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is where the dashboard is served.
const Prefix = "/ui/"

// contentTypes are the types of the files the dashboard ships, set here
// rather than looked up in the machine's MIME tables (which differ from
// one system to another, and a browser refuses a script served as
// text/plain under nosniff).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// securityHeaders keep the page to its own files: no script, style or
// connection to any other origin, no inline script, no framing.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
}

// file is one asset, read once.
type file struct {
	name  string
	data  []byte
	etag  string
	ctype string
}

// Handler serves the dashboard's files for paths under Prefix ("/ui/" is
// index.html); any other path, or a file it does not have, goes to
// notFound. It answers GET and HEAD (the router decides which methods
// reach it).
func Handler(notFound http.Handler) http.Handler {
	files := load()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		if name == "" {
			name = "index.html"
		}
		f, ok := files[name]
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		h.Set("Content-Type", f.ctype)
		// The files change only with the binary: a browser revalidates
		// them (ETag) on every load, so an upgraded node serves its own.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.data))
	})
}

// Files lists the dashboard's files by name (tests).
func Files() []string {
	var out []string
	for name := range load() {
		out = append(out, name)
	}
	return out
}

// load reads the embedded files. Only files of a known type are served.
func load() map[string]file {
	entries, err := assets.ReadDir("assets")
	if err != nil {
		panic("ui: the embedded assets cannot be read: " + err.Error())
	}
	files := map[string]file{}
	for _, e := range entries {
		ctype, ok := contentTypes[path.Ext(e.Name())]
		if e.IsDir() || !ok {
			continue
		}
		data, err := assets.ReadFile("assets/" + e.Name())
		if err != nil {
			panic("ui: the embedded asset " + e.Name() + " cannot be read: " + err.Error())
		}
		sum := sha256.Sum256(data)
		files[e.Name()] = file{name: e.Name(), data: data, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return files
}
