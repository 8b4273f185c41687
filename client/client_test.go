package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/api/wire"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

const secret = "client-test-secret-0123456789"

// moving is the move the test node reports.
var moving = api.MoveStatus{Partition: 2, From: "node1", To: "node2", Phase: "copying", DocumentsCopied: 5, DocumentsTotal: 9}

// lags reports one replica behind (Config.Replication; only Lags is asked
// by the routes these tests use).
type lags struct{ api.Replication }

func (lags) Lags() []replicate.Lag {
	return []replicate.Lag{{ReplicaLag: wire.ReplicaLag{Replica: "node2", Partition: 0, Acked: store.Position{Epoch: 1, Seq: 3}, Behind: 4}}}
}

// realNode serves the real api router of a node "node1" of a cluster of
// one, with a partition table, a move, a voter set and a replica behind.
// It has no store: the routes these tests ask do not reach it (but for
// /readyz of a ready node, which pings the store, so the node is left
// unready).
func realNode(t *testing.T) *httptest.Server {
	t.Helper()
	cl, err := cluster.Start(context.Background(), cluster.Config{NodeID: "node1", PublicURL: "http://127.0.0.1:1", DataDir: t.TempDir(),
		GossipInterval: time.Second, SuspectTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	table := shard.NewTable(4)
	if !table.Merge(shard.Assignment{Partition: 0, Master: "node1", Epoch: 1}) {
		t.Fatal("the table refused the assignment")
	}
	srv := httptest.NewServer(api.New(api.Config{NodeID: "node1", PartitionCount: 4, MaxBodyBytes: 1 << 20, AuthSecret: []byte(secret),
		Logger: slog.New(slog.DiscardHandler), Cluster: cl, Table: table, Replication: lags{},
		Moves:     func() []api.MoveStatus { return []api.MoveStatus{moving} },
		VoterSets: func() ([]string, []string) { return []string{"node1"}, []string{"node1"} },
	}, nil, nil))
	t.Cleanup(srv.Close)
	return srv
}

func token(t *testing.T, spec api.TokenSpec) string {
	t.Helper()
	spec.TTL = time.Hour
	tok, err := api.MintToken([]byte(secret), spec)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestClusterFromTheNodesRouter(t *testing.T) {
	srv := realNode(t)
	st, err := client.New(srv.URL+"/", token(t, api.TokenSpec{Admin: true})).Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Node != "node1" || len(st.Members) != 1 {
		t.Fatalf("view %+v", st.View)
	}
	m := st.Members[0]
	if m.ID != "node1" || m.State != cluster.Up || !m.Self || !m.InPeerList || m.FreeBytes == nil || m.LastHeardMsAgo == nil {
		t.Errorf("member %+v", m)
	}
	if st.InPeerListUnknown || st.Unlisted(m) {
		t.Errorf("a node that says in_peer_list read as unknown (%v) or m as unlisted (%v)", st.InPeerListUnknown, st.Unlisted(m))
	}
	if ps := st.Partitions; ps == nil || ps.Count != 4 || ps.Masters["node1"] != 1 || ps.WithoutMaster != 3 {
		t.Errorf("partitions %+v", ps)
	}
	if v := st.Voters; v == nil || !reflect.DeepEqual(v.Current, []string{"node1"}) || v.Changing {
		t.Errorf("voters %+v", v)
	}
	if len(st.Moves) != 1 || st.Moves[0] != moving {
		t.Errorf("moves %+v", st.Moves)
	}
	if len(st.Replication) != 1 || st.Replication[0].Replica != "node2" || st.Replication[0].Behind != 4 || st.Replication[0].Acked.Seq != 3 {
		t.Errorf("replication %+v", st.Replication)
	}
}

func TestHealthFromTheNodesRouter(t *testing.T) {
	srv := realNode(t)
	h, err := client.New(srv.URL, "").Health(context.Background())
	if err != nil || !reflect.DeepEqual(h, api.NodeStatus{Node: "node1", Status: "ok"}) {
		t.Fatalf("%+v, %v", h, err)
	}
}

// The node's own refusals: each is an *HTTPError with the status, the
// node's problem details, and the sentinel of its status.
func TestErrorsFromTheNodesRouter(t *testing.T) {
	srv := realNode(t)
	ctx := context.Background()
	admin := token(t, api.TokenSpec{Admin: true})
	for _, tc := range []struct {
		name     string
		ask      func() error
		status   int
		typ      string
		sentinel error // nil: none matches
		message  string
	}{
		{"no token", func() error { _, err := client.New(srv.URL, "").Cluster(ctx); return err },
			401, api.TypeUnauthorized, client.ErrUnauthorized, ""},
		{"a token signed with another secret", func() error {
			tok, _ := api.MintToken([]byte("another-secret-0123456789abc"), api.TokenSpec{Admin: true, TTL: time.Hour})
			_, err := client.New(srv.URL, tok).Cluster(ctx)
			return err
		}, 401, api.TypeUnauthorized, client.ErrUnauthorized, ""},
		{"a user's token", func() error {
			_, err := client.New(srv.URL, token(t, api.TokenSpec{User: "alice"})).Cluster(ctx)
			return err
		}, 403, api.TypeForbidden, client.ErrForbidden, ""},
		{"not the node's base URL", func() error { _, err := client.New(srv.URL+"/shoal", admin).Cluster(ctx); return err },
			404, api.TypeRouteNotFound, client.ErrNotFound, "GET /shoal/v1/cluster is not a Shoal route; see the README for the API"},
		{"a node starting", func() error { _, err := client.New(srv.URL, "").Ready(ctx); return err },
			503, api.TypeUnavailable, client.ErrUnavailable, "the node is starting or shutting down"},
		{"a limit out of range", func() error { _, err := client.New(srv.URL, admin).Rollbacks(ctx, 20000); return err },
			400, api.TypeInvalidQuery, nil, `limit "20000" must be a whole number from 1 to 10000`},
		{"a user name the node refuses", func() error { _, err := client.New(srv.URL, admin).Placement(ctx, "Not A Name"); return err },
			400, api.TypeInvalidName, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ask()
			var he *client.HTTPError
			if !errors.As(err, &he) {
				t.Fatalf("%T %v, want an *HTTPError", err, err)
			}
			if he.StatusCode != tc.status || he.Problem == nil || he.Problem.Type != tc.typ || he.Problem.Status != tc.status {
				t.Fatalf("status %d, problem %+v; want %d %s", he.StatusCode, he.Problem, tc.status, tc.typ)
			}
			if tc.message != "" && he.Message() != tc.message {
				t.Errorf("message %q, want %q", he.Message(), tc.message)
			}
			if want := fmt.Sprintf("GET %s answered status %d: %s", he.Path, tc.status, he.Message()); he.Message() == "" || he.Error() != want {
				t.Errorf("Error() %q, want %q", he.Error(), want)
			}
			for _, s := range []error{client.ErrUnauthorized, client.ErrForbidden, client.ErrNotFound, client.ErrUnavailable} {
				if got := errors.Is(err, s); got != (s == tc.sentinel) {
					t.Errorf("errors.Is(err, %v) = %v", s, got)
				}
			}
		})
	}
}

// serveJSON answers path with v encoded as the node encodes it, to
// requests that carry token.
func serveJSON(t *testing.T, path, tok string, v any) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		if tok != "" && r.Header.Get("Authorization") != "Bearer "+tok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Routes that need a store, answered from the server's own types.
func TestAnswersOfTheServersTypes(t *testing.T) {
	ctx := context.Background()
	placement := api.PlacementView{User: "alice", Partition: 3, PreferredMaster: "node2", Master: "node2", Epoch: 7,
		Responsible: []string{"node2", "node1"}, Succession: []string{"node2", "node1", "node3"}, States: map[string]string{"node1": "UP", "node2": "UP"},
		Position: store.Position{Epoch: 7, Seq: 42}, Replicas: []wire.ReplicaLag{{Replica: "node1", Partition: 3, Acked: store.Position{Epoch: 7, Seq: 40}, Behind: 2}}}
	p, err := client.New(serveJSON(t, "/v1/users/alice/placement", "tok", placement).URL, "tok").Placement(ctx, "alice")
	if err != nil || !reflect.DeepEqual(p, placement) {
		t.Errorf("placement %+v, %v", p, err)
	}

	at := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	rolled := api.RollbackList{Node: "node1", RolledBack: []wire.RolledBack{{Partition: 1, User: "alice", Coll: "c", ID: "d1", Version: 2,
		Position: store.Position{Epoch: 3, Seq: 9}, Body: map[string]any{"x": 1.0}, NewEpoch: 4, EpochStart: store.Position{Epoch: 4, Seq: 1}, At: at}}}
	var query string // asked one at a time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rolled)
	}))
	defer srv.Close()
	l, err := client.New(srv.URL, "tok").Rollbacks(ctx, 10000)
	if err != nil || !reflect.DeepEqual(l, rolled) || query != "limit=10000" {
		t.Errorf("rollbacks %+v, %v (query %q)", l, err, query)
	}
	if _, err := client.New(srv.URL, "tok").Rollbacks(ctx, 0); err != nil || query != "" {
		t.Errorf("no limit: %v, query %q", err, query)
	}

	r, err := client.New(serveJSON(t, "/readyz", "", api.NodeStatus{Node: "node1", Status: "ready"}).URL, "").Ready(ctx)
	if err != nil || !reflect.DeepEqual(r, api.NodeStatus{Node: "node1", Status: "ready"}) {
		t.Errorf("ready %+v, %v", r, err)
	}
}

// clusterJSON is the node's answer to GET /v1/cluster for two members,
// b out of the peer list, as a JSON object to edit.
func clusterJSON(t *testing.T) map[string]any {
	t.Helper()
	a := api.ClusterAnswer{View: cluster.View{Node: "a", Members: []cluster.MemberStatus{
		{ID: "a", State: cluster.Up, Self: true, InPeerList: true},
		{ID: "b", State: cluster.Up, InPeerList: false},
	}}}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A node built before in_peer_list does not say who is listed: no member
// reads as out of the list.
func TestInPeerListOfAnOlderNode(t *testing.T) {
	ctx := context.Background()
	current := clusterJSON(t)
	st, err := client.New(serveJSON(t, "/v1/cluster", "", current).URL, "").Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.InPeerListUnknown || st.Unlisted(st.Members[0]) || !st.Unlisted(st.Members[1]) {
		t.Errorf("current node: unknown %v, a unlisted %v, b unlisted %v", st.InPeerListUnknown, st.Unlisted(st.Members[0]), st.Unlisted(st.Members[1]))
	}

	older := clusterJSON(t)
	for _, m := range older["members"].([]any) {
		delete(m.(map[string]any), "in_peer_list")
	}
	st, err = client.New(serveJSON(t, "/v1/cluster", "", older).URL, "").Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.InPeerListUnknown || st.Unlisted(st.Members[0]) || st.Unlisted(st.Members[1]) {
		t.Errorf("older node: unknown %v, a unlisted %v, b unlisted %v", st.InPeerListUnknown, st.Unlisted(st.Members[0]), st.Unlisted(st.Members[1]))
	}
}

// A 200 that is not the route's JSON: the URL is not a node's.
func TestAnswersThatAreNotShoals(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, body, want string
	}{
		{"a web page", "text/html", "<html>hello</html>",
			`the answer is not Shoal's cluster status JSON (invalid character '<' looking for beginning of value; content type "text/html")`},
		{"other JSON", "application/json", `{"hello":1}`, `the answer is not Shoal's cluster status JSON (no "node" or "members" field)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			_, err := client.New(srv.URL, "").Cluster(context.Background())
			var ae *client.AnswerError
			if !errors.As(err, &ae) || err.Error() != tc.want {
				t.Fatalf("%T %v; want an *AnswerError %q", err, err, tc.want)
			}
		})
	}
}

// An error's body that is not problem JSON (a proxy's) is kept as it came.
func TestAnErrorThatIsNotAProblem(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	defer srv.Close()
	_, err := client.New(srv.URL, "").Health(context.Background())
	var he *client.HTTPError
	if !errors.As(err, &he) {
		t.Fatalf("%T %v", err, err)
	}
	if he.StatusCode != 502 || he.Status != "502 Bad Gateway" || he.Problem != nil || he.Message() != "" ||
		string(he.Body) != "upstream down\n" || he.Error() != "GET /healthz answered status 502" {
		t.Fatalf("%+v: %v", he, he)
	}
}

// Failures to reach the node are http.Client's, so errors.Is sees the
// system's and the context's errors through them.
func TestNetworkErrors(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if _, err := client.New(closed.URL, "").Health(context.Background()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a closed port: %v, want ECONNREFUSED", err)
	}
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hanging.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := client.New(hanging.URL, "").Cluster(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a node that does not answer: %v, want the context's deadline", err)
	}
}

// The token goes as a bearer token, none when empty; ReadyURL is asked as
// it is given; the HTTP client given is the one used.
func TestRequests(t *testing.T) {
	type asked struct{ path, auth, accept string }
	seen := make(chan asked, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- asked{r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Accept")}
	}))
	defer srv.Close()
	ctx := context.Background()
	client.New(srv.URL+"//", "tok").Health(ctx)
	if a := <-seen; a != (asked{"/healthz", "Bearer tok", "application/json"}) {
		t.Errorf("asked %+v", a)
	}
	client.New(srv.URL, "").Ready(ctx)
	if a := <-seen; a.path != "/readyz" || a.auth != "" {
		t.Errorf("asked %+v", a)
	}
	used := false
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	if _, err := client.New("http://ignored.invalid", "", client.ReadyURL(srv.URL+"/custom/check?x=1"), client.WithHTTPClient(hc)).Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-seen; a.path != "/custom/check?x=1" || !used {
		t.Errorf("asked %+v through the client given: %v", a, used)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
