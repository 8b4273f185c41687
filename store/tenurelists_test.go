package store

import (
	"context"
	"reflect"
	"testing"
)

// The replica lists of a node's tenures read back as last saved, each
// save replacing them whole; none recorded reads as none.
func TestTenureReplicasReadBackAsLastSaved(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	if got, err := s.TenureReplicas(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before any save: %v %v", got, err)
	}
	first := map[int]TenureList{3: {Epoch: 5, Replicas: []string{"b", "c"}}, 1: {Epoch: 2, Replicas: []string{"c"}}}
	if err := s.SaveTenureReplicas(ctx, first); err != nil {
		t.Fatal(err)
	}
	want := map[int]TenureList{3: {Epoch: 6, Replicas: []string{"b", "d"}}}
	if err := s.SaveTenureReplicas(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TenureReplicas(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %v (%v), want %v", got, err, want)
	}
}
