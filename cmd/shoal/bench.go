package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/api/doc"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/node"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
	"github.com/shoal-db/shoal/store/engine"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

type benchOptions struct {
	url, token string
	// transport reaches the nodes: it verifies https nodes with --ca (or
	// $SHOAL_CA, or the shoal dev directory's CA).
	transport *http.Transport
	docBytes  int
	clients   int
	users     int
	duration  time.Duration
}

func bench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o benchOptions
	fs.StringVar(&o.url, "url", "", "node to measure (default: start a node of its own in a temporary directory)")
	fs.StringVar(&o.token, "token", "", "admin token for --url")
	fs.IntVar(&o.docBytes, "doc-bytes", 1024, "size of each document's payload")
	fs.IntVar(&o.clients, "clients", 32, "concurrent clients")
	fs.IntVar(&o.users, "users", 1, "users the clients write as (client i's k-th write goes as user (i + k*clients) mod users, so every user is written); "+
		"writes of one user share a partition and so a group commit")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each phase runs")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of this process for the whole run to this file: its clients, and its node when it runs one of its own")
	clusterMode := fs.Bool("cluster", false, "measure a running cluster: writes to the master and forwarded, 1 and majority, replication lag, and point reads by read concern")
	urls := fs.String("urls", "", "with --cluster: the nodes' URLs, comma separated (default: those of the shoal dev directory --dir)")
	dir := fs.String("dir", ".shoal-dev", "with --cluster: a shoal dev directory for the default --urls, --token and --ca")
	ca := fs.String("ca", "", "PEM CA to verify https nodes with (default: $SHOAL_CA, else with --cluster DIR/certs/ca.pem when it exists, else the system's roots)")
	lagWrites := fs.Int("lag-writes", 2000, "with --cluster: how many writes measure the replication lag")
	lagRate := fs.Int("lag-rate", 500, "with --cluster: writes per second while the replication lag is measured")
	compare := fs.String("compare", "", "with --cluster: etcd, to drive the cluster and an etcd cluster side by side with the same clients (majority writes against puts) and print the ratio, and the CPU each operation cost the servers and this bench's own clients")
	etcdURLs := fs.String("etcd", "", "with --compare etcd: the client URLs of a running etcd cluster, comma separated (default: start three etcd members on loopback, from the etcd on PATH)")
	rounds := fs.Int("rounds", 3, "with --compare: rounds of each, alternating")
	routed := fs.Bool("routed", false, "with --compare: Shoal's clients are the Go client over every node, sending each user's calls to the partition's master (default: each client through one node, which forwards)")
	scale := fs.Int("scale", 0, fmt.Sprintf("measure what each operation costs against the size of its collection: with a node of its own and the document cache off, "+
		"fill one user's collection with %d documents and another's with this many, then time GET, PUT, PATCH, DELETE, a filtered query page and the collection list on both (0: off)", scaleBaseline))
	mongoURI := fs.String("mongo-uri", os.Getenv("MONGO_URI"), "with a node of its own: measure the mongo engine on this MongoDB (in a database of its own, shoal_bench_<random>, dropped at the end) instead of the embedded engine (default: $MONGO_URI; unset: the embedded engine)")
	samples := fs.Int("samples", 200, "with --scale: how many times each operation is timed on each collection")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal bench [--url URL --token TOKEN] [flags]")
		fmt.Fprintln(stderr, "Drives REST writes (POST) then point reads (GET) and prints ops/s and latency percentiles.")
		fmt.Fprintln(stderr, "With a node of its own, it then drives the same workload straight at the node's storage engine")
		fmt.Fprintln(stderr, "(one document per commit, a get by key) and prints the ratio Shoal/raw.")
		fmt.Fprintln(stderr, "With --cluster it measures a running cluster (default: the one `shoal dev` runs) instead;")
		fmt.Fprintln(stderr, "with --cluster --compare etcd it drives that cluster and an etcd cluster side by side.")
		fmt.Fprintln(stderr, "With --scale N it times each operation on a collection of 1000 documents and on one of N.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.clients < 1 || o.users < 1 || o.docBytes < 1 || o.duration <= 0 {
		fmt.Fprintln(stderr, "shoal bench: --clients, --users, --doc-bytes and --duration must be positive")
		return 2
	}
	switch {
	case *compare != "" && *compare != "etcd":
		fmt.Fprintf(stderr, "shoal bench: --compare %q: the one system to compare with is etcd\n", *compare)
		return 2
	case *compare != "" && !*clusterMode:
		fmt.Fprintln(stderr, "shoal bench: --compare needs --cluster (it drives a running cluster, by default the one shoal dev runs)")
		return 2
	case *rounds < 1:
		fmt.Fprintln(stderr, "shoal bench: --rounds must be positive")
		return 2
	case *mongoURI != "" && (*clusterMode || o.url != ""):
		fmt.Fprintln(stderr, "shoal bench: --mongo-uri (or $MONGO_URI) is for a node of its own; leave out --cluster and --url, or unset MONGO_URI")
		return 2
	case *scale != 0 && (*clusterMode || o.url != ""):
		fmt.Fprintln(stderr, "shoal bench: --scale runs a node of its own (it turns the document cache off and reads the node's memory); leave out --cluster and --url")
		return 2
	case *scale != 0 && (*scale < scaleBaseline || *samples < 1 || *samples > scaleBaseline/2):
		fmt.Fprintf(stderr, "shoal bench: --scale must be at least %d and --samples from 1 to %d\n", scaleBaseline, scaleBaseline/2)
		return 2
	}
	caDir := ""
	if *clusterMode {
		caDir = *dir
	}
	t, err := caTransport(devCA(*ca, caDir))
	if err != nil {
		fmt.Fprintf(stderr, "shoal bench: %v\n", err)
		return 2
	}
	o.transport = t
	// Every mode is profiled: with --cluster the profile is of the clients.
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "shoal bench: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "shoal bench: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *scale != 0 {
		return scaleBench(o, *scale, *samples, *mongoURI, stdout, stderr)
	}
	if *clusterMode {
		list, tok, err := clusterTargets(*urls, o.token, *dir)
		if err != nil {
			fmt.Fprintf(stderr, "shoal bench: %v\n", err)
			return 2
		}
		o.token = tok
		if *compare == "etcd" {
			var etcd []string
			for _, u := range strings.Split(*etcdURLs, ",") {
				if u = strings.TrimSpace(u); u != "" {
					etcd = append(etcd, strings.TrimRight(u, "/"))
				}
			}
			return compareEtcd(o, list, etcd, *rounds, *routed, stdout, stderr)
		}
		return clusterBench(o, list, max(*lagWrites, 1), max(*lagRate, 1), stdout, stderr)
	}
	if (o.url == "") != (o.token == "") {
		fmt.Fprintln(stderr, "shoal bench: --url and --token go together")
		return 2
	}
	ctx := context.Background()
	var raw engine.Documents
	partitions := shard.DefaultPartitionCount
	if o.url == "" {
		own, err := startOwnNode(ctx, "shoal-bench-", stderr, onMongo(*mongoURI))
		if err != nil {
			fmt.Fprintf(stderr, "shoal bench: %v\n", err)
			return 1
		}
		defer own.close(ctx)
		o.url, o.token = own.node.URL(), own.token
		raw, partitions = own.node.Store().Engine(), own.cfg.PartitionCount
		fmt.Fprintf(stdout, "node of its own at %s (%s)\n", o.url, own.storage())
	}
	fmt.Fprintf(stdout, "%d clients, %d users, %d-byte documents, %s per phase\n\n", o.clients, o.users, o.docBytes, o.duration)
	payload := strings.Repeat("x", o.docBytes)

	o.transport.MaxIdleConnsPerHost, o.transport.MaxConnsPerHost = o.clients*2, o.clients*2
	// One client of the node alone (no routing; it never tries a call
	// again), shared by the phase's goroutines.
	nodeAPI := client.New(o.url, o.token, client.WithHTTPClient(httpClient(o)))
	created := make([][]written, o.clients) // what each client wrote
	writes := runPhase(o, func(c int) error {
		body := json.RawMessage(`{"payload":"` + payload + `","client":` + fmt.Sprint(c) + `}`)
		user := fmt.Sprintf("bench-user-%d", benchUser(o, c, len(created[c])))
		d, err := nodeAPI.Create(ctx, user, "bench", body, client.WriteOptions{})
		if err != nil {
			return err
		}
		created[c] = append(created[c], written{user, d.ID})
		return nil
	})
	report(stdout, "REST writes (POST)", writes)
	reads := runPhase(o, func(c int) error {
		ws := created[c]
		if len(ws) == 0 {
			return errors.New("no documents to read")
		}
		w := ws[rand.IntN(len(ws))]
		_, err := nodeAPI.Get(ctx, w.user, "bench", w.id, client.ReadOptions{})
		return err
	})
	report(stdout, "REST point reads (GET)", reads)
	if raw == nil {
		fmt.Fprintln(stdout, "\n(--url given: the raw store is not reachable from here, so no ratio)")
		return exitFor(writes, reads)
	}

	var rawSeq atomic.Uint64
	// The engine's own rate: one document per commit, client c writing to
	// a partition of its own beyond the node's (so the two never meet).
	rawCommit := func(c int) error {
		id := doc.NewID()
		d := &store.Doc{Key: store.DocKey("bench-raw", "bench", id), User: "bench-raw", Coll: "bench", ID: id, Version: 1,
			Pos: store.Position{Epoch: 1, Seq: rawSeq.Add(1)}, Updated: time.Now(), Body: map[string]any{"payload": payload, "client": int64(c)}}
		return raw.Commit(ctx, partitions+c, []engine.Write{{Doc: d, Insert: true}})
	}
	rawWrites := runPhase(o, rawCommit)
	report(stdout, "raw engine commit, one document", rawWrites)
	// The same, one commit at a time: each waits for its own sync, which
	// concurrent commits share in the engine's log.
	one := o
	one.clients = 1
	rawOne := runPhase(one, rawCommit)
	report(stdout, "raw engine commit, one writer", rawOne)
	// Reads go to the same data Shoal wrote, by the same keys, so both
	// sides read the same documents.
	rawReads := runPhase(o, func(c int) error {
		ws := created[c]
		if len(ws) == 0 {
			return errors.New("no documents to read")
		}
		w := ws[rand.IntN(len(ws))]
		_, err := raw.Get(ctx, shard.PartitionOf(w.user, partitions), store.DocKey(w.user, "bench", w.id))
		return err
	})
	report(stdout, "raw engine get, same documents", rawReads)
	fmt.Fprintf(stdout, "\nShoal/raw: writes %.2fx (%.2fx the one writer), point reads %.2fx\n",
		writes.rate()/rawWrites.rate(), writes.rate()/rawOne.rate(), reads.rate()/rawReads.rate())
	return exitFor(writes, reads, rawWrites, rawOne, rawReads)
}

// ownNode is a node the benchmark started for itself, in a temporary
// directory, with an admin token.
type ownNode struct {
	node   *node.Node
	cfg    config.Config
	dir    string
	token  string
	stderr io.Writer
}

// startOwnNode starts a node of the benchmark's own in a new temporary
// directory named after prefix; tweak (if not nil) changes its settings.
func startOwnNode(ctx context.Context, prefix string, stderr io.Writer, tweak func(*config.Config)) (*ownNode, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	o := &ownNode{dir: dir, stderr: stderr, cfg: config.Defaults()}
	o.cfg.NodeID, o.cfg.HTTPAddr, o.cfg.DataDir = "bench", "127.0.0.1:0", dir
	o.cfg.AuthSecret = "bench-secret-" + doc.NewID()
	if tweak != nil {
		tweak(&o.cfg)
	}
	if o.token, err = api.MintToken([]byte(o.cfg.AuthSecret), api.TokenSpec{Admin: true, Audience: o.cfg.TokenAudience, TTL: o.cfg.TokenMaxTTL}); err != nil {
		o.close(ctx)
		return nil, err
	}
	if o.node, err = node.Start(ctx, o.cfg, newLogger(stderr, "warn")); err != nil {
		o.close(ctx) // a node that failed on MongoDB may have made its database
		return nil, fmt.Errorf("starting a node: %w", err)
	}
	return o, nil
}

// close stops the node (if it started) and removes its directory, and its
// database when it stored in a MongoDB.
func (o *ownNode) close(ctx context.Context) {
	if o.node != nil {
		o.node.Close(ctx)
	}
	os.RemoveAll(o.dir)
	if o.cfg.MongoURI != "" {
		if err := dropDatabase(ctx, o.cfg.MongoURI, o.cfg.MongoDB); err != nil {
			fmt.Fprintf(o.stderr, "shoal bench: dropping the database %s: %v\n", o.cfg.MongoDB, err)
		}
	}
}

// storage says where the node stores its documents.
func (o *ownNode) storage() string {
	if o.cfg.MongoURI != "" {
		return "mongo engine, database " + o.cfg.MongoDB
	}
	return "embedded store in " + o.dir
}

// onMongo has a node of the benchmark's own store in a database of its own
// on the MongoDB at uri ("": the embedded engine).
func onMongo(uri string) func(*config.Config) {
	if uri == "" {
		return nil
	}
	return func(cfg *config.Config) {
		cfg.MongoURI, cfg.MongoDB = uri, "shoal_bench_"+strings.ToLower(doc.NewID())
	}
}

// dropDatabase drops a database the benchmark made.
func dropDatabase(ctx context.Context, uri, name string) error {
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return err
	}
	defer c.Disconnect(ctx)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.Database(name).Drop(ctx)
}

// httpClient is the benchmark's HTTP client over its transport.
// written is a document a bench client wrote, read back by the read
// phases.
type written struct{ user, id string }

// benchUser is the user client c's k-th write goes as: the clients take
// the users in turn, so that every user is written (with 32 clients and
// 1,000 users, client c writes as users c, c+32, c+64, ... mod 1,000),
// where "client c as user c mod users" wrote as 32 users only.
func benchUser(o benchOptions, c, k int) int {
	return (c + k*o.clients) % o.users
}

func httpClient(o benchOptions) *http.Client {
	return &http.Client{Transport: o.transport, Timeout: 30 * time.Second}
}

type phaseResult struct {
	ops       int
	errors    int
	firstErr  error
	elapsed   time.Duration
	latencies []time.Duration
}

func (r phaseResult) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// runPhase runs op from every client until the duration is over.
func runPhase(o benchOptions, op func(client int) error) phaseResult {
	var mu sync.Mutex
	var res phaseResult
	start := time.Now()
	end := start.Add(o.duration)
	var wg sync.WaitGroup
	for c := 0; c < o.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var lat []time.Duration
			var errs int
			var first error
			for time.Now().Before(end) {
				t := time.Now()
				if err := op(c); err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.ops += len(lat)
			res.errors += errs
			if res.firstErr == nil {
				res.firstErr = first
			}
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.latencies)
	return res
}

func (r phaseResult) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))]
}

func report(w io.Writer, name string, r phaseResult) {
	fmt.Fprintf(w, "%-26s %9.0f ops/s  p50 %-9s p95 %-9s p99 %-9s errors %d\n", name, r.rate(),
		roundDur(r.percentile(0.50)), roundDur(r.percentile(0.95)), roundDur(r.percentile(0.99)), r.errors)
	if r.firstErr != nil {
		fmt.Fprintf(w, "  first error: %v\n", r.firstErr)
	}
}

func roundDur(d time.Duration) string {
	var b bytes.Buffer
	switch {
	case d >= time.Millisecond:
		fmt.Fprintf(&b, "%.2fms", float64(d)/float64(time.Millisecond))
	default:
		fmt.Fprintf(&b, "%dµs", d.Microseconds())
	}
	return b.String()
}

func exitFor(results ...phaseResult) int {
	for _, r := range results {
		if r.errors > 0 || r.ops == 0 {
			return 1
		}
	}
	return 0
}
