package devcluster

import (
	"strconv"
	"strings"
)

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:,@%=", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// The helpers below print the way `shoal status` (cmd/shoal/status.go)
// does; they are kept apart from it so this package does not import the
// command.

// roles prints a node's roles in fixed positions: "S R V", "S R -"; "-" for none.
func roles(sharding, replica, voter bool) string {
	if !sharding && !replica && !voter {
		return "-"
	}
	letter := func(on bool, l string) string {
		if on {
			return l
		}
		return "-"
	}
	return letter(sharding, "S") + " " + letter(replica, "R") + " " + letter(voter, "V")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func copies(n int) string {
	if n == 1 {
		return "1 copy"
	}
	return strconv.Itoa(n) + " copies"
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// naturalCmp is naturalLess as a comparison for slices.SortFunc.
func naturalCmp(a, b string) int {
	switch {
	case naturalLess(a, b):
		return -1
	case naturalLess(b, a):
		return 1
	}
	return 0
}

// naturalLess orders ids so that node2 comes before node10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := leadingDigits(a), leadingDigits(b)
		if da != "" && db != "" {
			na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
