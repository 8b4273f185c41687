package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
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
