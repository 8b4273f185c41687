package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// decodeMeta decodes a peer's gossiped metadata: one JSON object of at
// most metaLimit bytes that passes NodeMeta.check. Fields this version
// does not know are ignored (a newer node may send more).
func decodeMeta(b []byte) (NodeMeta, error) {
	if len(b) > metaLimit {
		return NodeMeta{}, fmt.Errorf("node metadata is %d bytes, more than %d", len(b), metaLimit)
	}
	var m NodeMeta
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&m); err != nil {
		return NodeMeta{}, fmt.Errorf("node metadata does not decode: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return NodeMeta{}, errors.New("node metadata has data after its JSON object")
	}
	if err := m.check(); err != nil {
		return NodeMeta{}, err
	}
	return m, nil
}

// check reports whether m is metadata a node makes of itself (selfMeta).
func (m NodeMeta) check() error {
	if err := ValidNodeID(m.ID); err != nil {
		return fmt.Errorf("node metadata: %w", err)
	}
	if m.InternalURL != "" {
		if err := checkBaseURL(m.InternalURL); err != nil {
			return fmt.Errorf("node metadata: iurl: %w", err)
		}
	}
	if err := m.checkOptional(); err != nil {
		return err
	}
	for i, f := range m.Flags {
		if !strings.ContainsRune("SRV", f) || strings.ContainsRune(m.Flags[:i], f) {
			return fmt.Errorf("node metadata: flags %q: use each of S, R and V at most once", m.Flags)
		}
	}
	if m.Incarnation < 0 {
		return fmt.Errorf("node metadata: incarnation %d is negative", m.Incarnation)
	}
	return nil
}

// checkOptional checks the fields encodeMeta may drop: the public URL and
// the version.
func (m NodeMeta) checkOptional() error {
	if m.PublicURL != "" {
		if err := checkPublicURL(m.PublicURL); err != nil {
			return fmt.Errorf("node metadata: url: %w", err)
		}
	}
	if !printableText(m.Version) {
		return fmt.Errorf("node metadata: version %q has unprintable characters", m.Version)
	}
	return nil
}

// checkBaseURL accepts what the peer list accepts as a node's URL: an
// http(s) base URL without user, path, query or fragment.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawPath != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" || !printableText(s) {
		return fmt.Errorf("%.80q is not a node's http(s) base URL", s)
	}
	return nil
}

// checkPublicURL accepts an http(s) URL with a host and no user, query or
// fragment: a path is allowed (a node behind a proxy).
func checkPublicURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" || strings.ContainsAny(s, " \t\r\n") || !printableText(s) {
		return fmt.Errorf("%.80q is not an http(s) URL", s)
	}
	return nil
}

// printableText reports whether s is valid UTF-8 made of printable
// characters only: a URL with an invalid byte would not survive the JSON
// of the gossiped metadata (it becomes U+FFFD), and one with control
// characters is no address anyone means.
func printableText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
