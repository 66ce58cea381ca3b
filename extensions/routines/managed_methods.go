package routines

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// Provided methods with which the host keeps a plugin's managed routines
// (sdk.ManagedRoutine): create one with its triggers, read, update and archive it, through
// the routine routes as the call's actor in the call's company.
func init() {
	addMethods(map[string]method{
		"create": {
			Description: "Create a routine in the call's company. Input: the create body of POST /api/companies/{companyId}/routines " +
				"plus triggers (bodies of POST /api/routines/{routineId}/triggers, created in order). Output: the routine as " +
				"GET /api/routines/{routineId} shows it, with its triggers.",
			Call: (*Routines).methodCreate,
		},
		"get": {
			Description: "Read a routine of the call's company as GET /api/routines/{routineId} shows it. Input: {routineId}. " +
				"404 \"Routine not found\" otherwise.",
			Call: (*Routines).methodGet,
		},
		"update": {
			Description: "Update a routine of the call's company. Input: {routineId, …the PATCH /api/routines/{routineId} body}. Output: the routine.",
			Call:        (*Routines).methodUpdate,
		},
		"list": {
			Description: "List the routines of the call's company, each as GET /api/routines/{routineId} shows it (with its triggers), " +
				"oldest first. Input: {}. Used by company export.",
			Call: (*Routines).methodList,
		},
		"archive": {
			Description: "Archive a routine of the call's company (status archived; runs and triggers kept). Input: {routineId}. Output: the routine.",
			Call:        (*Routines).methodArchive,
		},
	})
}

func managedMethodCompany(call *sdk.MethodCall) (string, error) {
	if call.CompanyID == "" {
		return "", invalid("companyId", "the call must name a company")
	}
	return call.CompanyID, nil
}

func (x *Routines) methodCreate(ctx context.Context, call *sdk.MethodCall) (any, error) {
	companyID, err := managedMethodCompany(call)
	if err != nil {
		return nil, err
	}
	var in map[string]json.RawMessage
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	var triggers []json.RawMessage
	if raw, ok := in["triggers"]; ok {
		if err := json.Unmarshal(raw, &triggers); err != nil {
			return nil, invalid("triggers", "must be an array of trigger bodies")
		}
	}
	delete(in, "triggers")
	delete(in, "companyId")
	out, err := extkit.ServeRoute(ctx, x.HTTPHandler(), call, "POST /api/companies/{companyId}/routines", "/api/companies/"+companyID+"/routines", in)
	if err != nil {
		return nil, err
	}
	var rt struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &rt); err != nil || rt.ID == "" {
		return nil, fmt.Errorf("error reading the created routine: %v", err)
	}
	for _, t := range triggers {
		if _, err := extkit.ServeRoute(ctx, x.HTTPHandler(), call, "POST /api/routines/{routineId}/triggers", "/api/routines/"+rt.ID+"/triggers", t); err != nil {
			return nil, err
		}
	}
	return extkit.ServeRoute(ctx, x.HTTPHandler(), call, "GET /api/routines/{routineId}", "/api/routines/"+rt.ID, nil)
}

// managedRoutine reads a routine of the call's company for a method: its id and the route's answer.
func (x *Routines) managedRoutine(ctx context.Context, call *sdk.MethodCall, in map[string]any) (string, json.RawMessage, error) {
	companyID, err := managedMethodCompany(call)
	if err != nil {
		return "", nil, err
	}
	id, _ := in["routineId"].(string)
	id = strings.ToLower(strings.TrimSpace(id))
	if !isUUID(id) {
		return "", nil, invalid("routineId", "must be a UUID")
	}
	delete(in, "routineId")
	out, err := extkit.ServeRoute(ctx, x.HTTPHandler(), call, "GET /api/routines/{routineId}", "/api/routines/"+id, nil)
	if err != nil {
		return "", nil, err
	}
	var rt struct {
		CompanyID string `json:"companyId"`
	}
	if json.Unmarshal(out, &rt) != nil || rt.CompanyID != companyID {
		return "", nil, notFound(msgRoutineNotFound)
	}
	return id, out, nil
}

func (x *Routines) methodGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in map[string]any
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	_, out, err := x.managedRoutine(ctx, call, in)
	return out, err
}

func (x *Routines) methodUpdate(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in map[string]any
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	id, _, err := x.managedRoutine(ctx, call, in)
	if err != nil {
		return nil, err
	}
	return extkit.ServeRoute(ctx, x.HTTPHandler(), call, "PATCH /api/routines/{routineId}", "/api/routines/"+id, in)
}

func (x *Routines) methodArchive(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in map[string]any
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	id, _, err := x.managedRoutine(ctx, call, in)
	if err != nil {
		return nil, err
	}
	return extkit.ServeRoute(ctx, x.HTTPHandler(), call, "PATCH /api/routines/{routineId}", "/api/routines/"+id, map[string]any{"status": statusArchived})
}

func (x *Routines) methodList(ctx context.Context, call *sdk.MethodCall) (any, error) {
	companyID, err := managedMethodCompany(call)
	if err != nil {
		return nil, err
	}
	out, err := extkit.ServeRoute(ctx, x.HTTPHandler(), call, "GET /api/companies/{companyId}/routines", "/api/companies/"+companyID+"/routines", nil)
	if err != nil {
		return nil, err
	}
	var items []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &items); err != nil {
		return nil, fmt.Errorf("error reading the routine list: %w", err)
	}
	details := make([]json.RawMessage, 0, len(items))
	for i := len(items) - 1; i >= 0; i-- {
		d, err := extkit.ServeRoute(ctx, x.HTTPHandler(), call, "GET /api/routines/{routineId}", "/api/routines/"+items[i].ID, nil)
		if err != nil {
			return nil, err
		}
		details = append(details, d)
	}
	return details, nil
}
