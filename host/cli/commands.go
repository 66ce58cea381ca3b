package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelhq/keel/sdk/client"
)

func loginCommand(o *options) *cobra.Command {
	var admin bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign this CLI in: opens a CLI auth challenge, prints the URL to approve it, stores the board API key (0600)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			creds, path, err := o.loadCredentials()
			if err != nil {
				return err
			}
			u := o.baseURL(creds)
			c := client.New(u, "")
			c.UserAgent = "keel-cli/" + cmd.Root().Version
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			out := cmd.OutOrStdout()
			if hl, err := c.Health(ctx); err == nil && hl.DeploymentMode == "local_trusted" {
				fmt.Fprintf(out, "%s is local_trusted: commands work without a key; logging in anyway.\n", u)
			}
			host, _ := os.Hostname()
			access := "board"
			if admin {
				access = "instance_admin_required"
			}
			ch, err := c.CreateChallenge(ctx, client.ChallengeCreate{ClientName: "keel CLI on " + host, Command: "keel login", RequestedAccess: access})
			if err != nil {
				return fmt.Errorf("error opening a CLI auth challenge at %s: %w", u, err)
			}
			fmt.Fprintf(out, "Approve this CLI in keel (signed in as a board user): %s\n", ch.ApproveURL)
			fmt.Fprintf(out, "Waiting for approval (until %s)...\n", ch.ExpiresAt.Local().Format(time.Kitchen))
			key, err := c.WaitForApproval(ctx, ch)
			if err != nil {
				if ctx.Err() != nil {
					_ = c.CancelChallenge(context.WithoutCancel(ctx), ch)
				}
				return fmt.Errorf("login not approved: %w", err)
			}
			creds.Instances[u] = credential{Token: key}
			creds.Default = u
			if err := saveCredentials(path, creds); err != nil {
				return err
			}
			fmt.Fprintf(out, "Logged in to %s; the key is stored in %s\n", u, path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&admin, "admin", false, "ask for instance admin access (only an instance admin can approve)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for approval")
	o.addFlags(cmd, false)
	return cmd
}

func logoutCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Revoke this CLI's board API key and forget it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			creds, path, err := o.loadCredentials()
			if err != nil {
				return err
			}
			u := o.baseURL(creds)
			cred, ok := creds.Instances[u]
			if !ok {
				fmt.Fprintf(cmd.OutOrStdout(), "Not logged in to %s\n", u)
				return nil
			}
			if err := client.New(u, cred.Token).RevokeCurrent(cmd.Context()); err != nil && !client.IsStatus(err, 401) {
				return fmt.Errorf("error revoking the key: %w", err)
			}
			delete(creds.Instances, u)
			if creds.Default == u {
				creds.Default = ""
			}
			if err := saveCredentials(path, creds); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Logged out of %s\n", u)
			return nil
		},
	}
	o.addFlags(cmd, false)
	return cmd
}

func whoamiCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the board user the CLI acts as",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			me, err := c.Me(cmd.Context())
			if err != nil {
				return err
			}
			var id, name, email string
			if me.User != nil {
				id, name, email = me.User.ID, me.User.Name, me.User.Email
			}
			return o.printer(cmd).fields(me.JSON(), "url", c.BaseURL, "user", id, "name", name, "email", email,
				"source", me.Source, "instance admin", strconv.FormatBool(me.IsInstanceAdmin))
		},
	}
	o.addFlags(cmd, false)
	return cmd
}

func companiesCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "companies",
		Aliases: []string{"company"},
		Short:   "List companies (keel companies [list|create NAME])",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listCompanies(cmd, o)
		},
	}
	o.addFlags(cmd, false)
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List the companies you can see", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listCompanies(cmd, o) },
	}, &cobra.Command{
		Use: "create NAME", Short: "Create a company", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			co, err := c.CreateCompany(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.printer(cmd).fields(co.JSON(), "id", co.ID, "name", co.Name, "prefix", co.IssuePrefix, "status", co.Status)
		},
	})
	return cmd
}

func listCompanies(cmd *cobra.Command, o *options) error {
	c, err := o.client(cmd)
	if err != nil {
		return err
	}
	list, err := c.Companies(cmd.Context())
	if err != nil {
		return err
	}
	rows := [][]string{}
	for _, co := range list.Items {
		rows = append(rows, []string{co.ID, co.IssuePrefix, co.Name, co.Status})
	}
	return o.printer(cmd).table(list.JSON(), []string{"ID", "PREFIX", "NAME", "STATUS"}, rows)
}

func agentsCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "agents",
		Aliases: []string{"agent"},
		Short:   "List, create, wake, pause and resume agents",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return listAgents(cmd, o) },
	}
	o.addFlags(cmd, true)
	var create client.AgentCreate
	var command string
	createCmd := &cobra.Command{
		Use: "create NAME", Short: "Create an agent (--adapter process --command 'sh -c ...' for a process agent)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, companyID, err := o.companyClient(cmd)
			if err != nil {
				return err
			}
			p := create
			p.Name = args[0]
			if command != "" {
				p.AdapterConfig = map[string]any{"command": "/bin/sh", "args": []string{"-c", command}}
			}
			a, err := c.CreateAgent(cmd.Context(), companyID, p)
			if err != nil {
				return err
			}
			return printAgent(cmd, o, a)
		},
	}
	createCmd.Flags().StringVar(&create.Role, "role", "", "role (ceo, engineer, ...)")
	createCmd.Flags().StringVar(&create.Title, "title", "", "title")
	createCmd.Flags().StringVar(&create.AdapterType, "adapter", "", "adapter type (process, http, ...)")
	createCmd.Flags().StringVar(&command, "command", "", "for a process agent: the shell command its runs execute")
	var wake client.Wake
	wakeCmd := &cobra.Command{
		Use: "wake AGENT", Short: "Wake an agent now: prints the queued run", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := o.agentArg(cmd, args[0])
			if err != nil {
				return err
			}
			w := wake
			if w.Source == "" {
				w.Source = "on_demand"
			}
			r, err := c.WakeAgent(cmd.Context(), id, w)
			if err != nil {
				return err
			}
			return o.printer(cmd).fields(r.JSON(), "run", r.ID, "status", r.Status)
		},
	}
	wakeCmd.Flags().StringVar(&wake.Reason, "reason", "", "why (shown on the run)")
	step := func(use, short string, f func(*client.Client, context.Context, string) (*client.Agent, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " AGENT", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, id, err := o.agentArg(cmd, args[0])
				if err != nil {
					return err
				}
				a, err := f(c, cmd.Context(), id)
				if err != nil {
					return err
				}
				return printAgent(cmd, o, a)
			},
		}
	}
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List the company's agents", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return listAgents(cmd, o) },
	}, createCmd, wakeCmd,
		step("pause", "Pause an agent", (*client.Client).PauseAgent),
		step("resume", "Resume a paused agent", (*client.Client).ResumeAgent))
	return cmd
}

// agentArg returns a client and the id of the agent named by ref (id or name).
func (o *options) agentArg(cmd *cobra.Command, ref string) (*client.Client, string, error) {
	c, err := o.client(cmd)
	if err != nil {
		return nil, "", err
	}
	id, err := o.agentID(cmd.Context(), c, ref)
	return c, id, err
}

func printAgent(cmd *cobra.Command, o *options, a *client.Agent) error {
	return o.printer(cmd).fields(a.JSON(), "id", a.ID, "name", a.Name, "role", a.Role, "status", a.Status, "adapter", a.AdapterType)
}

func listAgents(cmd *cobra.Command, o *options) error {
	c, companyID, err := o.companyClient(cmd)
	if err != nil {
		return err
	}
	list, err := c.Agents(cmd.Context(), companyID)
	if err != nil {
		return err
	}
	rows := [][]string{}
	for _, a := range list.Items {
		rows = append(rows, []string{a.ID, a.Name, a.Role, a.Status, a.AdapterType})
	}
	return o.printer(cmd).table(list.JSON(), []string{"ID", "NAME", "ROLE", "STATUS", "ADAPTER"}, rows)
}

func issuesCommand(o *options) *cobra.Command {
	var filter client.IssueFilter
	var assignee string
	list := func(cmd *cobra.Command, _ []string) error {
		c, companyID, err := o.companyClient(cmd)
		if err != nil {
			return err
		}
		f := filter
		if assignee != "" {
			if f.AssigneeAgentID, err = o.agentID(cmd.Context(), c, assignee); err != nil {
				return err
			}
		}
		l, err := c.Issues(cmd.Context(), companyID, f)
		if err != nil {
			return err
		}
		rows := [][]string{}
		for _, is := range l.Items {
			rows = append(rows, []string{is.Identifier, is.Status, is.Priority, is.Title, deref(is.AssigneeAgentID)})
		}
		return o.printer(cmd).table(l.JSON(), []string{"ISSUE", "STATUS", "PRIORITY", "TITLE", "ASSIGNEE"}, rows)
	}
	cmd := &cobra.Command{
		Use: "issues", Aliases: []string{"issue"}, Short: "List, create, show, comment on and assign issues", Args: cobra.NoArgs, RunE: list,
	}
	o.addFlags(cmd, true)
	listCmd := &cobra.Command{Use: "list", Short: "List the company's issues", Args: cobra.NoArgs, RunE: list}
	for _, c := range []*cobra.Command{cmd, listCmd} {
		c.Flags().StringVar(&filter.Status, "status", "", "only these statuses (comma-separated)")
		c.Flags().StringVar(&assignee, "assignee", "", "only issues assigned to this agent (id or name)")
		c.Flags().StringVarP(&filter.Q, "query", "q", "", "search text")
		c.Flags().IntVar(&filter.Limit, "limit", 0, "at most this many (server default 50)")
	}
	var create client.IssueCreate
	var createAssignee string
	createCmd := &cobra.Command{
		Use: "create TITLE", Short: "Create an issue", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, companyID, err := o.companyClient(cmd)
			if err != nil {
				return err
			}
			p := create
			p.Title = args[0]
			if createAssignee != "" {
				if p.AssigneeAgentID, err = o.agentID(cmd.Context(), c, createAssignee); err != nil {
					return err
				}
			}
			is, err := c.CreateIssue(cmd.Context(), companyID, p)
			if err != nil {
				return err
			}
			return printIssue(cmd, o, is)
		},
	}
	createCmd.Flags().StringVarP(&create.Description, "description", "d", "", "description (markdown)")
	createCmd.Flags().StringVar(&create.Priority, "priority", "", "critical, high, medium or low")
	createCmd.Flags().StringVar(&create.Status, "status", "", "initial status (default backlog, todo when assigned)")
	createCmd.Flags().StringVar(&createAssignee, "assignee", "", "assign to this agent (id or name)")
	showCmd := &cobra.Command{
		Use: "show ISSUE", Short: "Show an issue (id or identifier) and its comments", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			is, err := c.Issue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			comments, err := c.Comments(cmd.Context(), is.ID)
			if err != nil {
				return err
			}
			if o.json {
				return o.printer(cmd).raw([]byte(`{"issue":` + string(is.JSON()) + `,"comments":` + string(comments.JSON()) + `}`))
			}
			if err := printIssue(cmd, o, is); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if d := deref(is.Description); d != "" {
				fmt.Fprintf(out, "\n%s\n", d)
			}
			for _, cm := range comments.Items {
				author := deref(cm.AuthorAgentID)
				if author == "" {
					author = "user " + deref(cm.AuthorUserID)
				} else {
					author = "agent " + author
				}
				fmt.Fprintf(out, "\n--- %s, %s\n%s\n", author, cm.CreatedAt.Local().Format(time.DateTime), cm.Body)
			}
			return nil
		},
	}
	commentCmd := &cobra.Command{
		Use: "comment ISSUE BODY", Short: "Add a comment (@mentions wake the agents named)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			is, err := c.Issue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			cm, err := c.AddComment(cmd.Context(), is.ID, args[1])
			if err != nil {
				return err
			}
			return o.printer(cmd).fields(cm.JSON(), "comment", cm.ID, "issue", is.Identifier)
		},
	}
	var assignUser string
	var unassign bool
	assignCmd := &cobra.Command{
		Use: "assign ISSUE [AGENT]", Short: "Assign an issue to an agent (id or name), a user (--user) or nobody (--none)", Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			is, err := c.Issue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var a client.IssueAssign
			switch {
			case unassign:
			case assignUser != "":
				a.AssigneeUserID = &assignUser
			case len(args) == 2:
				id, err := o.agentIDIn(cmd.Context(), c, is.CompanyID, args[1])
				if err != nil {
					return err
				}
				a.AssigneeAgentID = &id
			default:
				return fmt.Errorf("name an agent, --user USER or --none")
			}
			is, err = c.AssignIssue(cmd.Context(), is.ID, a)
			if err != nil {
				return err
			}
			return printIssue(cmd, o, is)
		},
	}
	assignCmd.Flags().StringVar(&assignUser, "user", "", "assign to this board user id")
	assignCmd.Flags().BoolVar(&unassign, "none", false, "unassign")
	cmd.AddCommand(listCmd, createCmd, showCmd, commentCmd, assignCmd)
	return cmd
}

// agentIDIn resolves an agent id or name within a given company.
func (o *options) agentIDIn(ctx context.Context, c *client.Client, companyID, ref string) (string, error) {
	if looksLikeID(ref) {
		return ref, nil
	}
	list, err := c.Agents(ctx, companyID)
	if err != nil {
		return "", err
	}
	for _, a := range list.Items {
		if strings.EqualFold(a.Name, ref) {
			return a.ID, nil
		}
	}
	return "", fmt.Errorf("no agent %q in the company", ref)
}

func printIssue(cmd *cobra.Command, o *options, is *client.Issue) error {
	return o.printer(cmd).fields(is.JSON(), "issue", is.Identifier, "id", is.ID, "title", is.Title, "status", is.Status,
		"priority", is.Priority, "assignee agent", deref(is.AssigneeAgentID), "assignee user", deref(is.AssigneeUserID))
}

func runsCommand(o *options) *cobra.Command {
	var filter client.RunFilter
	var agent string
	list := func(cmd *cobra.Command, _ []string) error {
		c, companyID, err := o.companyClient(cmd)
		if err != nil {
			return err
		}
		f := filter
		if agent != "" {
			if f.AgentID, err = o.agentID(cmd.Context(), c, agent); err != nil {
				return err
			}
		}
		l, err := c.Runs(cmd.Context(), companyID, f)
		if err != nil {
			return err
		}
		rows := [][]string{}
		for _, r := range l.Items {
			rows = append(rows, []string{r.ID, r.AgentID, r.Status, r.InvocationSource, r.CreatedAt.Local().Format(time.DateTime)})
		}
		return o.printer(cmd).table(l.JSON(), []string{"RUN", "AGENT", "STATUS", "SOURCE", "CREATED"}, rows)
	}
	cmd := &cobra.Command{Use: "runs", Aliases: []string{"run"}, Short: "List and show heartbeat runs; follow a run's log live", Args: cobra.NoArgs, RunE: list}
	o.addFlags(cmd, true)
	listCmd := &cobra.Command{Use: "list", Short: "List the company's runs, newest first", Args: cobra.NoArgs, RunE: list}
	for _, c := range []*cobra.Command{cmd, listCmd} {
		c.Flags().StringVar(&agent, "agent", "", "only this agent's runs (id or name)")
		c.Flags().StringVar(&filter.Status, "status", "", "only runs in this status")
		c.Flags().IntVar(&filter.Limit, "limit", 0, "at most this many")
	}
	var follow bool
	showCmd := &cobra.Command{
		Use: "show RUN", Short: "Show a run", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			r, err := c.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var started, finished string
			if r.StartedAt != nil {
				started = r.StartedAt.Local().Format(time.DateTime)
			}
			if r.FinishedAt != nil {
				finished = r.FinishedAt.Local().Format(time.DateTime)
			}
			return o.printer(cmd).fields(r.JSON(), "run", r.ID, "agent", r.AgentID, "status", r.Status, "source", r.InvocationSource,
				"started", started, "finished", finished, "error", deref(r.Error))
		},
	}
	logCmd := &cobra.Command{
		Use: "log RUN", Short: "Print a run's log; --follow keeps printing until the run ends", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client(cmd)
			if err != nil {
				return err
			}
			if follow {
				return c.FollowLog(cmd.Context(), args[0], 0, cmd.OutOrStdout())
			}
			ch, err := c.RunLog(cmd.Context(), args[0], 0, false)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(ch.Data)
			return err
		},
	}
	logCmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log live until the run ends")
	cmd.AddCommand(listCmd, showCmd, logCmd)
	return cmd
}

func routinesCommand(o *options) *cobra.Command {
	list := func(cmd *cobra.Command, _ []string) error {
		c, companyID, err := o.companyClient(cmd)
		if err != nil {
			return err
		}
		l, err := c.Routines(cmd.Context(), companyID)
		if err != nil {
			return err
		}
		rows := [][]string{}
		for _, r := range l.Items {
			rows = append(rows, []string{r.ID, r.Title, r.Status, deref(r.AssigneeAgentID)})
		}
		return o.printer(cmd).table(l.JSON(), []string{"ID", "TITLE", "STATUS", "AGENT"}, rows)
	}
	cmd := &cobra.Command{Use: "routines", Aliases: []string{"routine"}, Short: "List routines and run one now", Args: cobra.NoArgs, RunE: list}
	o.addFlags(cmd, true)
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "List the company's routines", Args: cobra.NoArgs, RunE: list},
		&cobra.Command{
			Use: "run ROUTINE", Short: "Run a routine now (a manual run)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := o.client(cmd)
				if err != nil {
					return err
				}
				r, err := c.RunRoutine(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return o.printer(cmd).fields(r.JSON(), "routine run", r.ID, "status", r.Status, "source", r.Source)
			},
		})
	return cmd
}

func costsCommand(o *options) *cobra.Command {
	var from, to string
	summary := func(cmd *cobra.Command, _ []string) error {
		c, companyID, err := o.companyClient(cmd)
		if err != nil {
			return err
		}
		var f, t time.Time
		for _, p := range []struct {
			s   string
			dst *time.Time
		}{{from, &f}, {to, &t}} {
			if p.s == "" {
				continue
			}
			v, err := parseTime(p.s)
			if err != nil {
				return err
			}
			*p.dst = v
		}
		s, err := c.CostSummary(cmd.Context(), companyID, f, t)
		if err != nil {
			return err
		}
		return o.printer(cmd).fields(s.JSON(), "spend", dollars(s.SpendCents), "budget", dollars(s.BudgetCents),
			"utilization", strconv.FormatFloat(s.UtilizationPercent, 'f', 1, 64)+"%")
	}
	cmd := &cobra.Command{Use: "costs", Short: "Show spend against the monthly budget (keel costs [summary])", Args: cobra.NoArgs, RunE: summary}
	o.addFlags(cmd, true)
	sumCmd := &cobra.Command{Use: "summary", Short: "Billed spend over --from..--to (default all time) against the monthly budget", Args: cobra.NoArgs, RunE: summary}
	for _, c := range []*cobra.Command{cmd, sumCmd} {
		c.Flags().StringVar(&from, "from", "", "start (RFC 3339 time or YYYY-MM-DD)")
		c.Flags().StringVar(&to, "to", "", "end (RFC 3339 time or YYYY-MM-DD)")
	}
	cmd.AddCommand(sumCmd)
	return cmd
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid time %q: use RFC 3339 or YYYY-MM-DD", s)
	}
	return t, nil
}

func dollars(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
}
