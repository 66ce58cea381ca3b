package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/backup"
	"github.com/keelhq/keel/host/pgembed"
	"github.com/keelhq/keel/kernel"
)

// backupCommand is `keel backup`: what POST /api/instance/database-backups does, from the
// shell, against the data dir and its database whether keel runs or not.
func backupCommand() *cobra.Command {
	cfg, envErr := host.ConfigFromEnv()
	asJSON := false
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Back up the whole instance (every database schema in one snapshot, attachments, keys, installed packages) into a timestamped directory, pruning old backups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if envErr != nil {
				return envErr
			}
			home, err := host.HomeDir(cfg.Home)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			dsn, stop, err := backupDatabase(ctx, home, cfg)
			if err != nil {
				return err
			}
			defer stop()
			root := cfg.BackupDir
			if root == "" {
				root = filepath.Join(home, "backups")
			}
			res, err := backup.Run(ctx, backup.Options{
				Home: home, DatabaseURL: dsn, Root: root, KeepLast: cfg.BackupKeepLast, MaxAgeDays: cfg.BackupMaxAgeDays,
				KeelVersion: kernel.Version, Progress: progressLine(cmd.ErrOrStderr()),
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprintf(w, "backup written to %s in %s: %d tables (%d rows, %s dumped), %d files (%s)\n", res.Directory,
				(time.Duration(res.DurationMs) * time.Millisecond).String(), res.Database.Tables, res.Database.Rows,
				byteSize(res.Database.Bytes), res.Files.Count, byteSize(res.Files.Bytes))
			fmt.Fprintf(w, "retention: keep the %d newest, none older than %d days; %d kept, %d pruned\n",
				res.Retention.KeepLast, res.Retention.MaxAgeDays, res.Retention.Kept, len(res.Retention.Pruned))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Home, "home", cfg.Home, "data directory (SERVICE_HOME, default ~/.keel)")
	f.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "external PostgreSQL URL (DATABASE_URL); empty backs up the embedded cluster")
	f.IntVar(&cfg.PGPort, "pg-port", cfg.PGPort, "the embedded cluster's TCP port (SERVICE_PG_PORT)")
	f.StringVar(&cfg.BackupDir, "dir", cfg.BackupDir, "where backups go (SERVICE_BACKUP_DIR, default <home>/backups)")
	f.IntVar(&cfg.BackupKeepLast, "keep", cfg.BackupKeepLast, "keep this many newest backups (SERVICE_BACKUP_KEEP, default 7; negative keeps all)")
	f.IntVar(&cfg.BackupMaxAgeDays, "max-age-days", cfg.BackupMaxAgeDays, "remove backups older than this (SERVICE_BACKUP_MAX_AGE_DAYS, default 30; negative keeps them)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON (as the API answers it)")
	return cmd
}

// backupDatabase returns the database to dump: DATABASE_URL, the embedded cluster of a
// running keel, or the embedded cluster started for the backup (stopped by stop).
func backupDatabase(ctx context.Context, home string, cfg host.Config) (dsn string, stop func(), err error) {
	if cfg.DatabaseURL != "" {
		return cfg.DatabaseURL, func() {}, nil
	}
	dbDir := filepath.Join(home, "db")
	if socket, _, err := pgembed.ConnectionURLs(dbDir, cfg.PGPort, "keel"); err == nil {
		pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, cerr := pgx.Connect(pingCtx, socket)
		cancel()
		if cerr == nil {
			conn.Close(ctx)
			return socket, func() {}, nil
		}
	}
	if _, err := os.Stat(dbDir + ".password"); errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("no embedded cluster in %s: start keel once (keel serve) with this SERVICE_HOME, or set DATABASE_URL", home)
	}
	pg, err := pgembed.Start(ctx, pgembed.Config{DataDir: dbDir, Port: cfg.PGPort})
	if err != nil {
		return "", nil, fmt.Errorf("error starting the embedded cluster for the backup: %w", err)
	}
	return pg.DSN("keel"), func() { _ = pg.Stop() }, nil
}

// restoreCommand is `keel restore DIR`.
func restoreCommand() *cobra.Command {
	cfg, envErr := host.ConfigFromEnv()
	force := false
	cmd := &cobra.Command{
		Use:   "restore DIR",
		Short: "Restore a backup made by keel backup (or the API) into an empty data dir: its files, and its database into a new embedded cluster or the empty DATABASE_URL",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if envErr != nil {
				return envErr
			}
			home, err := host.HomeDir(cfg.Home)
			if err != nil {
				return err
			}
			res, err := backup.Restore(cmd.Context(), backup.RestoreOptions{
				Dir: args[0], Home: home, DatabaseURL: cfg.DatabaseURL, Force: force, Progress: progressLine(cmd.ErrOrStderr()),
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s in %s: %d tables (%d rows, counts checked), %d files; start it with keel serve\n",
				args[0], res.Home, (time.Duration(res.DurationMs) * time.Millisecond).String(), res.Tables, res.Rows, res.Files)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Home, "home", cfg.Home, "data directory to restore into (SERVICE_HOME, default ~/.keel)")
	f.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "empty external PostgreSQL database to restore into (DATABASE_URL); unset restores into a new embedded cluster")
	f.BoolVar(&force, "force", false, "replace the contents of a non-empty data dir (its backups directory is kept)")
	return cmd
}

// progressLine prints a backup's or restore's progress as one line per stage.
func progressLine(w io.Writer) func(backup.Progress) {
	return func(p backup.Progress) {
		if p.Total > 0 {
			fmt.Fprintf(w, "keel: %s (%s of %s)\n", p.Stage, byteSize(p.Done), byteSize(p.Total))
			return
		}
		fmt.Fprintf(w, "keel: %s\n", p.Stage)
	}
}

// byteSize formats n bytes for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
