package devcluster

import "testing"

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/a-b_c.d": "/tmp/a-b_c.d", "/my dir": "'/my dir'", "it's": `'it'\''s'`, "": "''", "$HOME": "'$HOME'",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
