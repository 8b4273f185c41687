package query

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"sync"
	"testing"
)

type matchCase struct {
	doc  string
	want bool
}

// filterTests maps a filter to documents and whether the filter matches them.
var filterTests = []struct {
	filter string
	cases  []matchCase
}{
	// Empty filters.
	{``, []matchCase{{`{}`, true}, {`{"a":1}`, true}}},
	{` {} `, []matchCase{{`{}`, true}, {`{"a":1}`, true}}},

	// Equality.
	{`{"a": 1}`, []matchCase{
		{`{"a": 1}`, true}, {`{"a": 1.0}`, true}, {`{"a": 2}`, false}, {`{"a": "1"}`, false},
		{`{}`, false}, {`{"a": null}`, false}, {`{"a": true}`, false},
		{`{"a": [3, 1]}`, true}, {`{"a": [3, [1]]}`, false}, {`{"a": {"b": 1}}`, false},
	}},
	{`{"a": 1.0}`, []matchCase{{`{"a": 1}`, true}, {`{"a": 1.5}`, false}}},
	{`{"a": "x"}`, []matchCase{{`{"a": "x"}`, true}, {`{"a": ["y", "x"]}`, true}, {`{"a": ["y"]}`, false}, {`{"a": "X"}`, false}}},
	{`{"a": true}`, []matchCase{{`{"a": true}`, true}, {`{"a": 1}`, false}, {`{"a": [false, true]}`, true}}},
	{`{"a": [1, 2]}`, []matchCase{
		{`{"a": [1, 2]}`, true}, {`{"a": [2, 1]}`, false}, {`{"a": [1, 2, 3]}`, false},
		{`{"a": [[1, 2], 3]}`, true}, {`{"a": 1}`, false}, {`{"a": [1.0, 2.0]}`, true},
	}},
	{`{"a": []}`, []matchCase{{`{"a": []}`, true}, {`{"a": [[]]}`, true}, {`{"a": [1]}`, false}, {`{}`, false}}},
	{`{"a": {"b": 1, "c": [2]}}`, []matchCase{
		{`{"a": {"c": [2], "b": 1}}`, true}, {`{"a": {"b": 1}}`, false}, {`{"a": {"b": 1, "c": [2], "d": 3}}`, false},
		{`{"a": [{"b": 1, "c": [2]}]}`, true}, {`{"a": {"b": 1.0, "c": [2.0]}}`, true},
	}},
	{`{"a": {}}`, []matchCase{{`{"a": {}}`, true}, {`{"a": {"b": 1}}`, false}, {`{}`, false}}},
	{`{"a": 1, "b": 2}`, []matchCase{{`{"a": 1, "b": 2}`, true}, {`{"a": 1}`, false}}},
	{`{"a": {"$eq": [1]}}`, []matchCase{{`{"a": [1]}`, true}, {`{"a": [[1]]}`, true}, {`{"a": 1}`, false}}},
	{`{"_id": "d1", "_version": 3}`, []matchCase{{`{"_id": "d1", "_version": 3}`, true}, {`{"_id": "d2", "_version": 3}`, false}}},
	{`{"big": 9007199254740993}`, []matchCase{{`{"big": 9007199254740993}`, true}, {`{"big": 9007199254740992.0}`, false}}},

	// Dotted paths and implicit array traversal.
	{`{"a.b": 1}`, []matchCase{
		{`{"a": {"b": 1}}`, true}, {`{"a": {"b": 2}}`, false}, {`{"a": [{"b": 2}, {"b": 1}]}`, true},
		{`{"a": [{"b": [0, 1]}]}`, true}, {`{"a": [[{"b": 1}]]}`, false}, {`{"a": {"b": {"c": 1}}}`, false},
		{`{"a": 1}`, false}, {`{"a": [1]}`, false}, {`{}`, false},
	}},
	{`{"items.sku": "x", "items.qty": {"$gt": 2}}`, []matchCase{
		{`{"items": [{"sku": "x", "qty": 1}, {"sku": "y", "qty": 5}]}`, true}, // different elements
		{`{"items": [{"sku": "x", "qty": 1}]}`, false},
	}},
	{`{"a.b.c": 1}`, []matchCase{
		{`{"a": [{"b": [{"c": 2}, {"c": 1}]}]}`, true}, {`{"a": [{"b": {"c": [1]}}]}`, true},
		{`{"a": [{"b": [{"c": 2}]}]}`, false},
	}},
	{`{"a.1": "y"}`, []matchCase{{`{"a": ["x", "y"]}`, true}, {`{"a": ["y", "x"]}`, false}, {`{"a": {"1": "y"}}`, true}, {`{"a": ["x"]}`, false}}},
	{`{"a.0.b": 1}`, []matchCase{{`{"a": [{"b": 1}, {"b": 2}]}`, true}, {`{"a": [{"b": 2}, {"b": 1}]}`, false}}},
	{`{"a.0": [1]}`, []matchCase{{`{"a": [[1], 2]}`, true}, {`{"a": [[[1]]]}`, true}}},
	{`{"a.0": 1}`, []matchCase{{`{"a": [[1, 2]]}`, true}}},
	{`{"a.5": 1}`, []matchCase{{`{"a": [{"5": 1}]}`, true}, {`{"a": [{"5": 2}]}`, false}}}, // index out of range: field "5"
	{`{"a.01": 1}`, []matchCase{{`{"a": [0, 1]}`, false}, {`{"a": [{"01": 1}]}`, true}}},

	// Null and missing.
	{`{"a": null}`, []matchCase{
		{`{}`, true}, {`{"a": null}`, true}, {`{"a": 0}`, false}, {`{"a": false}`, false},
		{`{"a": [1, null]}`, true}, {`{"a": [1]}`, false}, {`{"a": []}`, false},
	}},
	{`{"a.b": null}`, []matchCase{
		{`{"a": [{"b": 1}, {"c": 1}]}`, true}, {`{"a": [{"b": 1}]}`, false}, {`{"a": 5}`, true},
		{`{"a": [1, 2]}`, true}, {`{"a": []}`, true}, {`{"a": {"b": null}}`, true}, {`{}`, true},
	}},
	{`{"a": {"$in": [null]}}`, []matchCase{{`{}`, true}, {`{"a": null}`, true}, {`{"a": 1}`, false}}},

	// $ne.
	{`{"a": {"$ne": 1}}`, []matchCase{
		{`{"a": 1}`, false}, {`{"a": 2}`, true}, {`{}`, true}, {`{"a": null}`, true},
		{`{"a": [1, 2]}`, false}, {`{"a": [2, 3]}`, true}, {`{"a": "1"}`, true},
	}},
	{`{"a": {"$ne": null}}`, []matchCase{{`{}`, false}, {`{"a": null}`, false}, {`{"a": 0}`, true}, {`{"a": [null]}`, false}}},
	{`{"a.b": {"$ne": 1}}`, []matchCase{{`{"a": [{"b": 2}, {"b": 1}]}`, false}, {`{"a": [{"b": 2}]}`, true}}},

	// Comparisons and type bracketing.
	{`{"a": {"$gt": 1}}`, []matchCase{
		{`{"a": 2}`, true}, {`{"a": 1}`, false}, {`{"a": 1.5}`, true}, {`{"a": 0.5}`, false},
		{`{"a": "2"}`, false}, {`{"a": true}`, false}, {`{"a": null}`, false}, {`{}`, false},
		{`{"a": [0, 5]}`, true}, {`{"a": [0, 1]}`, false}, {`{"a": {"b": 2}}`, false}, {`{"a": [[5]]}`, false},
	}},
	{`{"a": {"$gte": 1}}`, []matchCase{{`{"a": 1.0}`, true}, {`{"a": 1}`, true}, {`{"a": 0.999}`, false}}},
	{`{"a": {"$lt": 1}}`, []matchCase{{`{"a": 0}`, true}, {`{"a": -1.5}`, true}, {`{"a": null}`, false}, {`{}`, false}, {`{"a": false}`, false}, {`{"a": "0"}`, false}}},
	{`{"a": {"$lte": 1}}`, []matchCase{{`{"a": 1}`, true}, {`{"a": 2}`, false}}},
	{`{"a": {"$lt": "b"}}`, []matchCase{{`{"a": "a"}`, true}, {`{"a": "B"}`, true}, {`{"a": "b"}`, false}, {`{"a": 1}`, false}, {`{"a": null}`, false}}},
	{`{"a": {"$gte": "b"}}`, []matchCase{{`{"a": "b"}`, true}, {`{"a": "ba"}`, true}, {`{"a": {"b": 1}}`, false}, {`{"a": [1]}`, false}, {`{"a": true}`, false}}},
	{`{"a": {"$gt": false}}`, []matchCase{{`{"a": true}`, true}, {`{"a": false}`, false}, {`{"a": 1}`, false}}},
	{`{"a": {"$gt": {"x": 1}}}`, []matchCase{{`{"a": {"x": 2}}`, true}, {`{"a": {"x": 1}}`, false}, {`{"a": {"y": 0}}`, true}, {`{"a": 5}`, false}, {`{"a": [1]}`, false}}},
	{`{"a": {"$gt": [1]}}`, []matchCase{{`{"a": [2]}`, true}, {`{"a": [1]}`, false}, {`{"a": [1, 0]}`, true}, {`{"a": 5}`, false}, {`{"a": [[2]]}`, true}}},
	{`{"a": {"$gt": 1, "$lt": 5}}`, []matchCase{{`{"a": 3}`, true}, {`{"a": 6}`, false}, {`{"a": [0, 6]}`, true}, {`{"a": [0, 1]}`, false}}},
	{`{"a": {"$gte": null}}`, []matchCase{{`{}`, true}, {`{"a": null}`, true}, {`{"a": 1}`, false}}},
	{`{"a": {"$lte": null}}`, []matchCase{{`{}`, true}, {`{"a": null}`, true}, {`{"a": ""}`, false}}},
	{`{"a": {"$gt": null}}`, []matchCase{{`{}`, false}, {`{"a": null}`, false}, {`{"a": 1}`, false}}},
	{`{"a": {"$lt": null}}`, []matchCase{{`{}`, false}, {`{"a": null}`, false}, {`{"a": 1}`, false}}},
	{`{"a": {"$gt": 9007199254740992}}`, []matchCase{{`{"a": 9007199254740993}`, true}, {`{"a": 9007199254740992.0}`, false}, {`{"a": 9007199254740994.0}`, true}}},
	{`{"a": {"$lt": 0.5}}`, []matchCase{{`{"a": 0}`, true}, {`{"a": 1}`, false}, {`{"a": -9223372036854775808}`, true}}},
	{`{"_version": {"$gte": 2}}`, []matchCase{{`{"_version": 2}`, true}, {`{"_version": 1}`, false}}},

	// $in and $nin.
	{`{"a": {"$in": [1, "x", [2]]}}`, []matchCase{
		{`{"a": "x"}`, true}, {`{"a": 1.0}`, true}, {`{"a": 2}`, false}, {`{"a": [2]}`, true}, {`{"a": [[2]]}`, true}, {`{"a": [3, 1]}`, true},
		{`{"a": 3}`, false}, {`{"a": [3]}`, false}, {`{}`, false}, {`{"a": null}`, false},
	}},
	{`{"a": {"$in": []}}`, []matchCase{{`{"a": 1}`, false}, {`{}`, false}}},
	{`{"a": {"$in": [{"b": 1}]}}`, []matchCase{{`{"a": {"b": 1}}`, true}, {`{"a": [{"b": 1}]}`, true}, {`{"a": {"b": 2}}`, false}}},
	{`{"a": {"$nin": [1, 2]}}`, []matchCase{{`{"a": 3}`, true}, {`{"a": 1}`, false}, {`{}`, true}, {`{"a": [3, 2]}`, false}, {`{"a": [3, 4]}`, true}}},
	{`{"a": {"$nin": [null]}}`, []matchCase{{`{}`, false}, {`{"a": 1}`, true}}},
	{`{"a": {"$nin": []}}`, []matchCase{{`{}`, true}, {`{"a": 1}`, true}}},

	// $exists.
	{`{"a": {"$exists": true}}`, []matchCase{{`{"a": null}`, true}, {`{"a": 0}`, true}, {`{}`, false}, {`{"b": 1}`, false}}},
	{`{"a": {"$exists": false}}`, []matchCase{{`{}`, true}, {`{"a": null}`, false}}},
	{`{"a": {"$exists": 1}}`, []matchCase{{`{"a": 1}`, true}, {`{}`, false}}},
	{`{"a": {"$exists": 0}}`, []matchCase{{`{"a": 1}`, false}, {`{}`, true}}},
	{`{"a.b": {"$exists": true}}`, []matchCase{
		{`{"a": [{"c": 1}, {"b": null}]}`, true}, {`{"a": [{"c": 1}]}`, false}, {`{"a": [1]}`, false},
		{`{"a": 1}`, false}, {`{"a": {"b": 1}}`, true}, {`{"a": []}`, false},
	}},
	{`{"a.b": {"$exists": false}}`, []matchCase{{`{"a": 5}`, true}, {`{"a": [{"b": 1}]}`, false}}},
	{`{"a.1": {"$exists": true}}`, []matchCase{{`{"a": [1, 2]}`, true}, {`{"a": [1]}`, false}}},

	// $type.
	{`{"a": {"$type": "string"}}`, []matchCase{{`{"a": "x"}`, true}, {`{"a": [1, "x"]}`, true}, {`{"a": 1}`, false}, {`{}`, false}, {`{"a": null}`, false}}},
	{`{"a": {"$type": "int"}}`, []matchCase{{`{"a": 5}`, true}, {`{"a": -2147483648}`, true}, {`{"a": 2147483648}`, false}, {`{"a": 5.5}`, false}}},
	{`{"a": {"$type": "long"}}`, []matchCase{{`{"a": 5}`, true}, {`{"a": 5000000000}`, true}, {`{"a": 5.0}`, false}}},
	{`{"a": {"$type": "double"}}`, []matchCase{{`{"a": 1.5}`, true}, {`{"a": 2.0}`, true}, {`{"a": 1}`, false}, {`{"a": "1.5"}`, false}}},
	{`{"a": {"$type": "number"}}`, []matchCase{{`{"a": 1.5}`, true}, {`{"a": 1}`, true}, {`{"a": "1"}`, false}, {`{"a": [true, 2]}`, true}}},
	{`{"a": {"$type": "array"}}`, []matchCase{{`{"a": []}`, true}, {`{"a": [1]}`, true}, {`{"a": 1}`, false}, {`{"a": {"0": 1}}`, false}}},
	{`{"a": {"$type": "object"}}`, []matchCase{{`{"a": {}}`, true}, {`{"a": [{}]}`, true}, {`{"a": []}`, false}}},
	{`{"a": {"$type": "null"}}`, []matchCase{{`{"a": null}`, true}, {`{}`, false}, {`{"a": [null]}`, true}}},
	{`{"a": {"$type": "bool"}}`, []matchCase{{`{"a": false}`, true}, {`{"a": 0}`, false}}},
	{`{"a": {"$type": ["string", "null"]}}`, []matchCase{{`{"a": null}`, true}, {`{"a": "x"}`, true}, {`{"a": 1}`, false}}},

	// $not.
	{`{"a": {"$not": {"$gt": 5}}}`, []matchCase{
		{`{"a": 3}`, true}, {`{"a": 6}`, false}, {`{}`, true}, {`{"a": "x"}`, true}, {`{"a": null}`, true},
		{`{"a": [1, 6]}`, false}, {`{"a": [1, 2]}`, true},
	}},
	{`{"a": {"$not": {"$regex": "^x"}}}`, []matchCase{{`{"a": "xy"}`, false}, {`{"a": "yx"}`, true}, {`{}`, true}, {`{"a": 1}`, true}, {`{"a": ["y", "xa"]}`, false}}},
	{`{"a": {"$not": {"$regex": "^X", "$options": "i"}}}`, []matchCase{{`{"a": "xy"}`, false}, {`{"a": "y"}`, true}}},
	{`{"a": {"$not": {"$size": 0}}}`, []matchCase{{`{}`, true}, {`{"a": []}`, false}, {`{"a": [1]}`, true}}},
	{`{"a": {"$not": {"$exists": true}}}`, []matchCase{{`{}`, true}, {`{"a": 1}`, false}}},
	{`{"a": {"$not": {"$gt": 1, "$lt": 5}}}`, []matchCase{{`{"a": 3}`, false}, {`{"a": 7}`, true}, {`{}`, true}}},
	{`{"a": {"$not": {"$eq": null}}}`, []matchCase{{`{}`, false}, {`{"a": 1}`, true}}},
	{`{"a": {"$not": {"$not": {"$gt": 5}}}}`, []matchCase{{`{"a": 6}`, true}, {`{"a": 5}`, false}, {`{}`, false}}},
	{`{"a.b": {"$not": {"$gt": 5}}}`, []matchCase{{`{"a": [{"b": 1}, {"b": 9}]}`, false}, {`{"a": [{"c": 9}]}`, true}}},

	// $and, $or, $nor.
	{`{"$and": [{"a": 1}, {"b": 2}]}`, []matchCase{{`{"a": 1, "b": 2}`, true}, {`{"a": 1}`, false}, {`{"b": 2}`, false}}},
	{`{"$and": [{"a": {"$gt": 1}}, {"a": {"$lt": 5}}]}`, []matchCase{{`{"a": 3}`, true}, {`{"a": [0, 9]}`, true}, {`{"a": 7}`, false}}},
	{`{"$or": [{"a": 1}, {"b": 2}]}`, []matchCase{{`{"b": 2}`, true}, {`{"a": 1}`, true}, {`{}`, false}, {`{"a": 2, "b": 1}`, false}}},
	{`{"$nor": [{"a": 1}, {"b": 2}]}`, []matchCase{{`{}`, true}, {`{"a": 1}`, false}, {`{"b": 2}`, false}, {`{"a": 2}`, true}}},
	{`{"a": 1, "$or": [{"b": 1}, {"c": 1}]}`, []matchCase{{`{"a": 1, "c": 1}`, true}, {`{"a": 2, "c": 1}`, false}, {`{"a": 1}`, false}}},
	{`{"$or": [{"$and": [{"a": 1}, {"b": 1}]}, {"$nor": [{"c": {"$exists": true}}]}]}`, []matchCase{{`{"a": 1, "b": 1, "c": 1}`, true}, {`{"a": 1, "c": 1}`, false}, {`{"a": 1}`, true}}},
	{`{"$and": [{}]}`, []matchCase{{`{}`, true}}},
	{`{"$or": [{"a": 1}], "$nor": [{"b": 1}]}`, []matchCase{{`{"a": 1}`, true}, {`{"a": 1, "b": 1}`, false}}},

	// $all.
	{`{"tags": {"$all": ["a", "b"]}}`, []matchCase{
		{`{"tags": ["b", "c", "a"]}`, true}, {`{"tags": ["a"]}`, false}, {`{"tags": "a"}`, false}, {`{}`, false},
		{`{"tags": [["a", "b"]]}`, false},
	}},
	{`{"tags": {"$all": ["a"]}}`, []matchCase{{`{"tags": "a"}`, true}, {`{"tags": ["a", "b"]}`, true}}},
	{`{"tags": {"$all": []}}`, []matchCase{{`{"tags": []}`, false}, {`{"tags": ["a"]}`, false}}},
	{`{"a": {"$all": [[1, 2]]}}`, []matchCase{{`{"a": [1, 2]}`, true}, {`{"a": [[1, 2], 3]}`, true}, {`{"a": [1]}`, false}}},
	{`{"items.sku": {"$all": ["a", "b"]}}`, []matchCase{{`{"items": [{"sku": "a"}, {"sku": "b"}]}`, true}, {`{"items": [{"sku": "a"}]}`, false}}},
	{`{"items": {"$all": [{"$elemMatch": {"sku": "a", "qty": {"$gt": 1}}}, {"$elemMatch": {"sku": "b"}}]}}`, []matchCase{
		{`{"items": [{"sku": "a", "qty": 2}, {"sku": "b"}]}`, true},
		{`{"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]}`, false},
	}},
	{`{"a": {"$all": [null]}}`, []matchCase{{`{}`, true}, {`{"a": 1}`, false}}},

	// $size.
	{`{"a": {"$size": 2}}`, []matchCase{
		{`{"a": [1, 2]}`, true}, {`{"a": [1]}`, false}, {`{"a": "xx"}`, false}, {`{}`, false},
		{`{"a": [[1, 2]]}`, false}, {`{"a": {"x": 1, "y": 2}}`, false},
	}},
	{`{"a": {"$size": 0}}`, []matchCase{{`{"a": []}`, true}, {`{}`, false}, {`{"a": null}`, false}}},
	{`{"a.b": {"$size": 1}}`, []matchCase{{`{"a": [{"b": [1, 2]}, {"b": [3]}]}`, true}, {`{"a": [{"b": [1, 2]}]}`, false}}},
	{`{"a": {"$size": 1.0}}`, []matchCase{{`{"a": [1]}`, true}}},

	// $elemMatch on scalars.
	{`{"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}}`, []matchCase{
		{`{"a": [0, 6]}`, false}, {`{"a": [0, 3]}`, true}, {`{"a": 3}`, false}, {`{"a": [[3]]}`, false}, {`{}`, false}, {`{"a": []}`, false},
	}},
	{`{"a": {"$elemMatch": {"$ne": 1}}}`, []matchCase{{`{"a": [1, 1]}`, false}, {`{"a": [1, 2]}`, true}, {`{"a": []}`, false}}},
	{`{"a": {"$elemMatch": {"$eq": null}}}`, []matchCase{{`{"a": [1, null]}`, true}, {`{"a": [1]}`, false}, {`{}`, false}}},
	{`{"a": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}}`, []matchCase{{`{"a": [[0], [2]]}`, true}, {`{"a": [[0], 2]}`, false}}},
	{`{"a": {"$elemMatch": {"$type": "array"}}}`, []matchCase{{`{"a": [1, [2]]}`, true}, {`{"a": [1, 2]}`, false}}},
	{`{"a": {"$elemMatch": {"$regex": "^b", "$options": "i"}}}`, []matchCase{{`{"a": ["a", "Bc"]}`, true}, {`{"a": "bc"}`, false}}},
	{`{"x.a": {"$elemMatch": {"$gt": 1}}}`, []matchCase{{`{"x": [{"a": [0]}, {"a": [2]}]}`, true}, {`{"x": [{"a": [0]}, {"a": 2}]}`, false}}},

	// $elemMatch on documents.
	{`{"items": {"$elemMatch": {"sku": "a", "qty": {"$gt": 2}}}}`, []matchCase{
		{`{"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 5}]}`, false},
		{`{"items": [{"sku": "b", "qty": 1}, {"sku": "a", "qty": 3}]}`, true},
		{`{"items": {"sku": "a", "qty": 3}}`, false},
		{`{"items": ["a", 3]}`, false},
		{`{}`, false},
	}},
	{`{"items": {"$elemMatch": {"$or": [{"sku": "z"}, {"qty": 1}]}}}`, []matchCase{{`{"items": [{"sku": "a", "qty": 1}]}`, true}, {`{"items": [{"sku": "a", "qty": 2}]}`, false}}},
	{`{"items": {"$elemMatch": {"tags": "x", "_hidden": {"$exists": false}}}}`, []matchCase{{`{"items": [{"tags": ["y", "x"]}]}`, true}, {`{"items": [{"tags": ["y"]}]}`, false}, {`{"items": [{"tags": "x", "_hidden": 1}]}`, false}}},
	{`{"items": {"$elemMatch": {"sub": {"$elemMatch": {"v": 1}}}}}`, []matchCase{{`{"items": [{"sub": [{"v": 2}]}, {"sub": [{"v": 1}]}]}`, true}, {`{"items": [{"sub": [{"v": 2}]}]}`, false}}},
	{`{"items": {"$elemMatch": {"a.b": 1}}}`, []matchCase{{`{"items": [{"a": [{"b": 1}]}]}`, true}}},

	// $regex.
	{`{"a": {"$regex": "^ab"}}`, []matchCase{
		{`{"a": "abc"}`, true}, {`{"a": "ABC"}`, false}, {`{"a": "cab"}`, false}, {`{"a": ["x", "abz"]}`, true},
		{`{"a": 1}`, false}, {`{}`, false}, {`{"a": {"b": "ab"}}`, false}, {`{"a": null}`, false},
	}},
	{`{"a": {"$regex": "^ab", "$options": "i"}}`, []matchCase{{`{"a": "ABC"}`, true}, {`{"a": "xab"}`, false}}},
	{`{"a": {"$options": "i", "$regex": "É"}}`, []matchCase{{`{"a": "é"}`, true}}},
	{`{"a": {"$regex": "^b"}}`, []matchCase{{`{"a": "a\nb"}`, false}}},
	{`{"a": {"$regex": "^b", "$options": "m"}}`, []matchCase{{`{"a": "a\nb"}`, true}}},
	{`{"a": {"$regex": "a.b"}}`, []matchCase{{`{"a": "a\nb"}`, false}, {`{"a": "axb"}`, true}}},
	{`{"a": {"$regex": "a.b", "$options": "s"}}`, []matchCase{{`{"a": "a\nb"}`, true}}},
	{`{"a": {"$regex": "^A.B$", "$options": "ims"}}`, []matchCase{{`{"a": "x\na\nb"}`, true}}},
	{`{"a": {"$regex": "b", "$ne": "abc"}}`, []matchCase{{`{"a": "abc"}`, false}, {`{"a": "ab"}`, true}}},
	{`{"a": {"$regex": ""}}`, []matchCase{{`{"a": ""}`, true}, {`{"a": 1}`, false}}},
}

func TestFilterMatch(t *testing.T) {
	for _, tt := range filterTests {
		f, err := ParseFilter(tt.filter)
		if err != nil {
			t.Errorf("ParseFilter(%s): %v", tt.filter, err)
			continue
		}
		for _, c := range tt.cases {
			if got := f.Match(doc(t, c.doc)); got != c.want {
				t.Errorf("filter %s on %s: got %v, want %v", tt.filter, c.doc, got, c.want)
			}
		}
	}
}

func TestNilFilterMatchesAll(t *testing.T) {
	var f *Filter
	if !f.Match(map[string]any{"a": int64(1)}) || !(&Filter{}).Match(nil) {
		t.Fatal("nil and zero filters must match everything")
	}
	g, err := ParseFilter(`{"a": null}`)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Match(nil) {
		t.Error(`{"a": null} must match a nil document`)
	}
}

// TestFilterGoTypes checks that the filter copes with Go integer types that
// are outside the JSON value model.
func TestFilterGoTypes(t *testing.T) {
	f, err := ParseFilter(`{"a": {"$gt": 1, "$type": "int"}, "b": 2.5, "c": {"$in": [3]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(map[string]any{"a": 2, "b": float32(2.5), "c": uint8(3)}) {
		t.Error("Go int types do not match as numbers")
	}
	if f.Match(map[string]any{"a": struct{}{}, "b": 2.5, "c": 3}) {
		t.Error("a struct matched a number")
	}
}

func TestFilterConcurrentUse(t *testing.T) {
	f, err := ParseFilter(`{"$or": [{"a": {"$regex": "^x", "$options": "i"}}, {"b": {"$elemMatch": {"c": {"$gt": 1}}}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	docs := []map[string]any{doc(t, `{"a": "Xy"}`), doc(t, `{"b": [{"c": 2}]}`), doc(t, `{"a": "y"}`)}
	want := []bool{true, true, false}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				for i, d := range docs {
					if f.Match(d) != want[i] {
						t.Error("concurrent Match gave a wrong answer")
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// rejectTests are filters that must be refused; the optional second string
// must appear in the message.
var rejectTests = []struct{ filter, msg string }{
	// Disallowed and unknown operators, wherever they appear.
	{`{"$where": "this.a > 1"}`, `unknown operator "$where": allowed operators are $eq`},
	{`{"a": {"$where": "1"}}`, `"$where"`},
	{`{"$expr": {"$gt": ["$a", 1]}}`, `"$expr"`},
	{`{"a": {"$function": {}}}`, `"$function"`},
	{`{"$text": {"$search": "x"}}`, `"$text"`},
	{`{"a": {"$mod": [2, 0]}}`, `"$mod"`},
	{`{"a": {"$x": 1}}`, `"$x"`},
	{`{"$comment": "x"}`, `"$comment"`},
	{`{"a": {"$near": [1, 2]}}`, `"$near"`},
	{`{"a": {"$geoWithin": {}}}`, `"$geoWithin"`},
	{`{"a": {"$bitsAllSet": 1}}`, `"$bitsAllSet"`},
	{`{"a": {"$jsonSchema": {}}}`, `"$jsonSchema"`},
	{`{"$jsonSchema": {}}`, `"$jsonSchema"`},
	{`{"a": {"$options": "i", "$foo": 1}}`, `"$foo"`},
	{`{"a": {"$eq": {"$where": 1}}}`, `"$where"`},
	{`{"a": {"$elemMatch": {"$where": 1}}}`, `"$where"`},
	{`{"a": {"$elemMatch": {"b": {"$where": 1}}}}`, `"$where"`},
	{`{"a": {"$not": {"$where": 1}}}`, `"$where"`},
	{`{"a": {"b": {"$where": 1}}}`, `"$where"`},
	{`{"a": {"$in": [{"$where": 1}]}}`, `"$where"`},
	{`{"$and": [{"$where": "x"}]}`, `"$where"`},
	{`{"a": {"$all": [{"$elemMatch": {"$where": 1}}]}}`, `"$where"`},
	{`{"a": {"$": 1}}`, `"$"`},
	{`{"a": {"$EQ": 1}}`, `"$EQ"`},

	// Malformed JSON and non-object filters.
	{`{`, "malformed JSON"},
	{`{"a":}`, "malformed JSON"},
	{`{"a": 1,}`, "malformed JSON"},
	{`{'a': 1}`, "malformed JSON"},
	{`{a: 1}`, "malformed JSON"},
	{`{"a": 1} {}`, "after the filter object"},
	{`{"a": 1}}`, "after the filter object"},
	{`{"a": 1} x`, "after the filter object"},
	{`{"a": [1, 2}`, "malformed JSON"},
	{`{"a": "\x"}`, "malformed JSON"},
	{`{"a": NaN}`, "malformed JSON"},
	{"{\"a\": \"\xff\"}", "not valid UTF-8"},
	{`[]`, "must be a JSON object"},
	{`[{"a": 1}]`, "must be a JSON object"},
	{`1`, "must be a JSON object"},
	{`"x"`, "must be a JSON object"},
	{`null`, "must be a JSON object"},
	{`true`, "must be a JSON object"},
	{`{"a": 1, "a": 2}`, "appears twice"},
	{`{"a": {"$gt": 1, "$gt": 2}}`, "appears twice"},
	{`{"a": {"b": 1, "b": 1}}`, "appears twice"},
	{`{"a": 1e400}`, "out of range"},
	{`{"a": -1e400}`, "out of range"},

	// Logical operators.
	{`{"$and": []}`, "non-empty array"},
	{`{"$and": {}}`, "non-empty array"},
	{`{"$and": [1]}`, "item 0"},
	{`{"$or": "x"}`, "non-empty array"},
	{`{"$or": null}`, "non-empty array"},
	{`{"$nor": [[]]}`, "item 0"},
	{`{"$or": [{"a": 1}, "b"]}`, "item 1"},
	{`{"a": {"$and": [{"b": 1}]}}`, "cannot be used inside the condition"},
	{`{"a": {"$or": [{"$gt": 1}]}}`, "cannot be used inside the condition"},

	// Field operators where fields are expected, and mixtures.
	{`{"$eq": 1}`, "must be applied to a field"},
	{`{"$gt": 1}`, "must be applied to a field"},
	{`{"$not": {"$gt": 1}}`, "must be applied to a field"},
	{`{"$in": [1]}`, "must be applied to a field"},
	{`{"$regex": "x"}`, "must be applied to a field"},
	{`{"$or": [{"$size": 1}]}`, "must be applied to a field"},
	{`{"a": {"$gt": 1, "b": 2}}`, "mixes operators and field names"},
	{`{"a": {"b": 2, "$gt": 1}}`, "mixes operators and field names"},
	{`{"a": {"b": {"$gt": 1}}}`, "appears inside a value"},
	{`{"a": {"$eq": {"$gt": 1}}}`, "appears inside a value"},
	{`{"a": [{"$gt": 1}]}`, "appears inside a value"},
	{`{"a": {"$in": [{"b": {"$exists": true}}]}}`, "appears inside a value"},

	// Operand types.
	{`{"a": {"$in": 1}}`, "$in must be an array"},
	{`{"a": {"$in": {"b": 1}}}`, "$in must be an array"},
	{`{"a": {"$nin": "x"}}`, "$nin must be an array"},
	{`{"a": {"$all": {}}}`, "$all must be an array"},
	{`{"a": {"$all": null}}`, "$all must be an array"},
	{`{"a": {"$size": -1}}`, "$size must be a non-negative integer"},
	{`{"a": {"$size": 1.5}}`, "$size must be a non-negative integer"},
	{`{"a": {"$size": "2"}}`, "$size must be a non-negative integer"},
	{`{"a": {"$size": null}}`, "$size must be a non-negative integer"},
	{`{"a": {"$size": true}}`, "$size must be a non-negative integer"},
	{`{"a": {"$size": 1e300}}`, "$size must be a non-negative integer"},
	{`{"a": {"$exists": "true"}}`, "$exists must be true or false"},
	{`{"a": {"$exists": null}}`, "$exists must be true or false"},
	{`{"a": {"$exists": 2}}`, "$exists must be true or false"},
	{`{"a": {"$exists": 0.5}}`, "$exists must be true or false"},
	{`{"a": {"$exists": []}}`, "$exists must be true or false"},
	{`{"a": {"$not": 5}}`, "$not must be a non-empty operator object"},
	{`{"a": {"$not": "^x"}}`, "$not must be a non-empty operator object"},
	{`{"a": {"$not": {}}}`, "$not must be a non-empty operator object"},
	{`{"a": {"$not": null}}`, "$not must be a non-empty operator object"},
	{`{"a": {"$not": {"b": 1}}}`, "$not must contain only operators"},
	{`{"a": {"$not": {"$gt": 1, "b": 2}}}`, "$not must contain only operators"},
	{`{"a": {"$not": {"$options": "i"}}}`, "$options is only allowed next to $regex"},
	{`{"a": {"$options": "i"}}`, "$options is only allowed next to $regex"},
	{`{"a": {"$regex": "x", "$options": "x"}}`, "unsupported flag"},
	{`{"a": {"$regex": "x", "$options": "g"}}`, "unsupported flag"},
	{`{"a": {"$regex": "x", "$options": "iu"}}`, "unsupported flag"},
	{`{"a": {"$regex": "x", "$options": 1}}`, "$options must be a string"},
	{`{"a": {"$regex": 5}}`, "$regex must be a string"},
	{`{"a": {"$regex": null}}`, "$regex must be a string"},
	{`{"a": {"$regex": "("}}`, "invalid $regex"},
	{`{"a": {"$regex": "a{2,1}"}}`, "invalid $regex"},
	{`{"a": {"$regex": "(?<=a)b"}}`, "invalid $regex"},
	{`{"a": {"$regex": "(a)\\1"}}`, "invalid $regex"},
	{`{"a": {"$regex": "` + strings.Repeat("a", maxRegexBytes+1) + `"}}`, "at most 1024 bytes"},
	// Each pattern within its own limit, five of them past the filter's
	// (a 64 KiB filter held 1,985 such, and its parse allocated 2 GB).
	{`{"$or": [` + strings.TrimSuffix(strings.Repeat(`{"a": {"$regex": "(?:abcd){900}"}},`, 5), ",") + `]}`, "the filter's $regex patterns together would compile to more than 20000 instructions"},
	{`{"a": {"$not": {"$regex": "(?:abcd){900}"}}, "b": {"$elemMatch": {"$regex": "(?:abcd){900}"}}, "c": {"$all": [{"$elemMatch": {"$regex": "(?:abcd){900}"}}]}, "$and": [{"d": {"$regex": "(?:abcd){900}"}}, {"e": {"$regex": "(?:abcd){900}", "$options": "i"}}]}`, "together would compile"},
	{`{"a": {"$type": "date"}}`, `unsupported $type "date"`},
	{`{"a": {"$type": "objectId"}}`, `unsupported $type`},
	{`{"a": {"$type": 2}}`, "$type must be a type name"},
	{`{"a": {"$type": []}}`, "$type must list"},
	{`{"a": {"$type": ["string", 2]}}`, "$type must be a type name"},
	{`{"a": {"$type": null}}`, "$type must be a type name"},
	{`{"a": {"$elemMatch": 1}}`, "$elemMatch must be a non-empty object"},
	{`{"a": {"$elemMatch": {}}}`, "$elemMatch must be a non-empty object"},
	{`{"a": {"$elemMatch": []}}`, "$elemMatch must be a non-empty object"},
	{`{"a": {"$elemMatch": {"$gt": 1, "b": 2}}}`, "not both"},
	{`{"a": {"$elemMatch": {"$gt": 1, "$or": [{"b": 2}]}}}`, "not both"},
	{`{"a": {"$elemMatch": {"b": {"$in": 3}}}}`, "$in must be an array"},
	{`{"a": {"$all": [{"$elemMatch": {"$gt": 1}}, 2]}}`, "not a mixture"},
	{`{"a": {"$all": [{"$elemMatch": {"$gt": 1}, "x": 1}]}}`, "no other keys"},
	{`{"a": {"$all": [{"$elemMatch": 3}]}}`, "$elemMatch must be a non-empty object"},

	// Field paths and reserved fields.
	{`{"": 1}`, "field path is empty"},
	{`{"a..b": 1}`, "empty component"},
	{`{"a.": 1}`, "empty component"},
	{`{".a": 1}`, "empty component"},
	{`{"a.$.b": 1}`, "contains '$'"},
	{`{"a$b": 1}`, "contains '$'"},
	{`{"a\u0000b": 1}`, "NUL"},
	{`{"` + strings.Repeat("a.", maxPathComponents) + `a": 1}`, "at most 32"},
	{`{"_secret": 1}`, `field "_secret" is reserved`},
	{`{"_owner.x": 1}`, `field "_owner" is reserved`},
	{`{"_": 1}`, "reserved"},
	{`{"$or": [{"_secret": 1}]}`, "reserved"},
	{`{"$and": [{"$nor": [{"_secret": {"$exists": true}}]}]}`, "reserved"},
	{`{"items": {"$elemMatch": {"a..b": 1}}}`, "empty component"},

	// Limits.
	{strings.Repeat(`{"a":`, maxFilterDepth+1) + `1` + strings.Repeat(`}`, maxFilterDepth+1), "nested more than 32 levels"},
	{`{"a": ` + strings.Repeat(`[`, maxFilterDepth) + strings.Repeat(`]`, maxFilterDepth) + `}`, "nested more than 32 levels"},
	{`{"a": {"$in": [` + strings.Repeat(`1,`, maxListItems) + `1]}}`, "at most 1000"},
	{`{"a": {"$nin": [` + strings.Repeat(`1,`, maxListItems) + `1]}}`, "at most 1000"},
	{`{"a": {"$all": [` + strings.Repeat(`1,`, maxListItems) + `1]}}`, "at most 1000"},
	{`{"a": "` + strings.Repeat("x", maxFilterBytes) + `"}`, "at most 65536 bytes"},
}

func TestParseFilterRejects(t *testing.T) {
	for _, tt := range rejectTests {
		name := truncate(tt.filter, 100)
		f, err := ParseFilter(tt.filter)
		if err == nil {
			t.Errorf("ParseFilter(%s) = %v, want an error", name, f)
			continue
		}
		msg := wantQueryError(t, err, name)
		if !strings.Contains(msg, tt.msg) {
			t.Errorf("ParseFilter(%s): message %q does not contain %q", name, msg, tt.msg)
		}
		if !strings.HasPrefix(msg, "invalid filter: ") {
			t.Errorf("ParseFilter(%s): message %q lacks the prefix", name, msg)
		}
	}
}

// TestParseFilterLimitsAccepted checks that inputs right at the limits are
// accepted.
func TestParseFilterLimitsAccepted(t *testing.T) {
	ok := []string{
		strings.Repeat(`{"a":`, maxFilterDepth-1) + `1` + strings.Repeat(`}`, maxFilterDepth-1),
		`{"a": ` + strings.Repeat(`[`, maxFilterDepth-1) + strings.Repeat(`]`, maxFilterDepth-1) + `}`,
		`{"a": {"$in": [` + strings.Repeat(`1,`, maxListItems-1) + `1]}}`,
		`{"a": {"$regex": "` + strings.Repeat("a", maxRegexBytes) + `"}}`,
		`{"` + strings.Repeat("a.", maxPathComponents-1) + `a": 1}`,
		`{"a": "` + strings.Repeat("x", maxFilterBytes-10) + `"}`,
		`{"a._b": 1, "_id": {"$exists": true}, "_version": 1}`,
		`{"a": {"$exists": false, "$type": ["null"], "$size": 0, "$all": [], "$in": [], "$nin": [], "$not": {"$gt": 1}}}`,
		`{"a": 12345678901234567890}`,
		`{"a": {"$regex": "x", "$options": ""}}`,
		`{"a": {"$regex": "^[a-z]{0,1000}$", "$options": "i"}}`,
		`{"a": {"$regex": "(?i)` + strings.Repeat("ab", maxRegexBytes/2-2) + `"}}`,
		`{"a": {"$elemMatch": {"$and": [{"b": 1}]}}}`,
		`{"$or": [` + strings.TrimSuffix(strings.Repeat(`{"a": {"$regex": "(?:abcd){999}"}},`, 4), ",") + `]}`,
	}
	for _, s := range ok {
		if _, err := ParseFilter(s); err != nil {
			t.Errorf("ParseFilter(%s): %v", truncate(s, 100), err)
		}
	}
}

// TestDisallowedOperatorMessage checks the message lists the allowed
// operators, so a user can fix the filter.
func TestDisallowedOperatorMessage(t *testing.T) {
	_, err := ParseFilter(`{"a": {"$where": "1"}}`)
	msg := wantQueryError(t, err, "$where")
	for op := range allowedOperators {
		if !strings.Contains(msg, op) {
			t.Errorf("message %q does not list %s", msg, op)
		}
	}
	if len(allowedOperators) != 19 {
		t.Errorf("allowedOperators has %d entries, want 19", len(allowedOperators))
	}
}

func ExampleParseFilter() {
	f, err := ParseFilter(`{"items": {"$elemMatch": {"sku": "a", "qty": {"$gt": 2}}}}`)
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Match(map[string]any{"items": []any{
		map[string]any{"sku": "a", "qty": int64(1)},
		map[string]any{"sku": "b", "qty": int64(5)},
	}}))
	_, err = ParseFilter(`{"a": {"$where": "1"}}`)
	fmt.Println(err)
	// Output:
	// false
	// invalid filter: unknown operator "$where": allowed operators are $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $type, $and, $or, $nor, $not, $all, $size, $elemMatch, $regex and $options
}

// TestRegexProgramSize checks that progSize does not underestimate the
// compiled size of a pattern by much, so the limit is effective.
func TestRegexProgramSize(t *testing.T) {
	pats := []string{
		"abc", "(?i)abc", "a*b+c?", "[a-z]{0,1000}", "(?:ab|cd){1,20}", "x{5,}", "(a(b(c)))",
		"(?:[a-c]x){100}", "(?s).{3,7}", `\pL{2}\d+`, "(?:a|bc|def){0,50}z",
		strings.Repeat("a", 1024), "^(?:x|y)$",
	}
	for _, p := range pats {
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		est, actual := progSize(re), len(prog.Inst)
		if est < actual/2 {
			t.Errorf("progSize(%q) = %d, but it compiles to %d instructions", p, est, actual)
		}
	}
	var alts []string
	for i := range 240 {
		alts = append(alts, string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	_, err := ParseFilter(`{"a": {"$regex": "(?:` + strings.Join(alts, "|") + `){1000}"}}`)
	if msg := wantQueryError(t, err, "huge regex"); !strings.Contains(msg, "too complex") {
		t.Errorf("message %q", msg)
	}
}
