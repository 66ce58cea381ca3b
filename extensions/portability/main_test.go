package portability_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/agents"
	_ "github.com/keelhq/keel/extensions/folders"
	_ "github.com/keelhq/keel/extensions/portability"
	_ "github.com/keelhq/keel/extensions/routines"
	_ "github.com/keelhq/keel/extensions/secrets"
	_ "github.com/keelhq/keel/extensions/skills"
	_ "github.com/keelhq/keel/extensions/work"
	"github.com/keelhq/keel/sdktest"
)

// TestMain runs the tests; when the host re-executes this binary as an extension,
// sdktest.Main serves it instead.
func TestMain(m *testing.M) { sdktest.Main(m) }

// ok requires a status and decodes an object.
func ok(t testing.TB, res *sdktest.Response, want int) map[string]any {
	t.Helper()
	require.Equal(t, want, res.Status, "%s", res.Body)
	return res.Map(t)
}

// list requires 200 and decodes an array.
func list(t testing.TB, res *sdktest.Response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// wantErr checks an API error's status and text ("" skips the text).
func wantErr(t testing.TB, res *sdktest.Response, status int, message string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	m := res.Map(t)
	if message != "" {
		require.Equal(t, message, m["error"], "%s", res.Body)
	}
	return m
}

// upload attaches a file to an issue.
func upload(t testing.TB, h *sdktest.Host, companyID, issueID, name, contentType string, data []byte) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	hdr := textproto.MIMEHeader{}
	hdr.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	hdr.Set("Content-Type", contentType)
	w, err := mw.CreatePart(hdr)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	return ok(t, h.Do("POST", "/api/companies/"+companyID+"/issues/"+issueID+"/attachments", buf.Bytes(),
		"Content-Type", mw.FormDataContentType()), http.StatusCreated)
}
