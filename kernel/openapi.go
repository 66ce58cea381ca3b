package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/invopop/jsonschema"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
)

// OpenAPI builds the OpenAPI 3.1 document of the routes in the table now, so extension
// routes appear as they load and disappear as they stop. Every route is one operation; routes
// whose paths differ only in parameter names share the first one's path item.
func (k *Kernel) OpenAPI() ([]byte, error) {
	routes := k.Routes.Routes()
	doc := &openAPIDoc{
		OpenAPI: "3.1.0",
		Info: openAPIInfo{Title: "keel API", Version: Version,
			Description: "keel control-plane API, composed from the kernel's routes and every loaded extension's manifest routes."},
		Servers: []openAPIServer{k.openAPIServer()},
		Paths:   map[string]map[string]*openAPIOperation{},
		Components: openAPIComponents{
			Schemas:   map[string]json.RawMessage{"Error": json.RawMessage(openAPIErrorSchema)},
			Responses: map[string]any{"Error": openAPIErrorResponse(0)},
			SecuritySchemes: map[string]any{
				"bearer":  map[string]any{"type": "http", "scheme": "bearer", "description": "Board API key (pcp_board_…), agent API key (pcp_…) or local agent JWT"},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": SessionCookie, "description": "Board session (authenticated mode)"},
			},
		},
	}
	pathFor := map[string]string{} // shape without method → path key
	usedIDs := map[string]bool{}
	owners := map[string]bool{}
	for _, r := range routes {
		segs := splitPath(r.Pattern)
		sh := shape("", segs)
		key, ok := pathFor[sh]
		if !ok {
			key = r.Pattern
			pathFor[sh] = key
		}
		item := doc.Paths[key]
		if item == nil {
			item = map[string]*openAPIOperation{}
			doc.Paths[key] = item
		}
		op := &openAPIOperation{
			OperationID: uniqueOperationID(usedIDs, r),
			Summary:     r.Summary,
			Tags:        []string{r.Owner},
			Access:      string(r.Access),
			Permission:  r.Permission,
			CompanyFrom: r.CompanyFrom,
			Responses:   map[string]any{},
		}
		if op.Summary == "" {
			op.Summary = r.Method + " " + r.Pattern
		}
		owners[r.Owner] = true
		if r.Access == AccessPublic {
			op.Security = []map[string][]string{}
		} else {
			op.Security = []map[string][]string{{"bearer": {}}, {"session": {}}}
		}
		// Parameters are named after the path key so that they match its template.
		for _, seg := range splitPath(key) {
			if isParam(seg) {
				op.Parameters = append(op.Parameters, openAPIParameter{
					Name: seg[1 : len(seg)-1], In: "path", Required: true, Schema: stringSchema,
				})
			}
		}
		op.Parameters = append(op.Parameters, queryParameters(r.Params)...)
		op.Parameters = append(op.Parameters, declaredQueryParameters(r.Query, op.Parameters, r.Owner, doc.Components.Schemas)...)
		idempotent := r.Method == fiber.MethodPost && r.Access != AccessPublic && !idemSkip[r.Key()]
		if idempotent {
			op.Parameters = append(op.Parameters, idempotencyKeyParameter)
		}
		if schema := requestSchema(r, doc.Components.Schemas); schema != nil {
			op.RequestBody = &openAPIRequestBody{Required: true, Content: map[string]openAPIMedia{"application/json": {Schema: objectSubschemas(schema)}}}
		}
		for _, st := range errorStatuses(r, op, idempotent) {
			name := openAPIErrorNames[st]
			doc.Components.Responses[name] = openAPIErrorResponse(st)
			op.Responses[strconv.Itoa(st)] = map[string]string{"$ref": "#/components/responses/" + name}
		}
		status := r.Status
		if status == 0 {
			status = http.StatusOK
		}
		resp := map[string]any{"description": http.StatusText(status)}
		if status != http.StatusNoContent {
			if schema := responseSchema(r, doc.Components.Schemas); schema != nil {
				resp["content"] = map[string]openAPIMedia{"application/json": {Schema: objectSubschemas(schema)}}
			}
		}
		op.Responses[strconv.Itoa(status)] = resp
		op.Responses["default"] = map[string]string{"$ref": "#/components/responses/Error"}
		item[strings.ToLower(r.Method)] = op
	}
	for owner := range owners {
		desc := "Routes of the " + owner + " extension"
		if owner == OwnerKernel {
			desc = "The kernel's own routes: companies, members and permissions, authentication, activity, settings, plugins and adapters"
		}
		doc.Tags = append(doc.Tags, openAPITag{Name: owner, Description: desc})
	}
	for name, def := range doc.Components.Schemas {
		doc.Components.Schemas[name] = objectSubschemas(def)
	}
	sort.Slice(doc.Tags, func(i, j int) bool { return doc.Tags[i].Name < doc.Tags[j].Name })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("error encoding OpenAPI document: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

const openAPIErrorSchema = `{"type":"object","required":["error"],"properties":{"error":{"type":"string"},"code":{"type":"string"},"details":{}}}`

type openAPIDoc struct {
	OpenAPI    string                                  `json:"openapi"`
	Info       openAPIInfo                             `json:"info"`
	Servers    []openAPIServer                         `json:"servers"`
	Tags       []openAPITag                            `json:"tags"`
	Paths      map[string]map[string]*openAPIOperation `json:"paths"`
	Components openAPIComponents                       `json:"components"`
}

type openAPIInfo struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

type openAPITag struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type openAPIServer struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
}

type openAPIComponents struct {
	Schemas         map[string]json.RawMessage `json:"schemas"`
	Responses       map[string]any             `json:"responses"`
	SecuritySchemes map[string]any             `json:"securitySchemes"`
}

type openAPIOperation struct {
	OperationID string                `json:"operationId"`
	Summary     string                `json:"summary"`
	Tags        []string              `json:"tags"`
	Security    []map[string][]string `json:"security"`
	Access      string                `json:"x-keel-access"`
	Permission  string                `json:"x-keel-permission,omitempty"`
	CompanyFrom string                `json:"x-keel-company-from,omitempty"`
	Parameters  []openAPIParameter    `json:"parameters,omitempty"`
	RequestBody *openAPIRequestBody   `json:"requestBody,omitempty"`
	Responses   map[string]any        `json:"responses"`
}

type openAPIParameter struct {
	Name        string          `json:"name"`
	In          string          `json:"in"`
	Description string          `json:"description,omitempty"`
	Required    bool            `json:"required"`
	Schema      json.RawMessage `json:"schema"`
}

// idempotencyKeyParameter documents Idempotency-Key on the authenticated POST routes.
var idempotencyKeyParameter = openAPIParameter{
	Name: idem.Header, In: "header", Schema: stringSchema,
	Description: "Makes the request safe to retry: the same key with the same request (method, path, query, body) " +
		"answers the original answer again (header Idempotent-Replayed: true) instead of creating twice; the same key " +
		"with another request is 409 idempotency_key_reused. 1-255 printable ASCII characters, remembered per actor for " +
		"24 hours. Ignored by routes whose answer shows a secret once.",
}

type openAPIRequestBody struct {
	Required bool                    `json:"required"`
	Content  map[string]openAPIMedia `json:"content"`
}

type openAPIMedia struct {
	Schema json.RawMessage `json:"schema"`
}

var operationIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9]+`)

// uniqueOperationID derives an id like getCompaniesByCompanyIdActivity from the route,
// suffixed when two routes would share one.
func uniqueOperationID(used map[string]bool, r *Route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Method))
	for i, seg := range splitPath(r.Pattern) {
		if i == 0 && seg == "api" {
			continue
		}
		if isParam(seg) {
			b.WriteString("By")
			seg = seg[1 : len(seg)-1]
		}
		for _, part := range operationIDUnsafe.Split(seg, -1) {
			if part != "" {
				b.WriteString(strings.ToUpper(part[:1]) + part[1:])
			}
		}
	}
	id := b.String()
	for n := 2; used[id]; n++ {
		id = b.String() + strconv.Itoa(n)
	}
	used[id] = true
	return id
}

// requestSchema is the route's declared JSON Schema or one reflected from its request type.
func requestSchema(r *Route, defs map[string]json.RawMessage) json.RawMessage {
	if schema := declaredSchema(r.RequestSchema, r.Owner, defs); schema != nil {
		return schema
	}
	if r.Request == nil {
		return nil
	}
	return reflectedSchema(reflect.TypeOf(r.Request), defs)
}

// responseSchema is the route's declared JSON Schema of its answer or one reflected from
// its response type.
func responseSchema(r *Route, defs map[string]json.RawMessage) json.RawMessage {
	if schema := declaredSchema(r.ResponseSchema, r.Owner, defs); schema != nil {
		return schema
	}
	if r.Response == nil {
		return nil
	}
	return reflectedSchema(reflect.TypeOf(r.Response), defs)
}

// schemaReflection is the cached reflection of one Go type.
type schemaReflection struct {
	schema json.RawMessage
	defs   map[string]json.RawMessage
}

var schemaReflections sync.Map // reflect.Type → *schemaReflection

// reflectedSchema reflects a Go type into a JSON Schema whose named types are components,
// adding them to defs. A type the reflector cannot handle documents as any value.
func reflectedSchema(t reflect.Type, defs map[string]json.RawMessage) json.RawMessage {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && t.NumField() == 0 && t.Name() == "" {
		return nil // struct{}: no body
	}
	cached, ok := schemaReflections.Load(t)
	if !ok {
		cached, _ = schemaReflections.LoadOrStore(t, reflectType(t))
	}
	sr := cached.(*schemaReflection)
	for name, def := range sr.defs {
		defs[name] = def
	}
	return sr.schema
}

func reflectType(t reflect.Type) (sr *schemaReflection) {
	defer func() {
		if recover() != nil {
			sr = &schemaReflection{schema: json.RawMessage(`{}`)}
		}
	}()
	rf := &jsonschema.Reflector{
		Anonymous:                  true,
		RequiredFromJSONSchemaTags: true,
		Namer:                      schemaName,
	}
	s := rf.ReflectFromType(t)
	defsIn := s.Definitions
	s.Definitions = nil
	s.Version = ""
	s.ID = ""
	sr = &schemaReflection{schema: componentRefs(mustMarshal(s)), defs: map[string]json.RawMessage{}}
	for name, def := range defsIn {
		sr.defs[name] = componentRefs(mustMarshal(def))
	}
	return sr
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// componentRefs points the reflector's $defs references at the document's components.
func componentRefs(b []byte) json.RawMessage {
	return bytes.ReplaceAll(b, []byte(`"#/$defs/`), []byte(`"#/components/schemas/`))
}

var schemaNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// schemaName names a component: the type name for kernel types, package.Name otherwise,
// with generic brackets and other characters OpenAPI does not allow replaced.
func schemaName(t reflect.Type) string {
	name := t.Name()
	if name == "" {
		return ""
	}
	if pkg := t.PkgPath(); pkg != "" && pkg != kernelPkgPath {
		name = path.Base(pkg) + "." + name
	}
	return strings.Trim(schemaNameUnsafe.ReplaceAllString(name, "_"), "_")
}

var kernelPkgPath = reflect.TypeFor[Kernel]().PkgPath()

// openAPIDocument is the served document.
type openAPIDocument []byte

// WriteResponse writes the document as it was built.
func (d *openAPIDocument) WriteResponse(c *fiber.Ctx, status int) error {
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(*d)
}

// JSONSchema documents the document as an object.
func (openAPIDocument) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{Type: "object"} }

type openAPIEndpoint struct{ k *Kernel }

func (e *openAPIEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/openapi.json", Access: AccessPublic, Summary: "OpenAPI 3.1 document of the composed API"}
}

func (e *openAPIEndpoint) Execute(_ context.Context, _ *struct{}) (*openAPIDocument, error) {
	b, err := e.k.OpenAPI()
	if err != nil {
		return nil, Internal(err)
	}
	d := openAPIDocument(b)
	return &d, nil
}

func (k *Kernel) openAPIRoutes() []*Route {
	return []*Route{Mount[struct{}, openAPIDocument](&openAPIEndpoint{k})}
}

// queryParameters documents the `query:"name"` fields of a kernel endpoint's request type.
func queryParameters(params any) []openAPIParameter {
	if params == nil {
		return nil
	}
	t := reflect.TypeOf(params)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []openAPIParameter
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("query")
		if name == "" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		typ := "string"
		switch ft.Kind() {
		case reflect.Int, reflect.Int32, reflect.Int64:
			typ = "integer"
		case reflect.Bool:
			typ = "boolean"
		}
		out = append(out, openAPIParameter{Name: name, In: "query", Schema: json.RawMessage(`{"type":"` + typ + `"}`)})
	}
	return out
}

var stringSchema = json.RawMessage(`{"type":"string"}`)

// openAPIServer is the document's server: the public base URL where one is configured,
// otherwise the host that serves the document.
func (k *Kernel) openAPIServer() openAPIServer {
	if base := strings.TrimRight(k.cfg.PublicBaseURL, "/"); base != "" {
		return openAPIServer{URL: base, Description: "This keel instance"}
	}
	return openAPIServer{URL: "/", Description: "The keel instance serving this document"}
}

// openAPIErrorNames names the shared error responses by status.
var openAPIErrorNames = map[int]string{
	http.StatusBadRequest:            "BadRequest",
	http.StatusUnauthorized:          "Unauthorized",
	http.StatusForbidden:             "Forbidden",
	http.StatusNotFound:              "NotFound",
	http.StatusConflict:              "Conflict",
	http.StatusUnprocessableEntity:   "UnprocessableEntity",
	http.StatusTooManyRequests:       "TooManyRequests",
	http.StatusServiceUnavailable:    "ServiceUnavailable",
	http.StatusRequestEntityTooLarge: "ContentTooLarge",
	http.StatusNotImplemented:        "NotImplemented",
	http.StatusPaymentRequired:       "PaymentRequired",
	http.StatusGone:                  "Gone",
	http.StatusLocked:                "Locked",
	http.StatusPreconditionFailed:    "PreconditionFailed",
	http.StatusBadGateway:            "BadGateway",
}

var openAPIErrorDescriptions = map[int]string{
	http.StatusBadRequest:   "The request is malformed or fails validation (the message names each bad field)",
	http.StatusUnauthorized: "No valid credentials: a board session or API key, an agent API key or agent JWT is required",
	http.StatusForbidden: "The caller may not do this: the route is for another kind of actor, the caller has no access " +
		"to the company, or lacks the route's permission",
	http.StatusNotFound:            "The resource named in the path does not exist (or is not visible to the caller)",
	http.StatusConflict:            "The request conflicts with the resource's state, or reuses an Idempotency-Key for another request",
	http.StatusUnprocessableEntity: "The request is well-formed but cannot be carried out as asked",
}

// openAPIErrorResponse is the shared error response of a status (0: any other error): the
// Error schema with the status's description. Only the statuses some route answers become
// components.
func openAPIErrorResponse(status int) map[string]any {
	ref := map[string]openAPIMedia{"application/json": {Schema: json.RawMessage(`{"$ref":"#/components/schemas/Error"}`)}}
	desc := openAPIErrorDescriptions[status]
	if desc == "" {
		desc = http.StatusText(status)
	}
	if status == 0 {
		desc = "Error"
	}
	return map[string]any{"description": desc, "content": ref}
}

// schemaKeywordsOfSchemas are the JSON Schema keywords whose value is a schema, and
// schemaKeywordsOfSchemaLists and schemaKeywordsOfSchemaMaps those whose value is a list or
// map of schemas.
var (
	schemaKeywordsOfSchemas     = []string{"items", "not", "contains", "if", "then", "else", "propertyNames", "unevaluatedItems"}
	schemaKeywordsOfSchemaLists = []string{"anyOf", "oneOf", "allOf", "prefixItems"}
	schemaKeywordsOfSchemaMaps  = []string{"properties", "patternProperties", "dependentSchemas", "$defs"}
)

// objectSubschemas writes boolean subschemas (true, false) as the object schemas {} and
// {"not":{}}: JSON Schema allows both forms, but OpenAPI tools expect schema objects.
func objectSubschemas(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte("true")) && !bytes.Contains(raw, []byte("false")) {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, err := json.Marshal(objectSchema(v))
	if err != nil {
		return raw
	}
	return out
}

func objectSchema(v any) any {
	switch s := v.(type) {
	case bool:
		if s {
			return map[string]any{}
		}
		return map[string]any{"not": map[string]any{}}
	case map[string]any:
		for _, k := range schemaKeywordsOfSchemas {
			if sub, ok := s[k]; ok {
				s[k] = objectSchema(sub)
			}
		}
		for _, k := range schemaKeywordsOfSchemaLists {
			if list, ok := s[k].([]any); ok {
				for i := range list {
					list[i] = objectSchema(list[i])
				}
			}
		}
		for _, k := range schemaKeywordsOfSchemaMaps {
			if m, ok := s[k].(map[string]any); ok {
				for name := range m {
					m[name] = objectSchema(m[name])
				}
			}
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			s["additionalProperties"] = objectSchema(ap)
		}
	}
	return v
}

// errorStatuses are the error statuses a route can answer: 400 with a body or query
// parameters, 401 and 403 unless public (403 also for a permission or company check),
// 404 with path parameters, 409 for an idempotent POST, 422 where an agent's JWT may name
// another run, and the route's declared ones.
func errorStatuses(r *Route, op *openAPIOperation, idempotent bool) []int {
	set := map[int]bool{}
	hasPath, hasQuery := false, false
	for _, p := range op.Parameters {
		hasPath = hasPath || p.In == "path"
		hasQuery = hasQuery || p.In == "query"
	}
	if op.RequestBody != nil || hasQuery || hasPath {
		set[http.StatusBadRequest] = true
	}
	if r.Access != AccessPublic {
		set[http.StatusUnauthorized] = true
		set[http.StatusForbidden] = true
	}
	if r.Permission != "" || r.CompanyFrom != CompanyFromNone {
		set[http.StatusForbidden] = true
	}
	if hasPath {
		set[http.StatusNotFound] = true
	}
	if idempotent {
		set[http.StatusConflict] = true
	}
	if r.Access == AccessAgent || r.Access == AccessEither {
		set[http.StatusUnprocessableEntity] = true
	}
	for _, st := range r.Errors {
		if openAPIErrorNames[st] != "" {
			set[st] = true
		}
	}
	out := make([]int, 0, len(set))
	for st := range set {
		out = append(out, st)
	}
	sort.Ints(out)
	return out
}

// declaredQueryParameters documents an extension route's declared query parameters, skipping
// names already documented.
func declaredQueryParameters(params []sdk.QueryParam, have []openAPIParameter, owner string, defs map[string]json.RawMessage) []openAPIParameter {
	seen := map[string]bool{}
	for _, p := range have {
		seen[p.In+" "+p.Name] = true
	}
	var out []openAPIParameter
	for _, p := range params {
		if p.Name == "" || seen["query "+p.Name] {
			continue
		}
		seen["query "+p.Name] = true
		schema := declaredSchema(p.Schema, owner, defs)
		if schema == nil {
			schema = stringSchema
		}
		out = append(out, openAPIParameter{Name: p.Name, In: "query", Description: p.Description, Required: p.Required, Schema: objectSubschemas(schema)})
	}
	return out
}

// declaredSchema prepares a JSON Schema an extension declared: its $defs become components
// named owner.Name (so two extensions' types never collide) and its references follow them.
// Nil when there is no valid schema.
func declaredSchema(raw json.RawMessage, owner string, defs map[string]json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 || !json.Valid(raw) {
		return nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return raw // a boolean schema
	}
	_, hasDefs := top["$defs"]
	_, hasDefinitions := top["definitions"]
	_, hasSchema := top["$schema"]
	_, hasID := top["$id"]
	if !hasDefs && !hasDefinitions && !hasSchema && !hasID {
		return raw
	}
	prefix := strings.Trim(schemaNameUnsafe.ReplaceAllString(owner, "_"), "_") + "."
	found := map[string]json.RawMessage{}
	var pairs []string // reference → component reference
	for _, key := range []string{"$defs", "definitions"} {
		var in map[string]json.RawMessage
		if err := json.Unmarshal(top[key], &in); err == nil {
			for name, def := range in {
				comp := prefix + strings.Trim(schemaNameUnsafe.ReplaceAllString(name, "_"), "_")
				found[comp] = def
				pairs = append(pairs, `"#/`+key+`/`+name+`"`, `"#/components/schemas/`+comp+`"`)
			}
		}
		delete(top, key)
	}
	replacer := strings.NewReplacer(pairs...)
	rewrite := func(b []byte) json.RawMessage { return json.RawMessage(replacer.Replace(string(b))) }
	for comp, def := range found {
		defs[comp] = rewrite(def)
	}
	delete(top, "$schema")
	delete(top, "$id")
	out, err := json.Marshal(top)
	if err != nil {
		return nil
	}
	return rewrite(out)
}
