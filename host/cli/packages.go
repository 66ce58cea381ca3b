package cli

import (
	"context"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/keelhq/keel/sdk/client"
)

// installRequest reads a package argument: a local directory (made absolute) or a package name.
func installRequest(arg, version string) client.PackageInstall {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		if abs, err := filepath.Abs(arg); err == nil {
			arg = abs
		}
		return client.PackageInstall{PackageName: arg, IsLocalPath: true}
	}
	return client.PackageInstall{PackageName: arg, Version: version}
}

func pluginCommand(o *options) *cobra.Command {
	list := func(cmd *cobra.Command, _ []string) error {
		c, err := o.client(cmd)
		if err != nil {
			return err
		}
		l, err := c.Plugins(cmd.Context())
		if err != nil {
			return err
		}
		rows := [][]string{}
		for _, p := range l.Items {
			rows = append(rows, []string{p.PluginKey, p.Version, p.Kind, p.Runtime, p.Source, p.Status, deref(p.LastError)})
		}
		return o.printer(cmd).table(l.JSON(), []string{"KEY", "VERSION", "KIND", "RUNTIME", "SOURCE", "STATUS", "LAST ERROR"}, rows)
	}
	cmd := &cobra.Command{Use: "plugin", Aliases: []string{"plugins"}, Short: "List, install, enable, disable, upgrade and remove plugins (instance admin)", Args: cobra.NoArgs, RunE: list}
	o.addFlags(cmd, false)
	printPlugin := func(cmd *cobra.Command, p *client.Plugin) error {
		return o.printer(cmd).fields(p.JSON(), "key", p.PluginKey, "id", p.ID, "version", p.Version, "status", p.Status, "last error", deref(p.LastError))
	}
	step := func(use, short string, f func(*client.Client, context.Context, string) (*client.Plugin, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " PLUGIN", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := o.client(cmd)
				if err != nil {
					return err
				}
				p, err := f(c, cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printPlugin(cmd, p)
			},
		}
	}
	var version string
	installCmd := &cobra.Command{
		Use: "install PACKAGE|DIR", Short: "Install a plugin from an npm package name or a local directory", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			p, err := c.InstallPlugin(cmd.Context(), installRequest(args[0], version))
			if err != nil {
				return err
			}
			return printPlugin(cmd, p)
		},
	}
	installCmd.Flags().StringVar(&version, "version", "", "package version (npm; default latest)")
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "List installed plugins and their status", Args: cobra.NoArgs, RunE: list},
		step("show", "Show one plugin (key or id)", (*client.Client).Plugin),
		installCmd,
		step("enable", "Enable a plugin", (*client.Client).EnablePlugin),
		step("disable", "Disable a plugin", (*client.Client).DisablePlugin),
		step("upgrade", "Upgrade a plugin to its package's newest version", (*client.Client).UpgradePlugin),
		&cobra.Command{
			Use: "remove PLUGIN", Aliases: []string{"uninstall"}, Short: "Uninstall a plugin", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := o.client(cmd)
				if err != nil {
					return err
				}
				if err := c.RemovePlugin(cmd.Context(), args[0]); err != nil {
					return err
				}
				cmd.Printf("Removed %s\n", args[0])
				return nil
			},
		})
	return cmd
}

func adapterCommand(o *options) *cobra.Command {
	list := func(cmd *cobra.Command, _ []string) error {
		c, err := o.client(cmd)
		if err != nil {
			return err
		}
		l, err := c.Adapters(cmd.Context())
		if err != nil {
			return err
		}
		rows := [][]string{}
		for _, a := range l.Items {
			state := "enabled"
			if a.Disabled {
				state = "disabled"
			}
			rows = append(rows, []string{a.Type, a.Label, a.Source, state})
		}
		return o.printer(cmd).table(l.JSON(), []string{"TYPE", "LABEL", "SOURCE", "STATE"}, rows)
	}
	cmd := &cobra.Command{Use: "adapter", Aliases: []string{"adapters"}, Short: "List, install, enable, disable, upgrade and remove adapters (instance admin)", Args: cobra.NoArgs, RunE: list}
	o.addFlags(cmd, false)
	printAdapter := func(cmd *cobra.Command, a *client.Adapter) error {
		return o.printer(cmd).fields(a.JSON(), "type", a.Type, "label", a.Label, "source", a.Source, "disabled", boolString(a.Disabled))
	}
	printInstalled := func(cmd *cobra.Command, a *client.AdapterInstalled) error {
		return o.printer(cmd).fields(a.JSON(), "type", a.Type, "key", a.Key, "version", a.Version)
	}
	var version string
	installCmd := &cobra.Command{
		Use: "install PACKAGE|DIR", Short: "Install an external adapter from an npm package name or a local directory", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			a, err := c.InstallAdapter(cmd.Context(), installRequest(args[0], version))
			if err != nil {
				return err
			}
			return printInstalled(cmd, a)
		},
	}
	installCmd.Flags().StringVar(&version, "version", "", "package version (npm; default latest)")
	toggle := func(use, short string, disabled bool) *cobra.Command {
		return &cobra.Command{
			Use: use + " TYPE", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := o.client(cmd)
				if err != nil {
					return err
				}
				a, err := c.SetAdapterDisabled(cmd.Context(), args[0], disabled)
				if err != nil {
					return err
				}
				return printAdapter(cmd, a)
			},
		}
	}
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "List built-in and external adapters", Args: cobra.NoArgs, RunE: list},
		installCmd, toggle("enable", "Enable an adapter type", false), toggle("disable", "Disable an adapter type", true),
		&cobra.Command{
			Use: "upgrade TYPE", Short: "Reinstall an external adapter (its package's newest version)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := o.client(cmd)
				if err != nil {
					return err
				}
				a, err := c.ReinstallAdapter(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printInstalled(cmd, a)
			},
		},
		&cobra.Command{
			Use: "remove TYPE", Short: "Remove an external adapter (an override falls back to the built-in)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := o.client(cmd)
				if err != nil {
					return err
				}
				if err := c.RemoveAdapter(cmd.Context(), args[0]); err != nil {
					return err
				}
				cmd.Printf("Removed %s\n", args[0])
				return nil
			},
		})
	return cmd
}

func boolString(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
