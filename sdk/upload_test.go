package sdk

import (
	"bytes"
	"errors"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadFileUpload(t *testing.T) {
	t.Parallel()
	type part struct{ field, name, contentType, body string }
	request := func(parts ...part) *http.Request {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, p := range parts {
			h := textproto.MIMEHeader{}
			disp := `form-data; name="` + p.field + `"`
			if p.name != "" {
				disp += `; filename="` + p.name + `"`
			}
			h.Set("Content-Disposition", disp)
			if p.contentType != "" {
				h.Set("Content-Type", p.contentType)
			}
			pw, err := w.CreatePart(h)
			require.NoError(t, err)
			_, _ = pw.Write([]byte(p.body))
		}
		require.NoError(t, w.Close())
		r := httptest.NewRequest("POST", "/", &buf)
		r.Header.Set("Content-Type", w.FormDataContentType())
		return r
	}
	for _, tc := range []struct {
		name     string
		req      *http.Request
		wantErr  string
		wantName string
		wantType string
	}{
		{name: "OneFile", req: request(part{"note", "", "", "x"}, part{"file", `..\dir/report.txt`, "", "hello"}), wantName: "report.txt", wantType: "text/plain; charset=utf-8"},
		{name: "DeclaredType", req: request(part{"file", "a.json", "application/json", "{}"}), wantName: "a.json", wantType: "application/json"},
		{name: "NotMultipart", req: httptest.NewRequest("POST", "/", strings.NewReader("x")), wantErr: "Missing file field 'file'"},
		{name: "NoFile", req: request(part{"other", "a.txt", "", "x"}), wantErr: "Missing file field 'file'"},
		{name: "Empty", req: request(part{"file", "a.txt", "", ""}), wantErr: "Attachment is empty"},
		{name: "TooLarge", req: request(part{"file", "a.txt", "", "0123456789A"}), wantErr: "Attachment exceeds 10 bytes"},
		{name: "TwoFiles", req: request(part{"file", "a.txt", "", "a"}, part{"file", "b.txt", "", "b"}), wantErr: "Expected exactly one file in field 'file'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up, err := ReadFileUpload(tc.req, "file", 10)
			if tc.wantErr != "" {
				var e *Error
				require.True(t, errors.As(err, &e), "%v", err)
				require.Equal(t, http.StatusUnprocessableEntity, e.Status)
				require.Equal(t, tc.wantErr, e.Message)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantName, up.FileName)
			require.Equal(t, tc.wantType, up.ContentType)
		})
	}
	require.Equal(t, "file", UploadFileName("\x00\"/"))
	require.Equal(t, "report.txt", UploadFileName(`C:\\up\\re"port.txt`))
	require.Len(t, UploadFileName(strings.Repeat("é", 200)), 254, "cut on a rune boundary at 255 bytes")
}
