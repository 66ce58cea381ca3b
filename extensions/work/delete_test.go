package work_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// TestIssueDeleteRemovesWhatItOwns deletes an issue with a revisioned document and an
// attachment and finds neither the document, its revisions nor the file left behind.
func TestIssueDeleteRemovesWhatItOwns(t *testing.T) {
	t.Parallel()
	var home string
	h := waitWorkReady(t, sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { home = c.Home }}))
	companyID := h.CreateCompany("Delete Co")
	iss := newAreaIssue(t, h, companyID, "")
	first := putDocument(t, h, iss.ID, "plan", map[string]any{"title": "Plan", "format": "markdown", "body": "zebracorn launch plan"}, http.StatusCreated)
	putDocument(t, h, iss.ID, "plan", map[string]any{"title": "Plan", "format": "markdown", "body": "zebracorn launch plan v2",
		"baseRevisionId": first.Revision.ID}, http.StatusOK)
	body, contentType := multipartBody(t, uploadPart{Field: "file", FileName: "plan.txt", ContentType: "text/plain", Data: []byte("bytes")})
	res := h.Do("POST", "/api/companies/"+companyID+"/issues/"+iss.ID+"/attachments", body, "Content-Type", contentType)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	a := res.Map(t)
	stored := filepath.Join(home, "extensions", "work", "attachments", companyID, a["sha256"].(string)[:2], a["id"].(string))
	_, err := os.Stat(stored)
	require.NoError(t, err)

	res = h.Do("DELETE", "/api/issues/"+iss.ID, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	for table, want := range map[string]int{"documents": 0, "document_revisions": 0, "issue_attachments": 0} {
		var n int
		require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM ext_work.`+table+` WHERE company_id = $1`, companyID).Scan(&n))
		require.Equal(t, want, n, table)
	}
	_, err = os.Stat(stored)
	require.True(t, os.IsNotExist(err), "the attachment file is removed: %v", err)
	res = h.Do("GET", "/api/companies/"+companyID+"/search?q=zebracorn", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), "zebracorn launch plan")
}
