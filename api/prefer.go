package api

import (
	"net/http"
	"strings"
)

// prefersMinimal reports whether r asks for return=minimal in its Prefer
// headers (RFC 7240): the first return preference of the request, in the
// order of its headers, decides. A header that does not parse counts for
// nothing from where it stops parsing.
func prefersMinimal(r *http.Request) bool {
	for _, h := range r.Header.Values("Prefer") {
		p := preferParser{s: h}
		for {
			name, value, ok := p.next()
			if !ok {
				break
			}
			if strings.EqualFold(name, "return") {
				return value == "minimal"
			}
		}
	}
	return false
}

// preferParser reads the preferences of one Prefer header:
//
//	Prefer     = 1#preference
//	preference = token [ BWS "=" BWS word ] *( OWS ";" [ OWS parameter ] )
//	parameter  = token [ BWS "=" BWS word ]
//	word       = token / quoted-string
type preferParser struct {
	s string
	i int
}

// next returns the next preference's name and value (a quoted string
// unquoted); ok is false at the end or where the header stops parsing.
func (p *preferParser) next() (name, value string, ok bool) {
	for p.i < len(p.s) && (p.s[p.i] == ',' || isSpace(p.s[p.i])) {
		p.i++
	}
	name, value, ok = p.pair()
	if !ok {
		return "", "", false
	}
	for { // parameters, which no preference here uses
		p.spaces()
		if p.i >= len(p.s) || p.s[p.i] == ',' {
			return name, value, true
		}
		if p.s[p.i] != ';' {
			return "", "", false
		}
		p.i++
		p.spaces()
		if p.i < len(p.s) && (p.s[p.i] == ';' || p.s[p.i] == ',') {
			continue // an empty parameter
		}
		if p.i < len(p.s) {
			if _, _, ok := p.pair(); !ok {
				return "", "", false
			}
		}
	}
}

// pair reads token [ BWS "=" BWS word ].
func (p *preferParser) pair() (name, value string, ok bool) {
	name = p.token()
	if name == "" {
		return "", "", false
	}
	save := p.i
	p.spaces()
	if p.i >= len(p.s) || p.s[p.i] != '=' {
		p.i = save
		return name, "", true
	}
	p.i++
	p.spaces()
	if p.i < len(p.s) && p.s[p.i] == '"' {
		value, ok = p.quoted()
		return name, value, ok
	}
	value = p.token()
	return name, value, value != ""
}

// token reads a token (RFC 9110 tchar).
func (p *preferParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// quoted reads a quoted-string, its quoted pairs unescaped.
func (p *preferParser) quoted() (string, bool) {
	var b strings.Builder
	for p.i++; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; c {
		case '"':
			p.i++
			return b.String(), true
		case '\\':
			if p.i+1 >= len(p.s) {
				return "", false
			}
			p.i++
			b.WriteByte(p.s[p.i])
		default:
			b.WriteByte(c)
		}
	}
	return "", false // no closing quote
}

func (p *preferParser) spaces() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
