package builtins_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/builtins"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	t.Run("ShipsTheFourKeys", func(t *testing.T) {
		t.Parallel()
		var keys []string
		for _, d := range builtins.All() {
			keys = append(keys, d.Key)
			require.Zero(t, d.BudgetMonthlyCents, "%s: every shipped built-in has a budget of 0", d.Key)
			require.NotEmpty(t, d.Instructions, d.Key)
		}
		require.Equal(t, []string{"briefs", "learning", "reflection-coach", "summarizer"}, keys)
	})
	t.Run("AdapterOrderPinsTheDefault", func(t *testing.T) {
		t.Parallel()
		for key, first := range map[string]string{"briefs": "beta_local", "learning": "beta_local", "reflection-coach": "alpha_local", "summarizer": "alpha_local"} {
			d, ok := builtins.Get(key)
			require.True(t, ok, key)
			require.Equal(t, first, d.AllowedAdapterTypes[0], key)
			require.Len(t, d.AllowedAdapterTypes, 5, key)
		}
	})
	t.Run("ReflectionCoachBundle", func(t *testing.T) {
		t.Parallel()
		d, _ := builtins.Get("reflection-coach")
		require.Equal(t, "Reflection Coach", d.DisplayName)
		require.True(t, d.StartsPaused)
		require.Equal(t, []string{"agents:suggest-changes", "skills:suggest-changes"}, d.PermissionKeys)
		require.NotNil(t, d.Skill("reflection-coach"))
		r := d.Routine("recent-agent-reflection")
		require.NotNil(t, r)
		require.False(t, r.Enabled)
	})
	t.Run("RejectsUnknownField", func(t *testing.T) {
		t.Parallel()
		_, err := builtins.Load(fstest.MapFS{
			"x/agent.json":      {Data: []byte(`{"key":"x","displayName":"X","purpose":"p","role":"general","allowedAdapterTypes":["process"],"bogus":1}`)},
			"x/instructions.md": {Data: []byte("do")},
		})
		require.ErrorContains(t, err, "unknown field")
	})
	t.Run("RejectsKeyNotFolder", func(t *testing.T) {
		t.Parallel()
		_, err := builtins.Load(fstest.MapFS{
			"x/agent.json":      {Data: []byte(`{"key":"y","displayName":"X","purpose":"p","role":"general","allowedAdapterTypes":["process"]}`)},
			"x/instructions.md": {Data: []byte("do")},
		})
		require.ErrorContains(t, err, "folder name")
	})
	t.Run("RejectsSkillNameMismatch", func(t *testing.T) {
		t.Parallel()
		_, err := builtins.Load(fstest.MapFS{
			"x/agent.json":          {Data: []byte(`{"key":"x","displayName":"X","purpose":"p","role":"general","allowedAdapterTypes":["process"]}`)},
			"x/instructions.md":     {Data: []byte("do")},
			"x/skills/one/SKILL.md": {Data: []byte("---\nname: two\ndescription: d\n---\nbody")},
		})
		require.ErrorContains(t, err, "skill one")
	})
}
