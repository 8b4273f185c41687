// Package wording holds how Shoal's commands print things for people:
// counts with their nouns, empty values, node roles, and node ids in the
// order a person expects (node2 before node10). `shoal status` and
// `shoal dev` share it so they say things the same way.
package wording

import (
	"strconv"
	"strings"
)

// Roles prints a node's roles in fixed positions: "S R V", "S R -"; "-" for none.
func Roles(sharding, replica, voter bool) string {
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

// OrDash prints s, or "-" when it is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Copies prints a count of copies: "1 copy", "3 copies".
func Copies(n int) string {
	if n == 1 {
		return "1 copy"
	}
	return strconv.Itoa(n) + " copies"
}

// Plural prints a count of noun: "1 peer", "2 peers".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Ranges prints sorted numbers with runs shortened: "0-3,7,9-12".
func Ranges(sorted []int) string {
	var b strings.Builder
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sorted[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(sorted[j]))
		}
		i = j + 1
	}
	return b.String()
}

// NaturalCmp is NaturalLess as a comparison for slices.SortFunc.
func NaturalCmp(a, b string) int {
	switch {
	case NaturalLess(a, b):
		return -1
	case NaturalLess(b, a):
		return 1
	}
	return 0
}

// NaturalLess orders ids so that node2 comes before node10.
func NaturalLess(a, b string) bool {
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
