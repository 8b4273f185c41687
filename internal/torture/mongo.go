package torture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// mongoProcess is a node's own MongoDB (ClusterOptions.Mongo).
type mongoProcess struct {
	addr    string // where it listens, in the node's namespace
	dir     string
	logPath string
	opts    MongoOptions
	start   func(cmd *exec.Cmd, wait func()) error // the node's: in its namespace

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	closing bool // killed by the cluster's end: never started again
}

// startMongos starts every node's MongoDB, spares' too, and waits until
// each accepts connections.
func (c *Cluster) startMongos(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := n.mongo.run(); err != nil {
			return fmt.Errorf("%s's MongoDB: %w", n.ID, err)
		}
	}
	for _, n := range c.Nodes {
		if err := c.awaitMongo(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// startMongo starts node n's MongoDB again and waits until it accepts
// connections.
func (c *Cluster) startMongo(ctx context.Context, n *Node) error {
	if err := n.mongo.run(); err != nil {
		return fmt.Errorf("%s's MongoDB: %w", n.ID, err)
	}
	return c.awaitMongo(ctx, n)
}

// awaitMongo waits until node n's MongoDB accepts connections.
func (c *Cluster) awaitMongo(ctx context.Context, n *Node) error {
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", n.mongo.addr)
	}
	if c.Net != nil {
		dial = func(ctx context.Context) (net.Conn, error) { return c.Net.DialFrom(ctx, n.ID, "tcp", n.mongo.addr) }
	}
	_, err := await(ctx, 30*time.Second, n.ID+"'s MongoDB accepting connections at "+n.mongo.addr, func() (bool, string) {
		if n.mongo.gone() {
			return true, "" // told below
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := dial(dctx)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
	if err == nil && n.mongo.gone() {
		err = fmt.Errorf("%s's MongoDB exited before it accepted connections at %s; its log is %s", n.ID, n.mongo.addr, n.mongo.logPath)
	}
	return err
}

// run starts the process, its output appended to logPath.
func (m *mongoProcess) run() error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(m.addr)
	fill := strings.NewReplacer("{addr}", m.addr, "{host}", host, "{port}", port, "{dir}", m.dir)
	argv := make([]string, len(m.opts.Command))
	for i, a := range m.opts.Command {
		argv[i] = fill.Replace(a)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(childEnv(), m.opts.Env...)
	cmd.Dir = m.dir
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return errors.New("the cluster is closing")
	}
	exited, err := startLogged(m.start, cmd, m.logPath, "MongoDB")
	if err != nil {
		return fmt.Errorf("starting %s: %w", strings.Join(argv, " "), err)
	}
	m.cmd, m.exited = cmd, exited
	return nil
}

// gone reports whether the process has exited.
func (m *mongoProcess) gone() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exited == nil {
		return true
	}
	select {
	case <-m.exited:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the exit; with closing, no later run
// starts it again (a heal racing the cluster's end).
func (m *mongoProcess) kill(closing bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closing = m.closing || closing
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.exited
	m.cmd = nil
}
