// Command keel is the keel control plane: `keel serve` runs the host, `keel extension <key>`
// runs one first-party extension as the host's child process.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelhq/keel/extensions"
	_ "github.com/keelhq/keel/extensions/all"
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/cli"
	"github.com/keelhq/keel/host/packages"
	"github.com/keelhq/keel/host/pgembed"
	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
)

func main() {
	if key := os.Getenv(supervisor.RoleEnv); key != "" && len(os.Args) > 1 && os.Args[1] == "extension" {
		runExtension(key)
		return
	}
	if err := rootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "keel:", err)
		os.Exit(1)
	}
}

func runExtension(key string) {
	f, ok := extensions.Lookup(key)
	if !ok {
		fmt.Fprintf(os.Stderr, "keel: no first-party extension %q\n", key)
		os.Exit(2)
	}
	startPprof(key)
	sdk.Serve(f())
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "keel",
		Short:         "keel is a control plane for companies of AI agents",
		Version:       kernel.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCommand(), extensionCommand(), versionCommand(), dbCommand(), backupCommand(), restoreCommand(),
		bootstrapCEOCommand())
	root.AddCommand(cli.Commands()...)
	return root
}

func serveCommand() *cobra.Command {
	cfg, envErr := host.ConfigFromEnv()
	var extDirs []string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Start keel: PostgreSQL (embedded unless DATABASE_URL is set), the kernel, extensions and the HTTP API",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if envErr != nil {
				return envErr
			}
			cfg.ExtensionDirs = append(cfg.ExtensionDirs, extDirs...)
			return serve(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Home, "home", cfg.Home, "data directory (SERVICE_HOME, default ~/.keel)")
	f.StringVar(&cfg.Host, "host", cfg.Host, "listen address (SERVICE_HOST)")
	f.IntVar(&cfg.Port, "port", cfg.Port, "listen port (SERVICE_PORT)")
	f.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "external PostgreSQL URL (DATABASE_URL); empty runs an embedded cluster")
	f.StringVar(&cfg.DeploymentMode, "deployment-mode", cfg.DeploymentMode, "local_trusted or authenticated (SERVICE_DEPLOYMENT_MODE)")
	f.StringVar(&cfg.DeploymentExposure, "deployment-exposure", cfg.DeploymentExposure, "private or public (SERVICE_DEPLOYMENT_EXPOSURE)")
	f.StringVar(&cfg.PublicBaseURL, "public-base-url", cfg.PublicBaseURL, "public base URL (SERVICE_PUBLIC_BASE_URL)")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "trace, debug, info, warn or error (SERVICE_LOG_LEVEL)")
	f.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "text or json (SERVICE_LOG_FORMAT)")
	f.StringSliceVar(&extDirs, "extensions", nil, "extra extension directories (also SERVICE_EXTENSIONS_PATH)")
	return cmd
}

func serve(ctx context.Context, cfg host.Config) error {
	logger := host.NewLogger(cfg, os.Stderr)
	startPprof("serve")
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	h, err := host.Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "keel %s serving %s (%s, data in %s) — ready in %s\n", kernel.Version, h.URL,
		h.Config().DeploymentMode, h.Config().Home, time.Since(began).Round(time.Millisecond))
	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case serveErr = <-h.Served():
	}
	h.Stop(context.Background())
	if serveErr != nil && !errors.Is(serveErr, context.Canceled) && !strings.Contains(serveErr.Error(), "closed") {
		return serveErr
	}
	return nil
}

func extensionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "extension",
		Short: "Write and package extensions (new, pack); `keel extension <key>` runs a first-party extension for keel serve",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			f, ok := extensions.Lookup(args[0])
			if !ok {
				return fmt.Errorf("no first-party extension %q (have: %s)", args[0], strings.Join(extensions.Keys(), ", "))
			}
			sdk.Serve(f())
			return nil
		},
	}
	cmd.AddCommand(extensionPackCommand(), extensionNewCommand())
	return cmd
}

func extensionPackCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "pack DIR",
		Short: "Build a keel package (.tgz) from an extension directory, writing each artifact's sha256 into its manifest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			var exclude []string
			if out != "" {
				if out, err = filepath.Abs(out); err != nil {
					return err
				}
				exclude = append(exclude, out)
			}
			p, err := packages.Pack(dir, packages.Limits{}, exclude...)
			if err != nil {
				return fmt.Errorf("error packing %s: %w", dir, err)
			}
			if out == "" {
				out = strings.ReplaceAll(p.Manifest.Key, ".", "-") + "-" + p.Manifest.Version + ".tgz"
			}
			if err := os.WriteFile(out, p.Archive, 0o644); err != nil {
				return fmt.Errorf("error writing %s: %w", out, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "packed %s %s into %s (%d bytes, sha256 %s)\n", p.Manifest.Key, p.Manifest.Version, out, len(p.Archive), p.Digest)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "archive to write (default <key>-<version>.tgz in the working directory)")
	return cmd
}

func extensionNewCommand() *cobra.Command {
	var (
		wasm    bool
		keelSrc string
		dir     string
		noTidy  bool
	)
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Write a working extension (manifest, main.go with a route, a test in a real host, Makefile) into ./NAME",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if dir == "" {
				dir = name
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if keelSrc == "" {
				keelSrc = packages.FindKeelSource()
			}
			if err := packages.Scaffold(packages.ScaffoldOptions{Dir: abs, Name: name, Wasm: wasm, KeelSource: keelSrc}); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "wrote %s\n", abs)
			if keelSrc == "" {
				fmt.Fprintln(w, "no keel checkout found: add `replace github.com/keelhq/keel => /path/to/keel` to go.mod (or pass --keel-src)")
			}
			if !noTidy {
				tidy := exec.Command("go", "mod", "tidy")
				tidy.Dir, tidy.Stdout, tidy.Stderr = abs, w, cmd.ErrOrStderr()
				if err := tidy.Run(); err != nil {
					return fmt.Errorf("go mod tidy in %s failed (fix go.mod and run it again): %w", abs, err)
				}
			}
			fmt.Fprintf(w, "next: cd %s && make test && make pack\n", dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&wasm, "wasm", false, "write a wasm extension instead of a process extension")
	f.StringVar(&keelSrc, "keel-src", "", "keel checkout to build against (default: the one above this executable or the working directory)")
	f.StringVar(&dir, "dir", "", "directory to write (default ./NAME)")
	f.BoolVar(&noTidy, "no-tidy", false, "do not run go mod tidy afterwards")
	return cmd
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the keel version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "keel", kernel.Version)
		},
	}
}

// dbCommand groups commands about the embedded PostgreSQL cluster.
func dbCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "db", Short: "The embedded PostgreSQL cluster"}
	cfg, envErr := host.ConfigFromEnv()
	socket := false
	database := "keel"
	url := &cobra.Command{
		Use:   "url",
		Short: "Print a URL to connect to the embedded cluster (psql \"$(keel db url)\"): over 127.0.0.1:SERVICE_PG_PORT when set, else over the Unix socket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if envErr != nil {
				return envErr
			}
			if cfg.DatabaseURL != "" {
				return errors.New("DATABASE_URL is set: keel uses that database, not an embedded cluster")
			}
			home, err := host.HomeDir(cfg.Home)
			if err != nil {
				return err
			}
			sock, tcp, err := pgembed.ConnectionURLs(filepath.Join(home, "db"), cfg.PGPort, database)
			if err != nil {
				return err
			}
			if tcp != "" && !socket {
				fmt.Fprintln(cmd.OutOrStdout(), tcp)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), sock)
			return nil
		},
	}
	f := url.Flags()
	f.StringVar(&cfg.Home, "home", cfg.Home, "data directory (SERVICE_HOME, default ~/.keel)")
	f.IntVar(&cfg.PGPort, "pg-port", cfg.PGPort, "the cluster's TCP port (SERVICE_PG_PORT)")
	f.BoolVar(&socket, "socket", false, "print the Unix socket URL even when a TCP port is set")
	f.StringVar(&database, "database", database, "database name")
	cmd.AddCommand(url)
	return cmd
}
