package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/kernel"
)

// bootstrapCEOCommand is `keel bootstrap-ceo`: it opens a bootstrap_ceo invite (revoking
// earlier unused ones) and prints its link; the signed-in person who accepts it becomes the
// instance's first admin. It works from the shell whether keel runs or not, with the same
// data dir or DATABASE_URL, and needs no config file.
func bootstrapCEOCommand() *cobra.Command {
	cfg, envErr := host.ConfigFromEnv()
	force, asJSON := false, false
	cmd := &cobra.Command{
		Use:   "bootstrap-ceo",
		Short: "Print a one-time invite link that makes the person who accepts it the first instance admin",
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
			// A local_trusted kernel opens no board claim or bootstrap invite of its own.
			k, err := kernel.New(ctx, dsn, kernel.Config{DeploymentMode: kernel.ModeLocalTrusted, PublicBaseURL: cfg.PublicBaseURL, DBMaxConns: 2})
			if err != nil {
				return err
			}
			defer k.Close()
			var admins int
			if err := k.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel.instance_user_roles WHERE role = 'instance_admin' AND user_id <> $1`,
				kernel.LocalBoardUserID).Scan(&admins); err != nil {
				return fmt.Errorf("error checking instance admins: %w", err)
			}
			if admins > 0 && !force {
				return errors.New("this instance already has an instance admin; use --force to open a bootstrap invite anyway")
			}
			base := cfg.PublicBaseURL
			if base == "" {
				base = fmt.Sprintf("http://127.0.0.1:%d", cfg.Port)
			}
			b, err := k.BootstrapInviteCreate(ctx, strings.TrimRight(base, "/"))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(b)
			}
			fmt.Fprintf(w, "bootstrap invite (expires %s): sign up, then accept it with POST %s/accept\n%s\n",
				b.ExpiresAt.Format("2006-01-02 15:04 MST"), b.InvitePath, b.InviteURL)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Home, "home", cfg.Home, "data directory (SERVICE_HOME, default ~/.keel)")
	f.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "external PostgreSQL URL (DATABASE_URL); empty uses the embedded cluster")
	f.IntVar(&cfg.PGPort, "pg-port", cfg.PGPort, "the embedded cluster's TCP port (SERVICE_PG_PORT)")
	f.StringVar(&cfg.PublicBaseURL, "base-url", cfg.PublicBaseURL, "base URL of the link (SERVICE_PUBLIC_BASE_URL, default http://127.0.0.1:<port>)")
	f.BoolVar(&force, "force", false, "open an invite even when an instance admin exists")
	f.BoolVar(&asJSON, "json", false, "print the invite as JSON")
	return cmd
}
