package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/keelhq/keel/sdk"
)

// The request helpers are the SDK's; these names keep the area files short. Bodies are
// decoded by decodeBody below, which never quotes the body.
var (
	apiError             = sdk.NewError
	notFound             = sdk.NotFound
	conflict             = sdk.Conflict
	forbidden            = sdk.Forbidden
	unprocessable        = sdk.Unprocessable
	validationError      = sdk.ValidationError
	invalid              = sdk.Invalid
	isUUID               = sdk.IsUUID
	requireCompanyAccess = sdk.RequireCompanyAccess
)

type validationDetail = sdk.ValidationDetail

// writeErr writes err; anything that is not an *sdk.Error is logged and answered with 500.
// Errors never carry secret values, so logging them is safe.
func (s *Secrets) writeErr(rw http.ResponseWriter, err error) {
	var e *sdk.Error
	if !errors.As(err, &e) {
		s.log.Error("request failed", "error", err)
	}
	sdk.WriteErr(rw, err)
}

// decodeBody decodes a JSON body into v, ignoring unknown fields as the reference product
// does (bad types are a 400 Validation error naming the field). An empty body decodes as {}.
// Decoding errors never quote the body, which may hold a value.
func decodeBody(r *http.Request, v any) error {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return invalid("", "unreadable body")
	}
	body := bytes.TrimSpace(buf.Bytes())
	if len(body) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return invalid(typeErr.Field, "expected "+typeErr.Type.String())
		default:
			return invalid("", "malformed JSON")
		}
	}
	return nil
}

// limitParam reads limit (default def, at most max).
func limitParam(r *http.Request, def, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, invalid("limit", fmt.Sprintf("must be an integer from 1 to %d", max))
	}
	return n, nil
}

// activity appends an activity entry attributed to actor; a failure is logged, not
// returned, because the change it records has already happened. Details never hold values.
func (s *Secrets) activity(ctx context.Context, actor *sdk.Actor, companyID, action, entityType, entityID string, details any) {
	err := s.host.LogActivity(ctx, &sdk.ActivityEntry{
		CompanyID: companyID, Actor: actor, Action: action, EntityType: entityType, EntityID: entityID, Details: details,
	})
	if err != nil {
		s.log.Warn("error appending activity", "action", action, "error", err)
	}
}
