package storetest

import (
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Recording starts a proxy in front of m that records every command the
// clients send through it, and returns the URI of the proxy and a
// function that returns the commands sent so far (each the command's
// document as the server read it, without document sequences). The proxy
// stops when the test ends.
func (m *Mongo) Recording(t testing.TB) (uri string, sent func() []bson.Raw) {
	t.Helper()
	var mu sync.Mutex
	var cmds []bson.Raw
	uri = m.proxy(t, func(doc bson.Raw) bool {
		mu.Lock()
		cmds = append(cmds, doc)
		mu.Unlock()
		return true
	})
	return uri, func() []bson.Raw {
		mu.Lock()
		defer mu.Unlock()
		return append([]bson.Raw(nil), cmds...)
	}
}

// Cutting starts a proxy in front of m that cuts the connection a command
// comes on, instead of passing it on, when cut says so (a link cut in the
// middle of a conversation: a cursor's getMore, say), and returns its
// URI. The proxy stops when the test ends.
func (m *Mongo) Cutting(t testing.TB, cut func(cmd bson.Raw) bool) string {
	t.Helper()
	return m.proxy(t, func(doc bson.Raw) bool { return !cut(doc) })
}

// proxy starts a proxy in front of m that hands the command document of
// every message a client sends to pass, which says whether to pass it on
// (false: the connection is closed), and returns its URI.
func (m *Mongo) proxy(t testing.TB, pass func(bson.Raw) bool) string {
	t.Helper()
	u, err := url.Parse(m.URI)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns sync.WaitGroup
	var open []net.Conn
	closed := false
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				s.Close()
				return
			}
			open = append(open, c, s)
			conns.Add(2)
			mu.Unlock()
			go func() { defer conns.Done(); io.Copy(c, s); c.Close() }()
			go func() { defer conns.Done(); copyMessages(s, c, pass); s.Close() }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return "mongodb://" + l.Addr().String() + "/"
}

// opMsg is the wire protocol's OP_MSG opcode.
const opMsg = 2013

// copyMessages copies wire-protocol messages from src to dst, handing the
// command document (section 0) of every OP_MSG to pass, and stops at the
// first it does not pass.
func copyMessages(dst io.Writer, src io.Reader, pass func(bson.Raw) bool) {
	for {
		var head [16]byte
		if _, err := io.ReadFull(src, head[:]); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(head[0:4]))
		if n < 16 || n > 64<<20 {
			return
		}
		msg := make([]byte, n)
		copy(msg, head[:])
		if _, err := io.ReadFull(src, msg[16:]); err != nil {
			return
		}
		if binary.LittleEndian.Uint32(head[12:16]) == opMsg && n > 20 {
			for b := msg[20:]; len(b) > 5; {
				kind := b[0]
				size := int(binary.LittleEndian.Uint32(b[1:5]))
				if size < 5 || 1+size > len(b) {
					break
				}
				if kind == 0 && !pass(bson.Raw(append([]byte(nil), b[1:1+size]...))) {
					return
				}
				b = b[1+size:]
			}
		}
		if _, err := dst.Write(msg); err != nil {
			return
		}
	}
}
