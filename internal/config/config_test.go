package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/cluster"
)

func resolve(t *testing.T, args []string, env map[string]string, dotenv string) (Config, error) {
	t.Helper()
	src := Source{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	if dotenv != "" {
		src.DotEnv = filepath.Join(t.TempDir(), ".env")
		if err := os.WriteFile(src.DotEnv, []byte(dotenv), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	get := FlagSet(fs, src)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return get()
}

func TestPrecedenceFlagEnvDotEnvDefault(t *testing.T) {
	c, err := resolve(t, []string{"--http-addr", ":1"},
		map[string]string{"HTTP_ADDR": ":2", "MONGO_DB": "fromenv", "AUTH_SECRET": "0123456789abcdef"},
		"HTTP_ADDR=:3\nMONGO_DB=fromdotenv\nDATA_DIR=/from/dotenv\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":1" || c.MongoDB != "fromenv" || c.DataDir != "/from/dotenv" || c.PartitionCount != 271 {
		t.Fatalf("resolved %+v", c)
	}
}

func TestInsecureIsABareSwitch(t *testing.T) {
	c, err := resolve(t, []string{"--insecure"}, nil, "")
	if err != nil || !c.Insecure {
		t.Fatalf("--insecure: %v %+v", err, c)
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		dotenv string
		want   string
	}{
		{"no secret", nil, nil, "", "AUTH_SECRET is empty"},
		{"short secret", nil, map[string]string{"AUTH_SECRET": "short"}, "", "shorter than 16"},
		{"unknown .env key", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef"}, "AUTH_SECRT=oops\n", "AUTH_SECRT, which Shoal does not read"},
		{"bad number", []string{"--partition-count", "many"}, map[string]string{"AUTH_SECRET": "0123456789abcdef"}, "", "PARTITION_COUNT (from --partition-count)"},
		{"zero partitions", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "PARTITION_COUNT": "0"}, "", "PARTITION_COUNT 0 is out of range"},
		{"bad duration", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "SHUTDOWN_GRACE": "soon"}, "", "not a duration"},
		{"bad level", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "LOG_LEVEL": "loud"}, "", "LOG_LEVEL"},
		{"document limit over MongoDB's", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "MAX_DOCUMENT_BYTES": "33554432"}, "", "MAX_DOCUMENT_BYTES 33554432 is out of range"},
		{"no fields", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "MAX_DOCUMENT_FIELDS": "0"}, "", "MAX_DOCUMENT_FIELDS 0"},
		{"token lifetime too short", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "TOKEN_MAX_TTL": "10s"}, "", "TOKEN_MAX_TTL 10s is too short"},
		// (Past 292 years the lifetime and the clock skew added to it
		// overflowed, and every token was refused.)
		{"token lifetime past ten years", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "TOKEN_MAX_TTL": "2562047h47m"}, "", "TOKEN_MAX_TTL 2562047h47m0s is too long"},
		// (A node sized its buffer by the declared length, up to this
		// bound: one request's header could exhaust its memory.)
		{"body limit past 64 MiB", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "MAX_BODY_BYTES": "1099511627776"}, "", "MAX_BODY_BYTES 1099511627776 is out of range"},
		{"page limit past 32 MiB", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "MAX_PAGE_BYTES": "33554433"}, "", "MAX_PAGE_BYTES 33554433 is out of range"},
		{"a certificate without its key", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "TLS_CERT_FILE": "node1.pem"}, "", "TLS_CERT_FILE and TLS_KEY_FILE go together"},
		{"node certificates required without a CA", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "TLS_CERT_FILE": "node1.pem", "TLS_KEY_FILE": "node1-key.pem", "TLS_CLIENT_AUTH": "require"}, "", "TLS_CLIENT_AUTH=require needs"},
		{"an unknown client auth", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "TLS_CLIENT_AUTH": "maybe"}, "", `TLS_CLIENT_AUTH "maybe"`},
		{"an http public url under TLS", nil, map[string]string{"AUTH_SECRET": "0123456789abcdef", "TLS_CERT_FILE": "node1.pem", "TLS_KEY_FILE": "node1-key.pem", "PUBLIC_URL": "http://db.example:8080"}, "", "PUBLIC_URL http://db.example:8080 is http://"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := resolve(t, c.args, c.env, c.dotenv)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestUsageListsEveryKey(t *testing.T) {
	var b bytes.Buffer
	PrintUsage(&b)
	for _, s := range Settings {
		if !strings.Contains(b.String(), s.Key) || !strings.Contains(b.String(), "--"+s.Flag()) {
			t.Errorf("usage lacks %s", s.Key)
		}
	}
}

func TestDefaultsAreValidWithASecret(t *testing.T) {
	c := Defaults()
	c.AuthSecret = "0123456789abcdef"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A request a node forwards to another carries the client's body in one
// internal request, which the receiver takes up to cluster.MaxInternalBody.
func TestTheLargestBodyFitsAForward(t *testing.T) {
	if maxBodyBytes > cluster.MaxInternalBody {
		t.Fatalf("MAX_BODY_BYTES may be %d, more than an internal request carries (%d)", maxBodyBytes, cluster.MaxInternalBody)
	}
}

// A query page a node forwards to another comes back in one internal
// answer, which the forwarding node takes up to cluster.MaxInternalAnswer:
// the largest page, its last document and the JSON around them fit.
func TestTheLargestPageFitsAForwardedAnswer(t *testing.T) {
	if maxPageBytes+maxDocumentBytes+1<<20 > cluster.MaxInternalAnswer {
		t.Fatalf("MAX_PAGE_BYTES may be %d and a document %d, more than an internal answer carries (%d)", maxPageBytes, maxDocumentBytes, cluster.MaxInternalAnswer)
	}
}
