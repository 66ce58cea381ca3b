package kernel

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// DefaultMaxBodyBytes is the default limit of a request body that is not a multipart
// upload, counted after decompression.
const DefaultMaxBodyBytes = 2 << 20

// uploadSlack is what a multipart upload may carry beyond the attachment size limit: the
// part headers, the boundaries and small form fields.
const uploadSlack = 1 << 20

// MaxBodyBytes is the largest request body, decompressed, that the kernel accepts on any
// route; the gRPC message limit between the host and extensions must stay above it.
func (k *Kernel) MaxBodyBytes() int {
	return max(k.cfg.MaxBodyBytes, k.maxUploadBytes())
}

func (k *Kernel) maxUploadBytes() int {
	return int(min(k.cfg.AttachmentMaxBytes, MaxAttachmentBytes)) + uploadSlack
}

// checkInput is the one place every request passes before its handler, kernel route and
// extension route alike, before any credential is looked at: it decompresses a
// Content-Encoding body through the size limit (413 beyond it, 415 for an unknown coding),
// limits the body by its media type (multipart uploads up to the attachment limit, others
// to MaxBodyBytes), and refuses with 400 Validation error, naming the field, a NUL
// character, invalid UTF-8 or an unpaired surrogate escape in a JSON body, a text body,
// a query parameter or a path parameter. A JSON body that does not parse is a 400 too.
func (k *Kernel) checkInput(c *fiber.Ctx, params map[string]string) *APIError {
	var details []ValidationDetail
	c.Request().URI().QueryArgs().VisitAll(func(key, value []byte) {
		details = append(details, ScanText(key, string(key))...)
		details = append(details, ScanText(value, string(key))...)
	})
	for name, v := range params {
		// Path parameters arrive escaped; an extension's handler sees them unescaped.
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		details = append(details, ScanText([]byte(v), name)...)
	}
	for i := range details {
		details[i].Path = strings.ToValidUTF8(strings.ReplaceAll(details[i].Path, "\x00", "\uFFFD"), "\uFFFD")
	}
	if len(details) > 0 {
		return ValidationError(details...)
	}

	req := c.Request()
	mediaType := mediaTypeOf(string(req.Header.ContentType()))
	limit := k.cfg.MaxBodyBytes
	if strings.HasPrefix(mediaType, "multipart/") {
		limit = k.maxUploadBytes()
	}
	if enc := strings.TrimSpace(string(req.Header.Peek(fiber.HeaderContentEncoding))); enc != "" {
		if len(req.Body()) > 0 {
			body, apiErr := decodeBody(req.Body(), enc, limit)
			if apiErr != nil {
				return apiErr
			}
			req.SetBodyRaw(body)
		}
		req.Header.Del(fiber.HeaderContentEncoding)
	}
	body := req.Body()
	if len(body) > limit {
		return bodyTooLarge(limit)
	}
	if len(body) == 0 || strings.HasPrefix(mediaType, "multipart/") {
		return nil
	}
	isJSON := mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
	if isJSON && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	problems, err := ScanJSON(body)
	switch {
	case err == nil && len(problems) > 0:
		return ValidationError(problems...)
	case err == nil:
		return nil
	case isJSON && len(problems) > 0:
		return ValidationError(problems...)
	case isJSON:
		return ValidationError(ValidationDetail{Path: "", Message: err.Error()})
	case isTextual(mediaType):
		if d := ScanText(body, "body"); len(d) > 0 {
			return ValidationError(d...)
		}
	}
	return nil
}

// mediaTypeOf returns the lowercased media type of a Content-Type header ("" when absent).
func mediaTypeOf(contentType string) string {
	if contentType == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// isTextual reports whether a body of this media type is text that a handler may store
// as is (so NUL and invalid UTF-8 are refused); binary types pass untouched.
func isTextual(mediaType string) bool {
	switch {
	case mediaType == "", strings.HasPrefix(mediaType, "text/"), mediaType == "application/x-www-form-urlencoded",
		mediaType == "application/xml", strings.HasSuffix(mediaType, "+xml"),
		mediaType == "application/json", strings.HasSuffix(mediaType, "+json"):
		return true
	}
	return false
}

func bodyTooLarge(limit int) *APIError {
	return (&APIError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("Request body is too large (limit %d bytes)", limit),
		Code: "body_too_large", Details: map[string]any{"maxBytes": limit}})
}

// decodeBody undoes the Content-Encoding codings of a body (listed in the order they were
// applied), never producing more than limit bytes: a longer result is a 413 however small
// the compressed body was.
func decodeBody(body []byte, header string, limit int) ([]byte, *APIError) {
	codings := strings.Split(header, ",")
	for i := len(codings) - 1; i >= 0; i-- {
		coding := strings.ToLower(strings.TrimSpace(codings[i]))
		var (
			rd  io.Reader
			err error
		)
		switch coding {
		case "identity", "":
			continue
		case "gzip", "x-gzip":
			rd, err = gzip.NewReader(bytes.NewReader(body))
		case "deflate":
			// HTTP deflate is zlib-wrapped; some clients send the raw stream.
			rd, err = zlib.NewReader(bytes.NewReader(body))
			if err != nil {
				rd, err = flate.NewReader(bytes.NewReader(body)), nil
			}
		default:
			return nil, (&APIError{Status: http.StatusUnsupportedMediaType,
				Message: fmt.Sprintf("Unsupported Content-Encoding %q: use gzip or deflate", coding)}).WithCode("unsupported_content_encoding")
		}
		if err != nil {
			return nil, BadRequest(fmt.Sprintf("Request body is not valid %s", coding)).WithCode("malformed_content_encoding")
		}
		out, err := io.ReadAll(io.LimitReader(rd, int64(limit)+1))
		if len(out) > limit {
			return nil, bodyTooLarge(limit)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, BadRequest(fmt.Sprintf("Request body is not valid %s", coding)).WithCode("malformed_content_encoding")
		}
		body = out
	}
	return body, nil
}
