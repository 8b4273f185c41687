package query

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// class is a type class of the total order over values, in ascending order.
type class int

const (
	classNull class = iota
	classNumber
	classString
	classObject
	classArray
	classBool
	// classOther holds values outside the value model. They sort after
	// everything else and are all equal to each other; no filter value ever
	// equals one.
	classOther
)

// otherValue stands for a value outside the value model in a decoded cursor.
type otherValue struct{}

// classOf returns the type class of v.
func classOf(v any) class {
	switch v.(type) {
	case nil:
		return classNull
	case string:
		return classString
	case map[string]any:
		return classObject
	case []any:
		return classArray
	case bool:
		return classBool
	}
	if _, _, _, ok := asNumber(v); ok {
		return classNumber
	}
	return classOther
}

// asNumber returns the number v as an int64 (isInt) or a float64. ok is false
// when v is not a number.
func asNumber(v any) (i int64, f float64, isInt, ok bool) {
	switch n := v.(type) {
	case int64:
		return n, 0, true, true
	case float64:
		return 0, n, false, true
	case int:
		return int64(n), 0, true, true
	case int32:
		return int64(n), 0, true, true
	case int16:
		return int64(n), 0, true, true
	case int8:
		return int64(n), 0, true, true
	case uint32:
		return int64(n), 0, true, true
	case uint16:
		return int64(n), 0, true, true
	case uint8:
		return int64(n), 0, true, true
	case float32:
		return 0, float64(n), false, true
	}
	return 0, 0, false, false
}

// Compare is a total order over values, MongoDB-like. It returns -1, 0 or +1
// as a sorts before, equal to or after b.
//
// Type classes are ordered null (and missing) < numbers < strings < objects
// < arrays < booleans. Numbers compare by exact numeric value across int64
// and float64 (NaN sorts below every other number; -0 equals 0). Strings
// compare byte-wise. Objects compare field by field in sorted key order (key,
// then value), then by number of fields. Arrays compare element-wise, then by
// length. false < true.
func Compare(a, b any) int { return compareIn(a, b, nil) }

// compareIn is Compare charging its work to bud (see [Budget]). Once the
// budget is exhausted it returns early with a meaningless result.
func compareIn(a, b any, bud *Budget) int {
	if !bud.charge(unitsPerValue) {
		return 0
	}
	ca, cb := classOf(a), classOf(b)
	if ca != cb {
		return cmp.Compare(ca, cb)
	}
	switch ca {
	case classNumber:
		return compareNumbers(a, b)
	case classString:
		x, y := a.(string), b.(string)
		if !bud.charge(stringCost(len(x), len(y))) {
			return 0
		}
		return strings.Compare(x, y)
	case classObject:
		return compareObjects(a.(map[string]any), b.(map[string]any), bud)
	case classArray:
		return compareArrays(a.([]any), b.([]any), bud)
	case classBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case y:
			return -1
		default:
			return 1
		}
	}
	return 0 // null, other
}

// compareNumbers compares two numbers exactly.
func compareNumbers(a, b any) int {
	ai, af, aInt, _ := asNumber(a)
	bi, bf, bInt, _ := asNumber(b)
	switch {
	case aInt && bInt:
		return cmp.Compare(ai, bi)
	case aInt:
		return compareIntFloat(ai, bf)
	case bInt:
		return -compareIntFloat(bi, af)
	default:
		// cmp.Compare orders NaN first and treats -0 as 0.
		return cmp.Compare(af, bf)
	}
}

// two63 is 2^63, exactly representable as a float64.
const two63 = 1 << 63

// compareIntFloat compares i and f exactly, without rounding i to a float64
// (which would make the order intransitive for large integers).
func compareIntFloat(i int64, f float64) int {
	switch {
	case math.IsNaN(f):
		return 1
	case f < -two63:
		return 1
	case f >= two63:
		return -1
	}
	t := math.Trunc(f) // within int64 range, so the conversion is exact
	if c := cmp.Compare(i, int64(t)); c != 0 {
		return c
	}
	// i equals the integer part of f; the fraction decides.
	switch {
	case f > t:
		return -1
	case f < t:
		return 1
	}
	return 0
}

// sortedKeys returns the keys of m in ascending byte-wise order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func compareObjects(a, b map[string]any, bud *Budget) int {
	if !bud.charge(keySortCost(len(a)) + keySortCost(len(b))) {
		return 0
	}
	ak, bk := sortedKeys(a), sortedKeys(b)
	for i := range min(len(ak), len(bk)) {
		if !bud.charge(unitsPerValue + stringCost(len(ak[i]), len(bk[i]))) {
			return 0
		}
		if c := strings.Compare(ak[i], bk[i]); c != 0 {
			return c
		}
		if c := compareIn(a[ak[i]], b[bk[i]], bud); c != 0 || bud.Exhausted() {
			return c
		}
	}
	return cmp.Compare(len(ak), len(bk))
}

func compareArrays(a, b []any, bud *Budget) int {
	for i := range min(len(a), len(b)) {
		if c := compareIn(a[i], b[i], bud); c != 0 || bud.Exhausted() {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// equal reports whether Compare(a, b) == 0, without sorting object keys.
func equal(a, b any) bool { return equalIn(a, b, nil) }

// equalIn is equal charging its work to bud (see [Budget]). Once the budget
// is exhausted it returns false.
func equalIn(a, b any, bud *Budget) bool {
	ca, cb := classOf(a), classOf(b)
	if ca != cb {
		bud.charge(unitsPerValue)
		return false
	}
	switch ca {
	case classObject:
		x, y := a.(map[string]any), b.(map[string]any)
		if !bud.charge(unitsPerValue) || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalIn(xv, yv, bud) || bud.Exhausted() {
				return false
			}
		}
		return true
	case classArray:
		x, y := a.([]any), b.([]any)
		if !bud.charge(unitsPerValue) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalIn(x[i], y[i], bud) || bud.Exhausted() {
				return false
			}
		}
		return true
	}
	return compareIn(a, b, bud) == 0
}

// typeMask is a set of $type names.
type typeMask uint8

const (
	typeDouble typeMask = 1 << iota
	typeString
	typeObject
	typeArray
	typeBool
	typeNull
	typeInt
	typeLong
)

// typeNames maps the names $type accepts to the types they stand for.
var typeNames = map[string]typeMask{
	"double": typeDouble,
	"string": typeString,
	"object": typeObject,
	"array":  typeArray,
	"bool":   typeBool,
	"null":   typeNull,
	"int":    typeInt,
	"long":   typeLong,
	"number": typeDouble | typeInt | typeLong,
}

// typeNameList is the list of $type names for error messages.
const typeNameList = `"double", "string", "object", "array", "bool", "null", "int", "long" and "number"`

// typeOf returns the $type names that v has.
func typeOf(v any) typeMask {
	switch v.(type) {
	case nil:
		return typeNull
	case string:
		return typeString
	case map[string]any:
		return typeObject
	case []any:
		return typeArray
	case bool:
		return typeBool
	}
	i, _, isInt, ok := asNumber(v)
	switch {
	case !ok:
		return 0
	case !isInt:
		return typeDouble
	case i >= math.MinInt32 && i <= math.MaxInt32:
		return typeLong | typeInt
	default:
		return typeLong
	}
}
