package localcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/internal/agentuser"
	"github.com/keelhq/keel/sdk/adapter"
)

func TestRenderTemplate(t *testing.T) {
	t.Parallel()
	data := map[string]any{"agent": map[string]any{"id": "a1", "name": "Ada"}, "runId": "r1", "noTask": true,
		"context": map[string]any{"issueId": "i1", "payload": map[string]any{"k": "v"}}}
	for _, tc := range []struct{ in, want string }{
		{"You are {{agent.id}} ({{ agent.name }}), run {{runId}}.", "You are a1 (Ada), run r1."},
		{"issue {{context.issueId}} {{context.missing}}!", "issue i1 !"},
		{"{{context.payload}}", `{"k":"v"}`},
		{"{{#noTask}}no task{{/noTask}}{{#taskId}}task{{/taskId}}", "no task"},
	} {
		require.Equal(t, tc.want, renderTemplate(tc.in, data), tc.in)
	}
}

func TestBuildPrompt(t *testing.T) {
	t.Parallel()
	s := &Spec{Tool: "Fake", InstructionsInPrompt: true}
	inv := func(resume string, env map[string]string) *Invocation {
		return &Invocation{
			Req:    &adapter.ExecuteRequest{AgentID: "a1", AgentName: "Ada", RunID: "r1", Env: env},
			Config: &Config{BootstrapPromptTemplate: "Bootstrap {{agent.name}}."}, ResumeID: resume,
			Instructions: "Be brief.\n\nThe above agent instructions were loaded from /x/AGENTS.md.\n\n",
		}
	}
	fresh := buildPrompt(s, inv("", map[string]string{"SERVICE_WAKE_REASON": "issue_assigned", "SERVICE_TASK_ID": "i1"}))
	require.Regexp(t, `(?s)^Be brief\..*Bootstrap Ada\.\n\n## Wake context\n- Wake reason: issue_assigned\n- Issue: i1\n\nYou are agent a1 \(Ada\)\. Continue your work\.`, fresh)

	delta := buildPrompt(s, inv("sess-1", map[string]string{"SERVICE_WAKE_REASON": "issue_commented", "SERVICE_WAKE_COMMENT_ID": "c1"}))
	require.Equal(t, "## Wake context\n- Wake reason: issue_commented\n- Comment: c1", delta, "a resumed session gets the wake delta only")

	timer := buildPrompt(s, inv("sess-1", map[string]string{}))
	require.Contains(t, timer, "Continue your work.", "a resumed session without a wake context gets the template")
	require.NotContains(t, timer, "Bootstrap", "the bootstrap prompt is for fresh sessions")
}

func TestResumable(t *testing.T) {
	t.Parallel()
	s := &Spec{Tool: "Fake"}
	params := func(id, cwd string) json.RawMessage {
		b, _ := json.Marshal(sessionParams{SessionID: id, Cwd: cwd})
		return b
	}
	for _, tc := range []struct {
		name string
		rt   *adapter.Runtime
		want string
	}{
		{"none", nil, ""},
		{"same cwd", &adapter.Runtime{SessionParams: params("s1", "/w/a/")}, "s1"},
		{"other cwd", &adapter.Runtime{SessionParams: params("s1", "/w/b")}, ""},
		{"no cwd saved", &adapter.Runtime{SessionID: "s2"}, "s2"},
	} {
		inv := &Invocation{Req: &adapter.ExecuteRequest{Runtime: tc.rt}, Cwd: "/w/a"}
		require.Equal(t, tc.want, resumable(s, inv), tc.name)
	}
	refuse := &Spec{Tool: "Fake", CanResume: func(*Invocation, string) bool { return false }}
	require.Empty(t, resumable(refuse, &Invocation{Req: &adapter.ExecuteRequest{Runtime: &adapter.Runtime{SessionID: "s"}}}))
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	s := &Spec{Type: "fake_local", DefaultCommand: "fake", CommandKeys: []string{"fakeCommand", "command"}, DefaultTimeoutSec: 1800}
	c, err := s.ParseConfig(json.RawMessage(`{"command":"x","fakeCommand":"y","args":["--a"],"env":{"K":"v","S":{"type":"plain","value":"w"}},"timeoutSec":0}`))
	require.NoError(t, err)
	require.Equal(t, "y", c.Command)
	require.Equal(t, []string{"--a"}, c.ExtraArgs)
	require.Equal(t, map[string]string{"K": "v", "S": "w"}, c.Env)
	require.Equal(t, 1800.0, c.TimeoutSec, "0 keeps a type's own default")
	c, err = s.ParseConfig(nil)
	require.NoError(t, err)
	require.Equal(t, "fake", c.Command)
	for _, bad := range []string{`[1]`, `{"extraArgs":"--yolo"}`, `{"timeoutSec":-1}`, `{"env":{"K":1}}`, `{"model":3}`} {
		_, err := s.ParseConfig(json.RawMessage(bad))
		require.Error(t, err, bad)
	}
}

func TestReadFileAsAgentUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an agent user")
	}
	au, err := agentuser.Get()
	if err != nil || au == nil {
		t.Skip("no agent user here")
	}
	private := filepath.Join(t.TempDir(), "secret.key") // 0700 directory of root's
	require.NoError(t, os.WriteFile(private, []byte("root only"), 0o600))
	inv := &Invocation{user: au}
	_, err = inv.ReadFile(private)
	require.Error(t, err, "the agent user cannot read root's files through the adapter")
	b, err := (&Invocation{}).ReadFile(private)
	require.NoError(t, err)
	require.Equal(t, "root only", string(b))
}
