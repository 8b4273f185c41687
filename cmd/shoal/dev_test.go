package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/devcerts"
	"github.com/shoal-db/shoal/internal/devcluster"
	"github.com/shoal-db/shoal/internal/nodetls"
)

// The internals of `shoal dev` are tested in internal/devcluster; these
// tests run the command.
func TestAddNode(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := dev([]string{"add-node", "--dir", dir}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "start `shoal dev --dir "+dir+"` first") {
		t.Fatalf("without peers.json: exit %d: %s", code, errb.String())
	}
	path := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(path, devcluster.FormatPeerList(devcluster.LoopbackPeerList(3, 8081, 7947, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, want := range []cluster.Peer{
		{ID: "node4", URL: "http://127.0.0.1:8084", Gossip: "127.0.0.1:7950", Sharding: true, Replica: true},
		{ID: "node5", URL: "http://127.0.0.1:8085", Gossip: "127.0.0.1:7951", Sharding: true, Replica: true},
	} {
		out.Reset()
		errb.Reset()
		if code := dev([]string{"add-node", "--dir", dir}, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		if !strings.Contains(out.String(), "added "+want.ID+" to "+path) || !strings.Contains(out.String(), want.URL) {
			t.Fatalf("output: %s", out.String())
		}
		l, err := cluster.ParsePeerList(devReadFile(t, path), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Peers) != 4+i {
			t.Fatalf("%d peers", len(l.Peers))
		}
		if got, _ := l.Get(want.ID); got != want {
			t.Fatalf("added %+v, want %+v", got, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	os.WriteFile(path, []byte(`{"peers":[{"id":"a"}]}`), 0o644)
	if code := dev([]string{"add-node", "--dir", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "not a valid peer list") {
		t.Fatalf("broken list: exit %d: %s", code, errb.String())
	}
}

func TestDevRefusesBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dev([]string{"--nodes", "0", "--dir", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--nodes 0") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := dev([]string{"addnode"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "add-node") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestDevRefusesPortsInUse(t *testing.T) {
	hp, gp := freeDevPorts(t, 2)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", hp+1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out, errb bytes.Buffer
	code := dev([]string{"--nodes", "2", "--dir", t.TempDir(), "--http-port", strconv.Itoa(hp), "--gossip-port", strconv.Itoa(gp)}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), fmt.Sprintf("node2's HTTP address 127.0.0.1:%d is in use", hp+1)) {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func devReadFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func devReadTrim(t *testing.T, path string) string {
	return strings.TrimSpace(string(devReadFile(t, path)))
}

// TestDevClusterAsker checks what the drain watch of internal/devcluster
// reads from a node's GET /v1/cluster, and the few words it logs when the
// node does not answer.
func TestDevClusterAsker(t *testing.T) {
	const holding = `{"node":"x","partitions":{"count":4,"masters":{"a":3,"x":1},"without_master":0,"copies":{"x":2}},"moves":[{"partition":3,"to":"a"}]}`
	tokens := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens <- r.Header.Get("Authorization")
		if r.URL.Path != "/v1/cluster" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(holding))
	}))
	t.Cleanup(srv.Close)
	ask := devClusterAsker("tok", nil)
	st, err := ask(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-tokens; got != "Bearer tok" {
		t.Errorf("asked with Authorization %q, want the admin token", got)
	}
	ps := st.Partitions
	if st.Node != "x" || ps == nil || ps.Count != 4 || ps.Masters["x"] != 1 || ps.Copies["x"] != 2 || len(st.Moves) != 1 || st.Moves[0].Partition != 3 {
		t.Fatalf("read %+v (partitions %+v)", st, ps)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if _, err := ask(context.Background(), closed.URL); err == nil || err.Error() != "connection refused" {
		t.Errorf("a closed node: %v, want \"connection refused\"", err)
	}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"title":"Unauthorized","detail":"bad token"}`, http.StatusUnauthorized)
	}))
	t.Cleanup(refusing.Close)
	if _, err := ask(context.Background(), refusing.URL); err == nil || err.Error() != "GET /v1/cluster answered status 401: bad token" {
		t.Errorf("a refusing node: %v", err)
	}
}

// --- end to end: real `shoal dev` processes ---

// devBannerEnd ends what `shoal dev` prints once every node is ready.
const devBannerEnd = "Ctrl-C stops every node."

// devOutput collects a process's output while tests read it.
type devOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *devOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *devOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freeDevPorts finds bases for n nodes' HTTP ports (TCP) and gossip ports
// (TCP and UDP) that are all free now, in 20000-32000: below Linux's usual
// ephemeral range (32768-60999), so outgoing connections do not take them
// before the nodes bind them.
func freeDevPorts(t *testing.T, n int) (httpBase, gossipBase int) {
	t.Helper()
	for range 200 {
		hp := 20000 + rand.IntN(12000-n)
		gp := 20000 + rand.IntN(12000-n)
		if devcluster.CheckFlags(n, hp, gp) != nil {
			continue
		}
		free := true
		for i := range n {
			free = free && devcluster.TCPFree(fmt.Sprintf("127.0.0.1:%d", hp+i)) == nil &&
				devcluster.TCPFree(fmt.Sprintf("127.0.0.1:%d", gp+i)) == nil && devcluster.UDPFree(fmt.Sprintf("127.0.0.1:%d", gp+i)) == nil
		}
		if free {
			return hp, gp
		}
	}
	t.Fatal("no free port range found")
	return 0, 0
}

// devProcess is a `shoal dev` run by a test.
type devProcess struct {
	t                *testing.T
	cmd              *exec.Cmd
	dir              string
	httpBase, gossip int
	out              *devOutput
	exited           chan struct{} // closed when cmd.Wait returned
	waitErr          error
	pids             map[string]int // node id -> pid, from the pid files
	tls              bool           // --tls: https urls, the dev CA
	hc               *http.Client   // to the nodes, once the dev CA exists (TLS)
}

// client is an HTTP client of the nodes (with TLS, trusting the dev CA,
// nil until `shoal dev` has written it).
func (d *devProcess) client() *http.Client {
	if !d.tls {
		return &http.Client{Timeout: 2 * time.Second}
	}
	if d.hc == nil {
		m, err := nodetls.Load(nodetls.Files{CA: filepath.Join(devcluster.CertDir(d.dir), devcerts.CAFile)}, nil)
		if err != nil {
			return nil
		}
		d.hc = &http.Client{Timeout: 2 * time.Second, Transport: m.Transport()}
	}
	return d.hc
}

// startDev runs `shoal dev` with n nodes (and room for extra more) on free
// loopback ports, and more flags, and stops it and its children when the
// test ends.
func startDev(t *testing.T, n, extra int, flags ...string) *devProcess {
	t.Helper()
	hp, gp := freeDevPorts(t, n+extra)
	d := &devProcess{t: t, dir: t.TempDir(), httpBase: hp, gossip: gp, out: &devOutput{}, exited: make(chan struct{}), pids: map[string]int{},
		tls: slices.Contains(flags, "--tls")}
	d.cmd = shoalCmd(t, append([]string{"dev", "--nodes", strconv.Itoa(n), "--dir", d.dir, "--http-port", strconv.Itoa(hp), "--gossip-port", strconv.Itoa(gp)}, flags...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.exited
		d.recordPIDs()
		for id, pid := range d.pids {
			if devOurProcess(pid) {
				t.Logf("killing %s (pid %d), left running", id, pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("shoal dev output:\n%s", d.out.String())
		}
	})
	return d
}

func (d *devProcess) url(i int) string {
	scheme := "http"
	if d.tls {
		scheme = "https"
	}
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, d.httpBase+i-1)
}

// recordPIDs reads the pid files `shoal dev` keeps while its children run.
func (d *devProcess) recordPIDs() {
	files, _ := filepath.Glob(filepath.Join(d.dir, "*.pid"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			d.pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
}

// waitReady waits until nodes 1..n have pid files and answer /readyz.
func (d *devProcess) waitReady(n int, timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d.recordPIDs()
		ready := len(d.pids) >= n
		for i := 1; ready && i <= n; i++ {
			ready = d.pids["node"+strconv.Itoa(i)] > 0 && devHTTPStatus(d.client(), d.url(i)+"/readyz", "") == http.StatusOK
		}
		if ready {
			return
		}
		select {
		case <-d.exited:
			d.t.Fatalf("shoal dev exited (%v) before the nodes were ready", d.waitErr)
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("the nodes were not ready within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond) // polling other processes: nothing to wait on
	}
}

// waitOutput waits until `shoal dev` has printed want.
func (d *devProcess) waitOutput(want string, timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(d.out.String(), want) {
		select {
		case <-d.exited:
			d.t.Fatalf("shoal dev exited (%v) before printing %q", d.waitErr, want)
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("shoal dev did not print %q within %s", want, timeout)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's output
	}
}

// waitCluster waits until node1's /v1/cluster shows n members, all UP. It
// returns false if the node has no /v1/cluster yet.
func (d *devProcess) waitCluster(n int, timeout time.Duration) bool {
	d.t.Helper()
	token := devReadTrim(d.t, filepath.Join(d.dir, "admin.token"))
	deadline := time.Now().Add(timeout)
	var last string
	for {
		st, code, err := devGetCluster(d.client(), d.url(1), token)
		switch {
		case code == http.StatusNotFound:
			return false
		case err == nil && code == http.StatusOK:
			up := 0
			for _, m := range st.Members {
				if m.State == "UP" {
					up++
				}
			}
			if up == n && len(st.Members) == n {
				return true
			}
			last = fmt.Sprintf("%d members, %d UP: %+v", len(st.Members), up, st.Members)
		default:
			last = fmt.Sprintf("status %d, %v", code, err)
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("node1 did not see %d members UP within %s; last: %s", n, timeout, last)
		}
		time.Sleep(200 * time.Millisecond) // polling other processes: nothing to wait on
	}
}

func devGetCluster(hc *http.Client, base, token string) (client.ClusterStatus, int, error) {
	if hc == nil {
		return client.ClusterStatus{}, 0, errors.New("no client yet: the dev CA is not written")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := client.New(base, token, client.WithHTTPClient(hc)).Cluster(ctx)
	var he *client.HTTPError
	var ae *client.AnswerError
	switch {
	case err == nil:
		return st, http.StatusOK, nil
	case errors.As(err, &he):
		return st, he.StatusCode, nil
	case errors.As(err, &ae):
		return st, http.StatusOK, err
	default:
		return st, 0, err
	}
}

func devHTTPStatus(c *http.Client, url, token string) int {
	if c == nil {
		return 0
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// signalAndWait signals `shoal dev` and waits for it to exit.
func (d *devProcess) signalAndWait(sig syscall.Signal, timeout time.Duration) error {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.exited:
		return d.waitErr
	case <-time.After(timeout):
		d.t.Fatalf("shoal dev did not exit within %s after %v", timeout, sig)
		return nil
	}
}

// devOurProcess reports whether pid is a live process of this test binary, so
// cleanup never signals a recycled pid.
func devOurProcess(pid int) bool {
	exe, err := os.Executable()
	if err != nil {
		return false
	}
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && target == exe && !devProcessGone(pid, true)
}

// devProcessGone reports whether pid no longer runs: kill(pid, 0) fails with
// ESRCH, or (when zombieOK) it is a zombie a parent other than ours has not
// reaped yet: exited, holding nothing.
func devProcessGone(pid int, zombieOK bool) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	if !zombieOK {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// checkAllGone waits until every recorded child is gone and every port of
// nodes 1..n is free again.
func (d *devProcess) checkAllGone(n int, zombieOK bool, timeout time.Duration) {
	d.t.Helper()
	if len(d.pids) < n {
		d.t.Fatalf("recorded %d child pids, want %d: %v", len(d.pids), n, d.pids)
	}
	deadline := time.Now().Add(timeout)
	for {
		var alive []string
		for id, pid := range d.pids {
			if !devProcessGone(pid, zombieOK) {
				alive = append(alive, fmt.Sprintf("%s (pid %d)", id, pid))
			}
		}
		var busy []string
		for i := range n {
			h, g := fmt.Sprintf("127.0.0.1:%d", d.httpBase+i), fmt.Sprintf("127.0.0.1:%d", d.gossip+i)
			if err := devcluster.TCPFree(h); err != nil {
				busy = append(busy, "tcp "+h)
			}
			if err := devcluster.TCPFree(g); err != nil {
				busy = append(busy, "tcp "+g)
			}
			if err := devcluster.UDPFree(g); err != nil {
				busy = append(busy, "udp "+g)
			}
		}
		if len(alive) == 0 && len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("after %s: still running %v; ports still in use %v", timeout, alive, busy)
		}
		time.Sleep(100 * time.Millisecond) // polling other processes: nothing to wait on
	}
}

// With --tls: the nodes serve HTTPS with the dev CA's certificates and
// require each other's (the banner comes after a probe write through
// every node, so node-to-node calls and forwards work), and `shoal status
// --dir` finds the CA by itself.
func TestDevStartsClusterAndStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	d := startDev(t, 3, 0, "--tls")
	d.waitReady(3, 90*time.Second)
	d.waitOutput(devBannerEnd, 30*time.Second)
	if out := d.out.String(); !strings.Contains(out, "curl --cacert") || !strings.Contains(out, d.url(1)) || !strings.HasPrefix(d.url(1), "https://") {
		t.Errorf("the banner does not show the https urls and curl --cacert")
	}
	clustered := d.waitCluster(3, 90*time.Second)
	if clustered {
		// `shoal status --dir` works with no other flag against the live cluster.
		t.Setenv("SHOAL_URL", "")
		t.Setenv("SHOAL_TOKEN", "")
		var out, errb bytes.Buffer
		if code := status([]string{"--dir", d.dir}, &out, &errb); code != 0 || !strings.Contains(out.String(), "3 members: 3 UP") ||
			!strings.Contains(out.String(), "* node1") {
			t.Fatalf("shoal status: exit %d\n%s%s", code, out.String(), errb.String())
		}
		t.Logf("shoal status --dir:\n%s", out.String())
	}
	if got := devReadTrim(t, filepath.Join(d.dir, "admin.token")); !strings.Contains(d.out.String(), got) {
		t.Errorf("the banner does not show the admin token")
	}
	d.recordPIDs()
	if err := d.signalAndWait(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("shoal dev exited with %v after SIGTERM, want 0", err)
	}
	d.checkAllGone(3, false, 10*time.Second)
	for i := 1; i <= 3; i++ {
		if _, err := os.Stat(filepath.Join(d.dir, fmt.Sprintf("node%d.pid", i))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("node%d.pid left behind: %v", i, err)
		}
	}
	if !strings.Contains(d.out.String(), "every node stopped cleanly") {
		t.Errorf("no clean stop in the output")
	}
	if !clustered {
		t.Skip("the cluster package has no GET /v1/cluster yet (404): start and clean stop checked, membership not")
	}
}

func TestDevChildrenDieWithSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	d := startDev(t, 3, 0)
	d.waitReady(3, 90*time.Second)
	d.waitOutput(devBannerEnd, 30*time.Second)
	d.recordPIDs()
	err := d.signalAndWait(syscall.SIGKILL, 30*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("shoal dev did not die by SIGKILL: %v", err)
	}
	// The children are no longer `shoal dev`'s: whoever adopts them reaps
	// them, so a zombie counts as gone.
	d.checkAllGone(3, true, 30*time.Second)
}

func TestDevStartsAddedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	d := startDev(t, 2, 1)
	d.waitReady(2, 90*time.Second)
	d.waitOutput(devBannerEnd, 30*time.Second)
	var out, errb bytes.Buffer
	if code := dev([]string{"add-node", "--dir", d.dir}, &out, &errb); code != 0 {
		t.Fatalf("add-node: exit %d: %s", code, errb.String())
	}
	d.waitReady(3, 90*time.Second)
	d.waitOutput("node3 joined the peer list: starting it", 10*time.Second)
	d.waitOutput("node3 is ready at "+d.url(3), 30*time.Second)
	clustered := d.waitCluster(3, 90*time.Second)
	if err := d.signalAndWait(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("shoal dev exited with %v after SIGTERM, want 0", err)
	}
	d.checkAllGone(3, false, 10*time.Second)
	if !clustered {
		t.Skip("the cluster package has no GET /v1/cluster yet (404): node3 started and stopped, membership not checked")
	}
}

func TestDevKeepsOthersWhenAChildDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	d := startDev(t, 2, 0)
	d.waitReady(2, 90*time.Second)
	d.waitOutput(devBannerEnd, 30*time.Second) // before it, a node that dies fails the start
	if err := syscall.Kill(d.pids["node2"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitOutput("node2 exited unexpectedly (signal: killed)", 30*time.Second)
	if code := devHTTPStatus(d.client(), d.url(1)+"/readyz", ""); code != http.StatusOK {
		t.Fatalf("node1 does not answer after node2 died: %d", code)
	}
	err := d.signalAndWait(syscall.SIGTERM, 30*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("shoal dev exited with %v; want exit status 1 since node2 did not exit 0", err)
	}
	d.checkAllGone(2, false, 10*time.Second)
}

func TestRemoveNode(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	run := func(args ...string) int {
		out.Reset()
		errb.Reset()
		return dev(append([]string{"remove-node"}, args...), &out, &errb)
	}
	if code := run("node1", "--dir", dir); code != 1 || !strings.Contains(errb.String(), "there is no peer list at "+filepath.Join(dir, "peers.json")) {
		t.Fatalf("without peers.json: exit %d: %s", code, errb.String())
	}
	path := filepath.Join(dir, "peers.json")
	l := devcluster.LoopbackPeerList(4, 8081, 7947, false) // node1..3 vote
	l.Peers[1].Sharding = false                            // node2 holds no partitions of its own
	if err := os.WriteFile(path, devcluster.FormatPeerList(l), 0o640); err != nil {
		t.Fatal(err)
	}
	peers := func() []string {
		t.Helper()
		l, err := cluster.ParsePeerList(devReadFile(t, path), "")
		if err != nil {
			t.Fatal(err)
		}
		return devcluster.SortedIDs(l)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no id", []string{"--dir", dir}, 2, "name the node to remove"},
		{"two ids", []string{"node3", "node4", "--dir", dir}, 2, `unexpected argument "node4": remove one node at a time`},
		{"unknown id", []string{"node9", "--dir", dir}, 1, `has no peer "node9"; its peers are node1, node2, node3, node4`},
		{"bad flag", []string{"node4", "--nodes", "3"}, 2, "flag provided but not defined: -nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := run(tc.args...); code != tc.code || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out.String(), errb.String(), tc.code, tc.want)
			}
			if got := peers(); len(got) != 4 {
				t.Fatalf("the peer list changed: %v", got)
			}
		})
	}

	// A non-voter, with --dir before the id: removed without a warning.
	if code := run("--dir", dir, "node4"); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"removed node4 from " + path, "keeps node4 running while it hands its partitions and copies over",
		"its data stays in " + filepath.Join(dir, "node4"), "does not start again unless"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if got := strings.Join(peers(), ","); got != "node1,node2,node3" {
		t.Fatalf("peers after removing node4: %s", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("the file's mode was not kept: %v %v", fi, err)
	}

	// A voter: removed, with a warning.
	if code := run("node3", "--dir", dir); code != 0 || !strings.Contains(errb.String(), "warning: node3 was a lease voter: the voter set changes one member at a time") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// node1 is the last sharding peer now.
	if code := run("node1", "--dir", dir); code != 1 || !strings.Contains(errb.String(), "node1 is the last sharding peer") {
		t.Fatalf("last sharding peer: exit %d: %s", code, errb.String())
	}
	// The last voter is refused even when another peer shards.
	l = cluster.PeerList{Peers: []cluster.Peer{
		{ID: "node1", URL: "http://127.0.0.1:8081", Gossip: "127.0.0.1:7947", Sharding: true, Voter: true},
		{ID: "node2", URL: "http://127.0.0.1:8082", Gossip: "127.0.0.1:7948", Sharding: true},
	}}
	if err := os.WriteFile(path, devcluster.FormatPeerList(l), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run("node1", "--dir", dir); code != 1 || !strings.Contains(errb.String(), "node1 is the last lease voter") {
		t.Fatalf("last voter: exit %d: %s", code, errb.String())
	}
	if code := run("node2", "--dir", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := strings.Join(peers(), ","); got != "node1" {
		t.Fatalf("peers: %s", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	os.WriteFile(path, []byte(`{"peers":[{"id":"a"}]}`), 0o644)
	if code := run("a", "--dir", dir); code != 1 || !strings.Contains(errb.String(), "not a valid peer list") {
		t.Fatalf("broken list: exit %d: %s", code, errb.String())
	}
}

func TestDevStopsRemovedNodeOnceDrained(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster and drains a node")
	}
	d := startDev(t, 3, 0)
	d.waitReady(3, 90*time.Second)
	d.waitOutput(devBannerEnd, 30*time.Second)
	if !d.waitCluster(3, 90*time.Second) {
		t.Skip("the cluster package has no GET /v1/cluster yet (404)")
	}
	token := devReadTrim(t, filepath.Join(d.dir, "admin.token"))
	d.waitPartitions(token, 90*time.Second, "every partition with a master, some on node3", func(ps *api.PartitionSummary) bool {
		return ps.WithoutMaster == 0 && ps.Masters["node3"] > 0
	})
	const users = 20
	for i := range users {
		if code := devPost(t, d.url(1)+fmt.Sprintf("/v1/users/u%d/collections/notes/documents", i), token, `{"n":1}`); code != http.StatusCreated {
			t.Fatalf("writing u%d's document: status %d", i, code)
		}
	}
	d.recordPIDs()
	pid := d.pids["node3"]

	var out, errb bytes.Buffer
	if code := dev([]string{"remove-node", "node3", "--dir", d.dir}, &out, &errb); code != 0 {
		t.Fatalf("remove-node: exit %d: %s", code, errb.String())
	}
	d.waitOutput("node3 left the peer list: it keeps running while it hands its partitions and copies over", 10*time.Second)
	d.waitOutput("node3 drained and was stopped (exit status 0)", 120*time.Second)
	logs := d.out.String()
	if strings.Index(logs, "node3 drained: it masters no partition and holds no copy") < strings.Index(logs, "node3 left the peer list") {
		t.Fatalf("node3 was stopped before it drained")
	}
	if !devProcessGone(pid, false) {
		t.Fatalf("node3 (pid %d) still runs", pid)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "node3.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node3.pid left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "node3", "pebble")); err != nil {
		t.Errorf("node3's data is gone: %v", err)
	}
	d.waitPartitions(token, 30*time.Second, "node3 holding nothing in node1's table", func(ps *api.PartitionSummary) bool {
		return ps.WithoutMaster == 0 && ps.Masters["node3"] == 0 && ps.Copies["node3"] == 0
	})
	for i := range users {
		req, _ := http.NewRequest(http.MethodGet, d.url(2)+fmt.Sprintf("/v1/users/u%d/collections", i), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `{"name":"notes","count":1}`) {
			t.Errorf("u%d's collections after the drain: status %d, %s", i, resp.StatusCode, body)
		}
	}
	if err := d.signalAndWait(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("shoal dev exited with %v after SIGTERM, want 0", err)
	}
	d.checkAllGone(3, false, 10*time.Second)
}

// waitPartitions waits until node1's partition summary satisfies ok.
func (d *devProcess) waitPartitions(token string, timeout time.Duration, what string, ok func(*api.PartitionSummary) bool) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		st, code, err := devGetCluster(d.client(), d.url(1), token)
		if err == nil && code == http.StatusOK && st.Partitions != nil {
			if ok(st.Partitions) {
				return
			}
			last = fmt.Sprintf("%+v", *st.Partitions)
		} else {
			last = fmt.Sprintf("status %d, %v", code, err)
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("node1 did not show %s within %s; last: %s", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond) // polling other processes: nothing to wait on
	}
}

func devPost(t *testing.T, url, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
