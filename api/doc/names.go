package doc

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Length limits for names, in bytes (all allowed characters are ASCII).
const (
	maxUserLen       = 128
	maxCollectionLen = 64
	maxIDLen         = 128
)

// Character classes, as bit sets over ASCII.
var (
	alnumChars = charSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
	alphaChars = charSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
	userChars  = charSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
	collChars  = charSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
	idChars    = charSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-")
)

// asciiSet is a set of ASCII bytes.
type asciiSet [2]uint64

func charSet(chars string) asciiSet {
	var s asciiSet
	for i := 0; i < len(chars); i++ {
		c := chars[i]
		s[c>>6] |= 1 << (c & 63)
	}
	return s
}

func (s *asciiSet) has(c byte) bool {
	return c < utf8.RuneSelf && s[c>>6]&(1<<(c&63)) != 0
}

// Rules, as stated in error messages.
const (
	userRule = "user names must be 1 to 128 characters long, start with a letter or digit, " +
		"and contain only ASCII letters, digits, '.', '_' and '-'"
	collRule = "collection names must be 1 to 64 characters long, start with a letter, " +
		"and contain only ASCII letters, digits, '_' and '-'"
	idRule = "document ids must be 1 to 128 characters long and contain only ASCII letters, digits, " +
		"'.', '_', '~' and '-', and may not be \".\" or \"..\""
)

// ValidUser reports whether name is a valid user name: 1 to 128 characters
// matching [A-Za-z0-9][A-Za-z0-9._-]*. It returns nil or an [*Error] with
// Field "user".
func ValidUser(name string) error {
	if msg := checkName(name, maxUserLen, &alnumChars, &userChars, "user name", userRule); msg != "" {
		return &Error{Field: "user", Message: msg}
	}
	return nil
}

// ValidCollection reports whether name is a valid collection name: 1 to 64
// characters matching [A-Za-z][A-Za-z0-9_-]*. It returns nil or an [*Error]
// with Field "collection".
func ValidCollection(name string) error {
	if msg := checkName(name, maxCollectionLen, &alphaChars, &collChars, "collection name", collRule); msg != "" {
		return &Error{Field: "collection", Message: msg}
	}
	return nil
}

// ValidID reports whether id is a valid document id: 1 to 128 characters
// matching [A-Za-z0-9._~-]*, the URL-unreserved characters, so an id never
// needs escaping in a URL. The ids "." and ".." are also refused, because
// HTTP clients remove such dot segments from URL paths, which would make the
// document unreachable. It returns nil or an [*Error] with Field "id".
func ValidID(id string) error {
	if msg := checkID(id); msg != "" {
		return &Error{Field: "id", Message: msg}
	}
	return nil
}

// checkID is ValidID without the allocation; it returns "" when id is valid.
func checkID(id string) string {
	if msg := checkName(id, maxIDLen, &idChars, &idChars, "document id", idRule); msg != "" {
		return msg
	}
	if id == "." || id == ".." {
		return fmt.Sprintf("document id %q is not allowed; %s", id, idRule)
	}
	return ""
}

// checkName checks name against a length limit and character sets for the
// first and the remaining bytes. It returns "" when name is valid and
// otherwise a message naming the first problem and stating rule.
func checkName(name string, maxLen int, first, rest *asciiSet, what, rule string) string {
	switch {
	case name == "":
		return what + " is empty; " + rule
	case len(name) > maxLen:
		return fmt.Sprintf("%s is %d bytes long, more than the maximum of %d; %s", what, len(name), maxLen, rule)
	}
	if !first.has(name[0]) {
		return fmt.Sprintf("%s may not start with %s; %s", what, quoteCharAt(name, 0), rule)
	}
	for i := 1; i < len(name); i++ {
		if !rest.has(name[i]) {
			return fmt.Sprintf("%s may not contain %s (at position %d); %s", what, quoteCharAt(name, i), i+1, rule)
		}
	}
	return ""
}

// quoteCharAt quotes the character starting at byte i of s, or the byte
// itself if it does not start a valid UTF-8 sequence.
func quoteCharAt(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("byte 0x%02x", s[i])
	}
	return strconv.QuoteRune(r)
}
