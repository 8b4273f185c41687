package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/storetest"
	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The benchmark command runs end to end on a node of its own and reports
// every phase with zero errors (its figures are not asserted: they are
// measured and written down, see docs/benchmarks.md).
func TestBenchRunsEveryPhase(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"bench", "--duration", "300ms", "--clients", "4", "--doc-bytes", "64"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"REST writes (POST)", "REST point reads (GET)", "raw engine commit, one document", "raw engine commit, one writer",
		"raw engine get, same documents", "Shoal/raw: writes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "first error") {
		t.Errorf("bench reported errors:\n%s", out.String())
	}
}

// --scale fills two collections and times every operation on both: each
// operation's line carries both sizes and their ratio, and each memory line
// a growth in MiB.
func TestBenchScaleTimesEveryOperationAtBothSizes(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"bench", "--scale", "1200", "--samples", "3", "--clients", "4", "--doc-bytes", "64"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, op := range []string{"GET (uncached)", "PUT replace", "PATCH", "DELETE", "query, filter, limit 10", "list collections"} {
		if !regexp.MustCompile(regexp.QuoteMeta(op) + `\s+\S+\s+\S+\s+[0-9.]+x\n`).MatchString(out.String()) {
			t.Errorf("no line with two p50s and a ratio for %q:\n%s", op, out.String())
		}
	}
	if n := len(regexp.MustCompile(`on 1200 documents, (first|again): \S+, resident memory \+[0-9.]+ MiB`).FindAllString(out.String(), -1)); n != 4 {
		t.Errorf("%d memory lines, want 4:\n%s", n, out.String())
	}
	for _, args := range [][]string{{"--scale", "10"}, {"--scale", "2000", "--cluster"}, {"--scale", "2000", "--samples", "0"}} {
		if code := run(append([]string{"bench"}, args...), &out, &errb); code != 2 {
			t.Errorf("bench %v: exit %d, want 2", args, code)
		}
	}
}

// With --mongo-uri the benchmark's node stores in a MongoDB (here the
// in-process FerretDB), its raw comparison is that engine's own commit,
// and the database it made is dropped at the end.
func TestBenchMeasuresTheMongoEngine(t *testing.T) {
	m := storetest.Start(t)
	var out, errb bytes.Buffer
	code := run([]string{"bench", "--mongo-uri", m.URI, "--duration", "200ms", "--clients", "2", "--doc-bytes", "64"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"mongo engine, database shoal_bench_", "REST writes (POST)", "raw engine commit, one document", "Shoal/raw: writes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench output lacks %q:\n%s", want, out.String())
		}
	}
	c, err := mongo.Connect(options.Client().ApplyURI(m.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	names, err := c.ListDatabaseNames(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "shoal_bench_") {
			t.Errorf("the benchmark left its database %s behind", n)
		}
	}
	if code := run([]string{"bench", "--mongo-uri", m.URI, "--cluster"}, &out, &errb); code != 2 {
		t.Errorf("--mongo-uri with --cluster: exit %d, want 2", code)
	}
}

func TestBenchClusterNeedsATarget(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "--cluster", "--dir", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--urls") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestBenchClusterRunsAgainstACluster(t *testing.T) {
	c := testcluster.Start(t, 3)
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, n.URL())
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "--cluster", "--urls", strings.Join(urls, ","), "--token", testnode.AdminToken(t),
		"--duration", "300ms", "--clients", "4", "--doc-bytes", "64", "--lag-writes", "20"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	t.Log(out.String())
	for _, want := range []string{"writes to the master (1)", "writes forwarded (1)", "writes majority", "replication lag",
		"point reads by read concern"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The read-concern phase has a row per concern, each with reads done
	// and none refused (its figures are not asserted).
	for _, rc := range []string{"local", "majority", "linearizable"} {
		row := regexp.MustCompile(`(?m)^read concern ` + rc + ` +[0-9]+ reads/s .* non-2xx 0 .*\(([0-9]+) reads\)$`).FindStringSubmatch(out.String())
		if row == nil {
			t.Errorf("output lacks a row for read concern %s with no non-2xx answers:\n%s", rc, out.String())
		} else if row[1] == "0" {
			t.Errorf("read concern %s did no reads:\n%s", rc, out.String())
		}
	}
}

// A read concern the cluster refuses shows in the read-concern phase: its
// non-2xx answers are counted per concern and by status, not hidden in the
// figures. The server here answers local reads, refuses majority with 400
// and linearizable with 503.
func TestBenchReadConcernShowsRefusals(t *testing.T) {
	var mu sync.Mutex
	written := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			if r.Header.Get("X-Write-Concern") != "majority" {
				http.Error(w, "the documents must be written with majority", 400)
				return
			}
			mu.Lock()
			written++
			id := written
			mu.Unlock()
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"_id":"d%d"}`, id)
			return
		}
		switch r.Header.Get("X-Read-Concern") {
		case "local":
			fmt.Fprint(w, `{"_id":"d1"}`)
		case "majority":
			http.Error(w, "refused", http.StatusBadRequest)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "no master", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	o := benchOptions{token: "t", docBytes: 8, clients: 2, duration: 100 * time.Millisecond}
	results, err := readConcernBench(o, srv.Client(), srv.URL, "u", []string{srv.URL, srv.URL}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	mu.Lock()
	if written != readConcernDocs {
		t.Errorf("%d documents written, want %d", written, readConcernDocs)
	}
	mu.Unlock()
	for i, want := range []struct {
		row, detail string
	}{
		{`(?m)^read concern local +[0-9]+ reads/s .* non-2xx 0 `, ""},
		{`(?m)^read concern majority +[0-9]+ reads/s .* non-2xx [1-9][0-9]* `, `(?m)^  majority: [1-9][0-9]* reads failed \(400 x[1-9][0-9]*\); first: .*status 400`},
		{`(?m)^read concern linearizable +[0-9]+ reads/s .* non-2xx [1-9][0-9]* `, `(?m)^  linearizable: [1-9][0-9]* reads failed \(503 x[1-9][0-9]*\); first: .*status 503`},
	} {
		if !regexp.MustCompile(want.row).MatchString(out.String()) {
			t.Errorf("no row matching %s", want.row)
		}
		if want.detail != "" && !regexp.MustCompile(want.detail).MatchString(out.String()) {
			t.Errorf("no line matching %s", want.detail)
		}
		if rc := readConcerns[i]; (results[i].errors == 0) != (rc == "local") {
			t.Errorf("read concern %s: %d errors", rc, results[i].errors)
		}
	}
	if exitFor(results[0].phaseResult, results[1].phaseResult) == 0 {
		t.Error("refused reads would not fail the bench's exit status")
	}
}

// shoal bench --cluster --compare etcd starts three etcd members of its own
// (Debian's etcd-server on PATH) and drives them and the cluster with the
// same clients, round after round, printing each and the ratio (its
// figures are not asserted: they are measured and written down, see
// docs/benchmarks.md).
func TestBenchComparesWithEtcd(t *testing.T) {
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("SKIPPED: no etcd on PATH; install Debian's etcd-server (apt-get install etcd-server) to run shoal bench --compare etcd and this test")
	}
	n := testnode.StartNew(t)
	// The first run starts etcd of its own; the second, routed through the
	// Go client, uses a running one (--etcd).
	etcdURLs, stop, err := startEtcd(3, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// --cpu-profile was left out silently with --cluster: the clients are
	// profiled too.
	profile := filepath.Join(t.TempDir(), "bench.pprof")
	for _, extra := range [][]string{{"--cpu-profile", profile}, {"--routed", "--etcd", strings.Join(etcdURLs, ",")}} {
		var out, errb bytes.Buffer
		args := append([]string{"bench", "--cluster", "--compare", "etcd", "--urls", n.URL(), "--token", testnode.AdminToken(t),
			"--rounds", "2", "--duration", "200ms", "--clients", "4", "--users", "6", "--doc-bytes", "64"}, extra...)
		code := run(args, &out, &errb)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", extra, code, out.String(), errb.String())
		}
		for _, want := range []string{"round 1: shoal majority", "answered minimally", "round 1: etcd put", "round 2: etcd/Shoal", "writes, etcd/Shoal over 2 rounds",
			"round 1: shoal linearizable get", "round 1: etcd range (linearizable)", "reads, etcd/Shoal over 2 rounds",
			// The CPU the node used (read from its /metrics before and
			// after each phase): 4 clients for 200 ms cost it more than
			// the counter's 10 ms resolution.
			"µs of CPU per operation on its 1 node (",
			// And the CPU the bench's own clients used.
			"µs of CPU per operation on its clients (this bench) (",
			// The busiest of etcd's three members (the node is alone:
			// its busiest is all of it, and no line says so), and the
			// ratio of the busiest servers' CPU per operation.
			"µs of CPU per operation on the busiest member (http://127.0.0.1:", "% of the members')",
			"; on the busiest server ", "writes, CPU per operation on the busiest server, Shoal/etcd over 2 rounds: "} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", extra, want, out.String())
			}
		}
		if routed := strings.Contains(out.String(), "the Go client over every node"); routed != (extra[0] == "--routed") {
			t.Errorf("%v: the output says routed %v:\n%s", extra, routed, out.String())
		}
		if strings.Contains(out.String(), "first error") {
			t.Errorf("%v: bench reported errors:\n%s", extra, out.String())
		}
	}
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Errorf("--cpu-profile with --cluster wrote no profile: %v", err)
	}
	// Every user is written, not only as many as there are clients
	// (client c wrote as user c mod users, 4 of the 6 here).
	admin := n.Client(testnode.AdminToken(t))
	for u := range 6 {
		r := admin.Do("GET", fmt.Sprintf("/v1/users/bench-u%d/collections", u), nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"bench"`) {
			t.Errorf("user bench-u%d of 6 was not written by 4 clients: %d %s", u, r.Status, r.Body)
		}
	}
}

// The clients take the users in turn: with more users than clients, every
// user is written.
func TestTheBenchsClientsWriteAsEveryUser(t *testing.T) {
	o := benchOptions{clients: 32, users: 1000}
	seen := map[int]bool{}
	for c := range o.clients {
		for k := range 1000 {
			seen[benchUser(o, c, k)] = true
		}
	}
	if len(seen) != o.users {
		t.Fatalf("32 clients wrote as %d of 1,000 users", len(seen))
	}
}

func TestBenchCompareNeedsClusterAndEtcd(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--compare", "etcd"},
		{"bench", "--cluster", "--compare", "redis"},
		{"bench", "--cluster", "--compare", "etcd", "--rounds", "0"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, %q; want 2 and why", args, code, errb.String())
		}
	}
}

// The etcd members bench starts end with it, however it ends: a bench
// killed with SIGKILL (or by a broken pipe: `shoal bench ... | head`)
// once left three members running. A child process of this test starts
// them as bench does and is killed; the members must stop answering.
func TestEtcdMembersEndWithTheBench(t *testing.T) {
	if os.Getenv("SHOAL_TEST_ETCD_CHILD") == "1" {
		urls, _, err := startEtcd(3, os.Stderr)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(strings.Join(urls, ","))
		// Until killed; or, should the test end without killing it, until
		// its stdin closes (then the members end with it all the same).
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("SKIPPED: no etcd on PATH; install Debian's etcd-server (apt-get install etcd-server) to run this test")
	}
	child := exec.Command(os.Args[0], "-test.run=^TestEtcdMembersEndWithTheBench$")
	child.Env = append(os.Environ(), "SHOAL_TEST_ETCD_CHILD=1", "TMPDIR="+t.TempDir()) // the members' data goes with the test
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := child.StdinPipe() // open until the child is killed
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("the child started no etcd: %q %v", line, err)
	}
	urls := strings.Split(strings.TrimSpace(line), ",")
	t.Cleanup(func() { // should the members outlive the check below
		for _, pid := range membersServing(urls) {
			t.Logf("killing etcd member %d, left running", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	child.Process.Kill()
	child.Wait()
	testnode.Eventually(t, 30*time.Second, "the etcd members ended with the process that started them", func() (bool, string) {
		left := membersServing(urls)
		return len(left) == 0, fmt.Sprintf("still running: %v", left)
	})
}

// membersServing lists the processes whose command line serves one of
// urls to clients (an ended process's command line is empty).
func membersServing(urls []string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmdline := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		for _, u := range urls {
			if strings.Contains(cmdline, "--listen-client-urls "+u+" ") {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
