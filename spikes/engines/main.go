// Command engines is the storage-engine spike of issue 16: it loads the
// same documents into today's embedded store (FerretDB 1.24 on SQLite,
// through Shoal's store package), SQLite used directly (modernc.org/sqlite,
// Shoal's own schema) and Pebble (github.com/cockroachdb/pebble/v2, Shoal's
// own key layout), then measures the store's access paths on each, the
// engines taking turns operation by operation, round after round, so that
// they meet the same noise. It prints markdown tables: latencies and the
// ratios between engines measured side by side. It asserts nothing about
// speed.
//
// Run it at the lowest priority on a shared machine:
//
//	cd spikes/engines && nice -n 19 go run . --docs 2000,20000 --rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "engines:", err)
		os.Exit(1)
	}
}

type config struct {
	docs     []int
	engines  []string
	rounds   int
	others   int
	body     int
	dir      string
	seed     uint64
	sync     string
	cacheMiB int
	keep     bool
	bench
}

func parseConfig() (config, error) {
	c := config{}
	flags := flag.NewFlagSet("engines", flag.ExitOnError)
	docs := flags.String("docs", "2000,20000", "sizes of the measured user's collection (documents in partition 0), comma-separated; each size is a fresh data set")
	engines := flags.String("engines", "ferretdb,sqlite,pebble", "engines to measure, in the order they take turns: ferretdb (today's store via store.Open), sqlite, pebble")
	flags.IntVar(&c.rounds, "rounds", 3, "rounds per size; in each round every operation runs on every engine in turn")
	flags.IntVar(&c.samples, "samples", 200, "operations per engine per operation per round, at most")
	flags.DurationVar(&c.opTime, "op-time", 2*time.Second, "time per engine per operation per round, at most (at least 3 operations run); a slow engine gets fewer samples")
	flags.DurationVar(&c.groupTime, "group-time", 2*time.Second, "duration of the grouped-writers run per engine per round")
	flags.IntVar(&c.writers, "writers", 32, "concurrent writers of the grouped run (writer w writes to partition w mod --parts)")
	flags.IntVar(&c.groupMax, "group-max", 100, "most writes one grouped commit carries")
	flags.IntVar(&c.batch, "batch", 100, "documents of the batch100 commit, spread round-robin over --parts partitions")
	flags.IntVar(&c.parts, "parts", 16, "partitions: partition 0 holds the measured collection, the others --others documents each")
	flags.IntVar(&c.others, "others", 500, "documents in each partition other than 0 (other users)")
	flags.IntVar(&c.body, "body", 1024, "approximate JSON body size in bytes")
	flags.StringVar(&c.dir, "dir", os.TempDir(), "where the data directories are made (a real disk: fsync must mean something)")
	flags.Uint64Var(&c.seed, "seed", 16, "random seed (every engine gets the same keys in the same order)")
	flags.StringVar(&c.sync, "sqlite-sync", "FULL", "SQLite synchronous setting of the direct engine (WAL mode): FULL fsyncs the log at every commit like Pebble's Sync writes and the store's default; NORMAL only at checkpoints")
	flags.IntVar(&c.cacheMiB, "cache-mib", 64, "block/page cache of the sqlite and pebble engines, MiB (FerretDB keeps its own defaults)")
	flags.BoolVar(&c.keep, "keep", false, "keep the data directories")
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), `Usage: nice -n 19 go run . [flags]

Loads the same documents (1 KiB JSON by default) into each engine and
measures, per engine and round: get, replace, delete (tombstone), range10,
scan500 (catch-up after a position), last (position), batch100 (one
durable commit of 100 documents over 16 partitions) and group32 (32
writers grouped into commits). Every commit is durable: fsync of the log
(FerretDB's SQLite and, unless --sqlite-sync NORMAL, SQLite direct:
synchronous=FULL in WAL mode; Pebble: Sync writes). Output:
markdown tables on stdout, progress on stderr. Nothing is asserted about
speed; compare the engines by the ratios of one run.

Flags:
`)
		flags.PrintDefaults()
	}
	flags.Parse(os.Args[1:])
	for _, f := range strings.Split(*docs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1000 {
			return c, fmt.Errorf("--docs: %q is not a size of at least 1000", f)
		}
		c.docs = append(c.docs, n)
	}
	for _, e := range strings.Split(*engines, ",") {
		switch e = strings.TrimSpace(e); e {
		case "ferretdb", "sqlite", "pebble":
			c.engines = append(c.engines, e)
		default:
			return c, fmt.Errorf("--engines: unknown engine %q", e)
		}
	}
	switch {
	case c.rounds < 1:
		return c, fmt.Errorf("--rounds must be at least 1")
	case c.parts < 1 || c.parts > 1<<16-1:
		return c, fmt.Errorf("--parts must be in 1..65535")
	case c.others < 1:
		return c, fmt.Errorf("--others must be at least 1")
	case c.sync != "FULL" && c.sync != "NORMAL":
		return c, fmt.Errorf("--sqlite-sync must be FULL or NORMAL")
	case c.writers < 1 || c.groupMax < 1 || c.batch < 1 || c.samples < 3:
		return c, fmt.Errorf("--writers, --group-max and --batch must be positive, --samples at least 3")
	}
	return c, nil
}

func run() error {
	c, err := parseConfig()
	if err != nil {
		return err
	}
	if prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil && 20-prio < 19 {
		fmt.Fprintf(os.Stderr, "engines: running at nice %d; on a shared machine use nice -n 19\n", 20-prio)
	}
	r := rand.New(rand.NewPCG(c.seed, 2))
	for i := range 64 {
		c.bodies = append(c.bodies, makeBody(r, i, c.body))
	}
	fmt.Printf("Engines %s, taking turns per operation; %d rounds; bodies ~%d B; %d partitions (partition 0: the measured collection, the others %d documents each); SQLite synchronous=%s; load average at start %s\n\n",
		strings.Join(c.engines, ", "), c.rounds, c.body, c.parts, c.others, c.sync, loadavg())
	for _, n := range c.docs {
		if err := c.size(n); err != nil {
			return fmt.Errorf("%d documents: %w", n, err)
		}
	}
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (c *config) open(name, dir string) (engine, error) {
	switch name {
	case "ferretdb":
		return openFerret(context.Background(), dir)
	case "sqlite":
		return openSQLite(dir, c.sync, c.cacheMiB<<10)
	default:
		return openPebble(dir, int64(c.cacheMiB)<<20)
	}
}

// size loads a fresh data set of n documents in partition 0 into every
// engine and runs the rounds.
func (c *config) size(n int) error {
	root, err := os.MkdirTemp(c.dir, "shoal-engines-")
	if err != nil {
		return err
	}
	if !c.keep {
		defer os.RemoveAll(root)
	}
	docs, sizes := dataset(n, c.parts, c.others, c.body, c.seed+uint64(n))
	var subjects []*subject
	defer func() {
		for _, s := range subjects {
			s.e.close()
		}
	}()
	loads := map[string]time.Duration{}
	for _, name := range c.engines {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		e, err := c.open(name, dir)
		if err != nil {
			return err
		}
		s := &subject{e: e, seq: make([]uint64, c.parts), sizes: sizes}
		subjects = append(subjects, s)
		fmt.Fprintf(os.Stderr, "%d docs: loading %d documents into %s\n", n, len(docs), name)
		t := time.Now()
		if err := e.load(docs); err != nil {
			return fmt.Errorf("loading %s: %w", name, err)
		}
		loads[name] = time.Since(t)
		for p := range c.parts {
			s.seq[p] = uint64(sizes[p])
		}
		if se, ok := e.(*sqliteEngine); ok {
			plans, err := se.plans()
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "sqlite query plans: %v\n", plans)
		}
	}
	// results[op][engine][round]
	results := map[string]map[string][]sample{}
	start := loadavg()
	for round := range c.rounds {
		for oi, op := range operations {
			for _, s := range subjects {
				// The same keys for every engine in this round and operation.
				r := rand.New(rand.NewPCG(c.seed, uint64(n)<<20|uint64(round)<<8|uint64(oi)))
				fmt.Fprintf(os.Stderr, "%d docs, round %d: %s on %s\n", n, round+1, op.name, s.e.name())
				sm, err := op.run(&c.bench, s, r)
				if err != nil {
					return fmt.Errorf("round %d, %s on %s: %w", round+1, op.name, s.e.name(), err)
				}
				if results[op.name] == nil {
					results[op.name] = map[string][]sample{}
				}
				results[op.name][s.e.name()] = append(results[op.name][s.e.name()], sm)
			}
		}
	}
	disk := map[string]int64{}
	for _, name := range c.engines {
		disk[name] = du(filepath.Join(root, name))
	}
	c.report(n, sizes, loads, disk, results, start)
	return nil
}

// du is the size of the files under dir, in bytes (0 if unreadable).
func du(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}
