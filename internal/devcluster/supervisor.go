package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/wording"
)

const (
	defaultReadyTimeout  = 60 * time.Second // for a node to answer /readyz, and then to take a write
	defaultStopTimeout   = 20 * time.Second // from SIGTERM to SIGKILL
	defaultWatchInterval = time.Second      // between reads of the peer list and polls of a drain
)

// child is one node process.
type child struct {
	Node
	proc           Process
	pidFile        string
	tail           *tailLines
	stdout, stderr *prefixWriter
	done           chan struct{} // closed once the process has exited and its output is written
	exit           Exit          // how it ended; set before done is closed

	// Touched only by Run's goroutine:
	stopDrain func() // ends the watch of its drain, while it is out of the peer list
	drained   bool   // it drained and was sent SIGTERM
}

// exitStatus says how the child ended ("exit status 0", "signal: killed").
func (c *child) exitStatus() string {
	if !isDone(c) {
		return "still running"
	}
	return c.exit.Text
}

func isDone(c *child) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Supervisor runs the nodes of a dev cluster as child processes: it starts
// them, follows the peer list (starting added nodes, stopping removed ones
// once they drained), reports a node that exits (it is not restarted) and
// stops them all on a signal. Everything but the processes' output and the
// waits runs on Run's goroutine.
type Supervisor struct {
	setup    Setup
	starter  Starter
	ask      AskCluster
	out      *lineOut
	client   *http.Client // asks /readyz, each answer within 2 s
	probe    *http.Client // sends the probe writes
	width    int          // of the prefix's id column; fixed, so every goroutine may read it
	exits    chan *child
	drained  chan *child       // a node out of the peer list that holds nothing
	children map[string]*child // the latest process of each node id; touched only by Run's goroutine
	all      []*child          // every process started, in order
	live     int               // processes whose exit Run has not seen yet

	peersData []byte // the peer list content last seen
	peersList cluster.PeerList
	peersErr  string // the last error reading the peer list file, logged once

	readyTimeout, stopTimeout, watchInterval time.Duration
}

// NewSupervisor is a supervisor of the cluster setup prepared, starting
// nodes with starter, asking them how far a drain is with ask, and writing
// every line (its own and the nodes') to stdout.
func NewSupervisor(setup Setup, starter Starter, ask AskCluster, stdout io.Writer) *Supervisor {
	width := len("dev")
	for _, p := range setup.List.Peers {
		width = max(width, len(p.ID))
	}
	return &Supervisor{
		setup: setup, starter: starter, ask: ask, out: &lineOut{w: stdout}, width: width,
		client:    &http.Client{Timeout: 2 * time.Second, Transport: setup.Transport},
		probe:     &http.Client{Timeout: 10 * time.Second, Transport: setup.Transport},
		exits:     make(chan *child),
		drained:   make(chan *child),
		children:  map[string]*child{},
		peersData: setup.PeersData, peersList: setup.List,
		readyTimeout: defaultReadyTimeout, stopTimeout: defaultStopTimeout, watchInterval: defaultWatchInterval,
	}
}

func (s *Supervisor) prefix(id string) string { return fmt.Sprintf("%-*s | ", s.width, id) }

// Logf writes one line of the supervisor's own, prefixed "dev".
func (s *Supervisor) Logf(format string, args ...any) {
	s.out.write(s.prefix("dev") + fmt.Sprintf(format, args...) + "\n")
}

// Run starts the nodes and supervises them until a signal arrives on sigs
// (a second one kills every node at once), and returns the exit code: 0
// when every node stopped cleanly, 1 otherwise or when they did not come
// up.
func (s *Supervisor) Run(nodes []Node, sigs <-chan os.Signal) int {
	ctx, cancel := context.WithCancel(context.Background())
	var waiters sync.WaitGroup
	defer waiters.Wait()
	defer cancel()

	var first []*child
	for _, n := range nodes {
		c, err := s.start(n)
		if err != nil {
			s.Logf("could not start %s: %v", n.ID, err)
			return s.stop(sigs, 1)
		}
		first = append(first, c)
	}
	ready := make(chan error, 1)
	waiters.Go(func() { ready <- s.waitReady(ctx, first) })
	ticker := time.NewTicker(s.watchInterval)
	defer ticker.Stop()
	for {
		select {
		case sig := <-sigs:
			s.Logf("%v: stopping every node", sig)
			cancel()
			return s.stop(sigs, 0)
		case c := <-s.exits:
			s.exited(c)
		case err := <-ready:
			ready = nil
			if err != nil {
				s.reportNotReady(err)
				cancel()
				return s.stop(sigs, 1)
			}
			s.out.write(s.banner(first))
		case c := <-s.drained:
			s.stopDrained(ctx, c, &waiters)
		case <-ticker.C:
			started, removed := s.watchPeerList()
			for _, c := range started {
				waiters.Go(func() {
					err := s.waitReady(ctx, []*child{c})
					switch {
					case err == nil:
						s.Logf("%s is ready at %s", c.ID, c.URL)
					case ctx.Err() == nil:
						s.reportNotReady(err)
					}
				})
			}
			for _, c := range removed {
				dctx, stop := context.WithCancel(ctx)
				c.stopDrain = stop
				others := s.listedURLs()
				waiters.Go(func() { s.watchDrain(dctx, c, others) })
			}
		}
	}
}

// start runs node n as a child process.
func (s *Supervisor) start(n Node) (*child, error) {
	dataDir := filepath.Join(s.setup.Dir, n.ID)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	tail := &tailLines{}
	c := &child{Node: n, tail: tail, done: make(chan struct{}),
		pidFile: filepath.Join(s.setup.Dir, n.ID+".pid"),
		stdout:  &prefixWriter{out: s.out, prefix: s.prefix(n.ID), tail: tail},
		stderr:  &prefixWriter{out: s.out, prefix: s.prefix(n.ID), tail: tail},
	}
	tlsEnv, err := s.setup.nodeTLSEnv(n.ID)
	if err != nil {
		return nil, err
	}
	proc, err := s.starter.Start(ProcessSpec{
		ID:   n.ID,
		Args: []string{"serve"},
		Dir:  dataDir, // no stray .env from the user's working directory is read
		Env: childEnv(os.Environ(), append([][2]string{
			{"NODE_ID", n.ID},
			{"HTTP_ADDR", n.HTTPAddr},
			{"GOSSIP_ADDR", n.Gossip},
			{"DATA_DIR", dataDir},
			{"PEERS_ENDPOINT", s.setup.PeersPath},
			{"PEERS_REFRESH", PeersRefresh},
			{"AUTH_SECRET", s.setup.Secrets.Auth},
			// The dev tokens live 30 days, past TOKEN_MAX_TTL's default.
			{"TOKEN_AUDIENCE", tokenAudience},
			{"TOKEN_MAX_TTL", tokenTTL.String()},
			{"CLUSTER_SECRET", s.setup.Secrets.Cluster},
			{"LOG_LEVEL", "info"},
		}, tlsEnv...)),
		Stdout: c.stdout,
		Stderr: c.stderr,
	})
	if err != nil {
		return nil, err
	}
	c.proc = proc
	if err := os.WriteFile(c.pidFile, []byte(strconv.Itoa(proc.Pid())+"\n"), 0o644); err != nil {
		s.Logf("could not write %s: %v", c.pidFile, err)
	}
	s.children[n.ID] = c
	s.all = append(s.all, c)
	s.live++
	go func() { // ends with the process; stop waits for every exit
		c.exit = proc.Wait()
		c.stdout.flush()
		c.stderr.flush()
		os.Remove(c.pidFile)
		close(c.done)
		s.exits <- c
	}()
	return c, nil
}

// exited handles a child that ended while the cluster runs.
func (s *Supervisor) exited(c *child) {
	s.live--
	if c.stopDrain != nil {
		c.stopDrain()
		c.stopDrain = nil
	}
	if c.drained {
		s.Logf("%s drained and was stopped (%s); it does not start again unless it is back in the peer list", c.ID, c.exitStatus())
		return
	}
	s.Logf("%s exited unexpectedly (%s); the other nodes keep running and it is not restarted", c.ID, c.exitStatus())
	if s.running() == 0 {
		s.Logf("no node is running any more: press Ctrl-C to quit")
	}
}

func (s *Supervisor) running() int {
	n := 0
	for _, c := range s.children {
		select {
		case <-c.done:
		default:
			n++
		}
	}
	return n
}

// notReadyError says which node did not come up.
type notReadyError struct {
	child  *child
	reason string
}

func (e *notReadyError) Error() string { return e.child.ID + " " + e.reason }

// waitReady waits until every child answers /readyz with 200 (it knows a
// master for every partition) and then takes a probe write, so that the
// banner's examples work on the first try; or until one exits, the ready
// timeout passes (for each of the two) or ctx ends.
func (s *Supervisor) waitReady(ctx context.Context, children []*child) error {
	if err := s.waitEach(ctx, children, s.ready, func(c *child, _ error) string {
		return fmt.Sprintf("did not answer %s/readyz within %s", c.URL, s.readyTimeout)
	}); err != nil {
		return err
	}
	return s.waitEach(ctx, children, s.probeWrite, func(c *child, err error) string {
		return fmt.Sprintf("answered /readyz but took no write within %s (the last try: %v)", s.readyTimeout, err)
	})
}

// waitEach tries check on every child, again every 200 ms for those it
// failed on, until it succeeded on all, one exits, the ready timeout
// passes (the error then says why, with late) or ctx ends.
func (s *Supervisor) waitEach(ctx context.Context, children []*child, check func(context.Context, *child) error, late func(*child, error) string) error {
	deadline := time.Now().Add(s.readyTimeout)
	pending := children
	last := map[*child]error{}
	for {
		var still []*child
		for _, c := range pending {
			select {
			case <-c.done:
				return &notReadyError{c, "exited before it was ready (" + c.exitStatus() + ")"}
			default:
			}
			if err := check(ctx, c); err != nil {
				last[c] = err
				still = append(still, c)
			}
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		if time.Now().After(deadline) {
			return &notReadyError{pending[0], late(pending[0], last[pending[0]])}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond): // polling another process: nothing to wait on
		}
	}
}

func (s *Supervisor) ready(ctx context.Context, c *child) error {
	_, err := client.New(c.URL, "", client.WithHTTPClient(s.client)).Ready(ctx)
	return err
}

// The probe document: written through a node, then deleted.
const (
	probeUser = "shoal-dev-probe"
	probeColl = "probe"
)

// probeWrite writes a document through c and deletes it.
func (s *Supervisor) probeWrite(ctx context.Context, c *child) error {
	// Not s.client's 2 s: a node waits up to 2 s for a master before it
	// answers 503, and a probe cut off sooner leaves it warning that a
	// write it forwarded may have been taken.
	cl := client.New(c.URL, s.setup.AdminToken, client.WithHTTPClient(s.probe))
	if _, _, err := cl.Put(ctx, probeUser, probeColl, c.ID, map[string]any{"probe": true}, client.WriteOptions{}); err != nil {
		return err
	}
	_, err := cl.Delete(ctx, probeUser, probeColl, c.ID, client.WriteOptions{})
	return err
}

func (s *Supervisor) reportNotReady(err error) {
	var nr *notReadyError
	if !errors.As(err, &nr) {
		s.Logf("waiting for the nodes: %v", err)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s did not come up: it %s\n", s.prefix("dev"), nr.child.ID, nr.reason)
	lines := nr.child.tail.get()
	if len(lines) == 0 {
		fmt.Fprintf(&b, "%s%s printed nothing\n", s.prefix("dev"), nr.child.ID)
	} else {
		fmt.Fprintf(&b, "%sits last %s:\n", s.prefix("dev"), wording.Plural(len(lines), "log line"))
		for _, l := range lines {
			fmt.Fprintf(&b, "%s    %s\n", s.prefix("dev"), l)
		}
	}
	s.out.write(b.String())
}

// watchPeerList re-reads the peer list; it starts a child for each new
// loopback peer and returns them, and returns the running children that
// left the list (they drain: Run watches them and stops them once they
// hold nothing).
func (s *Supervisor) watchPeerList() (started, removed []*child) {
	path := s.setup.PeersPath
	data, err := os.ReadFile(path)
	if err != nil {
		if msg := err.Error(); msg != s.peersErr {
			s.peersErr = msg
			s.Logf("cannot read the peer list: %v; the nodes keep the last good one", err)
		}
		return nil, nil
	}
	s.peersErr = ""
	if bytes.Equal(data, s.peersData) {
		return nil, nil
	}
	s.peersData = data // an invalid content is reported once, not every second
	list, err := cluster.ParsePeerList(data, "")
	if err != nil {
		s.Logf("%s changed but is not a valid peer list: %v; the nodes keep the last good one", path, err)
		return nil, nil
	}
	d := diffPeerLists(s.peersList, list)
	s.peersList = list
	for _, p := range d.Removed {
		c := s.children[p.ID]
		switch {
		case c != nil && !isDone(c) && !c.drained && c.stopDrain == nil:
			s.Logf("%s left the peer list: it keeps running while it hands its partitions and copies over, and is stopped once it holds nothing", p.ID)
			removed = append(removed, c)
		case c != nil && !isDone(c):
			s.Logf("%s left the peer list", p.ID)
		default:
			s.Logf("%s left the peer list; it does not run here", p.ID)
		}
	}
	for _, p := range d.Changed {
		s.Logf("%s's entry changed in the peer list (url %s, gossip %s); its process keeps running as it started: restart `shoal dev` to apply it", p.ID, p.URL, p.Gossip)
	}
	for _, p := range d.Added {
		if c := s.children[p.ID]; c != nil && !isDone(c) {
			switch {
			case c.drained:
				s.Logf("%s is in the peer list again, but it had drained and is stopping: restart `shoal dev` to run it again", p.ID)
			case c.stopDrain != nil:
				c.stopDrain()
				c.stopDrain = nil
				s.Logf("%s is in the peer list again; its process is still running and stays", p.ID)
			default:
				s.Logf("%s is in the peer list again; its process is still running", p.ID)
			}
			continue
		}
		n, err := NodeFor(p)
		if err != nil {
			s.Logf("%s joined the peer list but is not started here: %v; start it yourself", p.ID, err)
			continue
		}
		if err := CheckPortsFree([]Node{n}); err != nil {
			s.Logf("%s joined the peer list but is not started: %v", p.ID, err)
			continue
		}
		s.Logf("%s joined the peer list: starting it (HTTP %s, gossip %s, data %s)", p.ID, n.HTTPAddr, n.Gossip, filepath.Join(s.setup.Dir, n.ID))
		c, err := s.start(n)
		if err != nil {
			s.Logf("could not start %s: %v", p.ID, err)
			continue
		}
		started = append(started, c)
	}
	return started, removed
}

// stop sends SIGTERM to every running child in id order, waits up to the
// stop timeout (a second signal cuts it short) and then SIGKILLs the rest.
// It returns code, or 1 if any child did not exit 0.
func (s *Supervisor) stop(sigs <-chan os.Signal, code int) int {
	var running []*child
	for _, c := range s.all {
		if !isDone(c) {
			running = append(running, c)
		}
	}
	slices.SortStableFunc(running, func(a, b *child) int {
		if wording.NaturalLess(a.ID, b.ID) {
			return -1
		}
		if wording.NaturalLess(b.ID, a.ID) {
			return 1
		}
		return 0
	})
	for _, c := range running {
		s.Logf("stopping %s (SIGTERM to pid %d)", c.ID, c.proc.Pid())
		c.proc.Terminate()
	}
	timer := time.NewTimer(s.stopTimeout)
	defer timer.Stop()
	killAll := func() {
		for _, c := range s.all {
			if !isDone(c) {
				c.proc.Kill()
			}
		}
	}
	for s.live > 0 {
		select {
		case c := <-s.exits:
			s.live--
			s.Logf("%s stopped (%s)", c.ID, c.exitStatus())
		case <-timer.C:
			s.Logf("some nodes did not stop within %s: killing them (SIGKILL)", s.stopTimeout)
			killAll()
		case sig := <-sigs:
			s.Logf("%v again: killing every node now (SIGKILL)", sig)
			killAll()
		}
	}
	var failed []string
	for _, c := range s.all {
		if c.exit.Code != 0 {
			failed = append(failed, c.ID+" ("+c.exitStatus()+")")
		}
	}
	if len(failed) > 0 {
		s.Logf("every node is stopped; not cleanly: %s", strings.Join(failed, ", "))
		return 1
	}
	if code == 0 {
		s.Logf("every node stopped cleanly")
	}
	return code
}

// banner tells the user how to reach the cluster once it is up.
func (s *Supervisor) banner(nodes []*child) string {
	dir := ShellQuote(s.setup.Dir)
	adminFile := ShellQuote(filepath.Join(s.setup.Dir, "admin.token"))
	userFile := ShellQuote(s.setup.UserTokenPath)
	var b strings.Builder
	fmt.Fprintf(&b, "\nShoal dev cluster: %s ready, files in %s\n\n", wording.Plural(len(nodes), "node"), s.setup.Dir)
	for _, c := range nodes {
		fmt.Fprintf(&b, "  %-*s  %s  gossip %s  roles %s  data %s\n", s.width, c.ID, c.URL, c.Gossip,
			wording.Roles(c.Sharding, c.Replica, c.Voter), filepath.Join(s.setup.Dir, c.ID))
	}
	u := nodes[0].URL
	fmt.Fprintf(&b, "\n  peer list:   %s (edited or grown, it is picked up within a second)\n", s.setup.PeersPath)
	fmt.Fprintf(&b, "  admin token: %s\n", s.setup.AdminToken)
	fmt.Fprintf(&b, "               (in %s, valid %s; user %s's token is in %s)\n\n", filepath.Join(s.setup.Dir, "admin.token"),
		"30 days", tokenUser, s.setup.UserTokenPath)
	fmt.Fprintf(&b, "Try:\n")
	curl := "curl"
	if s.setup.TLS {
		curl += " --cacert " + ShellQuote(s.setup.CAPath())
	}
	fmt.Fprintf(&b, "  %s -H \"Authorization: Bearer $(cat %s)\" %s/v1/cluster\n", curl, adminFile, u)
	fmt.Fprintf(&b, "  %s -H \"Authorization: Bearer $(cat %s)\" -X POST %s/v1/users/%s/collections/notes/documents -d '{\"title\":\"hello\"}'\n",
		curl, userFile, u, tokenUser)
	fmt.Fprintf(&b, "  shoal status --dir %s\n", dir)
	fmt.Fprintf(&b, "  shoal dev add-node --dir %s\n\n", dir)
	fmt.Fprintf(&b, "Ctrl-C stops every node.\n\n")
	return b.String()
}
