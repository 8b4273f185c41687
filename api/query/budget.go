package query

import (
	"errors"
	"math/bits"
)

// DefaultBudget is the work, in units, a query may do by default: about
// half a second of one core in the worst cases measured (about 10 ns a
// unit), in line with the half second a node forwarding a read waits for
// an answer (READ_TRY_TIMEOUT), while ordinary queries over 20,000 small
// documents use at most a third of it (see
// TestDefaultBudgetFitsOrdinaryQueries).
const DefaultBudget = 50_000_000

// ErrTooExpensive is returned when a query needs more work than its
// [Budget] allows. The work depends on the filter, the sort and the
// documents scanned, not on the load of the server: the same query over
// the same documents always needs the same work.
var ErrTooExpensive = errors.New("query: the work budget is used up")

// A Budget counts the work a query does, in units, and stops it once the
// work would pass its limit. A unit stands for at most about 10 ns of one
// core (measured: 2 to 12 ns, depending on the work). Evaluating a query
// charges:
//
//   - 25 for every document offered to the page (its sort values, its
//     place among the documents kept);
//   - 1 for every value a field path leads to, for every logical clause
//     tried ($and, $or, $nor, $elemMatch elements) and for every $type,
//     $exists or $size test;
//   - 4 for every comparison of two values, and for every element or field
//     that comparing or testing the equality of arrays or objects visits; a
//     string comparison also 1 per 64 bytes of the shorter string, and an
//     object comparison 4·n·log2(n) for sorting its n keys;
//   - 1 + len(text) × (size of the compiled program) for a $regex test:
//     Go's regular expressions run in time proportional to both, and that
//     work is charged before the match runs, so a test that would pass the
//     limit never runs;
//   - comparisons made while sorting, counted as above.
//
// The count is deterministic: the same query over the same documents in the
// same order always charges the same units. A nil *Budget is unlimited. A
// Budget is not safe for concurrent use; use one per query.
type Budget struct {
	limit, used int64
	over        bool
}

// NewBudget returns a budget of limit units.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Used returns the units charged so far (never more than the limit).
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used
}

// Exhausted reports whether some work was refused because it would have
// passed the limit. The results of an evaluation that exhausted its budget
// are meaningless.
func (b *Budget) Exhausted() bool { return b != nil && b.over }

// charge records n units of work about to be done and reports whether the
// budget allows it. Once a charge is refused every later one is too.
func (b *Budget) charge(n int64) bool {
	if b == nil {
		return true
	}
	if b.over || n > b.limit-b.used {
		b.over = true
		return false
	}
	b.used += n
	return true
}

// Charges (see Budget).
const (
	unitsPerDocument = 25
	unitsPerValue    = 4
)

// stringCost is the charge for comparing strings of lengths m and n beyond
// the comparison itself.
func stringCost(m, n int) int64 { return int64(min(m, n) / 64) }

// keySortCost is the charge for sorting the n keys of an object.
func keySortCost(n int) int64 { return unitsPerValue * int64(n) * int64(bits.Len(uint(n))) }

// regexCost is the charge for matching a regular expression whose compiled
// program has prog instructions against text of length n.
func regexCost(n, prog int) int64 {
	hi, c := bits.Mul64(uint64(n), uint64(prog))
	if hi != 0 || c >= 1<<62 {
		return 1 << 62
	}
	return 1 + int64(c)
}
