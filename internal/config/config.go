// Package config defines every setting a Shoal node reads, where it comes
// from (flag, environment, .env file, default) and how it is validated.
//
// The table in Settings is the single definition: `shoal serve --help`, the
// README's configuration table and the tests that check docker-compose.yml
// all read it, so a key that nothing reads cannot be set by mistake.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/joho/godotenv"

	"github.com/shoal-db/shoal/internal/nodetls"
)

// Config is the resolved configuration of one node.
type Config struct {
	NodeID         string
	HTTPAddr       string
	DataDir        string
	MongoURI       string
	MongoDB        string
	AuthSecret     string
	TokenAudience  string
	TokenMaxTTL    time.Duration
	Insecure       bool
	PartitionCount int
	MaxBodyBytes   int64
	// MaxDocumentBytes and MaxDocumentFields bound a stored document,
	// whatever route makes it.
	MaxDocumentBytes  int64
	MaxDocumentFields int
	// BodyReadTimeout and WriteTimeout bound a slow client (see Settings).
	BodyReadTimeout time.Duration
	WriteTimeout    time.Duration
	QueryBudget     int64
	MaxPageBytes    int64
	DocCacheBytes   int64
	ShutdownGrace   time.Duration
	LogLevel        string
	// Pprof serves Go's profiler at /debug/pprof/ to admin tokens.
	Pprof bool

	PublicURL            string
	GossipAddr           string
	PeersEndpoint        string
	PeersRefresh         time.Duration
	ClusterSecret        string
	GossipInterval       time.Duration
	GossipSuspectTimeout time.Duration
	LeaseTTL             time.Duration
	ReadTryTimeout       time.Duration
	ReplicationFactor    int
	ReplicaReplaceAfter  time.Duration
	MaxConcurrentMoves   int
	StoreSync            string
	TombstoneRetention   time.Duration
	// CommitLog is where the node records each write it acknowledges as
	// a partition's master (fault testing; empty: off).
	CommitLog string
	// TLS: the API and /internal/ serve HTTPS with TLSCertFile and
	// TLSKeyFile; TLSCAFile verifies the other nodes (see nodetls).
	TLSCertFile   string
	TLSKeyFile    string
	TLSCAFile     string
	TLSClientAuth string
}

// TLS is the node's TLS files as nodetls takes them.
func (c Config) TLS() nodetls.Files {
	return nodetls.Files{Cert: c.TLSCertFile, Key: c.TLSKeyFile, CA: c.TLSCAFile, RequireClientCert: c.TLSClientAuth == "require"}
}

// Setting is one configuration key: its environment name, its flag name
// (the key in lower case with dashes), default and meaning.
type Setting struct {
	Key     string
	Default string
	Help    string
	// Secret settings are never printed with their value.
	Secret bool
	set    func(c *Config, v string) error
}

// Flag is the command-line flag that carries the same meaning as Key.
func (s Setting) Flag() string { return strings.ToLower(strings.ReplaceAll(s.Key, "_", "-")) }

// Settings lists every key `shoal serve` reads, in the order --help shows them.
var Settings = []Setting{
	{Key: "NODE_ID", Default: "", Help: "this node's id; must match its entry in the peer list (default: the host name)",
		set: func(c *Config, v string) error { c.NodeID = v; return nil }},
	{Key: "HTTP_ADDR", Default: ":8080", Help: "address the REST API listens on",
		set: func(c *Config, v string) error { c.HTTPAddr = v; return nil }},
	{Key: "PUBLIC_URL", Default: "", Help: "base URL clients reach this node's API at, shown in cluster status (default: this node's url in the peer list, else http://HTTP_ADDR)",
		set: func(c *Config, v string) error { c.PublicURL = v; return nil }},
	{Key: "PEERS_ENDPOINT", Default: "", Help: "peer list: an http(s) URL or a file path; unset: a cluster of one",
		set: func(c *Config, v string) error { c.PeersEndpoint = v; return nil }},
	{Key: "PEERS_REFRESH", Default: "10s", Help: "how often the peer list is re-read (also on SIGHUP)",
		set: func(c *Config, v string) error { return parseDuration(&c.PeersRefresh, v) }},
	{Key: "GOSSIP_ADDR", Default: ":7946", Help: "address gossip (memberlist, TCP and UDP) binds to; peers reach it at this node's gossip address in the peer list",
		set: func(c *Config, v string) error { c.GossipAddr = v; return nil }},
	{Key: "CLUSTER_SECRET", Default: "", Help: "shared secret of the cluster: encrypts gossip and signs node-to-node calls; required with PEERS_ENDPOINT", Secret: true,
		set: func(c *Config, v string) error { c.ClusterSecret = v; return nil }},
	{Key: "GOSSIP_INTERVAL", Default: "2s", Help: "how often each node probes a peer (memberlist ProbeInterval); sets failure detection speed",
		set: func(c *Config, v string) error { return parseDuration(&c.GossipInterval, v) }},
	{Key: "GOSSIP_SUSPECT_TIMEOUT", Default: "10s", Help: "how long a peer stays SUSPECT before it is DOWN (memberlist SuspicionMult x ProbeInterval)",
		set: func(c *Config, v string) error { return parseDuration(&c.GossipSuspectTimeout, v) }},
	{Key: "DATA_DIR", Default: "./data", Help: "directory for the embedded store's files, in DATA_DIR/pebble (used when MONGO_URI is unset)",
		set: func(c *Config, v string) error { c.DataDir = v; return nil }},
	{Key: "STORE_SYNC", Default: "full", Help: "kept for older configurations: the embedded store syncs every commit to disk before answering with either value (full or normal)",
		set: func(c *Config, v string) error { c.StoreSync = v; return nil }},
	{Key: "MONGO_URI", Default: "", Help: "MongoDB to store documents in; unset: the embedded store (Pebble) under DATA_DIR", Secret: true,
		set: func(c *Config, v string) error { c.MongoURI = v; return nil }},
	{Key: "MONGO_DB", Default: "shoal", Help: "database name inside that MongoDB",
		set: func(c *Config, v string) error { c.MongoDB = v; return nil }},
	{Key: "AUTH_SECRET", Default: "", Help: "HMAC secret that signs client tokens (HS256 JWT); required unless --insecure", Secret: true,
		set: func(c *Config, v string) error { c.AuthSecret = v; return nil }},
	{Key: "TOKEN_AUDIENCE", Default: "shoal", Help: "the aud claim every client token must carry (`shoal token` mints it); empty: aud is not checked",
		set: func(c *Config, v string) error { c.TokenAudience = v; return nil }},
	{Key: "TOKEN_MAX_TTL", Default: "24h", Help: "longest a client token may be valid (exp - iat, and exp - now); longer-lived tokens get 401; 1m..87600h",
		set: func(c *Config, v string) error { return parseDuration(&c.TokenMaxTTL, v) }},
	{Key: "INSECURE", Default: "false", Help: "accept every request as admin without a token (development only; logs a warning)",
		set: func(c *Config, v string) error { return parseBool(&c.Insecure, v) }},
	{Key: "TLS_CERT_FILE", Default: "", Help: "PEM certificate the API and /internal/ serve HTTPS with (with TLS_KEY_FILE; re-read when it changes on disk); peers then reach this node at an https:// url; unset: plain HTTP",
		set: func(c *Config, v string) error { c.TLSCertFile = v; return nil }},
	{Key: "TLS_KEY_FILE", Default: "", Help: "PEM private key of TLS_CERT_FILE",
		set: func(c *Config, v string) error { c.TLSKeyFile = v; return nil }},
	{Key: "TLS_CA_FILE", Default: "", Help: "PEM CA certificate(s) this node verifies other nodes' certificates (and an https PEERS_ENDPOINT) with; unset: the system's roots",
		set: func(c *Config, v string) error { c.TLSCAFile = v; return nil }},
	{Key: "TLS_CLIENT_AUTH", Default: "none", Help: "none, or require: nodes present their certificates to each other and /internal/ refuses a client without one the CA signed (users' clients need none)",
		set: func(c *Config, v string) error { c.TLSClientAuth = strings.ToLower(v); return nil }},
	{Key: "LEASE_TTL", Default: "3s", Help: "how long a partition's master holds its lease without renewing it; bounds how long a partition has no master after its master dies",
		set: func(c *Config, v string) error { return parseDuration(&c.LeaseTTL, v) }},
	{Key: "READ_TRY_TIMEOUT", Default: "500ms", Help: "how long a read waits for one node before trying the next of the responsible list (a query or a list of collections: 30s)",
		set: func(c *Config, v string) error { return parseDuration(&c.ReadTryTimeout, v) }},
	{Key: "REPLICATION_FACTOR", Default: "2", Help: "copies of each partition, master included",
		set: func(c *Config, v string) error { return parseInt(&c.ReplicationFactor, v) }},
	{Key: "REPLICA_REPLACE_AFTER", Default: "60s", Help: "how long a replica may be DOWN before another node replaces it and is copied the partition",
		set: func(c *Config, v string) error { return parseDuration(&c.ReplicaReplaceAfter, v) }},
	{Key: "MAX_CONCURRENT_MOVES", Default: "4", Help: "partitions this node moves to their preferred master at once (each is copied, then handed over)",
		set: func(c *Config, v string) error { return parseInt(&c.MaxConcurrentMoves, v) }},
	{Key: "TOMBSTONE_RETENTION", Default: "24h", Help: "how long a deleted document's tombstone is kept; a replica further behind than the purged tombstones gets a full copy of the partition",
		set: func(c *Config, v string) error { return parseDuration(&c.TombstoneRetention, v) }},
	{Key: "PARTITION_COUNT", Default: "271", Help: "number of partitions users are hashed into; stored on first start and fixed for the life of the data",
		set: func(c *Config, v string) error { return parseInt(&c.PartitionCount, v) }},
	{Key: "MAX_BODY_BYTES", Default: "1048576", Help: "largest request body accepted, in bytes (larger: 413); 1024..67108864",
		set: func(c *Config, v string) error { return parseInt64(&c.MaxBodyBytes, v) }},
	{Key: "MAX_DOCUMENT_BYTES", Default: "1048576", Help: "largest document stored, in bytes of compact JSON, whatever route makes it (a PATCH is checked once merged; larger: 413)",
		set: func(c *Config, v string) error { return parseInt64(&c.MaxDocumentBytes, v) }},
	{Key: "MAX_DOCUMENT_FIELDS", Default: "10000", Help: "most fields a document may have: object keys and array elements, at every depth (more: 413); every scan of a partition decodes its documents, so one document's fields cost every user of the partition",
		set: func(c *Config, v string) error { return parseInt(&c.MaxDocumentFields, v) }},
	{Key: "BODY_READ_TIMEOUT", Default: "30s", Help: "how long a request's headers and body may take to arrive (slower: the connection is closed); a request's work after its body is read is not bounded by it",
		set: func(c *Config, v string) error { return parseDuration(&c.BodyReadTimeout, v) }},
	{Key: "WRITE_TIMEOUT", Default: "30s", Help: "how long a client may leave each 64 KiB of an answer unread (longer: the connection is closed); a long answer to a client that keeps reading is not cut",
		set: func(c *Config, v string) error { return parseDuration(&c.WriteTimeout, v) }},
	{Key: "QUERY_BUDGET", Default: "50000000", Help: "work units one query may spend filtering and sorting (a unit is at most about 10 ns of CPU, so the default is about half a second of evaluation at worst, reading the documents on top; past it: 400 query-too-expensive)",
		set: func(c *Config, v string) error { return parseInt64(&c.QueryBudget, v) }},
	{Key: "MAX_PAGE_BYTES", Default: "4194304", Help: "largest query page, in bytes; a page holds at least one document, and the next cursor continues after the last; 4096..33554432",
		set: func(c *Config, v string) error { return parseInt64(&c.MaxPageBytes, v) }},
	{Key: "DOC_CACHE_BYTES", Default: "67108864", Help: "memory for the write-through document cache, in bytes (0 disables it)",
		set: func(c *Config, v string) error { return parseInt64(&c.DocCacheBytes, v) }},
	{Key: "SHUTDOWN_GRACE", Default: "15s", Help: "how long SIGINT/SIGTERM waits for in-flight requests before closing them",
		set: func(c *Config, v string) error { return parseDuration(&c.ShutdownGrace, v) }},
	{Key: "LOG_LEVEL", Default: "info", Help: "debug, info, warn or error",
		set: func(c *Config, v string) error { c.LogLevel = strings.ToLower(v); return nil }},
	{Key: "PPROF", Default: "false", Help: "serve Go's profiler at /debug/pprof/ to admin tokens (CPU, heap, goroutine and other profiles, to find where a node spends its time; `go tool pprof` reads them); profiles hold code locations and sizes, not documents",
		set: func(c *Config, v string) error { return parseBool(&c.Pprof, v) }},
	{Key: "COMMIT_LOG", Default: "", Help: "for fault testing: a file to which the node appends one JSON line per write it acknowledges as a partition's master (node, partition, lease epoch, positions, time), so that a checker can tell whether two nodes accepted writes for one partition at once; costs one write(2) per acknowledged request; empty: off",
		set: func(c *Config, v string) error { c.CommitLog = v; return nil }},
}

// Keys returns every configuration key, sorted.
func Keys() []string {
	keys := make([]string, 0, len(Settings))
	for _, s := range Settings {
		keys = append(keys, s.Key)
	}
	sort.Strings(keys)
	return keys
}

// Lookup returns the setting named key.
func Lookup(key string) (Setting, bool) {
	for _, s := range Settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// Defaults returns the configuration with every default applied.
func Defaults() Config {
	var c Config
	for _, s := range Settings {
		if err := s.set(&c, s.Default); err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", s.Key, err))
		}
	}
	return c
}

// Source says where values come from. Env is the process environment
// (os.LookupEnv in production); DotEnv is the path of an optional .env file.
type Source struct {
	Env    func(key string) (string, bool)
	DotEnv string
}

// OSSource reads the process environment and ./.env.
func OSSource() Source { return Source{Env: os.LookupEnv, DotEnv: ".env"} }

// FlagSet registers one flag per setting on fs and returns a function that,
// after fs.Parse, resolves the configuration: flag, then environment, then
// the .env file, then the default.
func FlagSet(fs *flag.FlagSet, src Source) func() (Config, error) {
	values := make(map[string]*flagValue, len(Settings))
	for _, s := range Settings {
		v := &flagValue{isBool: s.Default == "true" || s.Default == "false"}
		values[s.Key] = v
		fs.Var(v, s.Flag(), s.Help+" ("+s.Key+")")
	}
	return func() (Config, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		dot, err := readDotEnv(src.DotEnv)
		if err != nil {
			return Config{}, err
		}
		var c Config
		for _, s := range Settings {
			v, from := s.Default, "default"
			if dv, ok := dot[s.Key]; ok {
				v, from = dv, src.DotEnv
			}
			if src.Env != nil {
				if ev, ok := src.Env(s.Key); ok {
					v, from = ev, "environment"
				}
			}
			if set[s.Flag()] {
				v, from = values[s.Key].value, "--"+s.Flag()
			}
			if err := s.set(&c, v); err != nil {
				return Config{}, fmt.Errorf("%s (from %s): %w", s.Key, from, err)
			}
		}
		if c.NodeID == "" {
			host, err := os.Hostname()
			if err != nil || host == "" {
				host = "node"
			}
			c.NodeID = host
		}
		return c, c.Validate()
	}
}

// readDotEnv reads an optional .env file and refuses keys Shoal does not read,
// so that an operator never believes a misspelt setting took effect.
func readDotEnv(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	m, err := godotenv.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	for k := range m {
		if _, ok := Lookup(k); !ok {
			return nil, fmt.Errorf("%s sets %s, which Shoal does not read; known keys: %s", path, k, strings.Join(Keys(), ", "))
		}
	}
	return m, nil
}

// maxDocumentBytes is the most MAX_DOCUMENT_BYTES may be: MongoDB stores
// no document over 16 MiB, and its BSON is often larger than the JSON.
const maxDocumentBytes = 16 << 20

// maxBodyBytes is the most MAX_BODY_BYTES may be: four times the largest
// document, and what a node forwards to another must fit one internal
// request (cluster.MaxInternalBody).
const maxBodyBytes = 64 << 20

// maxPageBytes is the most MAX_PAGE_BYTES may be: a page forwarded to
// another node, with its last document (at most maxDocumentBytes), must
// fit the answer to an internal call (cluster.MaxInternalAnswer).
const maxPageBytes = 32 << 20

// maxTokenTTL is the most TOKEN_MAX_TTL may be.
const maxTokenTTL = 10 * 365 * 24 * time.Hour

// Validate explains the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case c.AuthSecret == "" && !c.Insecure:
		return errors.New("AUTH_SECRET is empty: set it (e.g. AUTH_SECRET=$(openssl rand -hex 32)) or pass --insecure for development")
	case c.AuthSecret != "" && len(c.AuthSecret) < 16:
		return errors.New("AUTH_SECRET is shorter than 16 bytes: use a long random value")
	case c.TokenMaxTTL < time.Minute:
		return fmt.Errorf("TOKEN_MAX_TTL %s is too short: use at least 1m (default 24h)", c.TokenMaxTTL)
	case c.TokenMaxTTL > maxTokenTTL:
		return fmt.Errorf("TOKEN_MAX_TTL %s is too long: use at most %s (ten years; default 24h)", c.TokenMaxTTL, maxTokenTTL)
	case c.PartitionCount < 1 || c.PartitionCount > 65536:
		return fmt.Errorf("PARTITION_COUNT %d is out of range: use 1..65536 (default 271)", c.PartitionCount)
	case c.MaxBodyBytes < 1024 || c.MaxBodyBytes > maxBodyBytes:
		return fmt.Errorf("MAX_BODY_BYTES %d is out of range: use 1024..%d (default 1048576)", c.MaxBodyBytes, maxBodyBytes)
	case c.MaxDocumentBytes < 1024 || c.MaxDocumentBytes > maxDocumentBytes:
		return fmt.Errorf("MAX_DOCUMENT_BYTES %d is out of range: use 1024..%d (default 1048576)", c.MaxDocumentBytes, maxDocumentBytes)
	case c.MaxDocumentFields < 1:
		return fmt.Errorf("MAX_DOCUMENT_FIELDS %d must be at least 1 (default 10000; it counts object keys and array elements)", c.MaxDocumentFields)
	case c.BodyReadTimeout < 100*time.Millisecond:
		return fmt.Errorf("BODY_READ_TIMEOUT %s is too short: use at least 100ms (default 30s)", c.BodyReadTimeout)
	case c.WriteTimeout < 100*time.Millisecond:
		return fmt.Errorf("WRITE_TIMEOUT %s is too short: use at least 100ms (default 30s)", c.WriteTimeout)
	case c.QueryBudget < 1_000_000:
		return fmt.Errorf("QUERY_BUDGET %d is too small: use at least 1000000 (default 50000000)", c.QueryBudget)
	case c.MaxPageBytes < 4096 || c.MaxPageBytes > maxPageBytes:
		return fmt.Errorf("MAX_PAGE_BYTES %d is out of range: use 4096..%d (default 4194304; a page forwarded between nodes must fit an internal answer)", c.MaxPageBytes, maxPageBytes)
	case c.DocCacheBytes < 0:
		return fmt.Errorf("DOC_CACHE_BYTES %d is negative", c.DocCacheBytes)
	case c.MongoURI == "" && c.DataDir == "":
		return errors.New("DATA_DIR is empty and MONGO_URI is unset: the embedded store needs a directory")
	case c.MongoDB == "":
		return errors.New("MONGO_DB is empty")
	case c.HTTPAddr == "":
		return errors.New("HTTP_ADDR is empty")
	case c.ShutdownGrace <= 0:
		return errors.New("SHUTDOWN_GRACE must be positive")
	case c.PeersEndpoint != "" && c.ClusterSecret == "":
		return errors.New("CLUSTER_SECRET is empty but PEERS_ENDPOINT is set: every node of a cluster needs the same long random CLUSTER_SECRET")
	case c.ClusterSecret != "" && len(c.ClusterSecret) < 16:
		return errors.New("CLUSTER_SECRET is shorter than 16 bytes: use a long random value")
	case c.PeersRefresh < time.Second:
		return fmt.Errorf("PEERS_REFRESH %s is too short: use at least 1s", c.PeersRefresh)
	case c.GossipInterval < 100*time.Millisecond:
		return fmt.Errorf("GOSSIP_INTERVAL %s is too short: use at least 100ms", c.GossipInterval)
	case c.GossipSuspectTimeout < 2*c.GossipInterval:
		return fmt.Errorf("GOSSIP_SUSPECT_TIMEOUT %s must be at least twice GOSSIP_INTERVAL (%s)", c.GossipSuspectTimeout, c.GossipInterval)
	case c.GossipAddr == "":
		return errors.New("GOSSIP_ADDR is empty")
	case c.LeaseTTL < 300*time.Millisecond:
		return fmt.Errorf("LEASE_TTL %s is too short: use at least 300ms (default 3s)", c.LeaseTTL)
	case c.ReadTryTimeout <= 0:
		return errors.New("READ_TRY_TIMEOUT must be positive")
	case c.ReplicaReplaceAfter <= 0:
		return errors.New("REPLICA_REPLACE_AFTER must be positive")
	case c.StoreSync != "full" && c.StoreSync != "normal":
		return fmt.Errorf("STORE_SYNC %q: use full or normal", c.StoreSync)
	case c.MaxConcurrentMoves < 1:
		return fmt.Errorf("MAX_CONCURRENT_MOVES %d must be at least 1 (default 4)", c.MaxConcurrentMoves)
	case c.TombstoneRetention <= 0:
		return fmt.Errorf("TOMBSTONE_RETENTION %s must be positive (default 24h): it is how long deletes are kept for replicas that fall behind", c.TombstoneRetention)
	case strings.HasSuffix(c.CommitLog, "/"):
		return fmt.Errorf("COMMIT_LOG %q names a directory: give the file to append to (or leave it empty)", c.CommitLog)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > 7:
		return fmt.Errorf("REPLICATION_FACTOR %d is out of range: use 1..7 (default 2)", c.ReplicationFactor)
	case c.TLSClientAuth != "none" && c.TLSClientAuth != "require":
		return fmt.Errorf("TLS_CLIENT_AUTH %q: use none or require", c.TLSClientAuth)
	case c.TLSCertFile != "" && strings.HasPrefix(c.PublicURL, "http://"):
		return fmt.Errorf("PUBLIC_URL %s is http:// but TLS_CERT_FILE makes this node serve HTTPS: make it https://", c.PublicURL)
	}
	if err := c.TLS().Check(); err != nil {
		return err
	}
	return CheckLogLevel(c.LogLevel)
}

// LogLevels are the values LOG_LEVEL takes, the most verbose first.
var LogLevels = []string{"debug", "info", "warn", "error"}

// CheckLogLevel refuses a LOG_LEVEL that is not one of LogLevels.
func CheckLogLevel(level string) error {
	if !slices.Contains(LogLevels, level) {
		return fmt.Errorf("LOG_LEVEL %q: use debug, info, warn or error", level)
	}
	return nil
}

// PrintUsage writes a --help text that lists every key with its flag,
// default and meaning.
func PrintUsage(w io.Writer) {
	fmt.Fprintln(w, "Settings (flag, else environment variable, else .env in the working directory, else default):")
	fmt.Fprintln(w)
	for _, s := range Settings {
		def := s.Default
		if def == "" {
			def = "(unset)"
		}
		fmt.Fprintf(w, "  --%-18s %-16s default %s\n", s.Flag(), s.Key, def)
		fmt.Fprintf(w, "      %s\n", s.Help)
	}
}

// flagValue holds a flag's text until the configuration is resolved; boolean
// settings accept a bare --flag.
type flagValue struct {
	value  string
	isBool bool
}

func (f *flagValue) String() string     { return f.value }
func (f *flagValue) Set(v string) error { f.value = v; return nil }
func (f *flagValue) IsBoolFlag() bool   { return f.isBool }

func parseBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*dst = b
	return nil
}

func parseInt(dst *int, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	*dst = n
	return nil
}

func parseInt64(dst *int64, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	*dst = n
	return nil
}

func parseDuration(dst *time.Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration like 10s or 1m", v)
	}
	*dst = d
	return nil
}

// Resolve reads only the settings keys the way `shoal serve` does
// (environment, then .env, then the default) for commands that need a few
// of a node's settings, such as `shoal token`. The other fields keep their
// defaults; nothing is validated.
func Resolve(src Source, keys ...string) (Config, error) {
	dot, err := readDotEnv(src.DotEnv)
	if err != nil {
		return Config{}, err
	}
	c := Defaults()
	for _, k := range keys {
		s, ok := Lookup(k)
		if !ok {
			return Config{}, fmt.Errorf("config: no setting %s", k)
		}
		v, from := s.Default, "default"
		if dv, ok := dot[k]; ok {
			v, from = dv, src.DotEnv
		}
		if src.Env != nil {
			if ev, ok := src.Env(k); ok {
				v, from = ev, "environment"
			}
		}
		if err := s.set(&c, v); err != nil {
			return Config{}, fmt.Errorf("%s (from %s): %w", k, from, err)
		}
	}
	return c, nil
}

// AuthSecret reads AUTH_SECRET the way `shoal serve` does (environment, then
// .env), for commands that sign tokens.
func AuthSecret(src Source) (string, error) {
	dot, err := readDotEnv(src.DotEnv)
	if err != nil {
		return "", err
	}
	v := dot["AUTH_SECRET"]
	if src.Env != nil {
		if ev, ok := src.Env("AUTH_SECRET"); ok {
			v = ev
		}
	}
	if v == "" {
		return "", errors.New("AUTH_SECRET is not set in the environment or .env (or pass --auth-secret)")
	}
	return v, nil
}
