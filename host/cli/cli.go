// Package cli holds keel's client commands (login, companies, agents, issues, runs,
// routines, costs, events, plugin, adapter): a board user's or an admin's view of an instance over
// its HTTP API, built on the Go API client in sdk/client.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/keelhq/keel/sdk/client"
)

// DefaultURL is the instance the commands talk to when neither --url, KEEL_URL nor a
// login names one: a local keel on SERVICE_PORT (default 3100).
func DefaultURL() string {
	port := os.Getenv("SERVICE_PORT")
	if port == "" {
		port = "3100"
	}
	return "http://127.0.0.1:" + port
}

// options are the flags every client command shares.
type options struct {
	url     string
	config  string
	company string
	json    bool
}

// Commands returns the client commands, to add to the keel root command.
func Commands() []*cobra.Command {
	o := &options{}
	return []*cobra.Command{
		loginCommand(o), logoutCommand(o), whoamiCommand(o), companiesCommand(o), agentsCommand(o), issuesCommand(o),
		runsCommand(o), routinesCommand(o), costsCommand(o), eventsCommand(o), pluginCommand(o), adapterCommand(o),
	}
}

// addFlags adds the shared flags to a top-level client command.
func (o *options) addFlags(cmd *cobra.Command, company bool) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.url, "url", "", "keel instance URL (KEEL_URL; default the last login, else "+DefaultURL()+")")
	f.StringVar(&o.config, "config", "", "credentials file (KEEL_CONFIG; default <user config dir>/keel/credentials.json)")
	f.BoolVar(&o.json, "json", false, "print the API's JSON instead of a table")
	if company {
		f.StringVarP(&o.company, "company", "c", "", "company id, issue prefix or name (KEEL_COMPANY; default the only company)")
	}
}

// configPath is the credentials file.
func (o *options) configPath() (string, error) {
	if o.config != "" {
		return o.config, nil
	}
	if p := os.Getenv("KEEL_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no user config dir (%v): pass --config or set KEEL_CONFIG", err)
	}
	return filepath.Join(dir, "keel", "credentials.json"), nil
}

// credentials is the credentials file: a board API key per instance URL and the URL of
// the last login.
type credentials struct {
	Default   string                `json:"default,omitempty"`
	Instances map[string]credential `json:"instances"`
}

type credential struct {
	Token string `json:"token"`
}

func (o *options) loadCredentials() (*credentials, string, error) {
	path, err := o.configPath()
	if err != nil {
		return nil, "", err
	}
	c := &credentials{Instances: map[string]credential{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, path, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("error reading credentials %s: %w", path, err)
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, "", fmt.Errorf("error reading credentials %s: %w", path, err)
	}
	if c.Instances == nil {
		c.Instances = map[string]credential{}
	}
	return c, path, nil
}

// saveCredentials writes the file 0600 (its directory 0700): it holds board API keys.
func saveCredentials(path string, c *credentials) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("error creating %s: %w", filepath.Dir(path), err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("error writing credentials %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("error writing credentials %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("error writing credentials %s: %w", path, err)
	}
	return nil
}

// baseURL picks the instance: --url, KEEL_URL, the last login, the local default.
func (o *options) baseURL(creds *credentials) string {
	for _, u := range []string{o.url, os.Getenv("KEEL_URL")} {
		if u != "" {
			return strings.TrimRight(u, "/")
		}
	}
	if creds != nil && creds.Default != "" {
		return creds.Default
	}
	return DefaultURL()
}

// client returns an API client of the chosen instance with its stored key (KEEL_API_KEY
// overrides it); no key is needed on a local_trusted instance.
func (o *options) client(cmd *cobra.Command) (*client.Client, error) {
	creds, _, err := o.loadCredentials()
	if err != nil {
		return nil, err
	}
	u := o.baseURL(creds)
	token := os.Getenv("KEEL_API_KEY")
	if token == "" {
		token = creds.Instances[u].Token
	}
	c := client.New(u, token)
	c.UserAgent = "keel-cli/" + cmd.Root().Version
	return c, nil
}

// companyClient returns the API client and the id of the company the command acts on.
func (o *options) companyClient(cmd *cobra.Command) (*client.Client, string, error) {
	c, err := o.client(cmd)
	if err != nil {
		return nil, "", err
	}
	companyID, err := o.companyID(cmd.Context(), c)
	if err != nil {
		return nil, "", err
	}
	return c, companyID, nil
}

// companyID resolves --company (an id, issue prefix or name) or the only company.
func (o *options) companyID(ctx context.Context, c *client.Client) (string, error) {
	want := o.company
	if want == "" {
		want = os.Getenv("KEEL_COMPANY")
	}
	list, err := c.Companies(ctx)
	if err != nil {
		return "", err
	}
	if want == "" {
		switch len(list.Items) {
		case 0:
			return "", errors.New("no company: create one first (keel companies create NAME)")
		case 1:
			return list.Items[0].ID, nil
		}
		names := make([]string, 0, len(list.Items))
		for _, co := range list.Items {
			names = append(names, co.Name)
		}
		return "", fmt.Errorf("%d companies: pass --company (one of %s)", len(list.Items), strings.Join(names, ", "))
	}
	for _, co := range list.Items {
		if co.ID == want || strings.EqualFold(co.IssuePrefix, want) || strings.EqualFold(co.Name, want) {
			return co.ID, nil
		}
	}
	return "", fmt.Errorf("no company %q among the %d you can see", want, len(list.Items))
}

// agentID resolves an agent id or name within the company of --company.
func (o *options) agentID(ctx context.Context, c *client.Client, ref string) (string, error) {
	if looksLikeID(ref) {
		return ref, nil
	}
	companyID, err := o.companyID(ctx, c)
	if err != nil {
		return "", err
	}
	return o.agentIDIn(ctx, c, companyID, ref)
}

func looksLikeID(s string) bool {
	return len(s) == 36 && strings.Count(s, "-") == 4
}

// printer writes a value as a table or as the API's JSON.
type printer struct {
	w    io.Writer
	json bool
}

func (o *options) printer(cmd *cobra.Command) *printer {
	return &printer{w: cmd.OutOrStdout(), json: o.json}
}

// raw prints JSON as the API sent it, indented.
func (p *printer) raw(b json.RawMessage) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		_, err = p.w.Write(b)
		return err
	}
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows under a header (a JSON printer prints raw instead).
func (p *printer) table(raw json.RawMessage, header []string, rows [][]string) error {
	if p.json {
		return p.raw(raw)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fields prints one value as name: value lines.
func (p *printer) fields(raw json.RawMessage, pairs ...string) error {
	if p.json {
		return p.raw(raw)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	return tw.Flush()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
