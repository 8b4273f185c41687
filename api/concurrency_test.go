package api_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/shoal-db/shoal/internal/testnode"
)

// 32 clients race to update one document with If-Match: every version must
// have exactly one winner, the losers get 412, and nothing fails otherwise.
func TestIfMatchRaceHasOneWinnerPerVersion(t *testing.T) {
	n := testnode.StartNew(t)
	path := docsPath("hana", "counters") + "/c"
	setup := n.Client(testnode.Token(t, "hana"))
	expectStatus(t, setup.Do("PUT", path, `{"n":0}`), 201, "create")

	const clients, attempts = 32, 15
	var mu sync.Mutex
	winners := map[int64]int{} // version written -> client
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := n.Client(testnode.Token(t, "hana"))
			for a := 0; a < attempts; a++ {
				r, err := c.TryDo("GET", path, nil)
				if err != nil || r.Status != 200 {
					errs <- fmt.Errorf("client %d read: %v %v", i, err, r)
					return
				}
				etag := r.Header.Get("ETag")
				r, err = c.TryDo("PUT", path, fmt.Sprintf(`{"n":%d,"by":%d}`, a, i), "If-Match", etag)
				if err != nil {
					errs <- err
					return
				}
				switch r.Status {
				case 200:
					v, _ := strconv.ParseInt(r.Header.Get("ETag")[1:len(r.Header.Get("ETag"))-1], 10, 64)
					read, _ := strconv.ParseInt(etag[1:len(etag)-1], 10, 64)
					if v != read+1 {
						errs <- fmt.Errorf("client %d: If-Match %d succeeded with version %d", i, read, v)
						return
					}
					mu.Lock()
					if prev, dup := winners[v]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("version %d won by clients %d and %d", v, prev, i)
						return
					}
					winners[v] = i
					mu.Unlock()
				case 412:
				default:
					errs <- fmt.Errorf("client %d: status %d: %s", i, r.Status, r.Body)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := setup.Do("GET", path, nil)
	final := r.JSON(t)["_version"].(float64)
	if int(final) != len(winners)+1 {
		t.Fatalf("final version %v after %d successful updates from version 1", final, len(winners))
	}
	for v := int64(2); v <= int64(final); v++ {
		if _, ok := winners[v]; !ok {
			t.Fatalf("version %d has no winner", v)
		}
	}
	t.Logf("%d clients x %d attempts: %d updates won, the rest got 412", clients, attempts, len(winners))
}

// Concurrent creates, replaces and deletes across users and partitions
// lose nothing and never fail because the store is busy.
func TestConcurrentWritesLoseNothing(t *testing.T) {
	n := testnode.StartNew(t)
	const clients, perClient = 32, 20
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			user := fmt.Sprintf("u%d", i%8) // 4 clients share each user
			c := n.Client(testnode.Token(t, user))
			for k := 0; k < perClient; k++ {
				id := fmt.Sprintf("c%d-%d", i, k)
				r, err := c.TryDo("PUT", docsPath(user, "load")+"/"+id, fmt.Sprintf(`{"k":%d}`, k))
				if err != nil || r.Status != 201 {
					errs <- fmt.Errorf("PUT %s: %v %v", id, err, r)
					return
				}
				if k%4 == 0 {
					if r, err := c.TryDo("PUT", docsPath(user, "load")+"/"+id, fmt.Sprintf(`{"k":%d,"again":true}`, k)); err != nil || r.Status != 200 {
						errs <- fmt.Errorf("replace %s: %v %v", id, err, r)
						return
					}
				}
				if k%5 == 0 {
					if r, err := c.TryDo("DELETE", docsPath(user, "load")+"/"+id, nil); err != nil || r.Status != 204 {
						errs <- fmt.Errorf("DELETE %s: %v %v", id, err, r)
						return
					}
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	admin := n.Client(testnode.AdminToken(t))
	for i := 0; i < clients; i++ {
		user := fmt.Sprintf("u%d", i%8)
		for k := 0; k < perClient; k++ {
			r := admin.Do("GET", docsPath(user, "load")+fmt.Sprintf("/c%d-%d", i, k), nil)
			switch {
			case k%5 == 0 && r.Status != 404:
				t.Fatalf("deleted c%d-%d: status %d", i, k, r.Status)
			case k%5 != 0 && r.Status != 200:
				t.Fatalf("c%d-%d lost: status %d", i, k, r.Status)
			case k%5 != 0 && k%4 == 0 && r.JSON(t)["_version"] != float64(2):
				t.Fatalf("c%d-%d: replace lost: %s", i, k, r.Body)
			}
		}
	}
}
