package lease

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeBatch feeds arbitrary bodies to a voter's decoder: nothing
// panics, and an accepted batch names only existing partitions, only the
// sender's own campaigns and releases at epochs from 1, and is accepted
// again once re-encoded.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range []string{
		`{"requests":[{"partition":0,"candidate":"a","epoch":5,"renew":true}]}`,
		`{"releases":[{"partition":3,"holder":"a","epoch":2}]}`,
		`{"queries":[0,1,2,3]}`,
		`{"requests":[{"partition":99999,"candidate":"a","epoch":1}]}`,
		`{"requests":[{"partition":0,"candidate":"b","epoch":1}]}`,
		`{"requests":[{"partition":0,"candidate":"a","epoch":0}]}`,
		`{"queries":[-1]}`,
		`{}`,
		`null`,
		`[]`,
	} {
		f.Add([]byte(s), uint8(4), "a")
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8, from string) {
		partitions := int(n%64) + 1
		b, err := DecodeBatch(bytes.NewReader(data), partitions, from)
		if err != nil {
			return
		}
		if from == "" || len(from) > maxNodeID {
			t.Fatalf("accepted a batch from %q", from)
		}
		limit := 2 * partitions
		if len(b.Requests) > limit || len(b.Releases) > limit || len(b.Queries) > limit {
			t.Fatalf("accepted %d requests, %d releases, %d queries for %d partitions", len(b.Requests), len(b.Releases), len(b.Queries), partitions)
		}
		for _, r := range b.Requests {
			if r.Partition < 0 || r.Partition >= partitions || r.Candidate != from || r.Epoch == 0 {
				t.Fatalf("accepted request %+v from %q", r, from)
			}
		}
		for _, r := range b.Releases {
			if r.Partition < 0 || r.Partition >= partitions || r.Holder != from || r.Epoch == 0 {
				t.Fatalf("accepted release %+v from %q", r, from)
			}
		}
		for _, p := range b.Queries {
			if p < 0 || p >= partitions {
				t.Fatalf("accepted query of partition %d of %d", p, partitions)
			}
		}
		again, _ := json.Marshal(b)
		if _, err := DecodeBatch(bytes.NewReader(again), partitions, from); err != nil {
			t.Fatalf("an accepted batch is refused once re-encoded: %v", err)
		}
	})
}
