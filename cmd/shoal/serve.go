package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/node"
)

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal serve [flags]")
		fmt.Fprintln(stderr, "Runs a Shoal node until SIGINT or SIGTERM, then finishes in-flight requests and exits 0.")
		fmt.Fprintln(stderr)
		config.PrintUsage(stderr)
	}
	resolve := config.FlagSet(fs, config.OSSource())
	if code, done := parseArgs(fs, args, stderr, 2); done {
		return code
	}
	cfg, err := resolve()
	if err != nil {
		fmt.Fprintf(stderr, "shoal serve: %v\n", err)
		return 2
	}
	log := newLogger(stderr, cfg.LogLevel)
	node.Version = version
	// A node whose log pipe closed (its supervisor died) must still shut
	// down cleanly: get EPIPE on writes instead of dying of SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := node.Start(ctx, cfg, log)
	if err != nil {
		log.Error("node did not start", "err", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
wait:
	for {
		select {
		case <-hup:
			log.Info("SIGHUP: re-reading the peer list")
			n.ReloadPeers()
		case <-ctx.Done():
			break wait
		}
	}
	stop()
	log.Info("signal received, shutting down")
	if err := n.Close(context.Background()); err != nil {
		log.Error("shutdown was not clean", "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
