package cli_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/client"
	"github.com/keelhq/keel/sdktest"
)

// pendingRoutes are spec routes the client calls that this build does not serve yet (the
// plugin and adapter lifecycle routes land with the lifecycle work); once served they are
// checked like the others.
var pendingRoutes = map[string]bool{
	"POST /api/plugins/install":            true,
	"POST /api/plugins/{pluginId}/enable":  true,
	"POST /api/plugins/{pluginId}/disable": true,
	"POST /api/plugins/{pluginId}/upgrade": true,
	"DELETE /api/plugins/{pluginId}":       true,
	"GET /api/adapters":                    true,
	"POST /api/adapters/install":           true,
	"PATCH /api/adapters/{type}":           true,
	"POST /api/adapters/{type}/reinstall":  true,
	"DELETE /api/adapters/{type}":          true,
}

// testClientMatchesOpenAPI checks the Go API client against the host's /api/openapi.json:
// every route it calls is in the document with that method, and every JSON field of its
// request bodies and typed answers is a property of the route's schema where the
// document has one.
func testClientMatchesOpenAPI(t *testing.T, h *sdktest.Host) {
	res := h.Do("GET", "/api/openapi.json", nil)
	require.Equal(t, http.StatusOK, res.Status)
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &doc))
	checked := 0
	for _, e := range client.Endpoints() {
		name := e.Method + " " + e.Path
		raw, ok := doc.Paths[e.Path][strings.ToLower(e.Method)]
		if !ok {
			if pendingRoutes[name] {
				t.Logf("%s: not served by this build yet", name)
				continue
			}
			t.Errorf("the client calls %s, which /api/openapi.json does not list", name)
			continue
		}
		var op struct {
			RequestBody struct {
				Content map[string]struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Content map[string]struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		}
		require.NoError(t, json.Unmarshal(raw, &op), name)
		if e.Request != nil {
			if props := properties(t, doc.Components.Schemas, op.RequestBody.Content["application/json"].Schema); props != nil {
				for _, f := range jsonFields(e.Request) {
					require.Contains(t, props, f, "%s: the client sends %s, which the request schema does not have", name, f)
				}
			}
		}
		if e.Response != nil {
			for status, r := range op.Responses {
				if !strings.HasPrefix(status, "2") {
					continue
				}
				if props := properties(t, doc.Components.Schemas, r.Content["application/json"].Schema); props != nil {
					for _, f := range jsonFields(e.Response) {
						require.Contains(t, props, f, "%s: the client reads %s, which the %s answer's schema does not have", name, f, status)
					}
				}
			}
		}
		checked++
	}
	require.Greater(t, checked, 20, "most of the client's routes are served and checked")
}

// properties returns the property names of a schema (following $ref and array items), or
// nil when the document gives no object schema.
func properties(t *testing.T, schemas map[string]json.RawMessage, raw json.RawMessage) map[string]bool {
	for range 5 {
		if len(raw) == 0 {
			return nil
		}
		var s struct {
			Ref        string                     `json:"$ref"`
			Type       any                        `json:"type"`
			Items      json.RawMessage            `json:"items"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(raw, &s))
		switch {
		case s.Ref != "":
			raw = schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
		case len(s.Items) > 0:
			raw = s.Items
		case len(s.Properties) > 0:
			out := map[string]bool{}
			for k := range s.Properties {
				out[k] = true
			}
			return out
		default:
			return nil
		}
	}
	return nil
}

// jsonFields lists the JSON names of a struct value's exported fields (nil for maps).
func jsonFields(v any) []string {
	rt := reflect.TypeOf(v)
	if rt.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
