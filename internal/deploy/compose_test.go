package deploy

import (
	"context"
	"encoding/json"
	"flag"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
)

const (
	composeFile   = "docker-compose.yml"
	peersExample  = "peers.example.json"
	nodeImage     = "shoal:dev"
	mongoImage    = "mongo:7"
	growProfile   = "grow"
	peersInside   = "/etc/shoal/peers.json"
	firstHostPort = 8080 // nodeN is published on 8080+N
)

// repoRoot is the repository root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the repository root: %v", root, err)
	}
	return root
}

// loadCompose loads docker-compose.yml the way `docker compose` does, with
// the given profiles ("*": all) and variables. It reads neither the process
// environment nor a .env file: the tests check the file's own defaults, not
// whatever this machine happens to set.
func loadCompose(t *testing.T, profiles []string, env ...string) *types.Project {
	t.Helper()
	return loadComposeFiles(t, []string{composeFile}, profiles, env...)
}

// loadComposeFiles is loadCompose of several files, each over the one
// before (docker compose -f a -f b).
func loadComposeFiles(t *testing.T, files, profiles []string, env ...string) *types.Project {
	t.Helper()
	root := repoRoot(t)
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(root, f))
	}
	opts, err := cli.NewProjectOptions(paths,
		cli.WithWorkingDirectory(root),
		cli.WithEnv(env),
		cli.WithProfiles(profiles),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("loading %s: %v", strings.Join(files, " and "), err)
	}
	return p
}

func allProfiles(t *testing.T) *types.Project { return loadCompose(t, []string{"*"}) }

var (
	nodeName  = regexp.MustCompile(`^node([0-9]+)$`)
	mongoName = regexp.MustCompile(`^mongo([0-9]+)$`)
)

// split sorts a project's services into Shoal nodes and MongoDBs and fails
// on anything else.
func split(t *testing.T, p *types.Project) (nodes, mongos []string) {
	t.Helper()
	for name := range p.Services {
		switch {
		case nodeName.MatchString(name):
			nodes = append(nodes, name)
		case mongoName.MatchString(name):
			mongos = append(mongos, name)
		default:
			t.Errorf("service %q is neither a node (nodeN) nor a MongoDB (mongoN)", name)
		}
	}
	sort.Strings(nodes)
	sort.Strings(mongos)
	return nodes, mongos
}

func env(t *testing.T, svc types.ServiceConfig, key string) string {
	t.Helper()
	v, ok := svc.Environment[key]
	if !ok || v == nil {
		t.Fatalf("service %s does not set %s", svc.Name, key)
	}
	return *v
}

func port(t *testing.T, svc types.ServiceConfig, key string) string {
	t.Helper()
	addr := env(t, svc, key)
	_, p, err := net.SplitHostPort(addr)
	if err != nil || p == "" {
		t.Fatalf("service %s: %s %q is not host:port", svc.Name, key, addr)
	}
	return p
}

// number is N of nodeN or mongoN.
func number(name string) string {
	if m := nodeName.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	if m := mongoName.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

func TestComposeServicesAndProfiles(t *testing.T) {
	def := loadCompose(t, nil)
	nodes, mongos := split(t, def)
	if want := []string{"node1", "node2", "node3"}; !slices.Equal(nodes, want) {
		t.Errorf("without a profile the nodes are %v, want %v", nodes, want)
	}
	if want := []string{"mongo1", "mongo2", "mongo3"}; !slices.Equal(mongos, want) {
		t.Errorf("without a profile the MongoDBs are %v, want %v", mongos, want)
	}

	all := allProfiles(t)
	nodes, mongos = split(t, all)
	if want := []string{"node1", "node2", "node3", "node4"}; !slices.Equal(nodes, want) {
		t.Errorf("with every profile the nodes are %v, want %v", nodes, want)
	}
	if want := []string{"mongo1", "mongo2", "mongo3", "mongo4"}; !slices.Equal(mongos, want) {
		t.Errorf("with every profile the MongoDBs are %v, want %v", mongos, want)
	}
	for name, svc := range all.Services {
		var want []string
		if name == "node4" || name == "mongo4" {
			want = []string{growProfile}
		}
		if !slices.Equal(svc.Profiles, want) {
			t.Errorf("service %s has profiles %v, want %v", name, svc.Profiles, want)
		}
	}
	grow := loadCompose(t, []string{growProfile})
	for _, name := range []string{"node4", "mongo4"} {
		if _, ok := grow.Services[name]; !ok {
			t.Errorf("--profile %s does not start %s", growProfile, name)
		}
	}
}

func TestComposeBuildsOneImageForEveryNode(t *testing.T) {
	p := allProfiles(t)
	root := repoRoot(t)
	nodes, _ := split(t, p)
	var builders []string
	for _, name := range nodes {
		svc := p.Services[name]
		if svc.Image != nodeImage {
			t.Errorf("node %s runs image %q, want %q", name, svc.Image, nodeImage)
		}
		if svc.Build == nil {
			if svc.PullPolicy != types.PullPolicyNever {
				t.Errorf("node %s has pull_policy %q: %s is built here, so it must be %q", name, svc.PullPolicy, nodeImage, types.PullPolicyNever)
			}
			continue
		}
		builders = append(builders, name)
		ctxDir := svc.Build.Context
		if !filepath.IsAbs(ctxDir) {
			ctxDir = filepath.Join(root, ctxDir)
		}
		if filepath.Clean(ctxDir) != root {
			t.Errorf("node %s builds from %s, want the repository root %s", name, ctxDir, root)
		}
		if df := svc.Build.Dockerfile; df != "" && df != "Dockerfile" {
			t.Errorf("node %s builds with %s, want Dockerfile", name, df)
		}
	}
	if len(builders) != 1 {
		t.Errorf("services with build: %v; want exactly one, whose image %s the other nodes reuse", builders, nodeImage)
	}
	for name, svc := range p.Services {
		if mongoName.MatchString(name) && svc.Build != nil {
			t.Errorf("MongoDB %s has a build section", name)
		}
	}
}

// Every environment key of every node must be a setting Shoal reads, and the
// whole environment must resolve to a valid configuration, as `shoal serve`
// would resolve it inside the container.
func TestComposeNodeSettingsAreKnownAndValid(t *testing.T) {
	p := allProfiles(t)
	nodes, _ := split(t, p)
	for _, name := range nodes {
		svc := p.Services[name]
		keys := make([]string, 0, len(svc.Environment))
		for k := range svc.Environment {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, ok := config.Lookup(k); !ok {
				t.Errorf("service %s sets %s, which Shoal does not read; known keys: %s", name, k, strings.Join(config.Keys(), ", "))
			}
		}
		cfg, err := resolveConfig(svc)
		if err != nil {
			t.Errorf("service %s: its environment does not give a valid configuration: %v", name, err)
			continue
		}
		if cfg.NodeID != name {
			t.Errorf("service %s runs with NODE_ID %q; a node's id is its service name (the host name in the peer list)", name, cfg.NodeID)
		}
		if cfg.PeersEndpoint != peersInside {
			t.Errorf("service %s reads its peer list from %q, want %s", name, cfg.PeersEndpoint, peersInside)
		}
		if cfg.MongoDB != "shoal" {
			t.Errorf("service %s uses MONGO_DB %q, want shoal", name, cfg.MongoDB)
		}
	}
}

func resolveConfig(svc types.ServiceConfig) (config.Config, error) {
	lookup := func(k string) (string, bool) {
		v, ok := svc.Environment[k]
		if !ok || v == nil {
			return "", false
		}
		return *v, true
	}
	fs := flag.NewFlagSet(svc.Name, flag.ContinueOnError)
	resolve := config.FlagSet(fs, config.Source{Env: lookup})
	if err := fs.Parse(nil); err != nil {
		return config.Config{}, err
	}
	return resolve()
}

func TestComposeEachNodeHasItsOwnMongo(t *testing.T) {
	p := allProfiles(t)
	nodes, mongos := split(t, p)
	used := map[string]string{}
	for _, name := range nodes {
		svc := p.Services[name]
		raw := env(t, svc, "MONGO_URI")
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "mongodb" {
			t.Errorf("node %s: MONGO_URI %q is not a mongodb:// URI", name, raw)
			continue
		}
		host := u.Hostname()
		want := "mongo" + number(name)
		if host != want {
			t.Errorf("node %s: MONGO_URI %q names %q, want its own MongoDB %s", name, raw, host, want)
			continue
		}
		if u.Port() != "" && u.Port() != "27017" {
			t.Errorf("node %s: MONGO_URI %q: MongoDB listens on 27017", name, raw)
		}
		if other, ok := used[host]; ok {
			t.Errorf("nodes %s and %s share MongoDB %s", other, name, host)
		}
		used[host] = name
		mongo, ok := p.Services[host]
		if !ok {
			t.Errorf("node %s: MONGO_URI names %s, which is not a service", name, host)
			continue
		}
		if mongo.Image != mongoImage {
			t.Errorf("service %s runs image %q, want %s", host, mongo.Image, mongoImage)
		}
		if !slices.Equal(mongo.Profiles, svc.Profiles) {
			t.Errorf("node %s has profiles %v but its MongoDB %s has %v: they must start together", name, svc.Profiles, host, mongo.Profiles)
		}
		dep, ok := svc.DependsOn[host]
		if !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("node %s must depend on %s with condition %s (has %+v)", name, host, types.ServiceConditionHealthy, svc.DependsOn)
		}
	}
	for _, m := range mongos {
		if _, ok := used[m]; !ok {
			t.Errorf("MongoDB %s serves no node", m)
		}
	}
}

func TestComposeEveryServiceHasAHealthcheck(t *testing.T) {
	p := allProfiles(t)
	for name, svc := range p.Services {
		hc := svc.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) == 0 {
			t.Errorf("service %s has no healthcheck", name)
			continue
		}
		test := strings.Join(hc.Test, " ")
		switch {
		case nodeName.MatchString(name):
			if want := []string{"CMD", "shoal", "health"}; !slices.Equal(hc.Test, want) {
				t.Errorf("node %s healthcheck %q, want %q", name, hc.Test, want)
			}
		case mongoName.MatchString(name):
			if !strings.Contains(test, "mongosh") || !strings.Contains(test, "ping") {
				t.Errorf("MongoDB %s healthcheck %q does not ping with mongosh", name, test)
			}
		}
	}
}

func TestComposeNodesMatchThePeerList(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, peersExample))
	if err != nil {
		t.Fatal(err)
	}
	list, err := cluster.ParsePeerList(data, "")
	if err != nil {
		t.Fatalf("%s: %v", peersExample, err)
	}
	p := loadCompose(t, nil)
	nodes, _ := split(t, p)
	if ids := list.IDs(); !slices.Equal(ids, nodes) {
		t.Errorf("%s lists %v but the nodes started without a profile are %v", peersExample, ids, nodes)
	}
	for _, peer := range list.Peers {
		svc, ok := p.Services[peer.ID]
		if !ok {
			t.Errorf("peer %s of %s is not a node service", peer.ID, peersExample)
			continue
		}
		checkPeer(t, svc, peer)
	}
	for _, name := range nodes {
		svc := p.Services[name]
		if _, err := cluster.ParsePeerList(data, env(t, svc, "NODE_ID")); err != nil {
			t.Errorf("node %s would refuse %s: %v", name, peersExample, err)
		}
		checkPeersMount(t, root, svc, filepath.Join(root, peersExample))
	}
}

// checkPeer checks that the peer list's entry for svc is where svc listens.
func checkPeer(t *testing.T, svc types.ServiceConfig, peer cluster.Peer) {
	t.Helper()
	if id := env(t, svc, "NODE_ID"); id != peer.ID {
		t.Errorf("service %s has NODE_ID %q, but its peer entry has id %q", svc.Name, id, peer.ID)
	}
	if want := "http://" + svc.Name + ":" + port(t, svc, "HTTP_ADDR"); peer.URL != want {
		t.Errorf("peer %s has url %q; the service listens at %s", peer.ID, peer.URL, want)
	}
	if want := svc.Name + ":" + port(t, svc, "GOSSIP_ADDR"); peer.Gossip != want {
		t.Errorf("peer %s has gossip %q; the service gossips at %s", peer.ID, peer.Gossip, want)
	}
}

// checkPeersMount checks that the peer list file is mounted read-only where
// PEERS_ENDPOINT reads it.
func checkPeersMount(t *testing.T, root string, svc types.ServiceConfig, wantSource string) {
	t.Helper()
	for _, v := range svc.Volumes {
		if v.Target != peersInside {
			continue
		}
		src := v.Source
		if !filepath.IsAbs(src) {
			src = filepath.Join(root, src)
		}
		if v.Type != types.VolumeTypeBind || !v.ReadOnly || filepath.Clean(src) != wantSource {
			t.Errorf("node %s mounts %s from %s (type %s, read-only %v), want a read-only bind of %s", svc.Name, peersInside, src, v.Type, v.ReadOnly, wantSource)
		}
		return
	}
	t.Errorf("node %s does not mount a peer list at %s", svc.Name, peersInside)
}

func TestComposeHostPortsAndPublicURLs(t *testing.T) {
	p := allProfiles(t)
	nodes, _ := split(t, p)
	seen := map[string]string{}
	for _, name := range nodes {
		svc := p.Services[name]
		n, _ := strconv.Atoi(number(name))
		want := strconv.Itoa(firstHostPort + n)
		httpPort := port(t, svc, "HTTP_ADDR")
		if len(svc.Ports) != 1 {
			t.Errorf("node %s publishes %d ports, want exactly one (its API)", name, len(svc.Ports))
			continue
		}
		pc := svc.Ports[0]
		if strconv.Itoa(int(pc.Target)) != httpPort || pc.Published != want {
			t.Errorf("node %s publishes %s -> %d, want %s -> %s (HTTP_ADDR)", name, pc.Published, pc.Target, want, httpPort)
		}
		if other, ok := seen[pc.Published]; ok {
			t.Errorf("nodes %s and %s both publish host port %s", other, name, pc.Published)
		}
		seen[pc.Published] = name
		if got, wantURL := env(t, svc, "PUBLIC_URL"), "http://localhost:"+want; got != wantURL {
			t.Errorf("node %s has PUBLIC_URL %q, want %q (its host port)", name, got, wantURL)
		}
	}
}

func TestComposeVolumesAreDistinct(t *testing.T) {
	p := allProfiles(t)
	owner := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		svc := p.Services[name]
		named := 0
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeVolume {
				continue
			}
			named++
			if v.Source == "" {
				t.Errorf("service %s mounts an anonymous volume at %s: give it a name", name, v.Target)
				continue
			}
			if other, ok := owner[v.Source]; ok {
				t.Errorf("services %s and %s share volume %s", other, name, v.Source)
			}
			owner[v.Source] = name
			if _, ok := p.Volumes[v.Source]; !ok {
				t.Errorf("service %s mounts volume %s, which is not declared under volumes:", name, v.Source)
			}
			if mongoName.MatchString(name) && v.Target != "/data/db" {
				t.Errorf("MongoDB %s mounts %s at %s, want /data/db", name, v.Source, v.Target)
			}
		}
		if mongoName.MatchString(name) && named != 1 {
			t.Errorf("MongoDB %s has %d named volumes, want one for /data/db", name, named)
		}
	}
}

// The secrets and the peer list file come from variables a user sets in .env
// or on the command line; the file's values are only defaults.
func TestComposeVariablesOverrideDefaults(t *testing.T) {
	root := repoRoot(t)
	def := allProfiles(t)
	nodes, _ := split(t, def)
	for _, name := range nodes {
		for _, k := range []string{"CLUSTER_SECRET", "AUTH_SECRET"} {
			if v := env(t, def.Services[name], k); len(v) < 16 {
				t.Errorf("node %s: the default %s %q is shorter than 16 bytes, so the node would not start", name, k, v)
			}
		}
	}
	const cs, as = "cluster-secret-from-dot-env-0123", "auth-secret-from-dot-env-0123456"
	p := loadCompose(t, []string{"*"}, "CLUSTER_SECRET="+cs, "AUTH_SECRET="+as, "PEERS_FILE=./peers.json")
	for _, name := range nodes {
		svc := p.Services[name]
		if got := env(t, svc, "CLUSTER_SECRET"); got != cs {
			t.Errorf("node %s ignores CLUSTER_SECRET from the environment (has %q)", name, got)
		}
		if got := env(t, svc, "AUTH_SECRET"); got != as {
			t.Errorf("node %s ignores AUTH_SECRET from the environment (has %q)", name, got)
		}
		checkPeersMount(t, root, svc, filepath.Join(root, "peers.json"))
	}
}

// The README's "Grow the cluster" tells users to add one entry for node4 to
// a copy of peers.example.json; that list must be one node4 accepts and must
// match node4's service.
func TestComposeGrowEntryInReadmeFitsNode4(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var entry map[string]any
	for _, line := range strings.Split(string(readme), "\n") {
		compact := strings.Join(strings.Fields(line), "")
		i := strings.Index(compact, `{"id":"node4"`)
		if i < 0 {
			continue
		}
		obj := strings.TrimSpace(line[strings.Index(line, "{"):])
		obj = strings.TrimRight(obj, ",` ")
		if err := json.Unmarshal([]byte(obj), &entry); err != nil {
			t.Fatalf("README's node4 entry %q is not JSON: %v", obj, err)
		}
		break
	}
	if entry == nil {
		t.Fatal(`README.md has no peer entry {"id":"node4",...} for growing the cluster`)
	}
	example, err := os.ReadFile(filepath.Join(root, peersExample))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string][]map[string]any
	if err := json.Unmarshal(example, &doc); err != nil {
		t.Fatal(err)
	}
	doc["peers"] = append(doc["peers"], entry)
	grown, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cluster.ParsePeerList(grown, "node4")
	if err != nil {
		t.Fatalf("%s plus the README's node4 entry: %v", peersExample, err)
	}
	p := allProfiles(t)
	peer, _ := list.Get("node4")
	node4, ok := p.Services["node4"]
	if !ok {
		t.Fatal("no node4 service")
	}
	checkPeer(t, node4, peer)
	if peer.Voter {
		t.Error("the README adds node4 as a voter; voters change one at a time, so a new node joins as a non-voter")
	}
	for _, id := range list.IDs() {
		if _, ok := p.Services[id]; !ok {
			t.Errorf("grown peer list names %s, which is not a node service", id)
		}
	}
}

// A node's MongoDB has no authentication of its own, so only that node may
// reach it: it shares no network with another node or another MongoDB, and
// publishes no port on the host (issue 12: no stranger, tenant or peer can
// reach the store).
func TestComposeOnlyItsNodeReachesAMongo(t *testing.T) {
	p := allProfiles(t)
	nodes, mongos := split(t, p)
	networksOf := func(svc types.ServiceConfig) []string {
		if len(svc.Networks) == 0 {
			return []string{"default"}
		}
		var ns []string
		for n := range svc.Networks {
			ns = append(ns, n)
		}
		return ns
	}
	for _, m := range mongos {
		svc := p.Services[m]
		if len(svc.Ports) > 0 {
			t.Errorf("MongoDB %s publishes ports %v on the host: anyone there could read every tenant's documents", m, svc.Ports)
		}
		own := "node" + number(m)
		for _, net := range networksOf(svc) {
			for _, other := range append(slices.Clone(nodes), mongos...) {
				if other == m || other == own {
					continue
				}
				if slices.Contains(networksOf(p.Services[other]), net) {
					t.Errorf("MongoDB %s shares network %q with %s: only %s may reach it", m, net, other, own)
				}
			}
		}
	}
}
