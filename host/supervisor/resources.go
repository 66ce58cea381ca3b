package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// A plugin's managed resources (sdk.Managed) are made and kept through their owners'
// provided methods, never their tables: the kernel's plugin_managed_resources rows bind each
// declared key to the owner's id in a company. A reconcile creates what has no row and
// checks what has one: a resource the owner still has is kept as it is (the board's edits
// included); one the owner no longer has is created again. A reset puts the declared fields
// back on the same resource. A purge terminates agents, deletes projects and skills and
// archives routines.

// managedOwner names the provided methods that keep one kind of managed resource.
type managedOwner struct {
	create, get, update, remove string
	// idField is the input field naming the resource in get, update and remove.
	idField string
	// nameField is the output field holding the resource's name.
	nameField string
}

var managedOwners = map[string]managedOwner{
	sdk.ManagedAgentKind:   {create: "agents.create", get: "agents.get", update: "agents.update", remove: "agents.terminate", idField: "agentId", nameField: "name"},
	sdk.ManagedProjectKind: {create: "work.projects.create", get: "work.projects.get", update: "work.projects.update", remove: "work.projects.delete", idField: "projectId", nameField: "name"},
	sdk.ManagedRoutineKind: {create: "routines.create", get: "routines.get", update: "routines.update", remove: "routines.archive", idField: "routineId", nameField: "title"},
	// The skills owner's managed.* methods take {key, slug, name, description, markdown,
	// metadata}; get, update and delete name the skill by {skillId}. While the skills
	// extension is not loaded, managed skills are reported as skipped.
	sdk.ManagedSkillKind: {create: "skills.managed.create", get: "skills.get", update: "skills.managed.update", remove: "skills.managed.delete", idField: "skillId", nameField: "name"},
}

// ownerCall calls an owner's provided method as the system in a company and decodes the
// answer into a generic object.
func (s *Supervisor) ownerCall(ctx context.Context, method, companyID string, input any) (map[string]any, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("error encoding input of %s: %w", method, err)
	}
	res, err := s.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: method, InputJson: in, Actor: sdk.SystemActor(), CompanyId: companyID})
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, sdk.FromProtoError(res.Error)
	}
	out := map[string]any{}
	if len(res.OutputJson) > 0 {
		if err := json.Unmarshal(res.OutputJson, &out); err != nil {
			return nil, fmt.Errorf("error decoding the answer of %s: %w", method, err)
		}
	}
	return out, nil
}

// errorStatus returns the status an owner answered with (0 when it is not an owner's answer).
func errorStatus(err error) int {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func notProvided(err error) bool {
	var e *sdk.Error
	return errors.As(err, &e) && (e.Code == "method_not_provided" || e.Status == http.StatusNotImplemented)
}

// managedPass is one reconcile of a plugin in a company.
type managedPass struct {
	s         *Supervisor
	src       *Source
	key       string
	companyID string
	// ids are the owners' ids by kind/key, for routines naming the agent and the project.
	ids map[string]string
}

func strOf(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

// setIf sets a field when the value is not empty.
func setIf(m map[string]any, k string, v any) {
	switch x := v.(type) {
	case string:
		if x != "" {
			m[k] = x
		}
	case json.RawMessage:
		if len(x) > 0 {
			m[k] = x
		}
	case []string:
		if len(x) > 0 {
			m[k] = x
		}
	default:
		if v != nil {
			m[k] = v
		}
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// adapterType picks the first preferred adapter type the registry knows, else the declared one.
func (p *managedPass) adapterType(a *sdk.ManagedAgent) string {
	if len(a.AdapterPreference) > 0 {
		known := p.s.AdapterTypes()
		for _, t := range a.AdapterPreference {
			if slices.Contains(known, t) {
				return t
			}
		}
	}
	return a.AdapterType
}

// fields returns the declared fields of a resource, as its owner's create and update
// bodies name them; create adds what only a creation sets.
func (p *managedPass) fields(kind, key string, create bool) (map[string]any, error) {
	mf := p.src.Manifest.Managed
	b := map[string]any{}
	switch kind {
	case sdk.ManagedAgentKind:
		for i := range mf.Agents {
			a := &mf.Agents[i]
			if a.Key != key {
				continue
			}
			b["name"] = a.Name
			setIf(b, "role", a.Role)
			setIf(b, "title", a.Title)
			setIf(b, "icon", a.Icon)
			setIf(b, "capabilities", a.Capabilities)
			setIf(b, "adapterType", p.adapterType(a))
			setIf(b, "adapterConfig", a.AdapterConfig)
			setIf(b, "runtimeConfig", a.RuntimeConfig)
			setIf(b, "desiredSkills", a.DesiredSkills)
			b["budgetMonthlyCents"] = a.BudgetMonthlyCents
			if create {
				b["status"] = orDefault(a.Status, "paused")
				b["metadata"] = map[string]any{"managedBy": map[string]any{"pluginKey": p.key, "resourceKey": a.Key}}
			}
		}
	case sdk.ManagedProjectKind:
		for _, pr := range mf.Projects {
			if pr.Key != key {
				continue
			}
			b["name"] = pr.Name
			setIf(b, "description", pr.Description)
			b["status"] = orDefault(pr.Status, "in_progress")
			setIf(b, "color", pr.Color)
			setIf(b, "icon", pr.Icon)
		}
	case sdk.ManagedRoutineKind:
		for _, r := range mf.Routines {
			if r.Key != key {
				continue
			}
			b["title"] = r.Title
			setIf(b, "description", r.Description)
			b["priority"] = orDefault(r.Priority, "low")
			b["status"] = orDefault(r.Status, "paused")
			b["concurrencyPolicy"] = orDefault(r.ConcurrencyPolicy, "skip_if_active")
			b["catchUpPolicy"] = orDefault(r.CatchUpPolicy, "skip_missed")
			if r.AgentKey != "" {
				id := p.ids[sdk.ManagedAgentKind+"/"+r.AgentKey]
				if id == "" {
					return nil, fmt.Errorf("its agent %s is not made", r.AgentKey)
				}
				b["assigneeAgentId"] = id
			}
			if r.ProjectKey != "" {
				id := p.ids[sdk.ManagedProjectKind+"/"+r.ProjectKey]
				if id == "" {
					return nil, fmt.Errorf("its project %s is not made", r.ProjectKey)
				}
				b["projectId"] = id
			}
			if create && r.Schedule != nil {
				t := map[string]any{"kind": "schedule", "cronExpression": r.Schedule.Cron,
					"timezone": orDefault(r.Schedule.Timezone, "UTC"), "enabled": r.Schedule.Enabled}
				setIf(t, "label", r.Schedule.Label)
				b["triggers"] = []any{t}
			}
		}
	case sdk.ManagedSkillKind:
		for _, sk := range mf.Skills {
			if sk.Key != key {
				continue
			}
			b["key"] = sk.Key
			b["slug"] = orDefault(sk.Slug, sk.Key)
			setIf(b, "name", sk.Name)
			setIf(b, "description", sk.Description)
			md, err := os.ReadFile(filepath.Join(p.src.Dir, filepath.FromSlash(sk.SkillMarkdown())))
			if err != nil {
				return nil, fmt.Errorf("error reading %s from the package: %w", sk.SkillMarkdown(), err)
			}
			b["markdown"] = string(md)
			b["metadata"] = map[string]any{"managedBy": map[string]any{"pluginKey": p.key, "resourceKey": sk.Key}}
		}
	}
	return b, nil
}

// ensure brings one declared resource about and returns its state.
func (p *managedPass) ensure(ctx context.Context, d *sdk.ManagedResource, stored *kernel.ManagedResourceRow, reset bool) *sdk.ManagedResource {
	owner := managedOwners[d.Kind]
	out := *d
	out.LastError = nil
	fail := func(status string, err error) *sdk.ManagedResource {
		out.Status = status
		msg := err.Error()
		out.LastError = &msg
		return &out
	}
	seen := func(status string, ans map[string]any) *sdk.ManagedResource {
		out.Status = status
		if id := strOf(ans, "id"); id != "" {
			out.ResourceID = &id
		}
		if n := strOf(ans, owner.nameField); n != "" {
			out.Name = n
		}
		out.OwnerStatus = strOf(ans, "status")
		return &out
	}
	recreated := false
	if stored != nil && stored.ResourceID != nil {
		id := *stored.ResourceID
		out.ResourceID = &id
		ans, err := p.s.ownerCall(ctx, owner.get, p.companyID, map[string]any{owner.idField: id})
		switch {
		case err == nil && reset:
			body, ferr := p.fields(d.Kind, d.Key, false)
			if ferr != nil {
				return fail(sdk.ManagedError, ferr)
			}
			body[owner.idField] = id
			if _, err := p.s.ownerCall(ctx, owner.update, p.companyID, body); err != nil {
				return fail(sdk.ManagedError, fmt.Errorf("reset failed: %w", err))
			}
			if d.Kind == sdk.ManagedAgentKind && p.declaredAgentStatus(d.Key) == "paused" && strOf(ans, "status") != "paused" {
				if _, err := p.s.ownerCall(ctx, "agents.pause", p.companyID, map[string]any{"agentId": id}); err != nil {
					return fail(sdk.ManagedError, fmt.Errorf("reset could not pause the agent: %w", err))
				}
			}
			if ans, err = p.s.ownerCall(ctx, owner.get, p.companyID, map[string]any{owner.idField: id}); err != nil {
				return fail(sdk.ManagedError, err)
			}
			return seen(sdk.ManagedReset, ans)
		case err == nil:
			return seen(sdk.ManagedResolved, ans)
		case notProvided(err):
			return fail(sdk.ManagedSkipped, err)
		case errorStatus(err) != http.StatusNotFound:
			return fail(sdk.ManagedError, err)
		}
		recreated = true // the owner no longer has it
	}
	body, err := p.fields(d.Kind, d.Key, true)
	if err != nil {
		return fail(sdk.ManagedError, err)
	}
	ans, err := p.s.ownerCall(ctx, owner.create, p.companyID, body)
	switch {
	case err == nil && recreated:
		return seen(sdk.ManagedRecreated, ans)
	case err == nil:
		return seen(sdk.ManagedCreated, ans)
	case notProvided(err):
		return fail(sdk.ManagedSkipped, err)
	}
	return fail(sdk.ManagedError, err)
}

func (p *managedPass) declaredAgentStatus(key string) string {
	for _, a := range p.src.Manifest.Managed.Agents {
		if a.Key == key {
			return orDefault(a.Status, "paused")
		}
	}
	return ""
}

// lockManaged holds a database lock on one plugin's resources in one company, so that two
// reconciles (two nodes, a route and a lifecycle move) never create the same resource twice.
func (s *Supervisor) lockManaged(ctx context.Context, key, companyID string) (func(), error) {
	conn, err := s.k.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("error locking managed resources of %s: %w", key, err)
	}
	lockKey := key + "/" + companyID
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('keel.managed'), hashtext($1))`, lockKey); err != nil {
		conn.Release()
		return nil, fmt.Errorf("error locking managed resources of %s: %w", key, err)
	}
	return func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('keel.managed'), hashtext($1))`, lockKey); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // a lost unlock must not stay held in the pool
		}
		conn.Release()
	}, nil
}

// ReconcileManaged implements kernel.ManagedReconciler: it makes the plugin's missing
// managed resources in a company, checks the others and stores what it found.
func (s *Supervisor) ReconcileManaged(ctx context.Context, key, companyID string, reset *kernel.ManagedRef) (*sdk.ManagedResourceList, error) {
	m := s.get(key)
	if m == nil {
		return nil, kernel.Conflict(fmt.Sprintf("Plugin %s is not loaded on this node", key)).WithCode("not_loaded")
	}
	src := m.src
	rec, err := s.k.ExtensionGetAny(ctx, key)
	if err != nil {
		return nil, kernel.Internal(err)
	}
	out := &sdk.ManagedResourceList{PluginKey: key, CompanyID: companyID, Resources: []*sdk.ManagedResource{}}
	if rec != nil {
		out.PluginID = rec.ID
	}
	declared := kernel.ManagedDeclared(src.Manifest)
	if len(declared) == 0 {
		return out, nil
	}
	unlock, err := s.lockManaged(ctx, key, companyID)
	if err != nil {
		return nil, kernel.Internal(err)
	}
	defer unlock()
	rows, err := s.k.ManagedResourceList(ctx, key, companyID)
	if err != nil {
		return nil, kernel.Internal(err)
	}
	stored := map[string]*kernel.ManagedResourceRow{}
	for _, r := range rows {
		stored[r.Kind+"/"+r.Key] = r
	}
	p := &managedPass{s: s, src: src, key: key, companyID: companyID, ids: map[string]string{}}
	made := map[string][]string{}
	for _, d := range declared {
		ref := d.Kind + "/" + d.Key
		isReset := reset != nil && reset.Kind == d.Kind && reset.Key == d.Key
		res := p.ensure(ctx, d, stored[ref], isReset)
		if res.ResourceID != nil {
			p.ids[ref] = *res.ResourceID
		}
		if err := s.k.ManagedResourceUpsert(ctx, &kernel.ManagedResourceRow{ExtensionKey: key, CompanyID: companyID, ManagedResource: *res}); err != nil {
			return nil, kernel.Internal(err)
		}
		switch res.Status {
		case sdk.ManagedCreated, sdk.ManagedRecreated, sdk.ManagedReset:
			made[res.Status] = append(made[res.Status], ref)
		case sdk.ManagedError:
			s.log.Warn("managed resource not made", "extension", key, "company", companyID, "resource", ref, "error", *res.LastError)
		}
		out.Resources = append(out.Resources, res)
	}
	if len(made) > 0 {
		if _, err := s.k.ActivityInsert(context.WithoutCancel(ctx), &kernel.ActivityInsertParams{
			CompanyID: companyID, ActorType: "system", ActorID: "supervisor", Action: "plugin.managed_resources.reconciled",
			EntityType: "plugin", EntityID: key, Details: made,
		}); err != nil {
			s.log.Warn("error recording managed resources activity", "extension", key, "error", err)
		}
	}
	// The stored list is the answer: a resource reported earlier keeps its check time.
	rows, err = s.k.ManagedResourceList(ctx, key, companyID)
	if err != nil {
		return nil, kernel.Internal(err)
	}
	out.Resources = kernel.ManagedMerge(src.Manifest, rows)
	return out, nil
}

// ReconcileManagedEverywhere reconciles a plugin's managed resources in every company that
// is not archived, in the background (after an install, an enable or an upgrade on this
// node); a plugin that declares none, or is not enabled, is left alone.
func (s *Supervisor) ReconcileManagedEverywhere(key string) {
	m := s.get(key)
	if m == nil || m.src.Manifest.Managed.Empty() || !m.enabled() {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		companies, err := s.k.CompanyList(s.ctx, &kernel.CompanyListParams{All: true})
		if err != nil {
			s.log.Warn("error listing companies for managed resources", "extension", key, "error", err)
			return
		}
		for _, c := range companies {
			if s.ctx.Err() != nil {
				return
			}
			if _, err := s.ReconcileManaged(s.ctx, key, c.ID, nil); err != nil {
				s.log.Warn("error reconciling managed resources", "extension", key, "company", c.ID, "error", err)
			}
		}
	}()
}

// ReconcileManagedInCompany makes the managed resources of every enabled plugin in a new
// company, in the background.
func (s *Supervisor) ReconcileManagedInCompany(companyID string) {
	s.mu.RLock()
	var keys []string
	for key, m := range s.exts {
		if !m.src.Manifest.Managed.Empty() {
			keys = append(keys, key)
		}
	}
	s.mu.RUnlock()
	if len(keys) == 0 {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for _, key := range keys {
			if m := s.get(key); m == nil || !m.enabled() {
				continue
			}
			if _, err := s.ReconcileManaged(s.ctx, key, companyID, nil); err != nil {
				s.log.Warn("error reconciling managed resources", "extension", key, "company", companyID, "error", err)
			}
		}
	}()
}

// PurgeManaged removes a plugin's managed resources in every company through their owners
// (uninstall with purge): agents are terminated, projects and skills deleted, routines
// archived. A resource the owner no longer has is skipped; other failures are returned
// together after every resource was tried.
func (s *Supervisor) PurgeManaged(ctx context.Context, key string) error {
	rows, err := s.k.ManagedResourceList(ctx, key, "")
	if err != nil {
		return err
	}
	var errs []error
	// Routines first: they name the agents and projects.
	slices.SortStableFunc(rows, func(a, b *kernel.ManagedResourceRow) int {
		return boolInt(a.Kind != sdk.ManagedRoutineKind) - boolInt(b.Kind != sdk.ManagedRoutineKind)
	})
	for _, r := range rows {
		if r.ResourceID == nil {
			continue
		}
		owner := managedOwners[r.Kind]
		_, err := s.ownerCall(ctx, owner.remove, r.CompanyID, map[string]any{owner.idField: *r.ResourceID})
		if err != nil && errorStatus(err) != http.StatusNotFound && !notProvided(err) &&
			!(r.Kind == sdk.ManagedAgentKind && errorStatus(err) == http.StatusConflict) {
			errs = append(errs, fmt.Errorf("managed %s %s in company %s: %w", r.Kind, r.Key, r.CompanyID, err))
			continue
		}
		if err := s.k.ManagedResourceDelete(ctx, key, r.CompanyID, r.Kind, r.Key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// managedCallPrefix is the prefix of the reserved calls a plugin reads and reconciles its
// own managed resources with.
const managedCallPrefix = "keel.managed."

// invokeManaged answers a plugin's reserved managed calls, about its own resources only.
func (s *Supervisor) invokeManaged(ctx context.Context, caller string, req *hostv1.InvokeRequest) *hostv1.InvokeResponse {
	fail := func(err error) *hostv1.InvokeResponse {
		apiErr := kernel.AsAPIError(err)
		return &hostv1.InvokeResponse{Error: &extensionv1.Error{Status: int32(apiErr.Status), Code: apiErr.Code, Message: apiErr.Message, Source: "downstream"}}
	}
	var in sdk.ManagedRequest
	if len(req.InputJson) > 0 {
		if err := json.Unmarshal(req.InputJson, &in); err != nil {
			return fail(kernel.BadRequest("invalid input of " + req.Method + ": " + err.Error()))
		}
	}
	companyID := in.CompanyID
	if companyID == "" {
		companyID = req.CompanyId
	}
	if !sdk.IsUUID(companyID) {
		return fail(kernel.BadRequest("companyId must be a UUID"))
	}
	m := s.get(caller)
	if m == nil || m.src.Manifest.Managed.Empty() {
		return fail(kernel.BadRequest(caller + " declares no managed resources"))
	}
	var out *sdk.ManagedResourceList
	var err error
	switch strings.TrimPrefix(req.Method, managedCallPrefix) {
	case "list":
		var rows []*kernel.ManagedResourceRow
		if rows, err = s.k.ManagedResourceList(ctx, caller, companyID); err == nil {
			out = &sdk.ManagedResourceList{PluginKey: caller, CompanyID: companyID, Resources: kernel.ManagedMerge(m.src.Manifest, rows)}
		}
	case "reconcile":
		out, err = s.ReconcileManaged(ctx, caller, companyID, nil)
	case "reset":
		if !m.src.Manifest.Managed.Declares(in.Kind, in.Key) {
			return fail(kernel.NotFound(fmt.Sprintf("Managed %s %q is not declared by this plugin manifest", in.Kind, in.Key)))
		}
		out, err = s.ReconcileManaged(ctx, caller, companyID, &kernel.ManagedRef{Kind: in.Kind, Key: in.Key})
	default:
		return fail(kernel.NewAPIError(http.StatusNotImplemented, "no such managed call: "+req.Method))
	}
	if err != nil {
		return fail(err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fail(err)
	}
	return &hostv1.InvokeResponse{OutputJson: b}
}

var _ kernel.ManagedReconciler = (*Supervisor)(nil)
