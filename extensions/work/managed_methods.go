package work

import (
	"context"
	"strings"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/extkit"
)

// Provided methods with which the host keeps a plugin's managed projects
// (sdk.ManagedProject): create, update and delete through the project routes, as the
// call's actor in the call's company.
func init() {
	addMethods(map[string]method{
		"projects.create": {
			Description: "Create a project in the call's company. Input: the create body of POST /api/companies/{companyId}/projects. " +
				"Output: the project.",
			Call: (*Work).methodProjectsCreate,
		},
		"projects.update": {
			Description: "Update a project of the call's company. Input: {projectId, …the PATCH /api/projects/{id} body}. Output: the project.",
			Call:        (*Work).methodProjectsUpdate,
		},
		"projects.delete": {
			Description: "Delete a project of the call's company as DELETE /api/projects/{id} does. Input: {projectId}. Output: the deleted project.",
			Call:        (*Work).methodProjectsDelete,
		},
	})
}

func (w *Work) methodProjectsCreate(ctx context.Context, call *sdk.MethodCall) (any, error) {
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return nil, err
	}
	var in map[string]any
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	delete(in, "companyId")
	return extkit.ServeRoute(ctx, w.HTTPHandler(), call, "POST /api/companies/{companyId}/projects", "/api/companies/"+companyID+"/projects", in)
}

// managedProjectRef checks that a method's project belongs to the call's company.
func (w *Work) managedProjectRef(ctx context.Context, call *sdk.MethodCall, in map[string]any) (string, error) {
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return "", err
	}
	id, _ := in["projectId"].(string)
	id = strings.ToLower(strings.TrimSpace(id))
	if !isUUID(id) {
		return "", invalid("projectId", "must be a UUID")
	}
	p, err := w.projectGet(ctx, w.db, id, false)
	if err != nil {
		return "", err
	}
	if p == nil || p.CompanyID != companyID {
		return "", notFound("Project not found")
	}
	delete(in, "projectId")
	return id, nil
}

func (w *Work) methodProjectsUpdate(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in map[string]any
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	id, err := w.managedProjectRef(ctx, call, in)
	if err != nil {
		return nil, err
	}
	return extkit.ServeRoute(ctx, w.HTTPHandler(), call, "PATCH /api/projects/{id}", "/api/projects/"+id, in)
}

func (w *Work) methodProjectsDelete(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in map[string]any
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	id, err := w.managedProjectRef(ctx, call, in)
	if err != nil {
		return nil, err
	}
	return extkit.ServeRoute(ctx, w.HTTPHandler(), call, "DELETE /api/projects/{id}", "/api/projects/"+id, nil)
}
