//go:build !linux

package torture

import (
	"context"
	"errors"
	"net"
	"os/exec"
)

// Network is the namespaced network of a cluster; only Linux has one.
type Network struct{ Swept []string }

var errNoNetns = errors.New("network namespaces are Linux only")

func netnsUsable() (bool, string) { return false, errNoNetns.Error() }

// NewNetwork fails: network namespaces are Linux only.
func NewNetwork(ids []string) (*Network, error) { return nil, errNoNetns }

func (nw *Network) Addr(id string) string { return "" }

func (nw *Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil, errNoNetns
}

func (nw *Network) starter(id string) func(cmd *exec.Cmd, wait func()) error {
	return func(*exec.Cmd, func()) error { return errNoNetns }
}

func (nw *Network) Cut(pairs [][2]string) error  { return errNoNetns }
func (nw *Network) Heal(pairs [][2]string) error { return errNoNetns }
func (nw *Network) HealAll() error               { return nil }
func (nw *Network) Close() error                 { return nil }

// ListNetns fails: network namespaces are Linux only.
func ListNetns() ([]string, error) { return nil, errNoNetns }
