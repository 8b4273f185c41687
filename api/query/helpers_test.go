package query

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// doc decodes a JSON document for a test. Numbers written with a fraction or
// exponent become float64 (so 2.0 stays a double), others int64.
func doc(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad test document %s: %v", s, err)
	}
	m, ok := normalizeTestValue(v).(map[string]any)
	if !ok {
		t.Fatalf("test document %s is not an object", s)
	}
	return m
}

func normalizeTestValue(v any) any {
	switch t := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(t), ".eE") {
			f, err := t.Float64()
			if err != nil {
				panic(err)
			}
			return f
		}
		i, err := t.Int64()
		if err != nil {
			panic(err)
		}
		return i
	case []any:
		for i := range t {
			t[i] = normalizeTestValue(t[i])
		}
	case map[string]any:
		for k, x := range t {
			t[k] = normalizeTestValue(x)
		}
	}
	return v
}

// wantQueryError checks that err is an *Error and returns its message.
func wantQueryError(t testing.TB, err error, what string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want *Error", what)
	}
	var qe *Error
	if !errors.As(err, &qe) {
		t.Fatalf("%s: got %T (%v), want *Error", what, err, err)
	}
	if qe.Message == "" || qe.Error() != qe.Message {
		t.Fatalf("%s: bad message %q", what, qe.Message)
	}
	return qe.Message
}
