package cli_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// testOpenAPIValidates runs an OpenAPI validator on the composed document of a host with
// every first-party extension: no errors, a server, the shared error responses, and the
// extensions' answers, statuses and query parameters. KEEL_OPENAPI_OUT names a file to
// write the document to (for linting it by hand).
func testOpenAPIValidates(t *testing.T, h *sdktest.Host) {
	res := h.Do("GET", "/api/openapi.json", nil)
	require.Equal(t, http.StatusOK, res.Status)
	if out := os.Getenv("KEEL_OPENAPI_OUT"); out != "" {
		require.NoError(t, os.WriteFile(out, res.Body, 0o644))
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(res.Body)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background(), openapi3.EnableMultiError(), openapi3.EnableSchemaPatternValidation()))

	require.NotEmpty(t, doc.Servers)
	for _, name := range []string{"BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict", "UnprocessableEntity"} {
		require.Contains(t, doc.Components.Responses, name)
	}
	op := func(method, path string) *openapi3.Operation {
		t.Helper()
		item := doc.Paths.Find(path)
		require.NotNil(t, item, path)
		o := item.GetOperation(method)
		require.NotNil(t, o, method+" "+path)
		return o
	}
	statuses := func(o *openapi3.Operation) []int {
		var out []int
		for k := range o.Responses.Map() {
			if n, err := strconv.Atoi(k); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	success := func(o *openapi3.Operation, status int) *openapi3.Schema {
		t.Helper()
		r := o.Responses.Status(status)
		require.NotNil(t, r, "%s answers %d", o.OperationID, status)
		mt := r.Value.Content.Get("application/json")
		require.NotNil(t, mt, "%s documents its %d answer", o.OperationID, status)
		s := mt.Schema.Value
		if s.Items != nil {
			s = s.Items.Value
		}
		return s
	}

	// Every operation answers something documented and lists its error statuses; every
	// authenticated one can be 401 and 403.
	for path, item := range doc.Paths.Map() {
		for method, o := range item.Operations() {
			st := statuses(o)
			require.NotEmpty(t, st, "%s %s", method, path)
			if o.Security != nil && len(*o.Security) > 0 {
				require.Contains(t, st, http.StatusUnauthorized, "%s %s", method, path)
				require.Contains(t, st, http.StatusForbidden, "%s %s", method, path)
			}
			if strings.Contains(path, "{") {
				require.Contains(t, st, http.StatusNotFound, "%s %s", method, path)
			}
			if o.RequestBody != nil {
				require.Contains(t, st, http.StatusBadRequest, "%s %s", method, path)
			}
		}
	}

	// The most used extension routes: statuses, answers and query parameters.
	create := op("POST", "/api/companies/{companyId}/issues")
	require.Contains(t, success(create, http.StatusCreated).Properties, "identifier")
	list := op("GET", "/api/companies/{companyId}/issues")
	require.Contains(t, success(list, http.StatusOK).Properties, "status")
	require.NotNil(t, list.Parameters.GetByInAndName("query", "assigneeAgentId"))
	require.Contains(t, success(op("GET", "/api/issues/{id}"), http.StatusOK).Properties, "ancestors")
	require.Contains(t, success(op("POST", "/api/companies/{companyId}/agents"), http.StatusCreated).Properties, "adapterType")
	require.Contains(t, success(op("GET", "/api/companies/{companyId}/heartbeat-runs"), http.StatusOK).Properties, "status")
	require.NotNil(t, op("GET", "/api/companies/{companyId}/costs/summary").Parameters.GetByInAndName("query", "from"))
	require.NotNil(t, op("GET", "/api/companies/{companyId}/costs/finance-events").Parameters.GetByInAndName("query", "to"))
	require.Contains(t, success(op("POST", "/api/companies"), http.StatusCreated).Properties, "issuePrefix")
}
