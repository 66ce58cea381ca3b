package work_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// uploadPart is one part of a multipart upload.
type uploadPart struct {
	Field, FileName, ContentType string
	Data                         []byte
}

// multipartBody encodes parts as multipart/form-data and returns the body and its
// Content-Type.
func multipartBody(t *testing.T, parts ...uploadPart) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		hdr := textproto.MIMEHeader{}
		disp := `form-data; name="` + p.Field + `"`
		if p.FileName != "" {
			disp += `; filename="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(p.FileName) + `"`
		}
		hdr.Set("Content-Disposition", disp)
		if p.ContentType != "" {
			hdr.Set("Content-Type", p.ContentType)
		}
		w, err := mw.CreatePart(hdr)
		require.NoError(t, err)
		_, err = w.Write(p.Data)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return buf.Bytes(), mw.FormDataContentType()
}

// TestAttachments sets SERVICE_ATTACHMENT_MAX_BYTES for the extension process it starts,
// so it cannot run in parallel.
func TestAttachments(t *testing.T) {
	const maxBytes = 64
	t.Setenv("SERVICE_ATTACHMENT_MAX_BYTES", "64")
	var home string
	h := waitWorkReady(t, sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { home = c.Home }}))
	dataDir := filepath.Join(home, "extensions", "work")
	companyID := h.CreateCompany("Files Co")
	uploader := h.CreateAgent(companyID, "Uploader", "engineer")
	otherCompanyID := h.CreateCompany("Other Files Co")
	outsider := h.CreateAgent(otherCompanyID, "Outsider", "engineer")

	upload := func(companyID, issueRef string, headers []string, parts ...uploadPart) *sdktest.Response {
		t.Helper()
		body, contentType := multipartBody(t, parts...)
		return h.Do("POST", "/api/companies/"+companyID+"/issues/"+issueRef+"/attachments", body, append([]string{"Content-Type", contentType}, headers...)...)
	}
	file := func(name, contentType string, data []byte) uploadPart {
		return uploadPart{Field: "file", FileName: name, ContentType: contentType, Data: data}
	}

	t.Run("UploadDownloadDelete", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		data := []byte("hello, attachment\n")
		sum := sha256.Sum256(data)
		runID := uuid.NewString()
		res := upload(companyID, iss.Identifier, uploader.As(runID), uploadPart{Field: "note", Data: []byte("ignored")}, file("hello.txt", "text/plain; charset=utf-8", data))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		a := res.Map(t)
		id := a["id"].(string)
		require.Equal(t, iss.ID, a["issueId"])
		require.Equal(t, companyID, a["companyId"])
		require.Equal(t, "hello.txt", a["fileName"])
		require.Equal(t, "text/plain; charset=utf-8", a["contentType"])
		require.EqualValues(t, len(data), a["sizeBytes"])
		require.Equal(t, hex.EncodeToString(sum[:]), a["sha256"])
		require.Equal(t, uploader.ID, a["createdByAgentId"])
		require.Equal(t, runID, a["createdByRunId"])
		require.Equal(t, "/api/attachments/"+id+"/content", a["contentPath"])
		require.NotContains(t, a, "storagePath")
		requireActivity(t, h, companyID, iss.ID, "issue.attachment.added", "attachmentId", id)

		stored := filepath.Join(dataDir, "attachments", companyID, a["sha256"].(string)[:2], id)
		onDisk, err := os.ReadFile(stored)
		require.NoError(t, err)
		require.Equal(t, data, onDisk)

		res = h.Do("GET", "/api/issues/"+iss.ID+"/attachments", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, id, list[0]["id"])

		res = h.Do("GET", "/api/attachments/"+id+"/content", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, data, res.Body)
		got := sha256.Sum256(res.Body)
		require.Equal(t, sum, got)
		require.Equal(t, "text/plain; charset=utf-8", res.Header.Get("Content-Type"))
		require.Equal(t, `inline; filename=hello.txt`, res.Header.Get("Content-Disposition"))
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))

		res = h.Do("GET", "/api/attachments/"+id+"/content?download=1", nil, uploader.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, data, res.Body)
		require.Equal(t, `attachment; filename=hello.txt`, res.Header.Get("Content-Disposition"))

		res = h.Do("DELETE", "/api/attachments/"+id, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		requireActivity(t, h, companyID, iss.ID, "issue.attachment.deleted", "attachmentId", id)
		_, err = os.Stat(stored)
		require.ErrorIs(t, err, os.ErrNotExist, "the file goes with the row")
		requireError(t, h.Do("GET", "/api/attachments/"+id+"/content", nil), http.StatusNotFound, "Attachment not found")
		requireError(t, h.Do("DELETE", "/api/attachments/"+id, nil), http.StatusNotFound, "Attachment not found")
		res = h.Do("GET", "/api/issues/"+iss.ID+"/attachments", nil)
		require.JSONEq(t, "[]", string(res.Body))
	})

	t.Run("SizeLimit", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		res := upload(companyID, iss.ID, nil, file("max.bin", "application/octet-stream", bytes.Repeat([]byte{7}, maxBytes)))
		require.Equal(t, http.StatusCreated, res.Status, "exactly the limit is fine: %s", res.Body)

		res = upload(companyID, iss.ID, nil, file("big.bin", "application/octet-stream", bytes.Repeat([]byte{7}, maxBytes+1)))
		requireError(t, res, http.StatusUnprocessableEntity, "Attachment exceeds 64 bytes")

		res = h.Do("GET", "/api/issues/"+iss.ID+"/attachments", nil)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 1, "the refused upload left no row")
		entries, err := os.ReadDir(filepath.Join(dataDir, "attachments", companyID))
		require.NoError(t, err)
		files := 0
		for _, e := range entries {
			sub, err := os.ReadDir(filepath.Join(dataDir, "attachments", companyID, e.Name()))
			require.NoError(t, err)
			files += len(sub)
		}
		require.Equal(t, 1, files, "the refused upload left no file")
	})

	t.Run("UploadErrors", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		requireError(t, upload(companyID, iss.ID, nil, file("empty.txt", "text/plain", nil)), http.StatusUnprocessableEntity, "Attachment is empty")
		requireError(t, upload(companyID, iss.ID, nil, uploadPart{Field: "upload", FileName: "a.txt", Data: []byte("x")}),
			http.StatusUnprocessableEntity, "Missing file field 'file'")
		requireError(t, upload(companyID, iss.ID, nil, uploadPart{Field: "file", Data: []byte("not a file")}),
			http.StatusUnprocessableEntity, "Missing file field 'file'")
		requireError(t, upload(companyID, iss.ID, nil), http.StatusUnprocessableEntity, "Missing file field 'file'")
		requireError(t, h.Do("POST", "/api/companies/"+companyID+"/issues/"+iss.ID+"/attachments", map[string]any{"file": "x"}),
			http.StatusUnprocessableEntity, "Missing file field 'file'")
		requireError(t, upload(companyID, iss.ID, nil, file("a.txt", "text/plain", []byte("a")), file("b.txt", "text/plain", []byte("b"))),
			http.StatusUnprocessableEntity, "Expected exactly one file in field 'file'")
		requireError(t, upload(companyID, uuid.NewString(), nil, file("a.txt", "text/plain", []byte("a"))), http.StatusNotFound, "Issue not found")
		requireError(t, h.Do("GET", "/api/attachments/not-an-id/content", nil), http.StatusNotFound, "Attachment not found")
	})

	t.Run("UnsafeTypesDownloadAndNamesAreSanitized", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		res := upload(companyID, iss.ID, nil, file(`..\..\evil "page".html`, "text/html", []byte("<script>alert(1)</script>")))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		a := res.Map(t)
		require.Equal(t, "evil page.html", a["fileName"])
		res = h.Do("GET", a["contentPath"].(string), nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.True(t, strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment;"), res.Header.Get("Content-Disposition"))
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))

		res = upload(companyID, iss.ID, nil, file("notes", "", []byte("plain words")))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "text/plain; charset=utf-8", res.Map(t)["contentType"], "a missing type is sniffed")
	})

	t.Run("CrossCompanyRefused", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		res := upload(companyID, iss.ID, nil, file("a.txt", "text/plain", []byte("a")))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		id := res.Map(t)["id"].(string)

		res = upload(companyID, iss.ID, outsider.As(""), file("b.txt", "text/plain", []byte("b")))
		require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
		// The path's company is the outsider's own, but the issue is not in it.
		requireError(t, upload(otherCompanyID, iss.ID, outsider.As(""), file("b.txt", "text/plain", []byte("b"))), http.StatusNotFound, "Issue not found")
		requireError(t, upload(otherCompanyID, iss.ID, nil, file("b.txt", "text/plain", []byte("b"))), http.StatusNotFound, "Issue not found")

		denied := "You do not have access to this company"
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/attachments", nil, outsider.As("")...), http.StatusForbidden, denied)
		requireError(t, h.Do("GET", "/api/attachments/"+id+"/content", nil, outsider.As("")...), http.StatusForbidden, denied)
		requireError(t, h.Do("DELETE", "/api/attachments/"+id, nil, outsider.As("")...), http.StatusForbidden, denied)
		res = h.Do("GET", "/api/attachments/"+id+"/content", nil, uploader.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})
}
