package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoal-db/shoal/client"
)

// readConcerns are the values of X-Read-Concern the read-concern phase
// compares, in the order it reports them; the first is the baseline.
var readConcerns = []string{"local", "majority", "linearizable"}

// readConcernDocs is how many documents the read-concern phase writes and
// then reads: few enough to write quickly with majority, enough that the
// reads do not all hit one document.
const readConcernDocs = 100

// readConcernRound is the length of one round of the read-concern phase:
// the phase alternates the concerns in rounds this long, so that what else
// the machine does at some moment falls on all of them alike.
const readConcernRound = 500 * time.Millisecond

// concernResult is what the read-concern phase measured for one concern,
// summed over its rounds.
type concernResult struct {
	phaseResult
	statuses map[int]int // non-2xx answers, by status
}

func (r concernResult) non2xx() int {
	n := 0
	for _, c := range r.statuses {
		n += c
	}
	return n
}

// readConcernBench writes readConcernDocs documents for user with write
// concern majority through master, then reads them back by id with each
// read concern, sending the reads to every node of nodes in turn (so that
// the nodes that do not master the partition forward them), in alternating
// rounds of the same concurrency. It reports reads/s, p50/p90/p99 and the
// non-2xx answers per concern, and returns the results in the order of
// readConcerns.
func readConcernBench(o benchOptions, hc *http.Client, master, user string, nodes []string, stdout io.Writer) ([]concernResult, error) {
	ids, err := writeReadConcernDocs(o, client.New(master, o.token, client.WithHTTPClient(hc)), user)
	if err != nil {
		return nil, err
	}
	rounds := max(1, min(20, int(o.duration/readConcernRound)))
	round := o
	round.duration = o.duration / time.Duration(rounds)
	results := make([]concernResult, len(readConcerns))
	for i := range results {
		results[i].statuses = map[int]int{}
	}
	var mu sync.Mutex              // guards the statuses
	next := make([]int, o.clients) // per client: how many reads it has sent; each client touches only its own
	// One client per node, of that node alone: each read goes to the node
	// whose turn it is (no routing, no retry), which forwards it if need be.
	clients := make([]*client.Client, len(nodes))
	for i, node := range nodes {
		clients[i] = client.New(node, o.token, client.WithHTTPClient(hc))
	}
	ctx := context.Background()
	read := func(rc int) func(int) error {
		return func(c int) error {
			i := (c + next[c]) % len(nodes)
			next[c]++
			_, err := clients[i].Get(ctx, user, "readconcern", ids[rand.IntN(len(ids))], client.ReadOptions{Concern: readConcerns[rc]})
			var he *client.HTTPError
			if errors.As(err, &he) {
				mu.Lock()
				results[rc].statuses[he.StatusCode]++
				mu.Unlock()
			}
			if err != nil {
				return fmt.Errorf("via %s: %w", nodes[i], err)
			}
			return nil
		}
	}
	for r := 0; r < rounds; r++ {
		for k := range readConcerns {
			rc := (r + k) % len(readConcerns) // each round starts with the next concern
			got := runPhase(round, read(rc))
			acc := &results[rc]
			acc.ops += got.ops
			acc.errors += got.errors
			acc.elapsed += got.elapsed
			acc.latencies = append(acc.latencies, got.latencies...)
			if acc.firstErr == nil {
				acc.firstErr = got.firstErr
			}
		}
	}
	for i := range results {
		slices.Sort(results[i].latencies)
	}

	fmt.Fprintf(stdout, "\npoint reads by read concern: %d documents written with majority, read by id through the %d nodes in turn; %d clients; the concerns alternated, %d round(s) of %s each\n",
		len(ids), len(nodes), o.clients, rounds, round.duration)
	for i, r := range results {
		fmt.Fprintf(stdout, "read concern %-12s %7.0f reads/s  p50 %-9s p90 %-9s p99 %-9s non-2xx %d  (%d reads)\n", readConcerns[i], r.rate(),
			roundDur(r.percentile(0.50)), roundDur(r.percentile(0.90)), roundDur(r.percentile(0.99)), r.non2xx(), r.ops)
	}
	base := results[0]
	var ratios []string
	for i, r := range results[1:] {
		ratios = append(ratios, fmt.Sprintf("%s/local reads/s %.2fx, p50 %.2fx, p99 %.2fx", readConcerns[i+1],
			r.rate()/base.rate(), ratio(r.percentile(0.50), base.percentile(0.50)), ratio(r.percentile(0.99), base.percentile(0.99))))
	}
	fmt.Fprintf(stdout, "%s\n", strings.Join(ratios, "; "))
	for i, r := range results {
		if r.errors == 0 {
			continue
		}
		var by []string
		for _, code := range slices.Sorted(maps.Keys(r.statuses)) {
			by = append(by, fmt.Sprintf("%d x%d", code, r.statuses[code]))
		}
		if failed := r.errors - r.non2xx(); failed > 0 {
			by = append(by, fmt.Sprintf("no answer x%d", failed))
		}
		fmt.Fprintf(stdout, "  %s: %d reads failed (%s); first: %v\n", readConcerns[i], r.errors, strings.Join(by, ", "), r.firstErr)
	}
	return results, nil
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// writeReadConcernDocs writes the read-concern phase's documents with write
// concern majority, so that every read concern may return them, and
// returns their ids.
func writeReadConcernDocs(o benchOptions, master *client.Client, user string) ([]string, error) {
	payload := strings.Repeat("x", o.docBytes)
	ids := make([]string, readConcernDocs)
	errs := make([]error, readConcernDocs)
	var wg sync.WaitGroup
	writers := min(o.clients, 8, readConcernDocs)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < readConcernDocs; i += writers {
				body := json.RawMessage(`{"payload":"` + payload + `","i":` + fmt.Sprint(i) + `}`)
				d, err := master.Create(context.Background(), user, "readconcern", body, client.WriteOptions{Concern: "majority"})
				ids[i], errs[i] = d.ID, err
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("writing the read-concern phase's documents: %w", err)
		}
	}
	return ids, nil
}
