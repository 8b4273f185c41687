package query

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// Filter is a compiled filter. It is immutable and safe for concurrent use.
// The zero Filter and a nil *Filter match every document.
type Filter struct {
	root node // nil matches everything
}

// ParseFilter parses a filter in MongoDB query syntax from JSON text and
// checks it completely: every error, from malformed JSON to a disallowed
// operator or an invalid regular expression, is an [*Error]. An empty text
// (or only white space) and "{}" match every document. See the package
// documentation for the supported syntax and its semantics.
func ParseFilter(raw string) (*Filter, error) {
	if len(raw) > maxFilterBytes {
		return nil, filterError("the filter is %d bytes long; at most %d bytes are allowed", len(raw), maxFilterBytes)
	}
	if strings.TrimSpace(raw) == "" {
		return &Filter{}, nil
	}
	if !utf8.ValidString(raw) {
		return nil, filterError("the filter is not valid UTF-8; send UTF-8 encoded JSON")
	}
	obj, err := decodeFilterJSON(raw)
	if err != nil {
		return nil, err
	}
	var p parser
	root, err := p.parseQuery(obj, true, "")
	if err != nil {
		return nil, err
	}
	if _, ok := root.(matchAll); ok {
		root = nil
	}
	return &Filter{root: root}, nil
}

// parser is what one filter's parse has used of the limits that hold for
// the filter as a whole.
type parser struct {
	// regexProgram is the estimated size of the filter's $regex patterns
	// compiled so far, together (see progSize): each is bounded by
	// maxRegexProgram, all of them by maxFilterRegexProgram, before they
	// are compiled (a compile costs memory in proportion).
	regexProgram int
}

// Match reports whether doc satisfies the filter, however much work that
// takes.
func (f *Filter) Match(doc map[string]any) bool {
	ok, _ := f.MatchWithin(doc, nil)
	return ok
}

// MatchWithin reports whether doc satisfies the filter, charging the work
// to b (nil: unlimited). When the work would pass what b has left it stops
// early and returns [ErrTooExpensive]; b is then exhausted.
func (f *Filter) MatchWithin(doc map[string]any, b *Budget) (bool, error) {
	if f == nil || f.root == nil {
		return true, nil
	}
	ok := f.root.match(doc, b)
	if b.Exhausted() {
		return false, ErrTooExpensive
	}
	return ok, nil
}

// operators are the operators a filter may use, in the order messages list
// them.
var operators = []string{
	"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$type",
	"$and", "$or", "$nor", "$not", "$all", "$size", "$elemMatch", "$regex", "$options",
}

// operatorList is operators as an English list, for messages.
var operatorList = strings.Join(operators[:len(operators)-1], ", ") + " and " + operators[len(operators)-1]

// allowedOperators is the set of operators.
var allowedOperators = func() map[string]bool {
	m := make(map[string]bool, len(operators))
	for _, op := range operators {
		m[op] = true
	}
	return m
}()

// isLogical reports whether op combines whole queries.
func isLogical(op string) bool {
	return op == "$and" || op == "$or" || op == "$nor"
}

func unknownOperator(op string) error {
	return filterError("unknown operator %q: allowed operators are %s", truncate(op, 40), operatorList)
}

// fieldError returns an *Error about the condition on a field.
func fieldError(field, format string, args ...any) error {
	return filterError("field %q: "+format, append([]any{truncate(field, 80)}, args...)...)
}

// checkOperatorNames returns an error naming the first key of obj that
// looks like an operator but is not an allowed one.
func checkOperatorNames(obj *jobject) error {
	for _, k := range obj.keys {
		if strings.HasPrefix(k, "$") && !allowedOperators[k] {
			return unknownOperator(k)
		}
	}
	return nil
}

// parseQuery parses a query object: field conditions and $and, $or and $nor.
// top is true for the document itself (where reserved fields are refused)
// and false inside $elemMatch, whose field names are prefixed by prefix in
// messages.
func (p *parser) parseQuery(obj *jobject, top bool, prefix string) (node, error) {
	if err := checkOperatorNames(obj); err != nil {
		return nil, err
	}
	var nodes []node
	for i, key := range obj.keys {
		val := obj.vals[i]
		if strings.HasPrefix(key, "$") {
			if !isLogical(key) {
				return nil, filterError("operator %q must be applied to a field, as in {\"field\": {%q: ...}}; where field names are expected only $and, $or and $nor may be used", key, key)
			}
			n, err := p.parseLogical(key, val, top, prefix)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, n)
			continue
		}
		path, msg := parsePath(key)
		if msg != "" {
			return nil, filterError("%s", msg)
		}
		if top && reservedField(path[0]) {
			return nil, filterError("field %q is reserved for the server: apart from _id and _version, top-level fields starting with '_' cannot be queried", truncate(path[0], 80))
		}
		c, err := p.parseCondition(val, prefix+key)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, &fieldNode{path: path, cond: c})
	}
	switch len(nodes) {
	case 0:
		return matchAll{}, nil
	case 1:
		return nodes[0], nil
	}
	return andNode(nodes), nil
}

// parseLogical parses the operand of $and, $or or $nor.
func (p *parser) parseLogical(op string, v any, top bool, prefix string) (node, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return nil, filterError("%s must be a non-empty array of filter objects, as in {%q: [{\"a\": 1}, {\"b\": 2}]}, not %s", op, op, describe(v))
	}
	nodes := make([]node, len(arr))
	for i, x := range arr {
		obj, ok := x.(*jobject)
		if !ok {
			return nil, filterError("%s must be an array of filter objects, but item %d is %s", op, i, describe(x))
		}
		n, err := p.parseQuery(obj, top, prefix)
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	switch op {
	case "$and":
		return andNode(nodes), nil
	case "$or":
		return orNode(nodes), nil
	}
	return norNode(nodes), nil
}

// parseCondition parses the value given for a field: an operator object or
// a literal value to compare with for equality.
func (p *parser) parseCondition(v any, field string) (cond, error) {
	if obj, ok := v.(*jobject); ok {
		if err := checkOperatorNames(obj); err != nil {
			return nil, err
		}
		ops := 0
		for _, k := range obj.keys {
			if strings.HasPrefix(k, "$") {
				ops++
			}
		}
		switch {
		case ops > 0 && ops == len(obj.keys):
			return p.parseOperators(obj, field)
		case ops > 0:
			return nil, fieldError(field, "an object mixes operators and field names; use either an operator object such as {\"$gt\": 1} or a plain value, and write conditions on sub-fields as {\"%s.sub\": ...}", truncate(field, 80))
		}
	}
	lit, err := literal(v, field)
	if err != nil {
		return nil, err
	}
	return leafCond{eqPred{lit}}, nil
}

// literal converts a value in a filter to the document value model. Keys
// starting with '$' are refused: stored documents cannot have them, and they
// are most likely an operator in the wrong place.
func literal(v any, field string) (any, error) {
	switch t := v.(type) {
	case *jobject:
		m := make(map[string]any, len(t.keys))
		for i, k := range t.keys {
			if strings.HasPrefix(k, "$") {
				if !allowedOperators[k] {
					return nil, unknownOperator(k)
				}
				return nil, fieldError(field, "operator %q appears inside a value; operators may only be the keys of the object directly under a field name, as in {\"a.b\": {\"$gt\": 1}}", k)
			}
			x, err := literal(t.vals[i], field)
			if err != nil {
				return nil, err
			}
			m[k] = x
		}
		return m, nil
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			var err error
			if out[i], err = literal(x, field); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

// parseOperators parses an object whose keys are all operators applying to
// one field; the conditions are combined with AND.
func (p *parser) parseOperators(obj *jobject, field string) (cond, error) {
	var (
		conds               []cond
		pattern, options    string
		hasRegex, hasOption bool
	)
	for i, op := range obj.keys {
		v := obj.vals[i]
		var (
			c   cond
			err error
		)
		switch op {
		case "$eq", "$ne":
			var lit any
			if lit, err = literal(v, field); err == nil {
				c = leafCond{eqPred{lit}}
				if op == "$ne" {
					c = notCond{c}
				}
			}
		case "$gt", "$gte", "$lt", "$lte":
			var lit any
			if lit, err = literal(v, field); err == nil {
				c = leafCond{newCmpPred(op, lit)}
			}
		case "$in", "$nin":
			c, err = parseIn(op, v, field)
		case "$exists":
			c, err = parseExists(v, field)
		case "$type":
			c, err = parseType(v, field)
		case "$not":
			c, err = p.parseNot(v, field)
		case "$all":
			c, err = p.parseAll(v, field)
		case "$size":
			c, err = parseSize(v, field)
		case "$elemMatch":
			c, err = p.parseElemMatch(v, field)
		case "$regex":
			s, ok := v.(string)
			if !ok {
				return nil, fieldError(field, "$regex must be a string holding a regular expression, not %s", describe(v))
			}
			pattern, hasRegex = s, true
			continue
		case "$options":
			s, ok := v.(string)
			if !ok {
				return nil, fieldError(field, "$options must be a string of flags such as \"i\", not %s", describe(v))
			}
			options, hasOption = s, true
			continue
		case "$and", "$or", "$nor":
			return nil, fieldError(field, "%s combines whole filters and cannot be used inside the condition on a field; write {%q: [{%q: ...}, ...]} instead", op, op, truncate(field, 80))
		default:
			return nil, unknownOperator(op)
		}
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	if hasOption && !hasRegex {
		return nil, fieldError(field, "$options is only allowed next to $regex, as in {\"$regex\": \"^a\", \"$options\": \"i\"}")
	}
	if hasRegex {
		c, err := p.compileRegex(pattern, options, field)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	if len(conds) == 1 {
		return conds[0], nil
	}
	return andCond(conds), nil
}

// parseList checks the array operand of $in, $nin or $all.
func parseList(op string, v any, field string) ([]any, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fieldError(field, "%s must be an array, as in {%q: [1, 2]}, not %s", op, op, describe(v))
	}
	if len(arr) > maxListItems {
		return nil, fieldError(field, "%s has %d items; at most %d are allowed", op, len(arr), maxListItems)
	}
	return arr, nil
}

func parseIn(op string, v any, field string) (cond, error) {
	arr, err := parseList(op, v, field)
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(arr))
	for i, x := range arr {
		if vals[i], err = literal(x, field); err != nil {
			return nil, err
		}
	}
	var c cond = leafCond{inPred{vals}}
	if op == "$nin" {
		c = notCond{c}
	}
	return c, nil
}

func parseExists(v any, field string) (cond, error) {
	switch t := v.(type) {
	case bool:
		return existsCond{t}, nil
	case int64:
		if t == 0 || t == 1 {
			return existsCond{t == 1}, nil
		}
	}
	return nil, fieldError(field, "$exists must be true or false, not %s", describe(v))
}

func parseType(v any, field string) (cond, error) {
	names := []any{v}
	if arr, ok := v.([]any); ok {
		if len(arr) == 0 || len(arr) > maxListItems {
			return nil, fieldError(field, "$type must list between 1 and %d type names", maxListItems)
		}
		names = arr
	}
	var mask typeMask
	for _, x := range names {
		s, ok := x.(string)
		if !ok {
			return nil, fieldError(field, "$type must be a type name or an array of type names, not %s; the names are %s", describe(x), typeNameList)
		}
		m, ok := typeNames[s]
		if !ok {
			return nil, fieldError(field, "unsupported $type %q: the supported type names are %s", truncate(s, 40), typeNameList)
		}
		mask |= m
	}
	return leafCond{typePred{mask}}, nil
}

func (p *parser) parseNot(v any, field string) (cond, error) {
	obj, ok := v.(*jobject)
	if !ok || len(obj.keys) == 0 {
		return nil, fieldError(field, "$not must be a non-empty operator object such as {\"$gt\": 5} or {\"$regex\": \"^a\"}, not %s", describe(v))
	}
	if err := checkOperatorNames(obj); err != nil {
		return nil, err
	}
	for _, k := range obj.keys {
		if !strings.HasPrefix(k, "$") {
			return nil, fieldError(field, "$not must contain only operators, such as {\"$gt\": 5} or {\"$regex\": \"^a\"}; it has the field name %q", truncate(k, 40))
		}
	}
	inner, err := p.parseOperators(obj, field)
	if err != nil {
		return nil, err
	}
	return notCond{inner}, nil
}

func (p *parser) parseAll(v any, field string) (cond, error) {
	arr, err := parseList("$all", v, field)
	if err != nil {
		return nil, err
	}
	conds := make(allCond, len(arr))
	elemMatches := 0
	for i, x := range arr {
		if obj, ok := x.(*jobject); ok && len(obj.keys) > 0 && obj.keys[0] == "$elemMatch" {
			if len(obj.keys) != 1 {
				return nil, fieldError(field, "an $elemMatch object inside $all must have no other keys")
			}
			elemMatches++
			conds[i], err = p.parseElemMatch(obj.vals[0], field)
		} else {
			var lit any
			if lit, err = literal(x, field); err == nil {
				conds[i] = leafCond{eqPred{lit}}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if elemMatches > 0 && elemMatches != len(arr) {
		return nil, fieldError(field, "$all must list either values or {\"$elemMatch\": ...} objects, not a mixture")
	}
	return conds, nil
}

func parseSize(v any, field string) (cond, error) {
	if n, ok := v.(int64); ok && n >= 0 {
		return sizeCond{n}, nil
	}
	return nil, fieldError(field, "$size must be a non-negative integer, not %s", describe(v))
}

func (p *parser) parseElemMatch(v any, field string) (cond, error) {
	obj, ok := v.(*jobject)
	if !ok || len(obj.keys) == 0 {
		return nil, fieldError(field, "$elemMatch must be a non-empty object: operators for the elements such as {\"$gt\": 1}, or conditions on fields of object elements such as {\"sku\": \"a\"}; not %s", describe(v))
	}
	if err := checkOperatorNames(obj); err != nil {
		return nil, err
	}
	ops, others := 0, 0
	for _, k := range obj.keys {
		if strings.HasPrefix(k, "$") && !isLogical(k) {
			ops++
		} else {
			others++
		}
	}
	if ops > 0 && others > 0 {
		return nil, fieldError(field, "$elemMatch must contain either operators for the elements, such as {\"$gt\": 1}, or conditions on fields of the elements, such as {\"sku\": \"a\"}, not both")
	}
	if ops > 0 {
		inner, err := p.parseOperators(obj, field)
		if err != nil {
			return nil, err
		}
		return elemMatchValue{inner}, nil
	}
	q, err := p.parseQuery(obj, false, field+".$elemMatch.")
	if err != nil {
		return nil, err
	}
	return elemMatchDoc{q}, nil
}

func (p *parser) compileRegex(pattern, options, field string) (cond, error) {
	if len(pattern) > maxRegexBytes {
		return nil, fieldError(field, "the $regex pattern is %d bytes long; at most %d bytes are allowed", len(pattern), maxRegexBytes)
	}
	var flags []byte
	for i := 0; i < len(options); i++ {
		switch f := options[i]; f {
		case 'i', 'm', 's':
			if !strings.ContainsRune(string(flags), rune(f)) {
				flags = append(flags, f)
			}
		default:
			return nil, fieldError(field, "$options %q has an unsupported flag; only i (case-insensitive), m (multi-line) and s (dot matches newline) are allowed", truncate(options, 40))
		}
	}
	expr := pattern
	if len(flags) > 0 {
		expr = "(?" + string(flags) + ")" + pattern
	}
	parsed, err := syntax.Parse(expr, syntax.Perl) // the flags regexp.Compile uses
	if err != nil {
		return nil, fieldError(field, "invalid $regex: %v; patterns use Go's RE2 syntax (no backreferences or lookaround)", err)
	}
	size := progSize(parsed)
	if size > maxRegexProgram {
		return nil, fieldError(field, "the $regex is too complex: it would compile to more than %d instructions; use smaller repetition counts", maxRegexProgram)
	}
	if p.regexProgram += size; p.regexProgram > maxFilterRegexProgram {
		return nil, fieldError(field, "the filter's $regex patterns together would compile to more than %d instructions; use fewer patterns or smaller repetition counts", maxFilterRegexProgram)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fieldError(field, "invalid $regex: %v; patterns use Go's RE2 syntax (no backreferences or lookaround)", err)
	}
	// The program regexp runs, for the budget (a test costs its length
	// times the length of the text).
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, fieldError(field, "invalid $regex: %v; patterns use Go's RE2 syntax (no backreferences or lookaround)", err)
	}
	return leafCond{regexPred{re: re, prog: len(prog.Inst)}}, nil
}

// progSize estimates the number of instructions re compiles to, capped at
// maxRegexProgram+1. RE2 matching takes time proportional to the length of
// the text times the size of the program, and counted repetition can make a
// short pattern compile to a huge program: (?:ab|cd|...){1000} is under
// 1 KiB but compiles to over 700,000 instructions.
func progSize(re *syntax.Regexp) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = len(re.Rune)
	case syntax.OpRepeat:
		count := re.Max
		if count < 0 { // x{n,} is n copies of x and a star
			count = re.Min + 1
		}
		n = max(count, 1) * (progSize(re.Sub[0]) + 1)
	default:
		for _, sub := range re.Sub {
			n += progSize(sub)
		}
	}
	return min(n, maxRegexProgram+1)
}
