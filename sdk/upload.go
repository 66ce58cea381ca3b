package sdk

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// UploadFileNameMaxBytes caps the file name ReadFileUpload keeps.
const UploadFileNameMaxBytes = 255

// FileUpload is the one file of a multipart upload, read whole.
type FileUpload struct {
	// FileName is the base name the client gave, cleaned (see UploadFileName).
	FileName string
	// ContentType is the declared media type, normalised or sniffed (see UploadContentType).
	ContentType string
	// Data is the file's content.
	Data []byte
}

// ReadFileUpload reads the single file of a multipart upload from field (parts of other
// fields are skipped), with the spec's attachment texts: 422 "Missing file field '<field>'"
// without one, "Attachment is empty", "Attachment exceeds <n> bytes" (code
// attachment_too_large, checked while reading, before the caller writes anything) and
// "Expected exactly one file in field '<field>'" for a second file; a malformed body is a
// 400 on the field.
func ReadFileUpload(r *http.Request, field string, maxBytes int64) (*FileUpload, error) {
	missing := Unprocessable(fmt.Sprintf("Missing file field '%s'", field))
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, missing
	}
	var up *FileUpload
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, Invalid(field, "malformed multipart body")
		}
		if part.FormName() != field || part.FileName() == "" {
			_ = part.Close()
			continue
		}
		if up != nil {
			_ = part.Close()
			return nil, Unprocessable(fmt.Sprintf("Expected exactly one file in field '%s'", field))
		}
		data, err := io.ReadAll(io.LimitReader(part, maxBytes+1))
		_ = part.Close()
		if err != nil {
			return nil, Invalid(field, "malformed multipart body")
		}
		if int64(len(data)) > maxBytes {
			return nil, &Error{Status: http.StatusUnprocessableEntity, Code: "attachment_too_large",
				Message: fmt.Sprintf("Attachment exceeds %d bytes", maxBytes), Details: map[string]any{"maxBytes": maxBytes}}
		}
		up = &FileUpload{FileName: UploadFileName(part.FileName()), ContentType: part.Header.Get("Content-Type"), Data: data}
	}
	if up == nil {
		return nil, missing
	}
	if len(up.Data) == 0 {
		return nil, Unprocessable("Attachment is empty")
	}
	up.ContentType = UploadContentType(up.ContentType, up.Data)
	return up, nil
}

// UploadFileName keeps the base name of an uploaded file without control characters or
// quotes, at most UploadFileNameMaxBytes bytes; a name with nothing left is "file".
func UploadFileName(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	name = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '"' || r == utf8.RuneError {
			return -1
		}
		return r
	}, name))
	for len(name) > UploadFileNameMaxBytes {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	if name == "" || name == "." || name == "/" {
		return "file"
	}
	return name
}

// UploadContentType normalises the declared media type, sniffing it from data when it is
// absent, unparseable or generic (application/octet-stream).
func UploadContentType(declared string, data []byte) string {
	mt, params, err := mime.ParseMediaType(declared)
	if err != nil || mt == "" || mt == "application/octet-stream" {
		mt, params, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	if mt == "" {
		return "application/octet-stream"
	}
	if ct := mime.FormatMediaType(mt, params); ct != "" {
		return ct
	}
	return mt
}
