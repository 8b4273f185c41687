package doc

import (
	"errors"
	"strings"
	"testing"
)

type nameCase struct {
	name string
	ok   bool
}

// disallowed returns, for every byte that may not appear anywhere in a name
// (given the allowed set), a name of the form prefix+c+"x".
func disallowed(t *testing.T, prefix string, allowed string) []nameCase {
	t.Helper()
	var cases []nameCase
	for c := 0; c < 256; c++ {
		if strings.IndexByte(allowed, byte(c)) >= 0 {
			continue
		}
		cases = append(cases, nameCase{prefix + string([]byte{byte(c)}) + "x", false})
	}
	cases = append(cases,
		nameCase{prefix + "é", false}, // non-ASCII letter
		nameCase{prefix + "😀", false}, // non-BMP
	)
	return cases
}

const (
	letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	digits  = "0123456789"
)

func runNameCases(t *testing.T, field string, valid func(string) error, cases []nameCase) {
	t.Helper()
	for _, c := range cases {
		err := valid(c.name)
		if c.ok {
			if err != nil {
				t.Errorf("%q: unexpected error %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: accepted, want error", c.name)
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error %T is not *Error", c.name, err)
			continue
		}
		if e.Field != field || e.Message == "" {
			t.Errorf("%q: error %+v, want Field %q and a message", c.name, e, field)
		}
	}
}

func TestValidUser(t *testing.T) {
	cases := []nameCase{
		{"", false},
		{"a", true},
		{"Z", true},
		{"0", true},
		{"9", true},
		{"alice", true},
		{"a.b_c-d", true},
		{"a" + strings.Repeat(".", 127), true},
		{strings.Repeat("u", 127), true},
		{strings.Repeat("u", 128), true},
		{strings.Repeat("u", 129), false},
		{strings.Repeat("u", 1000), false},
		{".a", false},
		{"_a", false},
		{"-a", false},
		{"~a", false},
		{"a~", false},
		{" a", false},
		{"a b", false},
		{"a/b", false},
		{"a\x00", false},
		{"a\xff", false},
	}
	for _, c := range letters + digits {
		cases = append(cases, nameCase{string(c), true}, nameCase{"a" + string(c), true})
	}
	cases = append(cases, disallowed(t, "a", letters+digits+"._-")...)
	runNameCases(t, "user", ValidUser, cases)
}

func TestValidCollection(t *testing.T) {
	cases := []nameCase{
		{"", false},
		{"a", true},
		{"Z", true},
		{"0", false},
		{"9abc", false},
		{"_a", false},
		{"-a", false},
		{"orders", true},
		{"a_b-c9", true},
		{"a" + strings.Repeat("_", 63), true},
		{strings.Repeat("c", 63), true},
		{strings.Repeat("c", 64), true},
		{strings.Repeat("c", 65), false},
		{"a.b", false},
		{"a~b", false},
		{"a b", false},
		{"a\xff", false},
	}
	for _, c := range letters {
		cases = append(cases, nameCase{string(c), true})
	}
	for _, c := range letters + digits + "_-" {
		cases = append(cases, nameCase{"a" + string(c), true})
	}
	cases = append(cases, disallowed(t, "a", letters+digits+"_-")...)
	runNameCases(t, "collection", ValidCollection, cases)
}

func TestValidID(t *testing.T) {
	cases := []nameCase{
		{"", false},
		{"a", true},
		{"0", true},
		{"_", true},
		{"-", true},
		{"~", true},
		{"...", true},
		{".a", true},
		{"a.", true},
		{"._", true},
		{".", false},
		{"..", false},
		{"01HV6ZQ3K7XK4J3M2N1P0R9S8T", true},
		{strings.Repeat("i", 127), true},
		{strings.Repeat("i", 128), true},
		{strings.Repeat("i", 129), false},
		{"a/b", false},
		{"a%2Fb", false},
		{"a b", false},
		{"a\x00", false},
		{"\xff", false},
	}
	for _, c := range letters + digits + "._~-" {
		cases = append(cases, nameCase{"x" + string(c), true})
	}
	cases = append(cases, disallowed(t, "", letters+digits+"._~-")...)
	runNameCases(t, "id", ValidID, cases)
}

func TestNameMessages(t *testing.T) {
	for _, c := range []struct {
		err  error
		want []string
	}{
		{ValidUser(""), []string{"user name is empty", "1 to 128"}},
		{ValidUser(strings.Repeat("a", 129)), []string{"129 bytes", "maximum of 128"}},
		{ValidUser("-a"), []string{"may not start with '-'"}},
		{ValidUser("ab/c"), []string{"may not contain '/' (at position 3)"}},
		{ValidUser("a\xffb"), []string{"byte 0xff"}},
		{ValidCollection("1a"), []string{"may not start with '1'", "start with a letter"}},
		{ValidCollection("a.b"), []string{"may not contain '.'"}},
		{ValidID(".."), []string{`".."`}},
		{ValidID("a b"), []string{"may not contain ' '"}},
	} {
		if c.err == nil {
			t.Errorf("want error containing %q, got nil", c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(c.err.Error(), w) {
				t.Errorf("error %q does not contain %q", c.err, w)
			}
		}
	}
}

func TestErrorString(t *testing.T) {
	if got := (&Error{Field: "user", Message: "bad"}).Error(); got != "user: bad" {
		t.Errorf("got %q", got)
	}
	if got := (&Error{Message: "bad"}).Error(); got != "bad" {
		t.Errorf("got %q", got)
	}
}

func BenchmarkValidID(b *testing.B) {
	id := "01HV6ZQ3K7XK4J3M2N1P0R9S8T"
	for b.Loop() {
		if ValidID(id) != nil {
			b.Fatal("invalid")
		}
	}
}
