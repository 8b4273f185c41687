package node

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// The stack closes last first, runs every closer even after one failed,
// joins their errors, and runs each once.
func TestClosersRunLastFirstAndJoinErrors(t *testing.T) {
	var cs closers
	var ran []string
	errStore, errCluster := errors.New("store"), errors.New("cluster")
	for _, part := range []struct {
		name string
		err  error
	}{{"store", errStore}, {"listener", nil}, {"cluster", errCluster}, {"server", nil}} {
		cs.push(func(context.Context) error {
			ran = append(ran, part.name)
			return part.err
		})
	}
	err := cs.close(context.Background())
	if want := []string{"server", "cluster", "listener", "store"}; !slices.Equal(ran, want) {
		t.Errorf("closed %v, want %v", ran, want)
	}
	if !errors.Is(err, errStore) || !errors.Is(err, errCluster) || err.Error() != "cluster\nstore" {
		t.Errorf("close returned %q, want both errors in the order they happened", err)
	}
	if err := cs.close(context.Background()); err != nil || len(ran) != 4 {
		t.Errorf("a second close ran closers again (%v) or failed: %v", ran, err)
	}
}
