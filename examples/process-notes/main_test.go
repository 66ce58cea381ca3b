package main

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// Test_main drives the example through a real host: its routes, its own schema, activity,
// the host's company service, a provided method, and a crash with automatic restart.
func Test_main(t *testing.T) {
	t.Parallel()
	dir := sdktest.BuildProcessExtension(t, ".")
	h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{dir}})
	company := h.CreateCompany("Notes Test Co")

	t.Run("CreateAndList", func(t *testing.T) {
		res := h.Do("POST", "/api/companies/"+company+"/notes", map[string]any{"text": "first"})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		var note Note
		res.JSON(t, &note)
		require.Equal(t, "first", note.Text)
		require.Equal(t, "board", note.AuthorType)

		res = h.Do("GET", "/api/companies/"+company+"/notes", nil)
		require.Equal(t, http.StatusOK, res.Status)
		var notes []Note
		res.JSON(t, &notes)
		require.Len(t, notes, 1)

		res = h.Do("GET", "/api/companies/"+company+"/activity?entityType=note", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var entries []map[string]any
		res.JSON(t, &entries)
		require.NotEmpty(t, entries)
		require.Equal(t, "note.created", entries[0]["action"])
		details := entries[0]["details"].(map[string]any)
		require.Equal(t, "Notes Test Co", details["companyName"], "company name read through the host service")
	})

	t.Run("JobRunsThroughTheQueue", func(t *testing.T) {
		sdktest.WaitFor(t, 10*time.Second, func() bool {
			var st struct {
				NoteCount int `json:"noteCount"`
			}
			h.Do("GET", "/api/companies/"+company+"/notes/stats", nil).JSON(t, &st)
			return st.NoteCount == 1
		}, "the refresh-stats job to count the note")
	})

	t.Run("EventDeliveredToSubscriber", func(t *testing.T) {
		res := h.Do("PATCH", "/api/companies/"+company, map[string]any{"name": "Renamed Co"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		sdktest.WaitFor(t, 10*time.Second, func() bool {
			var name string
			err := h.Kernel.Pool.QueryRow(t.Context(), `SELECT name FROM ext_example_notes.company_names WHERE company_id = $1`, company).Scan(&name)
			return err == nil && name == "Renamed Co"
		}, "the company.updated event to reach the extension")
	})

	t.Run("OwnSchemaOwnRole", func(t *testing.T) {
		var owner string
		require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT tableowner FROM pg_tables WHERE schemaname = 'ext_example_notes' AND tablename = 'notes'`).Scan(&owner))
		require.Equal(t, host.ExtensionRole("example.notes", h.Kernel.InstanceID()), owner)
		var canRead bool
		require.NoError(t, h.Kernel.Pool.QueryRow(t.Context(), `SELECT has_table_privilege($1, 'kernel.companies', 'SELECT')`, owner).Scan(&canRead))
		require.False(t, canRead, "an extension's role cannot read kernel tables")
	})

	t.Run("ValidationAndScoping", func(t *testing.T) {
		res := h.Do("POST", "/api/companies/"+company+"/notes", map[string]any{"text": ""})
		require.Equal(t, http.StatusBadRequest, res.Status)
		require.Equal(t, "Validation error", res.Map(t)["error"])
		res = h.Do("GET", "/api/companies/00000000-0000-0000-0000-000000000000/notes", nil)
		require.Equal(t, http.StatusNotFound, res.Status)
	})

	t.Run("OpenAPIListsRoutes", func(t *testing.T) {
		res := h.Do("GET", "/api/openapi.json", nil)
		require.Equal(t, http.StatusOK, res.Status)
		require.Contains(t, string(res.Body), "/api/companies/{companyId}/notes")
	})

	t.Run("PluginRecord", func(t *testing.T) {
		res := h.Do("GET", "/api/plugins/example.notes", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "ready", res.Map(t)["status"])
		res = h.Do("GET", "/api/plugins/example.notes/health", nil)
		require.Equal(t, http.StatusOK, res.Status)
		require.Equal(t, true, res.Map(t)["healthy"])
	})
}

// TestCrashRestart kills the extension process with SIGKILL: its routes answer 503 while it
// is down and work again after the supervisor restarts it; the state changes are logged.
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	dir := sdktest.BuildProcessExtension(t, ".")
	h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{dir}, Configure: nil})
	company := h.CreateCompany("Crash Co")
	require.Equal(t, http.StatusCreated, h.Do("POST", "/api/companies/"+company+"/notes", map[string]any{"text": "before"}).Status)

	pid := h.Supervisor.PID("example.notes")
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))

	saw503 := false
	sdktest.WaitFor(t, 2*time.Second, func() bool {
		res := h.Do("GET", "/api/companies/"+company+"/notes", nil)
		if res.Status == http.StatusServiceUnavailable {
			saw503 = true
			require.Equal(t, "extension_unavailable", res.Map(t)["code"])
		}
		return saw503
	}, "a 503 while the extension is down")

	sdktest.WaitFor(t, 15*time.Second, func() bool {
		return h.Do("GET", "/api/companies/"+company+"/notes", nil).Status == http.StatusOK
	}, "the extension to come back")
	require.NotEqual(t, pid, h.Supervisor.PID("example.notes"))
	var notes []Note
	h.Do("GET", "/api/companies/"+company+"/notes", nil).JSON(t, &notes)
	require.Len(t, notes, 1, "state survives the crash")

	var actions []string
	rows, err := h.Kernel.Pool.Query(t.Context(), `SELECT action FROM kernel.activity_log WHERE entity_type = 'extension' AND entity_id = 'example.notes' ORDER BY created_at`)
	require.NoError(t, err)
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		actions = append(actions, a)
	}
	require.Subset(t, actions, []string{"extension.ready", "extension.exited", "extension.restarting"})
}
