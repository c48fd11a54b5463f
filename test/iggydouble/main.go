// Command iggydouble runs the in-memory Iggy server double of package
// iggytest as a process, for tests and benchmarks that need a server on a
// port. It prints "iggy double (<dialect>) listening on <addr>" once
// listening and runs until SIGINT or SIGTERM.
//
//	iggydouble -addr 127.0.0.1:8090 -dialect legacy -token t1,t2
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/iggy/iggytest"
)

// listFlag collects a repeatable, comma-separated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			*l = append(*l, t)
		}
	}
	return nil
}

func main() {
	var tokens listFlag
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	dialect := flag.String("dialect", "current", "wire dialect: current (server 0.9) or legacy (server 0.7/0.8)")
	user := flag.String("user", "iggy", "root username")
	password := flag.String("password", "iggy", "root password")
	verbose := flag.Bool("v", false, "log connections and protocol events to stderr")
	delay := flag.Duration("delay", 0, "added before every reply, as a network round trip to a remote Iggy would be")
	flag.Var(&tokens, "token", "valid personal access token (repeatable or comma-separated)")
	flag.Parse()

	var d iggy.Dialect
	switch strings.ToLower(*dialect) {
	case "current":
		d = iggy.Current
	case "legacy":
		d = iggy.Legacy
	default:
		fmt.Fprintf(os.Stderr, "iggydouble: -dialect must be current or legacy, got %q\n", *dialect)
		os.Exit(2)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	srv, err := iggytest.Start(iggytest.Config{
		Dialect: d, Addr: *addr, Username: *user, Password: *password, Tokens: tokens, Logger: log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "iggydouble:", err)
		os.Exit(1)
	}
	srv.SetDelay(*delay)
	fmt.Printf("iggy double (%s) listening on %s\n", d, srv.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "iggydouble:", err)
		os.Exit(1)
	}
}
