package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/shoal-db/shoal/store"
)

// inspect prints what a stopped node's embedded store holds of each
// partition: the lease vote it recorded as a voter, the tenure it
// recorded as a master, the newest epoch of its history, its last stored
// position and the position its copy is complete up to. It is how a
// failing fault-suite run's kept data directories are read.
func inspect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "the DATA_DIR of a stopped node (its embedded store); required")
	database := fs.String("db", "shoal", "MONGO_DB: the database name inside the store")
	all := fs.Bool("all", false, "list every partition, not only those with anything recorded")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal inspect --data-dir DIR [--db shoal] [--all]")
		fmt.Fprintln(stderr, "Prints, per partition, what a stopped node's embedded store holds: the lease vote it recorded as a voter")
		fmt.Fprintln(stderr, "(holder@epoch), the tenure it recorded as a master, the newest epoch of its history, its last stored position")
		fmt.Fprintln(stderr, "and the position its copy is complete up to. Stop the node first: a running node owns its store.")
		fs.PrintDefaults()
	}
	if code, done := parseArgs(fs, args, stderr, 2); done {
		return code
	}
	if *dataDir == "" {
		fmt.Fprintln(stderr, "shoal inspect: --data-dir is required (the DATA_DIR of a stopped node)")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, store.Options{DataDir: *dataDir, Database: *database, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintf(stderr, "shoal inspect: opening the store in %s: %v\n", *dataDir, err)
		return 1
	}
	defer st.Close(context.Background())
	if err := printInspection(ctx, st, *dataDir, *all, stdout); err != nil {
		fmt.Fprintf(stderr, "shoal inspect: %v\n", err)
		return 1
	}
	return 0
}

func printInspection(ctx context.Context, st *store.Store, dataDir string, all bool, out io.Writer) error {
	count, nodeID, err := st.PartitionCount(ctx)
	if err != nil {
		return err
	}
	if count == 0 {
		return fmt.Errorf("the store in %s holds nothing yet: no node has started on it", dataDir)
	}
	votes, err := st.LeaseVotes(ctx)
	if err != nil {
		return err
	}
	w := store.NewWriter(st, count, store.WriterOptions{})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s, PARTITION_COUNT=%d, store in %s\n", nodeID, count, dataDir)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEASE VOTE\tTENURE\tNEWEST EPOCH\tLAST\tAPPLIED")
	for p := 0; p < count; p++ {
		vote, tenure, newest := "-", w.Tenure(p), w.NewestEpoch(p)
		if v, ok := votes[p]; ok && v.Holder != "" {
			vote = fmt.Sprintf("%s@%d", v.Holder, v.Epoch)
		}
		last, applied := w.Position(p), w.Applied(p)
		if !all && vote == "-" && tenure == 0 && newest == 0 && last == (store.Position{}) && applied == (store.Position{}) {
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", p, vote, epochOrDash(tenure), newest, last, applied)
	}
	return tw.Flush()
}

// epochOrDash prints an epoch, or "-" for none.
func epochOrDash(epoch uint64) string {
	if epoch == 0 {
		return "-"
	}
	return fmt.Sprint(epoch)
}
