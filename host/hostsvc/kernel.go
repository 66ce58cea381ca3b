package hostsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/google/uuid"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/pgerr"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Invoker routes a method call from one extension to the extension that provides it.
type Invoker interface {
	Invoke(ctx context.Context, caller string, req *hostv1.InvokeRequest) (*hostv1.InvokeResponse, error)
}

// Enqueuer puts an extension's declared job on the kernel's queue.
type Enqueuer interface {
	Enqueue(ctx context.Context, extension string, req *hostv1.EnqueueRequest) (*hostv1.EnqueueResponse, error)
}

// Publisher delivers a published event to subscribed extensions.
type Publisher interface {
	Publish(ctx context.Context, extension string, req *hostv1.PublishRequest) (string, error)
}

// Deps are the host parts the services reach besides the kernel.
type Deps struct {
	Kernel    *kernel.Kernel
	Invoker   Invoker
	Enqueuer  Enqueuer
	Publisher Publisher
}

// New opens the host services for one extension, gated by its manifest.
func New(m *sdk.Manifest, d Deps) *Services {
	b := &base{m: m, d: d}
	return &Services{
		Activity: &activity{base: b}, Authz: &authz{base: b}, Principals: &principals{base: b},
		Companies: &companies{base: b}, Calls: &calls{base: b}, Jobs: &jobs{base: b}, Events: &events{base: b},
		Settings: &settings{base: b}, Secrets: &secrets{base: b}, Storage: &storage{base: b},
	}
}

type base struct {
	m *sdk.Manifest
	d Deps
}

func (b *base) need(capability string) error {
	if !b.m.HasCapability(capability) {
		return status.Errorf(codes.PermissionDenied, "capability %s not declared by %s", capability, b.m.Key)
	}
	return nil
}

// internal maps an unexpected failure to a gRPC status; an unreachable database is
// Unavailable with pgerr's message, so the extension answers 503 database_unavailable.
func internal(err error) error {
	if pgerr.Unavailable(err) {
		return pgerr.Status()
	}
	return status.Error(codes.Internal, err.Error())
}

// companyMustExist refuses calls scoped to a company that does not exist.
func (b *base) companyMustExist(ctx context.Context, id string) error {
	if id == "" {
		return status.Error(codes.InvalidArgument, "company_id is required")
	}
	c, err := b.d.Kernel.CompanyGetByID(ctx, id)
	if err != nil {
		return internal(err)
	}
	if c == nil {
		return status.Errorf(codes.NotFound, "company %s not found", id)
	}
	return nil
}

// KernelActor turns a wire actor into a kernel actor, re-reading what the kernel owns
// (agent status and role, board memberships) so a stale or forged actor cannot widen access.
func KernelActor(ctx context.Context, k *kernel.Kernel, a *extensionv1.Actor) (*kernel.Actor, error) {
	if a == nil {
		return &kernel.Actor{Type: kernel.ActorNone}, nil
	}
	switch a.Type {
	case "agent":
		ag, err := k.AgentGetByID(ctx, a.AgentId)
		if err != nil {
			return nil, err
		}
		if ag == nil || ag.Status == "terminated" || ag.Status == "pending_approval" {
			return &kernel.Actor{Type: kernel.ActorNone}, nil
		}
		return &kernel.Actor{Type: kernel.ActorAgent, AgentID: ag.ID, CompanyID: ag.CompanyID, AgentRole: ag.Role, RunID: a.RunId, Source: a.Source}, nil
	case "board":
		ka, err := k.LoadBoardActor(ctx, a.UserId, a.Source)
		if err != nil {
			return nil, err
		}
		ka.RunID = a.RunId
		return ka, nil
	case "system":
		return &kernel.Actor{Type: kernel.ActorSystem}, nil
	}
	return &kernel.Actor{Type: kernel.ActorNone}, nil
}

type activity struct {
	hostv1.UnimplementedActivityServer
	*base
}

// appendMax is the most entries one AppendMany carries.
const appendMax = 256

func (s *activity) Append(ctx context.Context, req *hostv1.AppendActivityRequest) (*hostv1.AppendActivityResponse, error) {
	if err := s.need(sdk.CapActivity); err != nil {
		return nil, err
	}
	p, err := s.params(req)
	if err != nil {
		return nil, err
	}
	e, err := s.d.Kernel.ActivityInsert(ctx, p)
	if err != nil {
		return nil, appendError(req, err)
	}
	return appendResponse(e), nil
}

// AppendMany appends entries together: each is checked as Append checks it, and the valid
// ones reach the kernel at once, so that its group writer commits them in one statement.
// Each entry gets its own result, in order.
func (s *activity) AppendMany(ctx context.Context, req *hostv1.AppendManyActivityRequest) (*hostv1.AppendManyActivityResponse, error) {
	if err := s.need(sdk.CapActivity); err != nil {
		return nil, err
	}
	if len(req.Entries) > appendMax {
		return nil, status.Errorf(codes.InvalidArgument, "at most %d entries per call, got %d", appendMax, len(req.Entries))
	}
	results := make([]*hostv1.AppendActivityResult, len(req.Entries))
	var ps []*kernel.ActivityInsertParams
	var idx []int
	for i, r := range req.Entries {
		p, err := s.params(r)
		if err != nil {
			results[i] = appendFailed(err)
			continue
		}
		ps, idx = append(ps, p), append(idx, i)
	}
	if len(ps) > 0 {
		entries, errs := s.d.Kernel.ActivityInsertMany(ctx, ps)
		for j, i := range idx {
			if errs[j] != nil {
				results[i] = appendFailed(appendError(req.Entries[i], errs[j]))
				continue
			}
			results[i] = &hostv1.AppendActivityResult{Result: &hostv1.AppendActivityResult_Entry{Entry: appendResponse(entries[j])}}
		}
	}
	return &hostv1.AppendManyActivityResponse{Results: results}, nil
}

// params checks an entry to append and returns it as the kernel takes it.
func (s *activity) params(req *hostv1.AppendActivityRequest) (*kernel.ActivityInsertParams, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "entry is required")
	}
	if req.Action == "" {
		return nil, status.Error(codes.InvalidArgument, "action is required")
	}
	// The insert itself refuses an unknown company (no read of the company first).
	if req.CompanyId == "" {
		return nil, status.Error(codes.InvalidArgument, "company_id is required")
	}
	if _, err := uuid.Parse(req.CompanyId); err != nil {
		return nil, status.Errorf(codes.NotFound, "company %s not found", req.CompanyId)
	}
	actorType, actorID := req.ActorType, req.ActorId
	if actorType == "" {
		actorType, actorID = "plugin", s.m.Key
	}
	if req.Id != "" {
		if _, err := uuid.Parse(req.Id); err != nil {
			return nil, status.Error(codes.InvalidArgument, "id must be a UUID")
		}
	}
	var details any
	if len(req.DetailsJson) > 0 {
		if !json.Valid(req.DetailsJson) {
			return nil, status.Error(codes.InvalidArgument, "details_json is not valid JSON")
		}
		details = json.RawMessage(req.DetailsJson)
	}
	return &kernel.ActivityInsertParams{
		CompanyID: req.CompanyId, ActorType: actorType, ActorID: actorID, Action: req.Action,
		EntityType: req.EntityType, EntityID: req.EntityId, AgentID: req.AgentId, RunID: req.RunId,
		Details: details, Source: s.m.Key, ID: req.Id, CompanyMustExist: true,
	}, nil
}

// appendError maps the kernel's error for an entry to a gRPC status.
func appendError(req *hostv1.AppendActivityRequest, err error) error {
	if errors.Is(err, kernel.ErrCompanyNotFound) {
		return status.Errorf(codes.NotFound, "company %s not found", req.CompanyId)
	}
	return internal(err)
}

// appendResponse is the answer for an appended entry.
func appendResponse(e *kernel.ActivityEntry) *hostv1.AppendActivityResponse {
	return &hostv1.AppendActivityResponse{Id: e.ID, CreatedAt: e.CreatedAt.UTC().Format(time.RFC3339Nano)}
}

// appendFailed is the result of an entry that failed with a gRPC status error.
func appendFailed(err error) *hostv1.AppendActivityResult {
	st := status.Convert(err)
	return &hostv1.AppendActivityResult{Result: &hostv1.AppendActivityResult_Error{
		Error: &hostv1.AppendActivityError{Code: int32(st.Code()), Message: st.Message()}}}
}

// Query scans the company's activity after a cursor, oldest first.
func (s *activity) Query(ctx context.Context, req *hostv1.QueryActivityRequest) (*hostv1.QueryActivityResponse, error) {
	if err := s.need(sdk.CapActivity); err != nil {
		return nil, err
	}
	p := &kernel.ActivityScanParams{CompanyID: req.CompanyId, AfterID: req.AfterId, ExcludeActions: req.ExcludeActions,
		ProjectID: req.ProjectId, Limit: int(req.Limit)}
	var err error
	if p.After, err = parseOptionalTime("after", req.After); err != nil {
		return nil, err
	}
	if p.Until, err = parseOptionalTime("until", req.Until); err != nil {
		return nil, err
	}
	entries, err := s.d.Kernel.ActivityScan(ctx, p)
	if err != nil {
		return nil, internal(err)
	}
	b, err := json.Marshal(entries)
	if err != nil {
		return nil, internal(err)
	}
	return &hostv1.QueryActivityResponse{EntriesJson: b}, nil
}

// parseOptionalTime parses an RFC 3339 instant; empty is the zero time.
func parseOptionalTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, status.Errorf(codes.InvalidArgument, "%s is not an RFC 3339 time: %q", field, v)
	}
	return t, nil
}

type authz struct {
	hostv1.UnimplementedAuthzServer
	*base
}

func (s *authz) Check(ctx context.Context, req *hostv1.CheckRequest) (*hostv1.CheckResponse, error) {
	if err := s.need(sdk.CapAuthz); err != nil {
		return nil, err
	}
	a, err := KernelActor(ctx, s.d.Kernel, req.Actor)
	if err != nil {
		return nil, internal(err)
	}
	if err := s.d.Kernel.AuthorizeCompany(ctx, a, req.CompanyId, req.Permission); err != nil {
		var apiErr *kernel.APIError
		if errors.As(err, &apiErr) && apiErr.Status < 500 {
			return &hostv1.CheckResponse{Allowed: false, Reason: apiErr.Message}, nil
		}
		return nil, internal(err)
	}
	return &hostv1.CheckResponse{Allowed: true}, nil
}

type principals struct {
	hostv1.UnimplementedPrincipalsServer
	*base
}

func identity(a *kernel.AgentIdentity) *hostv1.AgentIdentity {
	return &hostv1.AgentIdentity{Id: a.ID, CompanyId: a.CompanyID, Name: a.Name, UrlKey: a.URLKey, Role: a.Role, Status: a.Status,
		CreatedAt: a.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedAt: a.UpdatedAt.UTC().Format(time.RFC3339Nano)}
}

func (s *principals) GetAgent(ctx context.Context, req *hostv1.GetAgentRequest) (*hostv1.AgentIdentity, error) {
	if err := s.need(sdk.CapPrincipals); err != nil {
		return nil, err
	}
	a, err := s.d.Kernel.AgentGetByID(ctx, req.AgentId)
	if err != nil {
		return nil, internal(err)
	}
	if a == nil {
		return nil, status.Errorf(codes.NotFound, "agent %s not found", req.AgentId)
	}
	return identity(a), nil
}

func (s *principals) ListAgents(ctx context.Context, req *hostv1.ListAgentsRequest) (*hostv1.ListAgentsResponse, error) {
	if err := s.need(sdk.CapPrincipals); err != nil {
		return nil, err
	}
	list, err := s.d.Kernel.AgentList(ctx, req.CompanyId, req.IncludeTerminated)
	if err != nil {
		return nil, internal(err)
	}
	out := &hostv1.ListAgentsResponse{}
	for _, a := range list {
		out.Agents = append(out.Agents, identity(a))
	}
	return out, nil
}

func (s *principals) CreateAgent(ctx context.Context, req *hostv1.CreateAgentRequest) (*hostv1.AgentIdentity, error) {
	if err := s.need(sdk.CapPrincipals); err != nil {
		return nil, err
	}
	if err := s.companyMustExist(ctx, req.CompanyId); err != nil {
		return nil, err
	}
	a, err := s.d.Kernel.AgentCreate(ctx, &kernel.AgentCreateParams{CompanyID: req.CompanyId, Name: req.Name, Role: req.Role, Status: req.Status})
	if err != nil {
		return nil, apiStatus(err)
	}
	return identity(a), nil
}

func (s *principals) SetAgentStatus(ctx context.Context, req *hostv1.SetAgentStatusRequest) (*hostv1.AgentIdentity, error) {
	if err := s.need(sdk.CapPrincipals); err != nil {
		return nil, err
	}
	a, err := s.d.Kernel.AgentSetStatusFrom(ctx, req.AgentId, req.Status, req.OnlyFrom)
	if err != nil {
		return nil, apiStatus(err)
	}
	return identity(a), nil
}

func (s *principals) MintAgentToken(ctx context.Context, req *hostv1.MintAgentTokenRequest) (*hostv1.MintAgentTokenResponse, error) {
	if err := s.need(sdk.CapPrincipals); err != nil {
		return nil, err
	}
	a, err := s.d.Kernel.AgentGetByID(ctx, req.AgentId)
	if err != nil {
		return nil, internal(err)
	}
	if a == nil {
		return nil, status.Errorf(codes.NotFound, "agent %s not found", req.AgentId)
	}
	tok, exp, err := s.d.Kernel.MintAgentJWT(a.ID, a.CompanyID, req.AdapterType, req.RunId, time.Duration(req.TtlSeconds)*time.Second)
	if err != nil {
		return nil, internal(err)
	}
	return &hostv1.MintAgentTokenResponse{Token: tok, ExpiresAt: exp.UTC().Format(time.RFC3339)}, nil
}

func (s *principals) UpdateAgent(ctx context.Context, req *hostv1.UpdateAgentRequest) (*hostv1.AgentIdentity, error) {
	if err := s.need(sdk.CapPrincipals); err != nil {
		return nil, err
	}
	a, err := s.d.Kernel.AgentGetByID(ctx, req.AgentId)
	if err != nil {
		return nil, internal(err)
	}
	if a == nil {
		return nil, status.Errorf(codes.NotFound, "agent %s not found", req.AgentId)
	}
	if req.Name != nil && *req.Name != a.Name {
		if a, err = s.d.Kernel.AgentRename(ctx, req.AgentId, *req.Name); err != nil {
			return nil, apiStatus(err)
		}
	}
	if req.Role != nil && *req.Role != a.Role {
		if a, err = s.d.Kernel.AgentSetRole(ctx, req.AgentId, *req.Role); err != nil {
			return nil, apiStatus(err)
		}
	}
	return identity(a), nil
}

func (s *principals) SetPermission(ctx context.Context, req *hostv1.SetPermissionRequest) (*hostv1.SetPermissionResponse, error) {
	if err := s.need(sdk.CapPrincipals); err != nil {
		return nil, err
	}
	if req.PrincipalType != "agent" && req.PrincipalType != "user" {
		return nil, status.Error(codes.InvalidArgument, "principal_type must be agent or user")
	}
	known := false
	for _, k := range kernel.PermissionKeys {
		known = known || k == req.Permission
	}
	if !known {
		return nil, status.Errorf(codes.InvalidArgument, "unknown permission %q", req.Permission)
	}
	if err := s.companyMustExist(ctx, req.CompanyId); err != nil {
		return nil, err
	}
	k := s.d.Kernel
	if req.PrincipalType == "agent" {
		a, err := k.AgentGetByID(ctx, req.PrincipalId)
		if err != nil {
			return nil, internal(err)
		}
		if a == nil || a.CompanyID != req.CompanyId {
			return nil, status.Errorf(codes.NotFound, "agent %s not found in company %s", req.PrincipalId, req.CompanyId)
		}
	}
	var err error
	if req.Granted {
		if req.PrincipalType == "agent" {
			if err = k.MembershipEnsure(ctx, req.CompanyId, "agent", req.PrincipalId, "member"); err != nil {
				return nil, apiStatus(err)
			}
		}
		err = k.GrantPermission(ctx, req.CompanyId, req.PrincipalType, req.PrincipalId, req.Permission, req.GrantedByUserId)
	} else {
		err = k.RevokePermission(ctx, req.CompanyId, req.PrincipalType, req.PrincipalId, req.Permission, req.GrantedByUserId)
	}
	if err != nil {
		return nil, apiStatus(err)
	}
	return &hostv1.SetPermissionResponse{}, nil
}

// apiStatus maps a kernel APIError to a gRPC status with the same meaning.
func apiStatus(err error) error {
	if pgerr.Unavailable(err) {
		return pgerr.Status()
	}
	var apiErr *kernel.APIError
	if !errors.As(err, &apiErr) {
		return internal(err)
	}
	code := codes.Internal
	switch apiErr.Status {
	case 400, 422:
		code = codes.InvalidArgument
	case 401:
		code = codes.Unauthenticated
	case 403:
		code = codes.PermissionDenied
	case 404:
		code = codes.NotFound
	case 409:
		code = codes.FailedPrecondition
	}
	return status.Error(code, apiErr.Message)
}

type companies struct {
	hostv1.UnimplementedCompaniesServer
	*base
}

func (s *companies) Get(ctx context.Context, req *hostv1.GetCompanyRequest) (*hostv1.CompanyResponse, error) {
	if err := s.need(sdk.CapCompanies); err != nil {
		return nil, err
	}
	c, err := s.d.Kernel.CompanyGetByID(ctx, req.CompanyId)
	if err != nil {
		return nil, internal(err)
	}
	if c == nil {
		return nil, status.Errorf(codes.NotFound, "company %s not found", req.CompanyId)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, internal(err)
	}
	return &hostv1.CompanyResponse{CompanyJson: b}, nil
}

func (s *companies) NextIssueNumber(ctx context.Context, req *hostv1.NextIssueNumberRequest) (*hostv1.NextIssueNumberResponse, error) {
	if err := s.need(sdk.CapCompanies); err != nil {
		return nil, err
	}
	count := int(req.Count)
	if count == 0 {
		count = 1
	}
	prefix, first, last, err := s.d.Kernel.CompanyNextIssueNumbers(ctx, req.CompanyId, count)
	if err != nil {
		return nil, apiStatus(err)
	}
	return &hostv1.NextIssueNumberResponse{IssuePrefix: prefix, FirstNumber: first, Number: last,
		Identifier: fmt.Sprintf("%s-%d", prefix, last)}, nil
}

// UpdateBudget applies budget state to a company: its monthly budget, this month's spend,
// and a pause or resume by budget enforcement.
func (s *companies) UpdateBudget(ctx context.Context, req *hostv1.UpdateCompanyBudgetRequest) (*hostv1.CompanyResponse, error) {
	if err := s.need(sdk.CapCompanies); err != nil {
		return nil, err
	}
	p := &kernel.CompanyUpdateParams{ID: req.CompanyId}
	if req.BudgetMonthlyCents != nil {
		if *req.BudgetMonthlyCents < 0 {
			return nil, status.Error(codes.InvalidArgument, "budget_monthly_cents must not be negative")
		}
		p.BudgetMonthlyCents = kernel.PatchField[int64]{Set: true, Value: *req.BudgetMonthlyCents}
	}
	if req.SpentMonthlyCents != nil {
		p.SpentMonthlyCents = kernel.PatchField[int64]{Set: true, Value: *req.SpentMonthlyCents}
	}
	if req.Status != nil {
		if *req.Status != kernel.CompanyActive && *req.Status != kernel.CompanyPaused {
			return nil, status.Errorf(codes.InvalidArgument, "status must be %s or %s", kernel.CompanyActive, kernel.CompanyPaused)
		}
		p.Status = kernel.PatchField[string]{Set: true, Value: *req.Status}
	}
	if req.PauseReason != nil {
		p.PauseReason = kernel.PatchField[string]{Set: true, Value: *req.PauseReason, Null: *req.PauseReason == ""}
	}
	c, err := s.d.Kernel.CompanyUpdate(ctx, p)
	if err != nil {
		return nil, internal(err)
	}
	if c == nil {
		return nil, status.Errorf(codes.NotFound, "company %s not found", req.CompanyId)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, internal(err)
	}
	return &hostv1.CompanyResponse{CompanyJson: b}, nil
}

type calls struct {
	hostv1.UnimplementedCallsServer
	*base
}

func (s *calls) Invoke(ctx context.Context, req *hostv1.InvokeRequest) (*hostv1.InvokeResponse, error) {
	if strings.HasPrefix(req.Method, "keel.managed.") {
		// A plugin's calls about its own managed resources need the managed capability only.
		if err := s.need(sdk.CapManaged); err != nil {
			return nil, err
		}
		if s.d.Invoker == nil {
			return nil, status.Error(codes.Unavailable, "no extension calls are routed on this host")
		}
		return s.d.Invoker.Invoke(ctx, s.m.Key, req)
	}
	if err := s.need(sdk.CapCalls); err != nil {
		return nil, err
	}
	if !s.m.UsesMethod(req.Method) {
		return nil, status.Errorf(codes.PermissionDenied, "%s does not declare that it uses %s", s.m.Key, req.Method)
	}
	if s.d.Invoker == nil {
		return nil, status.Error(codes.Unavailable, "no extension calls are routed on this host")
	}
	return s.d.Invoker.Invoke(ctx, s.m.Key, req)
}

type jobs struct {
	hostv1.UnimplementedJobsServer
	*base
}

func (s *jobs) Enqueue(ctx context.Context, req *hostv1.EnqueueRequest) (*hostv1.EnqueueResponse, error) {
	if err := s.need(sdk.CapJobs); err != nil {
		return nil, err
	}
	declared := false
	for _, j := range s.m.Jobs {
		if j.Key == req.JobKey {
			declared = true
		}
	}
	if !declared {
		return nil, status.Errorf(codes.InvalidArgument, "job %s is not declared by %s", req.JobKey, s.m.Key)
	}
	if s.d.Enqueuer == nil {
		return nil, status.Error(codes.Unavailable, "the job queue is not running")
	}
	return s.d.Enqueuer.Enqueue(ctx, s.m.Key, req)
}

type events struct {
	hostv1.UnimplementedEventsServer
	*base
}

func (s *events) Publish(ctx context.Context, req *hostv1.PublishRequest) (*hostv1.PublishResponse, error) {
	if err := s.need(sdk.CapEvents); err != nil {
		return nil, err
	}
	if req.Type == "" {
		return nil, status.Error(codes.InvalidArgument, "type is required")
	}
	if s.d.Publisher == nil {
		return nil, status.Error(codes.Unavailable, "event delivery is not running")
	}
	id, err := s.d.Publisher.Publish(ctx, s.m.Key, req)
	if err != nil {
		return nil, internal(err)
	}
	return &hostv1.PublishResponse{Id: id}, nil
}

type settings struct {
	hostv1.UnimplementedSettingsServer
	*base
}

func (s *settings) Get(ctx context.Context, req *hostv1.GetSettingsRequest) (*hostv1.GetSettingsResponse, error) {
	if err := s.need(sdk.CapSettings); err != nil {
		return nil, err
	}
	if req.Section != "general" && req.Section != "experimental" {
		return nil, status.Errorf(codes.InvalidArgument, "unknown settings section %q", req.Section)
	}
	b, err := s.d.Kernel.SettingsGet(ctx, req.Section)
	if err != nil {
		return nil, internal(err)
	}
	return &hostv1.GetSettingsResponse{SettingsJson: b}, nil
}

type secrets struct {
	hostv1.UnimplementedSecretsServer
	*base
}

// Resolve asks the extension that provides secrets.resolve; the kernel keeps no secrets.
func (s *secrets) Resolve(ctx context.Context, req *hostv1.ResolveSecretRequest) (*hostv1.ResolveSecretResponse, error) {
	if err := s.need(sdk.CapSecrets); err != nil {
		return nil, err
	}
	if s.d.Invoker == nil {
		return nil, status.Error(codes.Unavailable, "no secrets provider is installed")
	}
	in, _ := json.Marshal(map[string]any{"companyId": req.CompanyId, "secretId": req.SecretId, "version": req.Version, "requester": s.m.Key})
	res, err := s.d.Invoker.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: "secrets.resolve", InputJson: in, CompanyId: req.CompanyId, Actor: sdk.SystemActor()})
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, status.Error(codes.FailedPrecondition, res.Error.Message)
	}
	var out struct {
		Value   string `json:"value"`
		Version int32  `json:"version"`
	}
	if err := json.Unmarshal(res.OutputJson, &out); err != nil {
		return nil, internal(err)
	}
	return &hostv1.ResolveSecretResponse{Value: out.Value, Version: out.Version}, nil
}

type storage struct {
	hostv1.UnimplementedStorageServer
	*base
}

const maxStorageValue = 1 << 20

func (s *storage) Get(ctx context.Context, req *hostv1.StorageKey) (*hostv1.StorageGetResponse, error) {
	if err := s.need(sdk.CapStorage); err != nil {
		return nil, err
	}
	v, ok, err := s.d.Kernel.KVGet(ctx, s.m.Key, req.CompanyId, req.Key)
	if err != nil {
		return nil, internal(err)
	}
	return &hostv1.StorageGetResponse{Value: v, Found: ok}, nil
}

func (s *storage) Set(ctx context.Context, req *hostv1.StorageSetRequest) (*hostv1.StorageSetResponse, error) {
	if err := s.need(sdk.CapStorage); err != nil {
		return nil, err
	}
	if req.Key == "" {
		return nil, status.Error(codes.InvalidArgument, "key is required")
	}
	if len(req.Value) > maxStorageValue {
		return nil, status.Errorf(codes.InvalidArgument, "value exceeds %d bytes", maxStorageValue)
	}
	if req.CompanyId != "" {
		if err := s.companyMustExist(ctx, req.CompanyId); err != nil {
			return nil, err
		}
	}
	if err := s.d.Kernel.KVSet(ctx, s.m.Key, req.CompanyId, req.Key, req.Value); err != nil {
		return nil, internal(err)
	}
	return &hostv1.StorageSetResponse{}, nil
}

func (s *storage) Delete(ctx context.Context, req *hostv1.StorageKey) (*hostv1.StorageDeleteResponse, error) {
	if err := s.need(sdk.CapStorage); err != nil {
		return nil, err
	}
	ok, err := s.d.Kernel.KVDelete(ctx, s.m.Key, req.CompanyId, req.Key)
	if err != nil {
		return nil, internal(err)
	}
	return &hostv1.StorageDeleteResponse{Deleted: ok}, nil
}
