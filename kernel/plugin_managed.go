package kernel

import (
	"context"
	"fmt"
	"net/http"

	"github.com/keelhq/keel/sdk"
)

// ManagedReconciler creates and keeps plugins' managed resources through their owners; the
// host sets it with SetManagedReconciler. Without one the managed-resource routes answer 503.
type ManagedReconciler interface {
	// ReconcileManaged creates the plugin's missing managed resources in a company and
	// checks the others; reset, when set, names one resource to put back to its declaration.
	// Errors meant for the client are *APIError.
	ReconcileManaged(ctx context.Context, key, companyID string, reset *ManagedRef) (*sdk.ManagedResourceList, error)
}

// ManagedRef names one managed resource of a plugin.
type ManagedRef struct {
	Kind string
	Key  string
}

// SetManagedReconciler sets what carries out the managed-resource routes.
func (k *Kernel) SetManagedReconciler(r ManagedReconciler) { k.managed = r }

// OnCompanyCreated registers fn to be called (in its own goroutine) after a company is
// created on this node; the host creates the managed resources of installed plugins there.
func (k *Kernel) OnCompanyCreated(fn func(companyID string)) {
	k.settingsMu.Lock()
	defer k.settingsMu.Unlock()
	k.companyListeners = append(k.companyListeners, fn)
}

func (k *Kernel) notifyCompanyCreated(companyID string) {
	k.settingsMu.Lock()
	listeners := append([]func(string){}, k.companyListeners...)
	k.settingsMu.Unlock()
	for _, fn := range listeners {
		go fn(companyID)
	}
}

// ManagedResourceRow is one stored binding of a declared key to its owner's resource.
type ManagedResourceRow struct {
	ExtensionKey string
	CompanyID    string
	sdk.ManagedResource
}

// ManagedResourceList returns a plugin's stored managed resources in a company (all its
// companies when companyID is empty), by kind and key.
func (k *Kernel) ManagedResourceList(ctx context.Context, key, companyID string) ([]*ManagedResourceRow, error) {
	rows, err := k.Pool.Query(ctx, `SELECT company_id::text, kind, resource_key, resource_id, status, name, owner_status, last_error, checked_at
		FROM kernel.plugin_managed_resources WHERE extension_key = $1 AND ($2 = '' OR company_id::text = $2)
		ORDER BY company_id, kind, resource_key`, key, companyID)
	if err != nil {
		return nil, fmt.Errorf("error reading managed resources of %s: %w", key, err)
	}
	defer rows.Close()
	var out []*ManagedResourceRow
	for rows.Next() {
		r := &ManagedResourceRow{ExtensionKey: key}
		if err := rows.Scan(&r.CompanyID, &r.Kind, &r.Key, &r.ResourceID, &r.Status, &r.Name, &r.OwnerStatus, &r.LastError, &r.CheckedAt); err != nil {
			return nil, fmt.Errorf("error reading managed resources of %s: %w", key, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ManagedResourceUpsert stores the state of one managed resource in a company. A nil
// ResourceID keeps a stored id (a failed check does not forget what was made).
func (k *Kernel) ManagedResourceUpsert(ctx context.Context, r *ManagedResourceRow) error {
	if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.plugin_managed_resources
		(extension_key, company_id, kind, resource_key, resource_id, status, name, owner_status, last_error, checked_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
		ON CONFLICT (extension_key, company_id, kind, resource_key) DO UPDATE SET
			resource_id = COALESCE(EXCLUDED.resource_id, kernel.plugin_managed_resources.resource_id),
			status = EXCLUDED.status, name = EXCLUDED.name, owner_status = EXCLUDED.owner_status,
			last_error = EXCLUDED.last_error, checked_at = now()`,
		r.ExtensionKey, r.CompanyID, r.Kind, r.Key, r.ResourceID, r.Status, r.Name, r.OwnerStatus, r.LastError); err != nil {
		return fmt.Errorf("error storing managed %s %s of %s: %w", r.Kind, r.Key, r.ExtensionKey, err)
	}
	return nil
}

// ManagedResourceDelete forgets one managed resource binding.
func (k *Kernel) ManagedResourceDelete(ctx context.Context, key, companyID, kind, resourceKey string) error {
	if _, err := k.Pool.Exec(ctx, `DELETE FROM kernel.plugin_managed_resources
		WHERE extension_key = $1 AND company_id::text = $2 AND kind = $3 AND resource_key = $4`, key, companyID, kind, resourceKey); err != nil {
		return fmt.Errorf("error forgetting managed %s %s of %s: %w", kind, resourceKey, key, err)
	}
	return nil
}

// ManagedDeclared lists a manifest's managed resources in the order they are made
// (projects, agents, skills, then routines, which name the others), each missing.
func ManagedDeclared(mf *sdk.Manifest) []*sdk.ManagedResource {
	d := mf.Managed
	if d.Empty() {
		return nil
	}
	var out []*sdk.ManagedResource
	add := func(kind, key, name string) {
		out = append(out, &sdk.ManagedResource{Kind: kind, Key: key, Status: sdk.ManagedMissing, Name: name})
	}
	for _, p := range d.Projects {
		add(sdk.ManagedProjectKind, p.Key, p.Name)
	}
	for _, a := range d.Agents {
		add(sdk.ManagedAgentKind, a.Key, a.Name)
	}
	for _, s := range d.Skills {
		add(sdk.ManagedSkillKind, s.Key, s.Name)
	}
	for _, r := range d.Routines {
		add(sdk.ManagedRoutineKind, r.Key, r.Title)
	}
	return out
}

// ManagedMerge lays stored rows over a manifest's declarations: the declared resources in
// order, each with its stored state (missing when there is none).
func ManagedMerge(mf *sdk.Manifest, rows []*ManagedResourceRow) []*sdk.ManagedResource {
	stored := map[string]*ManagedResourceRow{}
	for _, r := range rows {
		stored[r.Kind+"/"+r.Key] = r
	}
	out := ManagedDeclared(mf)
	for i, d := range out {
		if r, ok := stored[d.Kind+"/"+d.Key]; ok {
			res := r.ManagedResource
			out[i] = &res
		}
	}
	if out == nil {
		out = []*sdk.ManagedResource{}
	}
	return out
}

type managedRequest struct {
	PluginID  string `path:"pluginId"`
	CompanyID string `path:"companyId"`
}

type managedResetRequest struct {
	PluginID    string `path:"pluginId"`
	CompanyID   string `path:"companyId"`
	Kind        string `path:"kind"`
	ResourceKey string `path:"resourceKey"`
}

// managedScope checks the company (the caller's access to it) and returns the plugin.
func (k *Kernel) managedScope(ctx context.Context, pluginID, companyID string) (*installedPlugin, error) {
	if !isUUID(companyID) {
		return nil, NotFound("Company not found")
	}
	if err := k.AuthorizeCompany(ctx, ActorFrom(ctx), companyID, ""); err != nil {
		return nil, err
	}
	return k.pluginByID(ctx, pluginID)
}

// reconcileManaged runs the host's reconciler for a plugin that can make its resources now.
func (k *Kernel) reconcileManaged(ctx context.Context, p *installedPlugin, companyID string, reset *ManagedRef) (*sdk.ManagedResourceList, error) {
	if k.managed == nil {
		return nil, NewAPIError(http.StatusServiceUnavailable, "Managed resources are not available on this host")
	}
	if p.mf.Managed.Empty() {
		return &sdk.ManagedResourceList{PluginID: p.rec.ID, PluginKey: p.rec.PluginKey, CompanyID: companyID, Resources: []*sdk.ManagedResource{}}, nil
	}
	if !p.enabled() {
		return nil, p.notReady()
	}
	return k.managed.ReconcileManaged(ctx, p.rec.PluginKey, companyID, reset)
}

type managedListEndpoint struct{ k *Kernel }

func (e *managedListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/companies/{companyId}/managed-resources", Access: AccessBoard,
		Summary: "A plugin's managed agents, projects, routines and skills in a company, as last reconciled (missing when not made yet)"}
}

func (e *managedListEndpoint) Execute(ctx context.Context, req *managedRequest) (*sdk.ManagedResourceList, error) {
	p, err := e.k.managedScope(ctx, req.PluginID, req.CompanyID)
	if err != nil {
		return nil, err
	}
	rows, err := e.k.ManagedResourceList(ctx, p.rec.PluginKey, req.CompanyID)
	if err != nil {
		return nil, Internal(err)
	}
	return &sdk.ManagedResourceList{PluginID: p.rec.ID, PluginKey: p.rec.PluginKey, CompanyID: req.CompanyID,
		Resources: ManagedMerge(p.mf, rows)}, nil
}

type managedReconcileEndpoint struct{ k *Kernel }

func (e *managedReconcileEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/companies/{companyId}/managed-resources/reconcile", Access: AccessBoard,
		Summary: "Create a plugin's missing managed resources in a company (those the board edited are kept as they are)",
		Errors:  []int{http.StatusBadRequest, http.StatusServiceUnavailable}}
}

func (e *managedReconcileEndpoint) Execute(ctx context.Context, req *managedRequest) (*sdk.ManagedResourceList, error) {
	p, err := e.k.managedScope(ctx, req.PluginID, req.CompanyID)
	if err != nil {
		return nil, err
	}
	return e.k.reconcileManaged(ctx, p, req.CompanyID, nil)
}

type managedResetEndpoint struct{ k *Kernel }

func (e *managedResetEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/companies/{companyId}/managed-resources/{kind}/{resourceKey}/reset", Access: AccessBoard,
		Summary: "Put one managed resource back to the plugin's declaration (the same resource; a missing one is created)",
		Errors:  []int{http.StatusBadRequest, http.StatusServiceUnavailable}}
}

func (e *managedResetEndpoint) Execute(ctx context.Context, req *managedResetRequest) (*sdk.ManagedResourceList, error) {
	p, err := e.k.managedScope(ctx, req.PluginID, req.CompanyID)
	if err != nil {
		return nil, err
	}
	if !p.mf.Managed.Declares(req.Kind, req.ResourceKey) {
		return nil, NotFound(fmt.Sprintf("Managed %s %q is not declared by this plugin manifest", req.Kind, req.ResourceKey))
	}
	return e.k.reconcileManaged(ctx, p, req.CompanyID, &ManagedRef{Kind: req.Kind, Key: req.ResourceKey})
}

func (k *Kernel) pluginManagedRoutes() []*Route {
	return []*Route{
		Mount[managedRequest, sdk.ManagedResourceList](&managedListEndpoint{k}),
		Mount[managedRequest, sdk.ManagedResourceList](&managedReconcileEndpoint{k}),
		Mount[managedResetRequest, sdk.ManagedResourceList](&managedResetEndpoint{k}),
	}
}
