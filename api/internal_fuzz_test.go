package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

var internalSeeds = []string{
	`{"partition":3,"from":{"epoch":2,"seq":9}}`,
	`{"partition":-1}`,
	`{"partition":99999}`,
	`{"partitions":[0,1,2]}`,
	`{"partitions":[0,0]}`,
	`{"partitions":[-5]}`,
	`{"partitions":null}`,
	`{}`,
	`{"x":1}`,
	``,
	`null`,
	`[1]`,
	`{} {}`,
	`{"partition":1e3}`,
}

// FuzzDecodeTakeOver: nothing panics; an accepted takeover names an
// existing partition and is accepted again once re-encoded.
func FuzzDecodeTakeOver(f *testing.F) {
	for _, s := range internalSeeds {
		f.Add([]byte(s), uint8(8))
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		partitions := int(n%64) + 1
		req, err := decodeTakeOver(bytes.NewReader(data), partitions)
		if err != nil {
			return
		}
		if req.Partition < 0 || req.Partition >= partitions {
			t.Fatalf("accepted a takeover of partition %d of %d", req.Partition, partitions)
		}
		again, _ := json.Marshal(req)
		if _, err := decodeTakeOver(bytes.NewReader(again), partitions); err != nil {
			t.Fatalf("an accepted takeover is refused once re-encoded: %v", err)
		}
	})
}

// FuzzDecodePositions: nothing panics; an accepted request names existing
// partitions, each once, and is accepted again once re-encoded.
func FuzzDecodePositions(f *testing.F) {
	for _, s := range internalSeeds {
		f.Add([]byte(s), uint8(8))
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		partitions := int(n%64) + 1
		req, err := decodePositions(bytes.NewReader(data), partitions)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, p := range req.Partitions {
			if p < 0 || p >= partitions || seen[p] {
				t.Fatalf("accepted %v for %d partitions", req.Partitions, partitions)
			}
			seen[p] = true
		}
		again, _ := json.Marshal(req)
		if _, err := decodePositions(bytes.NewReader(again), partitions); err != nil {
			t.Fatalf("an accepted positions request is refused once re-encoded: %v", err)
		}
	})
}

// FuzzDecodeVoters: nothing panics; what is accepted is {} (with any
// spacing) or nothing.
func FuzzDecodeVoters(f *testing.F) {
	for _, s := range internalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if decodeVoters(bytes.NewReader(data)) != nil {
			return
		}
		var v map[string]any
		if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && (json.Unmarshal(trimmed, &v) != nil || v == nil || len(v) != 0) {
			t.Fatalf("accepted the voter-set question %q", data)
		}
	})
}
