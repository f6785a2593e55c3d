// Command postmill is the one Postmill binary. `postmill serve [--target=all|edge,core,mta,inbound,analytics]`
// runs the chosen tiers in one process; `postmill migrate` applies the database migrations and exits;
// `postmill admin grant|revoke EMAIL`, `postmill secrets reencrypt` and `postmill rpc-credential
// --tier=…` are the operator's commands.
// Configuration comes from POSTMILL_* environment variables (see the README).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only on POSTMILL_PPROF_ADDR
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/react"
	"github.com/postmill/postmill/deploy/app"
)

// defaultGCPercent replaces Go's GOGC=100 when GOGC is not set. A Postmill process allocates quickly
// (every delivery reads, builds, signs and writes a message) against a live heap of 20-65 MB (the caches,
// the pools, the Kafka fetch buffers), so at 100 it would collect about once a second. At 200 the heap may
// grow to three times the live data: a collection every two seconds or so during a broadcast, and a peak
// RSS under 300 MB with the Kafka queue (at 400 it reached 410-480 MB; docs/benchmarks.md).
const defaultGCPercent = 200

func main() {
	// An isolated React Email render: this binary started by itself as a child with limits of its own.
	// It runs before anything reads configuration, and its environment holds nothing of the server's.
	if len(os.Args) > 1 && os.Args[1] == react.ChildArg {
		if err := react.ServeChild(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "postmill:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "postmill:", err)
		os.Exit(1)
	}
}

const usage = `usage: postmill <command> [flags]

commands:
  serve [--target=all]   run tiers: all (default) or a comma list of edge, core, mta, inbound, analytics
  migrate                apply database migrations to POSTMILL_DATABASE_URL and exit
  admin grant EMAIL      make the account with EMAIL a platform admin
  admin revoke EMAIL     withdraw platform admin from the account with EMAIL
  secrets reencrypt [--batch=N]
                         seal every stored secret under the primary POSTMILL_SECRET_KEY (after a rotation)
  rpc-credential --tier=edge|mta|inbound
                         print the tier's credential for the core (POSTMILL_RPC_CREDENTIAL of a process
                         without the core), derived from POSTMILL_SECRET_KEY
`

func run(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command")
	}
	cfg, err := app.LoadEnv(os.Getenv)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(logger)

	switch args[0] {
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		target := fs.String("target", app.TargetAll, "tiers to run: all or a comma list of edge, core, mta, inbound, analytics")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		targets, err := app.ParseTargets(*target)
		if err != nil {
			return err
		}
		return serve(cfg, targets, logger)
	case "migrate":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if cfg.DatabaseURL == "" {
			return errors.New("POSTMILL_DATABASE_URL is required")
		}
		st, err := postgres.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := postgres.Migrate(ctx, st.Pool()); err != nil {
			return err
		}
		logger.Info("migrations applied")
		return nil
	case "admin":
		return runAdmin(cfg, args[1:], os.Stdout)
	case "secrets":
		return runSecrets(cfg, args[1:], os.Stdout)
	case "rpc-credential":
		return runRPCCredential(cfg, args[1:], os.Stdout)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func serve(cfg app.Config, targets app.Targets, logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	shutdownTracing, err := app.SetupTracing(ctx, "postmill")
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(c)
	}()

	if addr := os.Getenv("POSTMILL_PPROF_ADDR"); addr != "" {
		// Go's profiler on a listener of its own, never on the public edge.
		go func() {
			logger.Info("listening", "service", "pprof", "addr", addr)
			if err := http.ListenAndServe(addr, nil); err != nil {
				logger.Error("pprof listener", "err", err)
			}
		}()
	}

	a, err := app.New(cfg, targets, logger)
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	failed := a.Failed()
	if err := a.Start(startCtx); err != nil {
		return err
	}
	logger.Info("postmill started", "targets", targets, "http", a.HTTPURL(), "rpc", a.RPCURL())

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down: draining")
	case runErr = <-failed:
		logger.Error("shutting down after a failure", "err", runErr)
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), time.Duration(cfg.ShutdownGraceSecs+10)*time.Second)
	defer cancelStop()
	if err := a.Stop(stopCtx); err != nil && runErr == nil {
		runErr = err
	}
	logger.Info("postmill stopped")
	return runErr
}
