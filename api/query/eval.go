package query

import "regexp"

// This file evaluates the parse tree built in filter.go. A filter is a tree
// of nodes, which match documents, whose leaves are field conditions. A
// condition is evaluated against the leaves a field path leads to (see
// collect) and is true when the document satisfies it on that field.
//
// Every evaluation charges its work to a *Budget (nil: unlimited, see
// [Budget] for what costs what) and, once the budget refuses a charge,
// returns early with a meaningless result; the caller checks
// Budget.Exhausted. Every loop charges at least one unit per iteration,
// so the work done is bounded by the units charged.

// node is a condition on a whole document (or an object inside $elemMatch).
type node interface {
	match(doc map[string]any, b *Budget) bool
}

// matchAll matches every document; it is an empty query such as {}.
type matchAll struct{}

func (matchAll) match(map[string]any, *Budget) bool { return true }

// andNode matches when all of its nodes match.
type andNode []node

func (n andNode) match(doc map[string]any, b *Budget) bool {
	for _, x := range n {
		if !b.charge(1) || !x.match(doc, b) {
			return false
		}
	}
	return true
}

// orNode matches when any of its nodes matches.
type orNode []node

func (n orNode) match(doc map[string]any, b *Budget) bool {
	for _, x := range n {
		if !b.charge(1) {
			return false
		}
		if x.match(doc, b) {
			return true
		}
	}
	return false
}

// norNode matches when none of its nodes matches.
type norNode []node

func (n norNode) match(doc map[string]any, b *Budget) bool {
	return !orNode(n).match(doc, b)
}

// fieldNode applies a condition to the values at a field path.
type fieldNode struct {
	path []string
	cond cond
}

func (n *fieldNode) match(doc map[string]any, b *Budget) bool {
	var buf [4]leaf
	ls := collect(doc, n.path, buf[:0])
	return b.charge(int64(len(ls))) && n.cond.eval(ls, true, b)
}

// cond is a condition on a field. eval reports whether it holds for the
// values ls the field's path leads to. expand is true when an array among
// them also stands for each of its elements (implicit array traversal); it
// is false for the elements of an array tested by $elemMatch, which MongoDB
// does not expand further.
type cond interface {
	eval(ls []leaf, expand bool, b *Budget) bool
}

// pred is a test on a single value, such as $eq or $gt. present is false
// when the field is missing (v is then nil). A test charges at least one
// unit.
type pred interface {
	test(v any, present bool, b *Budget) bool
}

// leafCond holds when its predicate holds for any of the values, or (with
// expand) for any element of an array among them.
type leafCond struct{ p pred }

func (c leafCond) eval(ls []leaf, expand bool, b *Budget) bool {
	for _, l := range ls {
		if c.p.test(l.v, l.present, b) {
			return true
		}
		if arr, ok := l.v.([]any); ok && expand {
			for _, e := range arr {
				if c.p.test(e, true, b) {
					return true
				}
				if b.Exhausted() {
					return false
				}
			}
		}
		if b.Exhausted() {
			return false
		}
	}
	return false
}

// andCond holds when all of its conditions hold, each with its own
// traversal, as for the several operators of {"$gt": 1, "$lt": 5}.
type andCond []cond

func (c andCond) eval(ls []leaf, expand bool, b *Budget) bool {
	for _, x := range c {
		if !b.charge(1) || !x.eval(ls, expand, b) {
			return false
		}
	}
	return true
}

// allCond is $all: like andCond, but an empty $all matches nothing.
type allCond []cond

func (c allCond) eval(ls []leaf, expand bool, b *Budget) bool {
	return len(c) > 0 && andCond(c).eval(ls, expand, b)
}

// notCond is $not (and $ne, $nin): it holds when its condition does not,
// including when the field is missing.
type notCond struct{ c cond }

func (c notCond) eval(ls []leaf, expand bool, b *Budget) bool { return !c.c.eval(ls, expand, b) }

// existsCond is $exists.
type existsCond struct{ want bool }

func (c existsCond) eval(ls []leaf, _ bool, b *Budget) bool {
	if !b.charge(int64(len(ls))) {
		return false
	}
	for _, l := range ls {
		if l.present {
			return c.want
		}
	}
	return !c.want
}

// sizeCond is $size: some value is an array of exactly n elements.
type sizeCond struct{ n int64 }

func (c sizeCond) eval(ls []leaf, _ bool, b *Budget) bool {
	if !b.charge(int64(len(ls))) {
		return false
	}
	for _, l := range ls {
		if arr, ok := l.v.([]any); ok && int64(len(arr)) == c.n {
			return true
		}
	}
	return false
}

// elemMatchValue is $elemMatch with operators: some value is an array with
// an element for which all of the operators hold.
type elemMatchValue struct{ c cond }

func (c elemMatchValue) eval(ls []leaf, _ bool, b *Budget) bool {
	for _, l := range ls {
		arr, ok := l.v.([]any)
		if !ok {
			continue
		}
		for _, e := range arr {
			if !b.charge(1) {
				return false
			}
			if c.c.eval([]leaf{{v: e, present: true}}, false, b) {
				return true
			}
		}
	}
	return false
}

// elemMatchDoc is $elemMatch with a query: some value is an array with an
// object element that matches the query.
type elemMatchDoc struct{ q node }

func (c elemMatchDoc) eval(ls []leaf, _ bool, b *Budget) bool {
	for _, l := range ls {
		arr, ok := l.v.([]any)
		if !ok {
			continue
		}
		for _, e := range arr {
			if !b.charge(1) {
				return false
			}
			if m, ok := e.(map[string]any); ok && c.q.match(m, b) {
				return true
			}
		}
	}
	return false
}

// eqPred is $eq; a null operand also matches a missing field.
type eqPred struct{ v any }

func (p eqPred) test(v any, present bool, b *Budget) bool {
	if !present {
		return b.charge(1) && p.v == nil
	}
	return equalIn(v, p.v, b)
}

// inPred is $in: the value equals one of vals.
type inPred struct{ vals []any }

func (p inPred) test(v any, present bool, b *Budget) bool {
	if !b.charge(1) {
		return false
	}
	for _, x := range p.vals {
		if (eqPred{x}).test(v, present, b) {
			return true
		}
		if b.Exhausted() {
			return false
		}
	}
	return false
}

// cmpPred is $gt, $gte, $lt or $lte. It only matches values of the
// operand's type class (type bracketing).
type cmpPred struct {
	v           any
	cls         class
	less, equal bool // which outcomes of Compare(value, operand) match
	greater     bool
}

func newCmpPred(op string, v any) cmpPred {
	p := cmpPred{v: v, cls: classOf(v)}
	switch op {
	case "$gt":
		p.greater = true
	case "$gte":
		p.greater, p.equal = true, true
	case "$lt":
		p.less = true
	case "$lte":
		p.less, p.equal = true, true
	}
	return p
}

func (p cmpPred) test(v any, present bool, b *Budget) bool {
	if !b.charge(1) {
		return false
	}
	if !present {
		// A missing field is null: only $gte and $lte null match it.
		return p.cls == classNull && p.equal
	}
	if classOf(v) != p.cls {
		return false
	}
	switch c := compareIn(v, p.v, b); {
	case c < 0:
		return p.less
	case c > 0:
		return p.greater
	default:
		return p.equal
	}
}

// regexPred is $regex; it only matches strings. prog is the number of
// instructions of its compiled program.
type regexPred struct {
	re   *regexp.Regexp
	prog int
}

func (p regexPred) test(v any, present bool, b *Budget) bool {
	s, ok := v.(string)
	if !ok || !present {
		b.charge(1)
		return false
	}
	// Charged before it runs: a match cannot be interrupted.
	return b.charge(regexCost(len(s), p.prog)) && p.re.MatchString(s)
}

// typePred is $type.
type typePred struct{ mask typeMask }

func (p typePred) test(v any, present bool, b *Budget) bool {
	return b.charge(1) && present && typeOf(v)&p.mask != 0
}
