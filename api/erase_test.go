package api_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testnode"
)

// Erasing a user reads and deletes its documents a chunk at a time: the
// memory it holds is a chunk's, not the user's data (before, it read every
// live document of the user, bodies decoded, before it deleted the first:
// a user holding more than the node's memory could erase itself and stop
// the node). 160 documents of 256 KiB, erased 8 at a time; the heap in
// use, sampled while the erase runs (the collector kept close to the live
// heap), grows by much less than the 40 MiB of the user's documents.
func TestErasingAUserHoldsAChunkOfItsDocumentsAtATime(t *testing.T) {
	api.SetEraseChunk(t, 8)
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "erin"))
	body := fmt.Sprintf(`{"s":%q}`, strings.Repeat("x", 256<<10))
	const docs = 160
	for i := range docs {
		expectStatus(t, c.Do("PUT", fmt.Sprintf("%s/d%03d", docsPath("erin", fmt.Sprint("c", i%3)), i), body), 201, "PUT")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	r := c.Do("DELETE", "/v1/users/erin", nil)
	close(done)
	wg.Wait()
	expectStatus(t, r, 200, "erase")
	if r.JSON(t)["deleted"] != float64(docs) {
		t.Fatalf("erase answered %s, want %d deleted", r.Body, docs)
	}
	grew := int64(peak) - int64(before.HeapAlloc)
	t.Logf("heap in use %d MiB before the erase, at most %d MiB during it", before.HeapAlloc>>20, peak>>20)
	if grew > 16<<20 {
		t.Fatalf("the heap in use grew by %d MiB during the erase of %d MiB of documents, want under 16 MiB (a chunk of 8 is 2 MiB)", grew>>20, docs/4)
	}
	if got := strings.TrimSpace(string(c.Do("GET", "/v1/users/erin/collections", nil).Body)); got != `{"collections":[]}` {
		t.Fatalf("after the erase: %s", got)
	}
}
