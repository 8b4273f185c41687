package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/node"
)

// A node's own router on loopback, without a store (it is not ready):
// its health, its readiness, and GET /v1/cluster asked without a token.
func Example() {
	node := httptest.NewServer(api.New(api.Config{NodeID: "node1", PartitionCount: 1, AuthSecret: []byte("example-secret-0123456789"),
		Logger: slog.New(slog.DiscardHandler)}, nil, nil))
	defer node.Close()
	c := client.New(node.URL, "")
	ctx := context.Background()

	h, err := c.Health(ctx)
	fmt.Println(h.Node, h.Status, err)

	_, err = c.Ready(ctx)
	fmt.Println(errors.Is(err, client.ErrUnavailable), err)

	_, err = c.Cluster(ctx)
	var he *client.HTTPError
	if errors.As(err, &he) {
		fmt.Println(he.StatusCode, he.Problem.Type, errors.Is(err, client.ErrUnauthorized))
	}
	// Output:
	// node1 ok <nil>
	// true GET /readyz answered status 503: the node is starting or shutting down
	// 401 urn:shoal:problem:unauthorized true
}

// A node of its own in a temporary directory (what `shoal serve` runs), and
// a user's documents through the client: create, read your write, replace
// only if unchanged, and a query read page after page.
func ExampleClient_Documents() {
	dir, _ := os.MkdirTemp("", "shoal-example-")
	defer os.RemoveAll(dir)
	cfg := config.Defaults()
	cfg.NodeID, cfg.HTTPAddr, cfg.DataDir, cfg.AuthSecret = "node1", "127.0.0.1:0", dir, "example-secret-0123456789"
	ctx := context.Background()
	n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close(ctx)
	token, _ := api.MintToken([]byte(cfg.AuthSecret), api.TokenSpec{User: "alice", Audience: cfg.TokenAudience, TTL: time.Hour})
	c := client.New(n.URL(), token)

	d, err := c.Create(ctx, "alice", "notes", map[string]any{"_id": "n1", "title": "first", "stars": 3}, client.WriteOptions{Concern: "majority"})
	fmt.Println(d.ID, d.Version, err)

	d, err = c.Get(ctx, "alice", "notes", "n1", client.ReadOptions{After: d.Token})
	fmt.Println(d.Fields["title"], err)

	_, _, err = c.Put(ctx, "alice", "notes", "n1", map[string]any{"title": "late"}, client.WriteOptions{IfMatch: "2"})
	fmt.Println(errors.Is(err, client.ErrPreconditionFailed))

	for i := 2; i <= 4; i++ {
		c.Create(ctx, "alice", "notes", map[string]any{"_id": fmt.Sprintf("n%d", i), "stars": i}, client.WriteOptions{})
	}
	for d, err := range c.Documents(ctx, "alice", "notes", client.Query{Filter: `{"stars":{"$gte":3}}`, Sort: "-stars", Limit: 2}, client.ReadOptions{}) {
		if err != nil {
			fmt.Println(err)
			break
		}
		fmt.Println(d.ID, d.Fields["stars"])
	}
	// Output:
	// n1 1 <nil>
	// first <nil>
	// true
	// n4 4
	// n1 3
	// n3 3
}

// A client of the three nodes of a cluster (the example's own, on
// loopback). It finds where alice's partition lives and sends her write,
// with write concern majority (acknowledged once a majority of the
// partition's copies hold it), to the partition's master itself; the read
// goes to the first of its nodes holding a copy, and the write's
// consistency token makes whichever copy answers hold that write.
func ExampleWithNodes() {
	urls := exampleCluster()
	token, _ := api.MintToken([]byte(exampleSecret), api.TokenSpec{User: "alice", Audience: "shoal", TTL: time.Hour})
	c := client.New(urls[0], token, client.WithNodes(urls[1:]...))
	ctx := context.Background()

	d, err := c.Create(ctx, "alice", "notes", map[string]any{"title": "first"}, client.WriteOptions{Concern: "majority"})
	fmt.Println(d.Version, err)

	got, err := c.Get(ctx, "alice", "notes", d.ID, client.ReadOptions{Preference: "nearest", After: d.Token})
	fmt.Println(got.Fields["title"], got.Version, err)
	// Output:
	// 1 <nil>
	// first 1 <nil>
}

// A node's refusal is an *HTTPError: its status, the problem's stable
// type, what the node said (a 412 says which version is current), and a
// sentinel to match with errors.Is. A write whose outcome is unknown
// matches ErrOutcomeUnknown: the client did not send it again, and only a
// read tells whether it was applied.
func ExampleHTTPError() {
	urls := exampleCluster()
	token, _ := api.MintToken([]byte(exampleSecret), api.TokenSpec{User: "bob", Audience: "shoal", TTL: time.Hour})
	c := client.New(urls[0], token, client.WithNodes(urls[1:]...))
	ctx := context.Background()
	c.Create(ctx, "bob", "notes", map[string]any{"_id": "n1", "title": "first"}, client.WriteOptions{})

	_, err := c.Create(ctx, "bob", "notes", map[string]any{"_id": "n1"}, client.WriteOptions{})
	var he *client.HTTPError
	if errors.As(err, &he) {
		fmt.Println(he.StatusCode, he.Problem.Type, errors.Is(err, client.ErrConflict))
	}

	_, _, err = c.Put(ctx, "bob", "notes", "n1", map[string]any{"title": "late"}, client.WriteOptions{IfMatch: "7"})
	if errors.As(err, &he) && errors.Is(err, client.ErrPreconditionFailed) {
		fmt.Println(he.StatusCode, "current version", *he.Problem.Current)
	}

	d, err := c.Create(ctx, "bob", "notes", map[string]any{"title": "once"}, client.WriteOptions{Concern: "majority"})
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown):
		fmt.Println("applied or not: read before writing again")
	case err != nil:
		fmt.Println("not applied:", err)
	default:
		fmt.Println("created, version", d.Version)
	}
	// Output:
	// 409 urn:shoal:problem:already-exists true
	// 412 current version 1
	// created, version 1
}
