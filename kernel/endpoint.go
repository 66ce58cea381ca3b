package kernel

import (
	"context"
	"net/http"
	"reflect"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
)

// EndpointMeta describes a kernel endpoint: its pattern ("GET /api/companies/{companyId}"),
// success status and route policy.
type EndpointMeta struct {
	Pattern     string
	Status      int
	Access      Access
	Permission  string
	CompanyFrom string
	CompanyKey  string
	Summary     string
	// StrictBody refuses unknown body fields (400) instead of ignoring them; set it on
	// routes the spec marks "unknown fields rejected".
	StrictBody bool
	// Personal marks a route that writes only the caller's own data in the company (their
	// preferences, their inbox): a member who may only read the company (a viewer) may call it.
	Personal bool
	// Errors are error statuses the endpoint answers beyond those implied by its access,
	// path parameters and body (such as 409 for a conflict), for /api/openapi.json.
	Errors []int
}

// Endpoint is one kernel endpoint: Meta describes it, Execute does the work on a decoded
// request. Decoding, validation and encoding live in Mount.
type Endpoint[Req any, Resp any] interface {
	Meta() *EndpointMeta
	Execute(ctx context.Context, req *Req) (*Resp, error)
}

// RequestBinder is implemented by request types that decode themselves instead of the
// default (JSON body, then `path:"name"` and `query:"name"` tagged fields).
type RequestBinder interface {
	Bind(c *fiber.Ctx, rc *RequestContext) error
}

// ResponseWriter is implemented by response types that write themselves (headers, status).
type ResponseWriter interface {
	WriteResponse(c *fiber.Ctx, status int) error
}

type requestContextKey struct{}

// RequestContextFrom returns the dispatcher's RequestContext stored in ctx.
func RequestContextFrom(ctx context.Context) *RequestContext {
	rc, _ := ctx.Value(requestContextKey{}).(*RequestContext)
	if rc == nil {
		return &RequestContext{Actor: ActorFrom(ctx)}
	}
	return rc
}

// Mount turns an endpoint into a route.
func Mount[Req any, Resp any](e Endpoint[Req, Resp]) *Route {
	meta := e.Meta()
	method, pattern, _ := cut(meta.Pattern)
	status := meta.Status
	if status == 0 {
		status = http.StatusOK
	}
	access := meta.Access
	if access == "" {
		access = AccessEither
	}
	hasBody := method == "POST" || method == "PUT" || method == "PATCH"
	var zeroReq Req
	var zeroResp Resp
	return &Route{
		Method: method, Pattern: pattern, Owner: OwnerKernel, Access: access, Permission: meta.Permission,
		CompanyFrom: meta.CompanyFrom, CompanyKey: meta.CompanyKey, Summary: meta.Summary, Status: status, Errors: meta.Errors, Personal: meta.Personal,
		Request: requestDoc(hasBody, &zeroReq), Response: &zeroResp, Params: &zeroReq,
		Handler: func(c *fiber.Ctx, rc *RequestContext) error {
			req := new(Req)
			if b, ok := any(req).(RequestBinder); ok {
				if err := b.Bind(c, rc); err != nil {
					return err
				}
			} else {
				if hasBody {
					decode := DecodeJSON
					if meta.StrictBody {
						decode = DecodeJSONStrict
					}
					if err := decode(c, req); err != nil {
						return err
					}
				}
				if err := bindParams(c, rc, req); err != nil {
					return err
				}
			}
			ctx := context.WithValue(WithActor(c.UserContext(), rc.Actor), requestContextKey{}, rc)
			resp, err := e.Execute(ctx, req)
			if err != nil {
				return err
			}
			if w, ok := any(resp).(ResponseWriter); ok {
				return w.WriteResponse(c, status)
			}
			if resp == nil {
				c.Status(status)
				return nil
			}
			return WriteJSON(c, status, resp)
		},
	}
}

func requestDoc(hasBody bool, req any) any {
	if !hasBody {
		return nil
	}
	return req
}

func cut(pattern string) (method, path string, ok bool) {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == ' ' {
			return pattern[:i], pattern[i+1:], true
		}
	}
	return "GET", pattern, false
}

// bindParams fills `path:"name"` and `query:"name"` tagged fields of string, int, bool and
// pointer-to-those kinds; a malformed number or boolean is a 400 Validation error.
func bindParams(c *fiber.Ctx, rc *RequestContext, req any) error {
	v := reflect.ValueOf(req).Elem()
	if v.Kind() != reflect.Struct {
		return nil
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		var raw string
		var present bool
		name := ""
		if n := f.Tag.Get("path"); n != "" {
			name = n
			raw, present = rc.Params[n]
		} else if n := f.Tag.Get("query"); n != "" {
			name = n
			raw = c.Query(n)
			present = raw != ""
		} else {
			continue
		}
		if !present {
			continue
		}
		if err := setField(v.Field(i), raw); err != nil {
			return ValidationError(ValidationDetail{Path: name, Message: err.Error()})
		}
	}
	return nil
}

func setField(fv reflect.Value, raw string) error {
	if fv.Kind() == reflect.Pointer {
		nv := reflect.New(fv.Type().Elem())
		if err := setField(nv.Elem(), raw); err != nil {
			return err
		}
		fv.Set(nv)
		return nil
	}
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(raw)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return &fieldError{"must be an integer"}
		}
		fv.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return &fieldError{"must be true or false"}
		}
		fv.SetBool(b)
	}
	return nil
}

type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

// newID returns a new time-ordered UUID (v7), good for index locality.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
