package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/all"
	"github.com/keelhq/keel/host/cli"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// keel runs a client command against the host in-process with a credentials file and
// returns its output.
func keel(ctx context.Context, h *sdktest.Host, config string, out *syncBuffer, args ...string) error {
	root := &cobra.Command{Use: "keel", Version: kernel.Version, SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cli.Commands()...)
	root.SetOut(out)
	root.SetErr(out)
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append(args, "--url", h.URL, "--config", config)
	}
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// run runs a command that must succeed and returns its output.
func run(t *testing.T, h *sdktest.Host, config string, args ...string) string {
	t.Helper()
	var out syncBuffer
	err := keel(context.Background(), h, config, &out, args...)
	require.NoError(t, err, "keel %s: %s", strings.Join(args, " "), out.String())
	return out.String()
}

// field returns the value of a "name: value" line of a command's output.
func field(t *testing.T, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `:\s+(.*?)\s*$`).FindStringSubmatch(out)
	require.NotNil(t, m, "no %s in:\n%s", name, out)
	return m[1]
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	require.NoError(t, keel(context.Background(), nil, "", &out, "--version"))
	require.Equal(t, "keel version "+kernel.Version+"\n", out.String())
}

// TestCLI runs the client commands against one real host with the first-party extensions.
func TestCLI(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	t.Run("Commands", func(t *testing.T) { t.Parallel(); testCommands(t, h) })
	t.Run("Plugin", func(t *testing.T) { t.Parallel(); testPluginCommands(t, h) })
	t.Run("Login", func(t *testing.T) { t.Parallel(); testLogin(t, h) })
	t.Run("ClientMatchesOpenAPI", func(t *testing.T) { t.Parallel(); testClientMatchesOpenAPI(t, h) })
	t.Run("OpenAPIValidates", func(t *testing.T) { t.Parallel(); testOpenAPIValidates(t, h) })
}

// testCommands drives a company's day through the CLI: companies, agents (create, pause,
// resume, wake), the run it starts (list, show, its log followed live), issues (create,
// list, comment, show, assign), routines (list, run) and costs, as tables and as JSON.
func testCommands(t *testing.T, h *sdktest.Host) {
	cfg := filepath.Join(t.TempDir(), "credentials.json")

	out := run(t, h, cfg, "companies", "create", "CLI Co")
	companyID := field(t, out, "id")
	out = run(t, h, cfg, "companies")
	require.Regexp(t, `(?m)^ID\s+PREFIX\s+NAME\s+STATUS$`, out)
	require.Regexp(t, `(?m)^`+companyID+`\s+\S+\s+CLI Co\s+active$`, out)
	var companies []map[string]any
	require.NoError(t, json.Unmarshal([]byte(run(t, h, cfg, "companies", "list", "--json")), &companies))
	found := false
	for _, c := range companies {
		found = found || c["id"] == companyID
	}
	require.True(t, found, "the JSON list has the company")
	co := []string{"--company", "CLI Co"}

	t.Run("Agents", func(t *testing.T) {
		out := run(t, h, cfg, append([]string{"agents", "create", "Echo", "--role", "engineer", "--adapter", "process",
			"--command", "echo hello from the run; sleep 1; echo bye from the run"}, co...)...)
		agentID := field(t, out, "id")
		require.Equal(t, "idle", field(t, out, "status"))
		require.Regexp(t, `(?m)^`+agentID+`\s+Echo\s+engineer\s+idle\s+process$`, run(t, h, cfg, append([]string{"agents"}, co...)...))

		require.Equal(t, "paused", field(t, run(t, h, cfg, append([]string{"agents", "pause", "Echo"}, co...)...), "status"))
		require.Equal(t, "idle", field(t, run(t, h, cfg, append([]string{"agents", "resume", agentID}, co...)...), "status"))

		out = run(t, h, cfg, append([]string{"agents", "wake", "Echo", "--reason", "cli test"}, co...)...)
		runID := field(t, out, "run")
		require.Regexp(t, `(?m)^`+runID+`\s+`+agentID+`\s+\S+\s+on_demand`, run(t, h, cfg, append([]string{"runs", "list", "--agent", "Echo"}, co...)...))

		// Following the log prints it as it grows and returns when the run ends.
		logOut := run(t, h, cfg, "runs", "log", runID, "--follow")
		require.Contains(t, logOut, "hello from the run")
		require.Contains(t, logOut, "bye from the run")
		out = run(t, h, cfg, "runs", "show", runID)
		require.Equal(t, "succeeded", field(t, out, "status"))
		require.NotEmpty(t, field(t, out, "finished"))
		var runJSON map[string]any
		require.NoError(t, json.Unmarshal([]byte(run(t, h, cfg, "runs", "show", runID, "--json")), &runJSON))
		require.Equal(t, runID, runJSON["id"])
		require.Contains(t, runJSON, "usageJson", "JSON output is the server's whole object")
	})

	t.Run("Issues", func(t *testing.T) {
		out := run(t, h, cfg, append([]string{"issues", "create", "Fix the CLI", "--priority", "high", "-d", "It needs tests."}, co...)...)
		ident := field(t, out, "issue")
		require.Equal(t, "high", field(t, out, "priority"))
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(ident)+`\s+backlog\s+high\s+Fix the CLI`, run(t, h, cfg, append([]string{"issues"}, co...)...))

		run(t, h, cfg, "issues", "comment", ident, "Looking into it")
		out = run(t, h, cfg, "issues", "show", ident)
		require.Contains(t, out, "It needs tests.")
		require.Contains(t, out, "Looking into it")

		run(t, h, cfg, append([]string{"agents", "create", "Fixer", "--role", "engineer"}, co...)...)
		out = run(t, h, cfg, "issues", "assign", ident, "Fixer")
		require.NotEmpty(t, field(t, out, "assignee agent"))
		var shown map[string]any
		require.NoError(t, json.Unmarshal([]byte(run(t, h, cfg, "issues", "show", ident, "--json")), &shown))
		require.Equal(t, field(t, out, "assignee agent"), shown["issue"].(map[string]any)["assigneeAgentId"])
		require.Len(t, shown["comments"], 1)
	})

	t.Run("RoutinesAndCosts", func(t *testing.T) {
		agentID := field(t, run(t, h, cfg, append([]string{"agents", "create", "Routinier", "--role", "engineer"}, co...)...), "id")
		res := h.Do("POST", "/api/companies/"+companyID+"/routines", map[string]any{"title": "Morning report", "assigneeAgentId": agentID})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		routineID := res.Map(t)["id"].(string)
		require.Regexp(t, `(?m)^`+routineID+`\s+Morning report\s+\S+\s+`+agentID, run(t, h, cfg, append([]string{"routines"}, co...)...))
		out := run(t, h, cfg, "routines", "run", routineID)
		require.NotEmpty(t, field(t, out, "routine run"))

		out = run(t, h, cfg, append([]string{"costs", "summary", "--from", "2020-01-01"}, co...)...)
		require.Equal(t, "$0.00", field(t, out, "spend"))
	})

	t.Run("Events", func(t *testing.T) {
		eventsCo := field(t, run(t, h, cfg, "companies", "create", "Events Co"), "id")
		latest := h.Do("GET", "/api/companies/"+eventsCo+"/activity?limit=1", nil)
		require.Equal(t, http.StatusOK, latest.Status, "%s", latest.Body)
		var entries []map[string]any
		require.NoError(t, json.Unmarshal(latest.Body, &entries))
		require.NotEmpty(t, entries)
		ctx, cancel := context.WithCancel(context.Background())
		var out syncBuffer
		done := make(chan error, 1)
		// Starting after the newest entry, nothing written from here on can be missed.
		go func() {
			done <- keel(ctx, h, cfg, &out, "events", "--company", "Events Co", "--entity-type", "issue", "--after", entries[0]["id"].(string))
		}()
		run(t, h, cfg, "issues", "create", "Watch me", "--company", "Events Co")
		require.Eventually(t, func() bool { return strings.Contains(out.String(), "issue.created") }, 30*time.Second, 20*time.Millisecond,
			"the events command prints the new issue's entry: %s", out.String())
		require.Regexp(t, `issue\.created\s+user:local-board\s+issue \S+`, out.String())
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})

	t.Run("Errors", func(t *testing.T) {
		var out syncBuffer
		err := keel(context.Background(), h, cfg, &out, "issues", "show", "NOPE-999999")
		require.Error(t, err)
		require.Contains(t, err.Error(), "(404")
		err = keel(context.Background(), h, cfg, &out, append([]string{"agents", "wake", "Nobody"}, co...)...)
		require.EqualError(t, err, `no agent "Nobody" in the company`)
		err = keel(context.Background(), h, cfg, &out, "agents", "--company", "No Such Co")
		require.ErrorContains(t, err, `no company "No Such Co"`)
	})
}

// testPluginCommands lists the extensions through `keel plugin` and shows one.
func testPluginCommands(t *testing.T, h *sdktest.Host) {
	cfg := filepath.Join(t.TempDir(), "credentials.json")
	out := run(t, h, cfg, "plugin", "list")
	require.Regexp(t, `(?m)^KEY\s+VERSION\s+KIND\s+RUNTIME\s+SOURCE\s+STATUS\s+LAST ERROR$`, out)
	require.Regexp(t, `(?m)^work\s+\S+\s+feature\s+process\s+builtin\s+ready`, out)
	require.Equal(t, "ready", field(t, run(t, h, cfg, "plugin", "show", "work"), "status"))

	// The adapter registry routes land with the lifecycle work: until then the command
	// says the route is not there.
	var out2 syncBuffer
	if err := keel(context.Background(), h, cfg, &out2, "adapter", "list"); err != nil {
		require.ErrorContains(t, err, "(404")
	} else {
		require.Regexp(t, `(?m)^TYPE\s+LABEL\s+SOURCE\s+STATE$`, out2.String())
	}
}

// testLogin runs `keel login` against the host: it prints the approval URL, waits, and
// once a board user approves stores the board API key 0600; the next commands use it,
// and `keel logout` revokes it.
func testLogin(t *testing.T, h *sdktest.Host) {
	cfg := filepath.Join(t.TempDir(), "keel", "credentials.json")
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- keel(context.Background(), h, cfg, &out, "login", "--timeout", "2m") }()
	var id string
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		m := regexp.MustCompile(`/cli-auth/([0-9a-f-]{36})`).FindStringSubmatch(out.String())
		if m != nil {
			id = m[1]
		}
		return id != ""
	}, "the approval URL")
	require.Contains(t, out.String(), "Waiting for approval")
	require.Contains(t, out.String(), h.URL+" is local_trusted: commands work without a key")
	res := h.Do("POST", "/api/cli-auth/challenges/"+id+"/approve", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NoError(t, <-done, "%s", out.String())
	require.Contains(t, out.String(), "Logged in to "+h.URL)

	st, err := os.Stat(cfg)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(cfg)
	require.NoError(t, err)
	require.Regexp(t, `"token": "pcp_board_[0-9a-f]{48}"`, string(b))

	who := run(t, h, cfg, "whoami")
	require.Equal(t, "board_key", field(t, who, "source"))

	require.Contains(t, run(t, h, cfg, "logout"), "Logged out of "+h.URL)
	require.NotEqual(t, "board_key", field(t, run(t, h, cfg, "whoami"), "source"), "without a key, local_trusted still answers")
	b, err = os.ReadFile(cfg)
	require.NoError(t, err)
	require.NotContains(t, string(b), "pcp_board_")
}
