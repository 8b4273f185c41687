package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/config"
)

// scaleBaseline is the size of the small collection every figure of
// --scale is compared with.
const scaleBaseline = 1000

// scaleBench measures what an operation costs against the size of the
// collection it touches: a node of its own with the document cache off,
// one user's collection filled with scaleBaseline documents and another's
// with size, then every operation timed on both, alternately, by one
// client (so the two sizes share the machine's noise alike). It prints the
// p50 of each at both sizes and their ratio, and how much a query page over
// the large collection raises the process's resident memory.
func scaleBench(o benchOptions, size, samples int, mongoURI string, stdout, stderr io.Writer) int {
	ctx := context.Background()
	onEngine := onMongo(mongoURI)
	own, err := startOwnNode(ctx, "shoal-bench-scale-", stderr, func(cfg *config.Config) {
		if onEngine != nil {
			onEngine(cfg)
		}
		cfg.DocCacheBytes = 0 // every GET reads the store
	})
	if err != nil {
		fmt.Fprintf(stderr, "shoal bench: %v\n", err)
		return 1
	}
	defer own.close(ctx)
	n, token := own.node, own.token
	o.transport.MaxIdleConnsPerHost, o.transport.MaxConnsPerHost = o.clients*2, o.clients*2
	c := client.New(n.URL(), token, client.WithHTTPClient(httpClient(o)))
	fmt.Fprintf(stdout, "node of its own at %s (%s, document cache off)\n", n.URL(), own.storage())

	payload := strings.Repeat("x", o.docBytes)
	small, large := sizedCollection{user: "scale-small", size: scaleBaseline}, sizedCollection{user: "scale-large", size: size}
	for _, sc := range []sizedCollection{small, large} {
		start := time.Now()
		if err := fill(ctx, c, sc, payload, o.clients); err != nil {
			fmt.Fprintf(stderr, "shoal bench: filling %s's collection: %v\n", sc.user, err)
			return 1
		}
		fmt.Fprintf(stdout, "filled %s/docs with %d documents in %s (%d clients)\n", sc.user, sc.size, time.Since(start).Round(time.Millisecond), o.clients)
	}
	fmt.Fprintf(stdout, "%d samples of each operation on each collection, one client, alternating\n\n", samples)

	// Each operation picks its documents at random, once per sample; a
	// DELETE takes documents no other sample touches.
	rng := rand.New(rand.NewPCG(1, 2))
	ops := []struct {
		name string
		run  func(sc sizedCollection, i int) error
	}{
		{"GET (uncached)", func(sc sizedCollection, _ int) error {
			_, err := c.Get(ctx, sc.user, "docs", sc.id(rng.IntN(sc.size-samples)), client.ReadOptions{})
			return err
		}},
		{"PUT replace", func(sc sizedCollection, _ int) error {
			k := rng.IntN(sc.size - samples)
			_, _, err := c.Put(ctx, sc.user, "docs", sc.id(k), scaleBody(k, payload), client.WriteOptions{})
			return err
		}},
		{"PATCH", func(sc sizedCollection, _ int) error {
			_, err := c.Patch(ctx, sc.user, "docs", sc.id(rng.IntN(sc.size-samples)), map[string]any{"patched": true}, client.WriteOptions{})
			return err
		}},
		{"DELETE", func(sc sizedCollection, i int) error {
			_, err := c.Delete(ctx, sc.user, "docs", sc.id(sc.size-1-i), client.WriteOptions{})
			return err
		}},
		{"query, filter, limit 10", func(sc sizedCollection, _ int) error {
			return firstPage(ctx, c, sc.user, client.Query{Filter: map[string]any{"group": rng.IntN(10)}, Limit: 10}, 10)
		}},
		{"list collections", func(sc sizedCollection, _ int) error {
			cs, err := c.Collections(ctx, sc.user)
			if err == nil && len(cs) != 1 {
				err = fmt.Errorf("%d collections, want 1", len(cs))
			}
			return err
		}},
	}
	fmt.Fprintf(stdout, "%-26s %14s %14s %8s\n", "operation (p50)", fmt.Sprintf("at %d", small.size), fmt.Sprintf("at %d", large.size), "ratio")
	failed := false
	for _, op := range ops {
		var at [2][]time.Duration
		for i := 0; i < samples; i++ {
			for j, sc := range []sizedCollection{small, large} {
				t := time.Now()
				if err := op.run(sc, i); err != nil {
					fmt.Fprintf(stderr, "shoal bench: %s on %s: %v\n", op.name, sc.user, err)
					return 1
				}
				at[j] = append(at[j], time.Since(t))
			}
		}
		p0, p1 := median(at[0]), median(at[1])
		fmt.Fprintf(stdout, "%-26s %14s %14s %7.2fx\n", op.name, roundDur(p0), roundDur(p1), float64(p1)/float64(p0))
	}

	// Memory: a page of the dense filter, and a page sorted by another
	// field than _id, which reads the whole collection and keeps the top
	// ten. Each runs twice: the first fills the engine's block cache
	// (bounded, 64 MiB) with the collection's blocks, the second shows what
	// the page itself holds. The peak resident size is reset before each
	// where Linux allows.
	for _, q := range []struct {
		name string
		q    client.Query
	}{
		{"query page, filter, limit 10", client.Query{Filter: map[string]any{"group": 3}, Limit: 10}},
		{"query page, sort -n, limit 10", client.Query{Sort: "-n", Limit: 10}},
	} {
		for _, run := range []string{"first", "again"} {
			start := time.Now()
			grew, how, err := rssGrowth(func() error { return firstPage(ctx, c, large.user, q.q, 10) })
			if err != nil {
				fmt.Fprintf(stderr, "shoal bench: %s: %v\n", q.name, err)
				failed = true
				break
			}
			fmt.Fprintf(stdout, "%-30s on %d documents, %s: %s, resident memory +%.1f MiB (%s)\n",
				q.name, large.size, run, roundDur(time.Since(start)), float64(grew)/(1<<20), how)
		}
	}
	if failed {
		return 1
	}
	return 0
}

type sizedCollection struct {
	user string
	size int
}

func (sc sizedCollection) id(k int) string { return fmt.Sprintf("d%08d", k) }

// scaleBody is document k: group k mod 10 makes a filter on group match
// one document in ten, spread over the collection's key order.
func scaleBody(k int, payload string) map[string]any {
	return map[string]any{"n": k, "group": k % 10, "payload": payload}
}

// fill writes documents 0..size-1 of sc with PUTs from clients at once.
func fill(ctx context.Context, c *client.Client, sc sizedCollection, payload string, clients int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				if _, _, err := c.Put(ctx, sc.user, "docs", sc.id(k), scaleBody(k, payload), client.WriteOptions{}); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
feed:
	for k := 0; k < sc.size; k++ {
		select {
		case next <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// firstPage reads the first page of a query and checks it is full.
func firstPage(ctx context.Context, c *client.Client, user string, q client.Query, want int) error {
	got := 0
	for _, err := range c.Documents(ctx, user, "docs", q, client.ReadOptions{}) {
		if err != nil {
			return err
		}
		if got++; got == want {
			return nil
		}
	}
	return fmt.Errorf("the page held %d documents, want %d", got, want)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// rssGrowth runs f and answers how far the process's resident memory rose
// above what it was before (after returning free heap to the OS): the
// peak (VmHWM, after resetting it through /proc/self/clear_refs) when
// Linux allows, else the size after f. With --mongo-uri it leaves out the
// MongoDB server's memory.
func rssGrowth(f func() error) (int64, string, error) {
	// Return the heap the runtime holds free to the OS first, or the page
	// would reuse it unseen.
	debug.FreeOSMemory()
	before, err := procStatus("VmRSS")
	if err != nil {
		return 0, "", err
	}
	peak := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	if err := f(); err != nil {
		return 0, "", err
	}
	field, how := "VmRSS", "resident size after the page"
	if peak {
		field, how = "VmHWM", "peak resident size during the page"
	}
	after, err := procStatus(field)
	if err != nil {
		return 0, "", err
	}
	return max(after-before, 0), how, nil
}

// procStatus reads a field of /proc/self/status given in kB, in bytes.
func procStatus(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading the process's memory: %w (--scale measures memory on Linux only)", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("/proc/self/status has no " + field)
}
