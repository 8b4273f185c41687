package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
)

// clusterBench measures a running cluster: writes sent to a partition's
// master and to another node (forwarded), with write concern 1 and
// majority, the replication lag from a write's acknowledgement to its
// visibility on the replica, and point reads with each read concern.
func clusterBench(o benchOptions, urls []string, lagWrites, lagRate int, stdout, stderr io.Writer) int {
	o.transport.MaxIdleConnsPerHost = o.clients * 2
	hc := httpClient(o)
	// Where every node answers, and where the benchmark user's partition lives.
	admin := client.New(urls[0], o.token, client.WithHTTPClient(hc))
	view, err := admin.Cluster(context.Background())
	if code, err := answerOf(err); err != nil || code != 200 {
		fmt.Fprintf(stderr, "shoal bench: %s/v1/cluster answered %d %v (is --token an admin token?)\n", urls[0], code, err)
		return 1
	}
	nodeURL := map[string]string{}
	for _, m := range view.Members {
		u := m.PublicURL
		if u == "" {
			u = m.URL
		}
		nodeURL[m.ID] = u
	}
	user := "bench-user-0"
	pl, err := admin.Placement(context.Background(), user)
	if code, err := answerOf(err); err != nil || code != 200 || pl.Master == "" || len(pl.Responsible) < 2 {
		fmt.Fprintf(stderr, "shoal bench: the placement of %s is not settled (%d %v {Master:%s Responsible:%v}); wait for the cluster to be ready\n",
			user, code, err, pl.Master, pl.Responsible)
		return 1
	}
	master, replica := nodeURL[pl.Master], nodeURL[pl.Responsible[1]]
	// Forwarded writes go through a node that holds no copy if there is
	// one, else through the replica.
	other := replica
	for _, m := range view.Members {
		if !slices.Contains(pl.Responsible, m.ID) {
			other = nodeURL[m.ID]
			break
		}
	}
	fmt.Fprintf(stdout, "cluster of %d nodes; user %s: master %s (%s), replica %s; %d clients, %d-byte documents, %s per phase\n\n",
		len(nodeURL), user, pl.Master, master, pl.Responsible[1], o.clients, o.docBytes, o.duration)
	payload := strings.Repeat("x", o.docBytes)
	body := json.RawMessage(`{"payload":"` + payload + `"}`)
	ctx := context.Background()
	// One client per node asked, of that node alone: a call goes where
	// the phase sends it (no routing, no retry), forwarded by the node if
	// it is not the master.
	post := func(base, wc string) func(int) error {
		cl := client.New(base, o.token, client.WithHTTPClient(hc))
		return func(int) error {
			_, err := cl.Create(ctx, user, "bench", body, client.WriteOptions{Concern: wc})
			return err
		}
	}
	direct := runPhase(o, post(master, "1"))
	report(stdout, "writes to the master (1)", direct)
	forwarded := runPhase(o, post(other, "1"))
	report(stdout, "writes forwarded (1)", forwarded)
	majority := runPhase(o, post(master, "majority"))
	report(stdout, "writes majority", majority)
	fmt.Fprintf(stdout, "\nforwarded/direct %.2fx, majority/1 %.2fx\n\n", forwarded.rate()/direct.rate(), majority.rate()/direct.rate())

	// Replication lag: writes to the master at a steady rate (each in its
	// own request, so the rate does not depend on their latency), while
	// one watcher asks the replica every half millisecond how far it holds
	// the partition. A write's lag is from its acknowledgement to the first
	// answer of the replica that covers it (0 if the replica had it before
	// the master's answer arrived).
	lags, rate, err := measureLag(hc, o.token, master, replica, user, lagWrites, lagRate)
	if err != nil {
		fmt.Fprintf(stderr, "shoal bench: %v\n", err)
		return 1
	}
	slices.Sort(lags)
	pct := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	fmt.Fprintf(stdout, "replication lag, ack on the master to visible on the replica (%d writes at %.0f/s): p50 %s  p99 %s  max %s\n",
		len(lags), rate, roundDur(pct(0.5)), roundDur(pct(0.99)), roundDur(lags[len(lags)-1]))

	// Point reads with each read concern, through every node in turn. It
	// runs last, once the replica has caught up (the lag phase waits for
	// it), so that no backlog of the write phases falls on one concern.
	var nodes []string
	for _, id := range slices.Sorted(maps.Keys(nodeURL)) {
		nodes = append(nodes, nodeURL[id])
	}
	concerns, err := readConcernBench(o, hc, master, user, nodes, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "shoal bench: %v\n", err)
		return 1
	}
	results := []phaseResult{direct, forwarded, majority}
	for _, r := range concerns {
		results = append(results, r.phaseResult)
	}
	return exitFor(results...)
}

// answerOf is the status of an answer of the client's and the error to
// print with it: 200 and the error for a 200 that did not decode, the
// status and no error for an answer other than 200, 0 and the error when
// the node was not reached.
func answerOf(err error) (int, error) {
	var he *client.HTTPError
	var ae *client.AnswerError
	switch {
	case err == nil:
		return http.StatusOK, nil
	case errors.As(err, &ae):
		return http.StatusOK, err
	case errors.As(err, &he):
		return he.StatusCode, nil
	default:
		return 0, err
	}
}

// clusterTargets resolves --urls and --token for --cluster, defaulting to a
// shoal dev directory.
func clusterTargets(urls, token, dir string) ([]string, string, error) {
	var list []string
	for _, u := range strings.Split(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			list = append(list, strings.TrimRight(u, "/"))
		}
	}
	if len(list) == 0 {
		data, err := os.ReadFile(filepath.Join(dir, "peers.json"))
		if err != nil {
			return nil, "", errors.New("--cluster needs --urls, or a shoal dev directory (--dir) with peers.json")
		}
		pl, err := cluster.ParsePeerList(data, "")
		if err != nil {
			return nil, "", err
		}
		for _, p := range pl.Peers {
			list = append(list, p.URL)
		}
	}
	if token == "" {
		data, err := os.ReadFile(filepath.Join(dir, "admin.token"))
		if err != nil {
			return nil, "", errors.New("--cluster needs --token (an admin token), or a shoal dev directory with admin.token")
		}
		token = strings.TrimSpace(string(data))
	}
	return list, token, nil
}

// position is a partition position as the API shows it.
type position struct {
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

func (p position) covers(q position) bool {
	return p.Epoch > q.Epoch || p.Epoch == q.Epoch && p.Seq >= q.Seq
}

// measureLag writes n documents for user to master at rate per second and
// returns each one's replication lag to replica, and the rate achieved.
func measureLag(hc *http.Client, token, master, replica, user string, n, rate int) ([]time.Duration, float64, error) {
	type write struct {
		pos   position
		acked time.Time
	}
	replicaAPI := client.New(replica, token, client.WithHTTPClient(hc))
	masterAPI := client.New(master, token, client.WithHTTPClient(hc))
	var mu sync.Mutex
	var written []write
	var failed error
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
		defer tick.Stop()
		for i := 0; i < n; i++ {
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := masterAPI.Create(context.Background(), user, "lag", json.RawMessage(`{"i":1}`), client.WriteOptions{})
				acked := time.Now()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = fmt.Errorf("lag write: %w", err)
					return
				}
				// The token is "partition:epoch.seq".
				var p int
				var w write
				if _, err := fmt.Sscanf(d.Token, "%d:%d.%d", &p, &w.pos.Epoch, &w.pos.Seq); err != nil {
					failed = fmt.Errorf("lag write: unreadable X-Consistency-Token %q", d.Token)
					return
				}
				w.acked = acked
				written = append(written, w)
			}()
		}
		wg.Wait()
	}()
	var lags []time.Duration
	finished := false
	for !finished || len(written) > 0 {
		select {
		case <-done:
			finished = true
		default:
		}
		// An answer other than 200 says nothing of how far the replica
		// is: it holds nothing as far as the benchmark knows.
		var held position
		pl, err := replicaAPI.Placement(context.Background(), user)
		var he *client.HTTPError
		var ae *client.AnswerError
		switch {
		case err == nil:
			held = position(pl.Position)
		case errors.As(err, &ae):
			return nil, 0, fmt.Errorf("the replica's placement: %w", ae.Err)
		case errors.As(err, &he):
		default:
			return nil, 0, fmt.Errorf("asking the replica how far it is: %w", err)
		}
		seen := time.Now()
		mu.Lock()
		if failed != nil {
			mu.Unlock()
			return nil, 0, failed
		}
		kept := written[:0]
		for _, w := range written {
			switch {
			case held.covers(w.pos):
				lags = append(lags, max(seen.Sub(w.acked), 0))
			case seen.Sub(w.acked) > 10*time.Second:
				mu.Unlock()
				return nil, 0, fmt.Errorf("a write at %d.%d is not on the replica after 10s (it holds %d.%d)", w.pos.Epoch, w.pos.Seq, held.Epoch, held.Seq)
			default:
				kept = append(kept, w)
			}
		}
		written = kept
		mu.Unlock()
		// Asking without a pause would take a core from the nodes being
		// measured; this bounds the resolution to about half a millisecond.
		time.Sleep(500 * time.Microsecond)
	}
	return lags, float64(len(lags)) / time.Since(start).Seconds(), nil
}
