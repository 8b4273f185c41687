package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/devcluster"
	"github.com/shoal-db/shoal/internal/freeport"
	"github.com/shoal-db/shoal/internal/metrictext"
	"github.com/shoal-db/shoal/internal/wording"
)

// compareEtcd drives a running Shoal cluster (urls) and an etcd cluster
// with the same clients, side by side: rounds of Shoal writes with write
// concern majority (client c's k-th write as user benchUser(c, k), through
// node c mod len(urls), forwarded to the partition's master), each followed by a
// round of etcd puts (client c through member c mod len(etcd), forwarded to
// the Raft leader), the same payload size. Every etcd put is committed by
// a majority of its members and synced, as a majority write is. Then the
// same for reads: each client reads back, at random, what it wrote, with
// X-Read-Concern linearizable from Shoal and etcd's default (linearizable)
// range. It prints each round and the range of the ratio etcd/Shoal.
//
// With no etcd URLs it starts a cluster of three etcd members on loopback
// (the etcd binary on PATH: Debian's etcd-server), in a temporary
// directory it removes when done.
func compareEtcd(o benchOptions, urls, etcdURLs []string, rounds int, routed bool, stdout, stderr io.Writer) int {
	o.transport.MaxIdleConnsPerHost = o.clients * 2
	hc := httpClient(o)
	if len(etcdURLs) == 0 {
		started, stop, err := startEtcd(3, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "shoal bench: %v\n", err)
			return 1
		}
		defer stop()
		// The members run in process groups of their own: a Ctrl-C
		// reaches only this process, which stops them and removes their
		// data before it ends.
		interrupted := make(chan os.Signal, 1)
		signal.Notify(interrupted, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(interrupted)
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-interrupted:
				stop()
				os.Exit(130)
			case <-done:
			}
		}()
		etcdURLs = started
	}
	payload := strings.Repeat("x", o.docBytes)
	var seq atomic.Int64
	// What each client wrote, read back by the read rounds (each client
	// appends to its own slice only).
	etcdWritten := make([][]string, o.clients)
	// Each Shoal client is the Go client of its node alone (no routing,
	// no retry: the node forwards to the partition's master), or, with
	// routed, over every node, its own first, sending a user's calls
	// straight to the partition's master.
	how := "each client through one node, which forwards to the partition's master"
	if routed {
		how = "each client the Go client over every node, routing to the partition's master"
	}
	clients := make([]*client.Client, o.clients)
	for c := range clients {
		opts := []client.Option{client.WithHTTPClient(hc)}
		if routed {
			var others []string
			for i := 1; i < len(urls); i++ {
				others = append(others, urls[(c+i)%len(urls)])
			}
			opts = append(opts, client.WithNodes(others...))
		}
		clients[c] = client.New(urls[c%len(urls)], o.token, opts...)
	}
	body := json.RawMessage(`{"payload":"` + payload + `"}`)
	ctx := context.Background()
	shoalWritten := make([][]written, o.clients)
	shoalPut := func(c int) error {
		w := written{fmt.Sprintf("bench-u%d", benchUser(o, c, len(shoalWritten[c]))), fmt.Sprintf("c%d-%d", c, seq.Add(1))}
		if _, _, err := clients[c].Put(ctx, w.user, "bench", w.id, body, client.WriteOptions{Concern: "majority", Minimal: true}); err != nil {
			return err
		}
		shoalWritten[c] = append(shoalWritten[c], w)
		return nil
	}
	shoalGet := func(c int) error {
		if len(shoalWritten[c]) == 0 {
			return errors.New("this client wrote nothing to read")
		}
		w := shoalWritten[c][rand.IntN(len(shoalWritten[c]))]
		_, err := clients[c].Get(ctx, w.user, "bench", w.id, client.ReadOptions{Concern: "linearizable"})
		return err
	}
	value := base64.StdEncoding.EncodeToString([]byte(`{"payload":"` + payload + `"}`))
	etcdPut := func(c int) error {
		key := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "bench/c%d-%d", c, seq.Add(1)))
		req, _ := http.NewRequest("POST", etcdURLs[c%len(etcdURLs)]+"/v3/kv/put", strings.NewReader(`{"key":"`+key+`","value":"`+value+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if err := expectStatus(hc, req, http.StatusOK); err != nil {
			return err
		}
		etcdWritten[c] = append(etcdWritten[c], key)
		return nil
	}
	// Reads: a linearizable read of what the client wrote, on both (etcd's
	// range is linearizable unless asked to be serializable).
	etcdGet := func(c int) error {
		w := etcdWritten[c]
		if len(w) == 0 {
			return errors.New("this client wrote nothing to read")
		}
		req, _ := http.NewRequest("POST", etcdURLs[c%len(etcdURLs)]+"/v3/kv/range", strings.NewReader(`{"key":"`+w[rand.IntN(len(w))]+`"}`))
		req.Header.Set("Content-Type", "application/json")
		return expectStatus(hc, req, http.StatusOK)
	}
	fmt.Fprintf(stdout, "Shoal: %d nodes, writes with write concern majority answered minimally (Prefer: return=minimal: an etcd put answers no value either) as %d users, %s; etcd: %d members, puts; %d clients, %d-byte values, %s per round\n\n",
		len(urls), o.users, how, len(etcdURLs), o.clients, o.docBytes, o.duration)
	var results []phaseResult
	for _, kind := range []struct {
		name, shoal, etcd string
		shoalOp, etcdOp   func(int) error
	}{
		{"writes", "shoal majority", "etcd put", shoalPut, etcdPut},
		{"reads", "shoal linearizable get", "etcd range (linearizable)", shoalGet, etcdGet},
	} {
		var rates, cpus, busiest spread
		for r := 1; r <= rounds; r++ {
			s, sCPU, sClients := runPhaseCounted(o, hc, urls, kind.shoalOp)
			report(stdout, fmt.Sprintf("round %d: %s", r, kind.shoal), s)
			reportCPU(stdout, sCPU.total(), s, wording.Plural(len(urls), "node"))
			reportBusiest(stdout, sCPU, s, urls, "node")
			reportCPU(stdout, sClients, s, "clients (this bench)")
			e, eCPU, eClients := runPhaseCounted(o, hc, etcdURLs, kind.etcdOp)
			report(stdout, fmt.Sprintf("round %d: %s", r, kind.etcd), e)
			reportCPU(stdout, eCPU.total(), e, wording.Plural(len(etcdURLs), "member"))
			reportBusiest(stdout, eCPU, e, etcdURLs, "member")
			reportCPU(stdout, eClients, e, "clients (this bench)")
			results = append(results, s, e)
			if s.ops == 0 || e.ops == 0 {
				continue
			}
			x := e.rate() / s.rate()
			fmt.Fprintf(stdout, "round %d: etcd/Shoal %.2fx", r, x)
			rates.add(x)
			if sCPU.total() > 0 && eCPU.total() > 0 {
				c := (sCPU.total() / float64(s.ops)) / (eCPU.total() / float64(e.ops))
				fmt.Fprintf(stdout, "; CPU per operation Shoal/etcd %.2fx", c)
				cpus.add(c)
				_, sBusiest := sCPU.busiest()
				_, eBusiest := eCPU.busiest()
				b := (sBusiest / float64(s.ops)) / (eBusiest / float64(e.ops))
				fmt.Fprintf(stdout, "; on the busiest server %.2fx", b)
				busiest.add(b)
			}
			fmt.Fprintf(stdout, "\n\n")
		}
		if rates.n > 0 {
			fmt.Fprintf(stdout, "%s, etcd/Shoal over %d rounds: %.2f-%.2fx (above 1, etcd serves more per second)\n", kind.name, rates.n, rates.lo, rates.hi)
		}
		if cpus.n > 0 {
			fmt.Fprintf(stdout, "%s, CPU per operation Shoal/etcd over %d rounds: %.2f-%.2fx (above 1, an operation costs Shoal's servers more CPU than etcd's)\n", kind.name, cpus.n, cpus.lo, cpus.hi)
			fmt.Fprintf(stdout, "%s, CPU per operation on the busiest server, Shoal/etcd over %d rounds: %.2f-%.2fx (with a machine per server and the servers' CPU the limit, the busiest server bounds the rate: below 1, Shoal's bound is higher)\n", kind.name, busiest.n, busiest.lo, busiest.hi)
		}
		fmt.Fprintln(stdout)
	}
	return exitFor(results...)
}

// spread is the range of a ratio over rounds.
type spread struct {
	n      int
	lo, hi float64
}

func (s *spread) add(x float64) {
	if s.n == 0 || x < s.lo {
		s.lo = x
	}
	if s.n == 0 || x > s.hi {
		s.hi = x
	}
	s.n++
}

// serverCPU is the CPU each server used during a phase, in seconds, in
// the order of its URLs; nil when one could not be read.
type serverCPU []float64

func (c serverCPU) total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// busiest is the server that used the most CPU (its index) and how much
// it used.
func (c serverCPU) busiest() (int, float64) {
	if len(c) == 0 {
		return 0, 0
	}
	i := 0
	for j, v := range c {
		if v > c[i] {
			i = j
		}
	}
	return i, c[i]
}

// runPhaseCounted runs a phase as runPhase does and counts the CPU each
// server at urls used meanwhile (their process_cpu_seconds_total: Shoal
// nodes and etcd members both export it on /metrics), nil when one could
// not be read, and the CPU this process used (its clients), 0 when it
// could not be read. On a machine shared with other work a round's rate
// moves with whatever else runs; the CPU each operation cost the servers
// moves much less, and says how much work each system does per operation.
// The clients share the machine's cores with the servers: a system whose
// client costs more per operation leaves its servers less.
func runPhaseCounted(o benchOptions, hc *http.Client, urls []string, op func(client int) error) (r phaseResult, servers serverCPU, clients float64) {
	before, okBefore := cpuSeconds(hc, urls)
	selfBefore, okSelf := selfCPU()
	r = runPhase(o, op)
	selfAfter, okSelfAfter := selfCPU()
	after, okAfter := cpuSeconds(hc, urls)
	if okBefore && okAfter {
		servers = make(serverCPU, len(urls))
		for i := range urls {
			if after[i] < before[i] { // a server restarted
				servers = nil
				break
			}
			servers[i] = after[i] - before[i]
		}
	}
	if okSelf && okSelfAfter && selfAfter > selfBefore {
		clients = (selfAfter - selfBefore).Seconds()
	}
	return r, servers, clients
}

// reportCPU prints what a phase cost its servers (or its clients) in CPU
// per operation.
func reportCPU(w io.Writer, cpu float64, r phaseResult, servers string) {
	if cpu <= 0 || r.ops == 0 {
		return
	}
	fmt.Fprintf(w, "  %.0f µs of CPU per operation on its %s (%.2f cores)\n",
		cpu/float64(r.ops)*1e6, servers, cpu/r.elapsed.Seconds())
}

// reportBusiest prints the CPU per operation of the server that used the
// most in a phase, and its share of all the servers'. An etcd cluster's
// leader does more per put than its followers; a Shoal cluster spreads
// its partitions' masters over its nodes. On one machine shared by every
// server only the total counts; with a machine per server, the busiest
// one bounds the rate first.
func reportBusiest(w io.Writer, cpu serverCPU, r phaseResult, urls []string, what string) {
	if len(cpu) < 2 || cpu.total() <= 0 || r.ops == 0 {
		return
	}
	i, busiest := cpu.busiest()
	fmt.Fprintf(w, "  %.0f µs of CPU per operation on the busiest %s (%s, %.0f%% of the %ss')\n",
		busiest/float64(r.ops)*1e6, what, urls[i], 100*busiest/cpu.total(), what)
}

// cpuSeconds reads process_cpu_seconds_total from the /metrics of each
// of urls; ok is false when one could not be read.
func cpuSeconds(hc *http.Client, urls []string) (perServer []float64, ok bool) {
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		body, err := metrictext.Get(ctx, hc, u)
		cancel()
		if err != nil {
			return nil, false
		}
		v, found := metrictext.Value(body, "process_cpu_seconds_total")
		if !found {
			return nil, false
		}
		perServer = append(perServer, v)
	}
	return perServer, true
}

// expectStatus sends req and reads its answer whole; an answer other than
// want is an error.
func expectStatus(hc *http.Client, req *http.Request, want int) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// startEtcd starts n etcd members on loopback, each with its data in a
// temporary directory, waits until every one reports itself healthy, and
// returns their client URLs and a function that stops them and removes
// the directory.
func startEtcd(n int, stderr io.Writer) (urls []string, stop func(), err error) {
	exe, err := exec.LookPath("etcd")
	if err != nil {
		return nil, nil, errors.New("no etcd on PATH: install Debian's etcd-server (apt-get install etcd-server), or pass --etcd with the client URLs of a running cluster")
	}
	dir, err := os.MkdirTemp("", "shoal-bench-etcd-")
	if err != nil {
		return nil, nil, err
	}
	// The members are started as shoal dev starts its nodes: each gets
	// SIGTERM when this process dies, even by SIGKILL or a broken pipe
	// (`shoal bench ... | head` once ended bench and left three etcd
	// members running), and runs in a process group of its own.
	starter := devcluster.NewExecStarter(exe)
	var members []devcluster.Process
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, m := range members {
				m.Terminate()
			}
			for _, m := range members {
				m.Wait()
			}
			starter.Close()
			os.RemoveAll(dir)
		})
	}
	ports, err := freeport.Find(2 * n)
	if err != nil {
		stop()
		return nil, nil, err
	}
	// The members' output (errors only: etcd 3.4 applies --log-level to
	// its zap logger alone, and logs every Raft step otherwise) goes to
	// stderr through one lock: each process's output is copied by a
	// goroutine of its own.
	out := &lockedWriter{w: stderr}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("e%d=http://127.0.0.1:%d", i+1, ports[2*i+1]))
	}
	for i := range n {
		client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]), fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		m, err := starter.Start(devcluster.ProcessSpec{ID: fmt.Sprintf("e%d", i+1), Stdout: io.Discard, Stderr: out, Args: []string{
			"--name", fmt.Sprintf("e%d", i+1), "--data-dir", filepath.Join(dir, fmt.Sprintf("e%d", i+1)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "shoal-bench", "--logger", "zap", "--log-level", "error"}})
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("starting etcd: %w", err)
		}
		members = append(members, m)
		urls = append(urls, client)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range urls {
		if err := awaitEtcdHealthy(ctx, u); err != nil {
			stop()
			return nil, nil, err
		}
	}
	return urls, stop, nil
}

// awaitEtcdHealthy asks an etcd member's /health until it answers healthy
// or ctx ends.
func awaitEtcdHealthy(ctx context.Context, url string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var h struct {
				Health string `json:"health"`
			}
			err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&h)
			resp.Body.Close()
			if err == nil && h.Health == "true" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd at %s did not report itself healthy within 30s", url)
		case <-tick.C:
		}
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
