package kernel_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
)

type openAPITestDoc struct {
	OpenAPI    string                                           `json:"openapi"`
	Paths      map[string]map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

var openAPIParam = regexp.MustCompile(`\{[^}]+\}`)

// openAPIShape erases parameter names, as the route table's collision check does.
func openAPIShape(p string) string { return openAPIParam.ReplaceAllString(p, "{}") }

// requireRoutesDocumented checks that every route of the table is exactly one operation.
func requireRoutesDocumented(t *testing.T, routes []*kernel.Route, doc *openAPITestDoc) {
	t.Helper()
	ops := map[string]int{}
	ids := map[string]bool{}
	for p, item := range doc.Paths {
		for method, op := range item {
			ops[strings.ToUpper(method)+" "+openAPIShape(p)]++
			var id string
			require.NoError(t, json.Unmarshal(op["operationId"], &id))
			require.False(t, ids[id], "duplicate operationId %s", id)
			ids[id] = true
		}
	}
	for _, r := range routes {
		key := r.Method + " " + openAPIShape(r.Pattern)
		require.Equal(t, 1, ops[key], "route %s", key)
		delete(ops, key)
	}
	require.Empty(t, ops, "operations without a route")
}

func TestOpenAPI(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktAuthenticated())
	get := func(t *testing.T) (*openAPITestDoc, []byte) {
		r := env.Do(t, "GET", "/api/openapi.json", nil).RequireStatus(t, http.StatusOK)
		require.True(t, json.Valid(r.Body))
		var doc openAPITestDoc
		require.NoError(t, json.Unmarshal(r.Body, &doc))
		return &doc, r.Body
	}

	doc, body := get(t)
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, string(body), `"servers":[{"url":`)
	requireRoutesDocumented(t, env.K.Routes.Routes(), doc)
	for _, p := range []string{"/api/companies", "/api/companies/{companyId}", "/api/companies/{companyId}/activity",
		"/api/companies/{companyId}/members/{memberId}/permissions", "/api/instance/settings/experimental", "/api/openapi.json", "/api/health"} {
		require.Contains(t, doc.Paths, p)
	}

	// Every reference points at a component that exists.
	for _, m := range regexp.MustCompile(`"\$ref":"#/components/schemas/([^"]+)"`).FindAllSubmatch(body, -1) {
		require.Contains(t, doc.Components.Schemas, string(m[1]))
	}
	require.NotContains(t, string(body), `#/$defs/`)

	create := doc.Paths["/api/companies"]["post"]
	var tags []string
	require.NoError(t, json.Unmarshal(create["tags"], &tags))
	require.Equal(t, []string{"kernel"}, tags)
	require.JSONEq(t, `"board"`, string(create["x-keel-access"]))
	require.Contains(t, string(create["responses"]), `"201"`)
	require.Contains(t, string(create["requestBody"]), "#/components/schemas/companyCreateRequest")
	var createSchema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(doc.Components.Schemas["companyCreateRequest"], &createSchema))
	require.Equal(t, []string{"name"}, createSchema.Required)
	require.Contains(t, createSchema.Properties, "issuePrefix")
	require.NotContains(t, createSchema.Properties, "CompanyID")

	perms := doc.Paths["/api/companies/{companyId}/members/{memberId}/permissions"]["patch"]
	require.JSONEq(t, `"users:manage_permissions"`, string(perms["x-keel-permission"]))
	require.Contains(t, string(perms["parameters"]), `"memberId"`)
	require.Contains(t, string(doc.Paths["/api/instance/settings/experimental"]["patch"]["requestBody"]), "experimentalSettingsPatch")
	require.Contains(t, string(doc.Components.Schemas["experimentalSettingsPatch"]), `"enableCases"`)
	require.Contains(t, string(doc.Paths["/api/companies/{companyId}"]["get"]["responses"]), "#/components/schemas/Company")
	require.JSONEq(t, `[]`, string(doc.Paths["/api/openapi.json"]["get"]["security"]))

	t.Run("ExtensionRoutesAppearAndGo", func(t *testing.T) {
		ok := func(c *fiber.Ctx, _ *kernel.RequestContext) error { return c.SendStatus(http.StatusNoContent) }
		require.NoError(t, env.K.Routes.Add(
			&kernel.Route{Method: "POST", Pattern: "/api/companies/{companyId}/widgets", Owner: "ext.widgets", Access: kernel.AccessBoard,
				CompanyFrom: kernel.CompanyFromPath, Permission: "tasks:assign", Summary: "Create a widget", Status: http.StatusCreated,
				RequestSchema: json.RawMessage(`{"type":"object","properties":{"size":{"type":"integer"}},"required":["size"]}`), Handler: ok},
			&kernel.Route{Method: "GET", Pattern: "/api/widgets/{widgetId}", Owner: "ext.widgets", Access: kernel.AccessEither, Handler: ok,
				ResponseSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$ref":"#/$defs/Widget",` +
					`"$defs":{"Widget":{"type":"object","properties":{"size":{"type":"integer"},"meta":true,"parts":{"type":"array","items":{"$ref":"#/$defs/Widget"}}}}}}`),
				Query:  []sdk.QueryParam{{Name: "deep", Description: "Include parts", Schema: json.RawMessage(`{"type":"boolean"}`)}},
				Errors: []int{http.StatusConflict}},
			&kernel.Route{Method: "DELETE", Pattern: "/api/widgets/{id}", Owner: "ext.widgets", Access: kernel.AccessBoard, Handler: ok},
		))
		doc, _ := get(t)
		requireRoutesDocumented(t, env.K.Routes.Routes(), doc)
		op := doc.Paths["/api/companies/{companyId}/widgets"]["post"]
		require.JSONEq(t, `["ext.widgets"]`, string(op["tags"]))
		require.JSONEq(t, `"tasks:assign"`, string(op["x-keel-permission"]))
		require.Contains(t, string(op["requestBody"]), `"required":["size"]`)
		// Both widget routes share one path item, named after the first.
		require.Contains(t, doc.Paths, "/api/widgets/{id}")
		require.NotContains(t, doc.Paths, "/api/widgets/{widgetId}")
		require.Len(t, doc.Paths["/api/widgets/{id}"], 2)
		require.Contains(t, string(doc.Paths["/api/widgets/{id}"]["get"]["parameters"]), `"name":"id"`)
		// A declared answer's $defs become owner-prefixed components its references follow;
		// declared query parameters and error statuses are listed.
		widget := doc.Paths["/api/widgets/{id}"]["get"]
		require.Contains(t, string(widget["responses"]), `"$ref":"#/components/schemas/ext.widgets.Widget"`)
		require.Contains(t, doc.Components.Schemas, "ext.widgets.Widget")
		require.Contains(t, string(doc.Components.Schemas["ext.widgets.Widget"]), `"items":{"$ref":"#/components/schemas/ext.widgets.Widget"}`)
		require.Contains(t, string(doc.Components.Schemas["ext.widgets.Widget"]), `"meta":{}`)
		require.Contains(t, string(widget["parameters"]), `{"name":"deep","in":"query","description":"Include parts","required":false,"schema":{"type":"boolean"}}`)
		for _, st := range []string{"400", "401", "403", "404", "409", "422"} {
			require.Contains(t, string(widget["responses"]), `"`+st+`":{"$ref":"#/components/responses/`, st)
		}
		post := doc.Paths["/api/companies/{companyId}/widgets"]["post"]
		require.Contains(t, string(post["responses"]), `"201"`)
		require.Contains(t, string(post["responses"]), `"409"`, "an idempotent POST can reuse a key")
		require.NotContains(t, string(post["responses"]), `"422"`, "a board route never sees an agent's run")

		env.K.Routes.RemoveOwner("ext.widgets")
		doc, _ = get(t)
		requireRoutesDocumented(t, env.K.Routes.Routes(), doc)
		require.NotContains(t, doc.Paths, "/api/companies/{companyId}/widgets")
	})
}
