package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func needNetns(t *testing.T) {
	t.Helper()
	if ok, why := netnsUsable(); !ok {
		t.Skipf("needs network namespaces: %s", why)
	}
}

// echoIn serves, in node id's namespace, one line back per connection:
// the node's id.
func echoIn(t *testing.T, nw *Network, id string) string {
	t.Helper()
	l, err := nw.Listen(id, "tcp", nw.Addr(id)+":9000")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, id)
			c.Close()
		}
	}()
	return l.Addr().String()
}

// reach dials addr with dial and reads the one line answered, giving up
// after patience.
func reach(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, patience time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(patience))
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}

// Two node namespaces and the clients': the clients reach a listener in
// each, the nodes reach each other until the link between them is cut,
// the clients still reach both while it is, the heal restores it, and
// Close leaves no namespace behind.
func TestNetworkCutAndHeal(t *testing.T) {
	needNetns(t)
	ctx := context.Background()
	nw, err := NewNetwork([]string{"node1", "node2"})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			nw.Close()
		}
	})
	if got := len(nw.Namespaces()); got != 4 {
		t.Fatalf("%d namespaces made, want 4 (hub, clients, two nodes): %v", got, nw.Namespaces())
	}
	a1, a2 := echoIn(t, nw, "node1"), echoIn(t, nw, "node2")
	fromNode := func(id string) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nw.DialFrom(ctx, id, network, addr)
		}
	}
	expect := func(step, who string, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, want string) {
		t.Helper()
		if want == "" {
			// A cut drops packets silently: the dial finds no answer
			// (and no local error) before it gives up.
			got, err := reach(ctx, dial, addr, time.Second)
			if err == nil {
				t.Fatalf("%s: %s reached %s (answered %q), want the link cut", step, who, addr, got)
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("%s: %s dialing %s: %v, want no answer (a timeout)", step, who, addr, err)
			}
			return
		}
		got, err := reach(ctx, dial, addr, 5*time.Second)
		if err != nil || got != want {
			t.Fatalf("%s: %s dialing %s: %q, %v; want %q", step, who, addr, got, err, want)
		}
	}
	// The addresses live only in the namespaces, none in the test's own.
	own, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range own {
		if strings.HasPrefix(a.String(), netnsSubnet) {
			t.Fatalf("the test's own namespace has address %s", a)
		}
	}
	for _, step := range []string{"before the cut", "cut", "healed"} {
		switch step {
		case "cut":
			if err := nw.Cut([][2]string{{"node1", "node2"}}); err != nil {
				t.Fatal(err)
			}
		case "healed":
			if err := nw.HealAll(); err != nil {
				t.Fatal(err)
			}
			if c := nw.Cuts(); len(c) != 0 {
				t.Fatalf("cuts left after HealAll: %v", c)
			}
		}
		expect(step, "the clients", nw.DialContext, a1, "node1")
		expect(step, "the clients", nw.DialContext, a2, "node2")
		want1, want2 := "node1", "node2"
		if step == "cut" {
			want1, want2 = "", ""
		}
		expect(step, "node1", fromNode("node1"), a2, want2)
		expect(step, "node2", fromNode("node2"), a1, want1)
	}
	names := nw.Namespaces()
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	left, err := ListNetns()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		if strings.HasPrefix(l, nw.prefix) {
			t.Errorf("namespace %s is left after Close (made: %v)", l, names)
		}
	}
	if _, err := nw.DialContext(ctx, "tcp", a1); !errors.Is(err, errNetnsClosed) {
		t.Fatalf("dialing through a closed network: %v, want %v", err, errNetnsClosed)
	}
}

// A namespace of the suite's whose process is gone is swept; one of a
// live process is not.
func TestSweepNetns(t *testing.T) {
	needNetns(t)
	// A process that has exited: its pid is free (until reused, which
	// the sweep cannot tell from a live run and so leaves alone).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	if err := syscall.Kill(dead, 0); !errors.Is(err, syscall.ESRCH) {
		t.Skipf("pid %d of an exited process is in use again", dead)
	}
	gone := fmt.Sprintf("%s%d-1-node1", netnsPrefix, dead)
	live := fmt.Sprintf("%s%d-1-node1", netnsPrefix, os.Getppid())
	for _, name := range []string{gone, live} {
		if err := runIP("netns", "add", name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { runIP("netns", "delete", name) })
	}
	swept, err := SweepNetns()
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0] != gone {
		t.Fatalf("swept %v, want only %s", swept, gone)
	}
	left, err := ListNetns()
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, l := range left {
		has[l] = true
	}
	if has[gone] || !has[live] {
		t.Fatalf("after the sweep: %v; want %s gone and %s kept", left, gone, live)
	}
}

// Nodes run inside their own namespace, as the very process the cluster
// signals; when the context ends, every namespace goes with the nodes.
func TestClusterInNetns(t *testing.T) {
	needNetns(t)
	dir := t.TempDir()
	// A stand-in for `shoal serve`: it notes its pid and network
	// namespace, then stays (exec keeps the pid).
	bin := filepath.Join(dir, "fake-shoal")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho $$ > \"$DATA_DIR/pid\"\nreadlink /proc/self/ns/net > \"$DATA_DIR/netns\"\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := StartCluster(ctx, ClusterOptions{Binary: bin, Nodes: 2, Netns: true, Dir: filepath.Join(dir, "cluster")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(false)
	names := c.Net.Namespaces()
	for _, n := range c.Nodes {
		var pid, ns string
		if _, err := await(ctx, 10*time.Second, n.ID+" noting its pid and namespace", func() (bool, string) {
			p, err1 := os.ReadFile(filepath.Join(n.DataDir, "pid"))
			s, err2 := os.ReadFile(filepath.Join(n.DataDir, "netns"))
			pid, ns = strings.TrimSpace(string(p)), strings.TrimSpace(string(s))
			return err1 == nil && err2 == nil && pid != "" && ns != "", fmt.Sprint(err1, err2)
		}); err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		want := n.cmd.Process.Pid
		n.mu.Unlock()
		if pid != fmt.Sprint(want) {
			t.Fatalf("%s runs as pid %s, the cluster signals %d", n.ID, pid, want)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/run/netns", c.Net.prefix+n.ID), &st); err != nil {
			t.Fatal(err)
		}
		if wantNS := fmt.Sprintf("net:[%d]", st.Ino); ns != wantNS {
			t.Fatalf("%s runs in namespace %s, want its own %s", n.ID, ns, wantNS)
		}
		if n.URL() != "http://"+c.Net.Addr(n.ID)+":8080" {
			t.Fatalf("%s's URL is %s", n.ID, n.URL())
		}
	}
	cancel()
	if _, err := await(context.Background(), 10*time.Second, "no namespace left once the context ended", func() (bool, string) {
		left, err := ListNetns()
		if err != nil {
			return false, err.Error()
		}
		for _, l := range left {
			for _, m := range names {
				if l == m {
					return false, l + " is left"
				}
			}
		}
		return true, ""
	}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n.Running() {
			t.Fatalf("%s still runs after the context ended", n.ID)
		}
	}
}
