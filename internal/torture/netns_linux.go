package torture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Network is the network namespaces of one cluster: a hub holding a
// bridge, one namespace per node and one for the suite's own clients,
// each joined to the bridge by a veth pair whose other end is in the hub.
// Every address and interface lives inside these namespaces; nothing is
// added to the namespace the suite runs in.
//
// A link between two nodes is cut on both sides with a permanent
// neighbour entry that gives the other node's address a "sink" MAC
// address, which the hub's bridge knows to be on the sender's own port
// and so drops: the packets vanish as in a real partition (connections
// time out; no sender gets an error), and the clients, whose neighbour
// entries are untouched, still reach every node. (A blackhole route
// would do too, but a sender gets EINVAL at once, which a real partition
// never gives; this kernel has no tc qdiscs to drop with.)
//
// Names are netnsPrefix, the pid of the process that made them, a count
// and the member ("shoalt4242-1-node1"): SweepNetns removes those of a
// process that is gone, and only those.
type Network struct {
	// Swept are the namespaces of dead runs NewNetwork removed first.
	Swept []string

	prefix string // "shoalt<pid>-<k>-"
	hub    string
	client *netns
	nodes  map[string]*netns

	mu     sync.Mutex
	made   []string           // every namespace made, the hub last
	cuts   map[[2]string]bool // cut links, each pair in order
	closed bool
}

// netns is one namespace with its address on the bridge's subnet and an
// open handle to enter it with.
type netns struct {
	name, addr string
	sink       string // the MAC its packets to a cut link are sent to

	mu sync.RWMutex // held to enter by fd, which Close closes and clears
	fd *os.File
}

// netnsPrefix starts the name of every namespace the suite makes.
const netnsPrefix = "shoalt"

// The bridge's subnet: every Network has a hub of its own, so the same
// addresses serve every run, also concurrent ones.
const (
	netnsSubnet     = "10.213.0."
	netnsClientAddr = netnsSubnet + "2"
)

var netnsCount atomic.Int64

var errNetnsClosed = errors.New("the network is closed")

// ipPath is iproute2's ip, or "" if it cannot be found.
func ipPath() string { return findTool("ip") }

// bridgePath is iproute2's bridge, or "".
func bridgePath() string { return findTool("bridge") }

func findTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// netnsUsable says whether this process can make network namespaces, and
// why (not).
func netnsUsable() (bool, string) {
	if os.Geteuid() != 0 {
		return false, fmt.Sprintf("not running as root (uid %d): network namespaces need root", os.Geteuid())
	}
	ip, br := ipPath(), bridgePath()
	if ip == "" || br == "" {
		return false, "iproute2's ip and bridge are not both installed"
	}
	return true, "running as root with " + ip + " and " + br
}

// NewNetwork makes the namespaces for nodes ids (first removing those
// that a process no longer alive left behind). On error nothing it made
// is left.
func NewNetwork(ids []string) (nw *Network, err error) {
	if ok, why := netnsUsable(); !ok {
		return nil, errors.New(why)
	}
	if len(ids) > 240 {
		return nil, fmt.Errorf("%d nodes: the namespaced network holds at most 240", len(ids))
	}
	swept, err := SweepNetns()
	if err != nil {
		return nil, err
	}
	nw = &Network{Swept: swept, prefix: fmt.Sprintf("%s%d-%d-", netnsPrefix, os.Getpid(), netnsCount.Add(1)), nodes: map[string]*netns{}, cuts: map[[2]string]bool{}}
	defer func() {
		if err != nil {
			nw.Close()
			nw = nil
		}
	}()
	nw.hub = nw.prefix + "hub"
	if err := nw.add(nw.hub); err != nil {
		return nw, err
	}
	if err := runIP("-n", nw.hub, "link", "add", "br0", "type", "bridge"); err != nil {
		return nw, err
	}
	if err := runIP("-n", nw.hub, "link", "set", "br0", "up"); err != nil {
		return nw, err
	}
	if nw.client, err = nw.member("client", "vc", netnsClientAddr, ""); err != nil {
		return nw, err
	}
	for i, id := range ids {
		if nw.nodes[id], err = nw.member(id, fmt.Sprintf("vn%d", i+1), fmt.Sprintf("%s%d", netnsSubnet, 10+i+1), fmt.Sprintf("02:53:68:00:00:%02x", i+1)); err != nil {
			return nw, err
		}
	}
	return nw, nil
}

// add makes namespace name, with its loopback up (the node's own
// listeners may use it).
func (nw *Network) add(name string) error {
	if err := runIP("netns", "add", name); err != nil {
		return err
	}
	nw.mu.Lock()
	nw.made = append([]string{name}, nw.made...) // the hub ends up last
	nw.mu.Unlock()
	return runIP("-n", name, "link", "set", "lo", "up")
}

// member makes a namespace for who, joined to the hub's bridge by a veth
// pair (hubEnd in the hub, eth0 in the member) with address addr/24; the
// bridge drops what is sent to sink (if any) from that port.
func (nw *Network) member(who, hubEnd, addr, sink string) (*netns, error) {
	ns := &netns{name: nw.prefix + who, addr: addr, sink: sink}
	if err := nw.add(ns.name); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"-n", nw.hub, "link", "add", hubEnd, "type", "veth", "peer", "name", "eth0", "netns", ns.name},
		{"-n", nw.hub, "link", "set", hubEnd, "master", "br0", "up"},
		{"-n", ns.name, "addr", "add", addr + "/24", "dev", "eth0"},
		{"-n", ns.name, "link", "set", "eth0", "up"},
	} {
		if err := runIP(args...); err != nil {
			return nil, err
		}
	}
	if sink != "" {
		// A frame is never sent back out of the port it came in by.
		if err := run(bridgePath(), "-n", nw.hub, "fdb", "add", sink, "dev", hubEnd, "master", "static"); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(filepath.Join("/run/netns", ns.name))
	if err != nil {
		return nil, fmt.Errorf("opening namespace %s: %w", ns.name, err)
	}
	ns.fd = f
	return ns, nil
}

func runIP(args ...string) error { return run(ipPath(), args...) }

func run(bin string, args ...string) error {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Addr is node id's address.
func (nw *Network) Addr(id string) string { return nw.nodes[id].addr }

// Namespaces is the name of every namespace the network made.
func (nw *Network) Namespaces() []string {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return append([]string(nil), nw.made...)
}

// DialContext dials from the clients' namespace (a socket stays in the
// namespace it was made in, whichever thread uses it later).
func (nw *Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(ctx, nw.client, network, addr)
}

// DialFrom dials from node id's namespace.
func (nw *Network) DialFrom(ctx context.Context, id, network, addr string) (net.Conn, error) {
	ns, ok := nw.nodes[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", errNoNode, id)
	}
	return dialIn(ctx, ns, network, addr)
}

// Listen listens in node id's namespace.
func (nw *Network) Listen(id, network, addr string) (net.Listener, error) {
	ns, ok := nw.nodes[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", errNoNode, id)
	}
	var l net.Listener
	var err error
	done := make(chan struct{})
	if e := onThreadIn(ns, func() { l, err = net.Listen(network, addr); close(done) }); e != nil {
		return nil, e
	}
	<-done
	return l, err
}

func dialIn(ctx context.Context, ns *netns, network, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	done := make(chan struct{})
	if e := onThreadIn(ns, func() {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		close(done)
	}); e != nil {
		return nil, e
	}
	<-done
	return c, err
}

// starter starts a node's process in its namespace: the process is
// forked from a thread that entered it, and that thread waits for the
// process (wait) before it ends, because the kernel sends a child its
// Pdeathsig when the thread that forked it ends, not the process.
func (nw *Network) starter(id string) func(cmd *exec.Cmd, wait func()) error {
	ns := nw.nodes[id]
	return func(cmd *exec.Cmd, wait func()) error {
		errc := make(chan error, 1)
		if err := onThreadIn(ns, func() {
			err := cmd.Start()
			errc <- err
			if err == nil {
				wait()
			}
		}); err != nil {
			return err
		}
		return <-errc
	}
}

// onThreadIn runs fn on a new goroutine locked to its OS thread, once the
// thread has entered namespace ns. The thread is never unlocked: it ends
// with the goroutine instead of going back to the runtime's other
// goroutines, which stay in this process's own namespace.
func onThreadIn(ns *netns, fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		ns.mu.RLock()
		err := errNetnsClosed
		if ns.fd != nil {
			err = unix.Setns(int(ns.fd.Fd()), unix.CLONE_NEWNET)
		}
		ns.mu.RUnlock()
		if err != nil {
			errc <- fmt.Errorf("entering namespace %s: %w", ns.name, err)
			return
		}
		errc <- nil
		fn()
	}()
	return <-errc
}

// Cut cuts the links between each pair of nodes: on both sides, the
// other's address gets the sender's sink MAC.
func (nw *Network) Cut(pairs [][2]string) error {
	return nw.link(true, pairs)
}

// Heal restores the links of pairs: the sink entries are deleted, and
// the addresses resolved again.
func (nw *Network) Heal(pairs [][2]string) error {
	return nw.link(false, pairs)
}

// HealAll restores every cut link.
func (nw *Network) HealAll() error {
	return nw.link(false, nw.Cuts())
}

// Cuts is every cut link, sorted.
func (nw *Network) Cuts() [][2]string {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var out [][2]string
	for p := range nw.cuts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+" "+out[i][1] < out[j][0]+" "+out[j][1] })
	return out
}

func (nw *Network) link(cut bool, pairs [][2]string) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, p := range pairs {
		a, b := nw.nodes[p[0]], nw.nodes[p[1]]
		if a == nil || b == nil || a == b {
			return fmt.Errorf("no link between %q and %q to cut", p[0], p[1])
		}
		key := p
		if key[0] > key[1] {
			key[0], key[1] = key[1], key[0]
		}
		if nw.cuts[key] == cut {
			continue // cut already, or not cut
		}
		for _, s := range [][2]*netns{{a, b}, {b, a}} {
			args := []string{"-n", s[0].name, "neigh", "del", s[1].addr, "dev", "eth0"}
			if cut {
				args = []string{"-n", s[0].name, "neigh", "replace", s[1].addr, "lladdr", s[0].sink, "dev", "eth0", "nud", "permanent"}
			}
			if err := runIP(args...); err != nil {
				return err
			}
		}
		if cut {
			nw.cuts[key] = true
		} else {
			delete(nw.cuts, key)
		}
	}
	return nil
}

// Close deletes every namespace the network made (their veths go with
// them). It may be called more than once.
func (nw *Network) Close() error {
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		return nil
	}
	nw.closed = true
	made := nw.made
	nw.mu.Unlock()
	for _, ns := range append(nw.nodeList(), nw.client) {
		if ns != nil {
			ns.mu.Lock()
			if ns.fd != nil {
				ns.fd.Close()
				ns.fd = nil
			}
			ns.mu.Unlock()
		}
	}
	var errs []error
	for _, name := range made {
		if err := runIP("netns", "delete", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (nw *Network) nodeList() []*netns {
	var l []*netns
	for _, ns := range nw.nodes {
		l = append(l, ns)
	}
	return l
}

var sweepName = regexp.MustCompile(`^` + netnsPrefix + `([0-9]+)-`)

// SweepNetns deletes the namespaces the suite made in a process that is
// no longer alive (a run killed before it could clean up), and returns
// their names. Namespaces of live processes, this one's included, and
// every other namespace are left alone.
func SweepNetns() ([]string, error) {
	names, err := ListNetns()
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, name := range names {
		m := sweepName.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() || pidAlive(pid) {
			continue
		}
		if err := runIP("netns", "delete", name); err != nil {
			return gone, fmt.Errorf("removing a crashed run's namespace: %w", err)
		}
		gone = append(gone, name)
	}
	return gone, nil
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ListNetns is the name of every named network namespace
// (`ip netns list`).
func ListNetns() ([]string, error) {
	out, err := exec.Command(ipPath(), "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}
