package all_test

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/all"
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// companyRows counts a company's rows in every extension schema, per table: each base
// table with a company_id column.
func companyRows(t *testing.T, h *sdktest.Host, companyID string) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := h.Kernel.Pool.Query(ctx, `SELECT c.table_schema, c.table_name FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema LIKE 'ext\_%' AND c.column_name = 'company_id' AND t.table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	var tables [][2]string
	for rows.Next() {
		var s, n string
		require.NoError(t, rows.Scan(&s, &n))
		tables = append(tables, [2]string{s, n})
	}
	require.NoError(t, rows.Err())
	out := map[string]int{}
	for _, tb := range tables {
		var n int
		require.NoError(t, h.Kernel.Pool.QueryRow(ctx,
			fmt.Sprintf(`SELECT count(*) FROM %q.%q WHERE company_id::text = $1`, tb[0], tb[1]), companyID).Scan(&n))
		if n > 0 {
			out[tb[0]+"."+tb[1]] = n
		}
	}
	return out
}

// seedCompany gives a company rows in every first-party owner: an issue with a comment, a
// document and an attachment, an agent, a secret, a routine with a run and a cost event.
func seedCompany(t *testing.T, h *sdktest.Host, name string) string {
	t.Helper()
	company := h.CreateCompany(name)
	ok := func(res *sdktest.Response, want int) map[string]any {
		t.Helper()
		require.Equal(t, want, res.Status, "%s", res.Body)
		return res.Map(t)
	}
	agent := ok(h.Do("POST", "/api/companies/"+company+"/agents", map[string]any{"name": "Worker", "role": "engineer"}), http.StatusCreated)
	issue := ok(h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Purge me"}), http.StatusCreated)
	issueID := issue["id"].(string)
	ok(h.Do("POST", "/api/issues/"+issueID+"/comments", map[string]any{"body": "a comment"}), http.StatusCreated)
	ok(h.Do("PUT", "/api/issues/"+issueID+"/documents/plan", map[string]any{"title": "Plan", "format": "markdown", "body": "secret plan"}), http.StatusCreated)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "notes.txt")
	require.NoError(t, err)
	_, _ = fw.Write([]byte("attachment bytes"))
	require.NoError(t, mw.Close())
	ok(h.Do("POST", "/api/companies/"+company+"/issues/"+issueID+"/attachments", buf.Bytes(), "Content-Type", mw.FormDataContentType()), http.StatusCreated)
	ok(h.Do("POST", "/api/companies/"+company+"/secrets", map[string]any{"name": "Token", "value": "v"}), http.StatusCreated)
	folder := ok(h.Do("POST", "/api/companies/"+company+"/folders", map[string]any{"kind": "routine", "name": "Ops"}), http.StatusCreated)
	routine := ok(h.Do("POST", "/api/companies/"+company+"/routines", map[string]any{"title": "Daily", "assigneeAgentId": agent["id"],
		"folderId": folder["id"]}), http.StatusCreated)
	ok(h.Do("POST", "/api/companies/"+company+"/skills", map[string]any{"name": "Runbook"}), http.StatusCreated)
	ok(h.Do("POST", "/api/routines/"+routine["id"].(string)+"/run", map[string]any{}), http.StatusAccepted)
	ok(h.Do("POST", "/api/companies/"+company+"/cost-events", map[string]any{"agentId": agent["id"], "provider": "anthropic",
		"model": "m1", "costCents": 3, "occurredAt": time.Now().UTC().Format(time.RFC3339)}), http.StatusCreated)
	return company
}

// TestCompanyDeletePurgesEveryOwner deletes a company and waits for every extension to
// purge its rows (counted in every extension schema) and its files, leaving another
// company untouched.
func TestCompanyDeletePurgesEveryOwner(t *testing.T) {
	t.Parallel()
	var home string
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) {
		c.EnableCompanyDeletion = true
		home = c.Home
	}})
	doomed := seedCompany(t, h, "Doomed Co")
	kept := seedCompany(t, h, "Kept Co")

	before := companyRows(t, h, doomed)
	for _, schema := range []string{"ext_work.", "ext_agents.", "ext_secrets.", "ext_routines.", "ext_costs.", "ext_folders.", "ext_skills."} {
		found := false
		for table := range before {
			found = found || len(table) > len(schema) && table[:len(schema)] == schema
		}
		require.True(t, found, "the seed wrote rows in %s*: %v", schema, before)
	}
	keptBefore := companyRows(t, h, kept)
	attachments := filepath.Join(home, "extensions", "work", "attachments", doomed)
	_, err := os.Stat(attachments)
	require.NoError(t, err)

	res := h.Do("DELETE", "/api/companies/"+doomed, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	sdktest.WaitFor(t, 60*time.Second, func() bool { return len(companyRows(t, h, doomed)) == 0 },
		"every owner to purge the deleted company")
	_, err = os.Stat(attachments)
	require.True(t, os.IsNotExist(err), "the company's attachment files are gone: %v", err)
	require.Equal(t, keptBefore, companyRows(t, h, kept), "another company keeps everything")
}
