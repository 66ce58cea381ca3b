package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// ResolveInput is the input of secrets.resolve.
type ResolveInput struct {
	CompanyID string `json:"companyId"`
	SecretID  string `json:"secretId"`
	// Version is the version to read; 0 is the latest.
	Version int `json:"version"`
	// Requester names who asks (the kernel sends the calling extension's key).
	Requester string `json:"requester"`
}

// ResolveOutput is the output of secrets.resolve.
type ResolveOutput struct {
	Value   string `json:"value"`
	Version int    `json:"version"`
}

// Consumer names what a resolved env is for.
type Consumer struct {
	// Type is agent or run.
	Type string `json:"type"`
	ID   string `json:"id"`
}

// ResolveEnvInput is the input of secrets.resolveEnv. Each env value is a plain string,
// {type:"plain", value} or {type:"secret_ref", secretId, version?}.
type ResolveEnvInput struct {
	CompanyID string                     `json:"companyId"`
	Env       map[string]json.RawMessage `json:"env"`
	Consumer  Consumer                   `json:"consumer"`
}

// ResolveEnvOutput is the output of secrets.resolveEnv: every variable as a plain value.
type ResolveEnvOutput struct {
	Env map[string]string `json:"env"`
}

// GrantedInput is the input of secrets.grantedForAgent.
type GrantedInput struct {
	AgentID string `json:"agentId"`
	// ConfigRefs are the secret_ref bindings of the agent's adapterConfig.env, sent by the
	// agents extension (which owns the config): each is a granted secret too, as in the
	// reference product.
	ConfigRefs []ConfigSecretRef `json:"configRefs,omitempty"`
}

// ConfigSecretRef is one {type:"secret_ref", secretId, version?} binding of an agent's
// adapterConfig.env.
type ConfigSecretRef struct {
	SecretID string          `json:"secretId"`
	Version  json.RawMessage `json:"version,omitempty"`
}

// GrantedSecret is one granted-secret entry (internal ids and config path stripped).
type GrantedSecret struct {
	Key             string          `json:"key"`
	Name            string          `json:"name"`
	Description     *string         `json:"description"`
	Delivery        string          `json:"delivery"`
	ProjectionClass string          `json:"projectionClass"`
	LatestVersion   int             `json:"latestVersion"`
	VersionSelector versionSelector `json:"versionSelector"`
	ResolvedVersion int             `json:"resolvedVersion"`
}

// GrantedOutput is the output of secrets.grantedForAgent.
type GrantedOutput struct {
	Secrets []GrantedSecret `json:"secrets"`
}

// ValueForAgentInput is the input of secrets.valueForAgent.
type ValueForAgentInput struct {
	AgentID string `json:"agentId"`
	Key     string `json:"key"`
	RunID   string `json:"runId"`
	// ConfigRefs are the agent's adapterConfig.env secret refs (see GrantedInput).
	ConfigRefs []ConfigSecretRef `json:"configRefs,omitempty"`
	// LowTrust marks a low-trust token (skill-test runs, low-trust review agents): refused.
	LowTrust bool `json:"lowTrust"`
}

// ValueForAgentOutput is the output of secrets.valueForAgent.
type ValueForAgentOutput struct {
	Key     string `json:"key"`
	Value   string `json:"value"`
	Version int    `json:"version"`
}

// Texts of the agent-facing refusals (spec: forbidden error).
const (
	msgNotGranted = "Secret is not granted to this agent"
	msgLowTrust   = "Low-trust tokens cannot read secret values"
)

// needsSecrets is what every secrets method requires of its caller: the secrets capability,
// declared in the caller's manifest, as well as a use of the method.
var needsSecrets = []string{sdk.CapSecrets}

func init() {
	addMethods(map[string]method{
		"resolve": {Description: "Resolve a version (0 = latest) of a company secret to its value; audited with the requester. " +
			"Input {companyId, secretId, version, requester}; output {value, version}.", Call: (*Secrets).callResolve, Requires: needsSecrets},
		"resolveEnv": {Description: "Resolve an adapter env map (plain strings, {type:plain,value}, {type:secret_ref,secretId,version?}) " +
			"to plain values for a consumer {type: agent|run, id}; output {env}.", Call: (*Secrets).callResolveEnv, Requires: needsSecrets},
		"grantedForAgent": {Description: "List the secrets granted to an agent. Input {agentId}; output {secrets: [granted-secret entries]}.",
			Call: (*Secrets).callGrantedForAgent, Requires: needsSecrets},
		"boundToAgent": {Description: "Which of some secrets the board bound to an agent explicitly (bindings, not config refs). " +
			"Input {agentId, secretIds}; output {bound: [secretIds]}.", Call: (*Secrets).callBoundToAgent, Requires: needsSecrets},
		"valueForAgent": {Description: "Read the value of a secret granted to an agent by its key. Input {agentId, key, runId, lowTrust}; " +
			"output {key, value, version}.", Call: (*Secrets).callValueForAgent, Requires: needsSecrets},
	})
}

// callCompany returns the company of a call: the call's company, which an input companyId
// must match when both are given.
func callCompany(call *sdk.MethodCall, input string) (string, error) {
	switch {
	case call.CompanyID != "" && input != "" && call.CompanyID != input:
		return "", forbidden("companyId does not match the company of the call")
	case call.CompanyID != "":
		return call.CompanyID, nil
	case input != "":
		return input, nil
	}
	return "", invalid("companyId", "is required")
}

func actorFields(a *sdk.Actor) (string, string) {
	if a == nil {
		return "", ""
	}
	switch a.Type {
	case "agent":
		return "agent", a.AgentId
	case "board":
		return "user", a.UserId
	}
	return a.Type, ""
}

func (s *Secrets) callResolve(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in ResolveInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	requester := in.Requester
	if requester == "" {
		requester = call.Caller
	}
	at, aid := actorFields(call.Actor)
	sec, value, version, err := s.resolveValue(ctx, companyID, in.SecretID, in.Version)
	rec := accessRecord{companyID: companyID, version: version, actorType: at, actorID: aid, requester: requester, outcome: "success"}
	if sec != nil {
		rec.secretID, rec.secretKey = sec.ID, sec.Key
	}
	var ref *refusal
	if errors.As(err, &ref) {
		rec.outcome, rec.reason, rec.version = ref.outcome, ref.reason, in.Version
		s.audit(ctx, rec)
		msg := "Secret not found"
		if ref.status != http.StatusNotFound {
			msg = "Cannot resolve secret: " + ref.reason
		}
		return nil, apiError(ref.status, msg)
	}
	if err != nil {
		return nil, err
	}
	s.audit(ctx, rec)
	return &ResolveOutput{Value: value, Version: version}, nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envRef is the object form of an env value.
type envRef struct {
	Type     string          `json:"type"`
	Value    *string         `json:"value"`
	SecretID string          `json:"secretId"`
	Version  json.RawMessage `json:"version"`
}

func (s *Secrets) callResolveEnv(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in ResolveEnvInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(in.Env))
	for name := range in.Env {
		names = append(names, name)
	}
	sort.Strings(names)
	envErr := func(name, reason string) error {
		return unprocessable(fmt.Sprintf("Cannot resolve environment variable %s: %s", name, reason))
	}
	// Validate every entry before resolving any secret, so a bad map reads nothing.
	refs := make(map[string]*envRef, len(names))
	for _, name := range names {
		if !envNameRE.MatchString(name) {
			return nil, envErr(name, "invalid variable name")
		}
		if name == "SERVICE_API_KEY" || strings.HasPrefix(name, "SERVICE_") {
			return nil, envErr(name, "SERVICE_* variables are assigned at run time and cannot be set from config")
		}
		raw := in.Env[name]
		var plain string
		if err := json.Unmarshal(raw, &plain); err == nil {
			v := plain
			refs[name] = &envRef{Type: "plain", Value: &v}
			continue
		}
		var ref envRef
		if err := json.Unmarshal(raw, &ref); err != nil {
			return nil, envErr(name, "must be a string or an object with a type")
		}
		switch ref.Type {
		case "plain":
			if ref.Value == nil {
				return nil, envErr(name, "plain binding needs a value")
			}
		case "secret_ref":
			if ref.SecretID == "" {
				return nil, envErr(name, "secret_ref needs a secretId")
			}
			if _, ok := parseSelector(ref.Version); !ok {
				return nil, envErr(name, `version must be "latest" or a positive number`)
			}
		default:
			return nil, envErr(name, fmt.Sprintf("binding type %q is not supported", ref.Type))
		}
		refs[name] = &ref
	}
	at, aid := actorFields(call.Actor)
	out := &ResolveEnvOutput{Env: make(map[string]string, len(names))}
	for _, name := range names {
		ref := refs[name]
		if ref.Type == "plain" {
			out.Env[name] = *ref.Value
			continue
		}
		sel, _ := parseSelector(ref.Version)
		rec := accessRecord{companyID: companyID, actorType: at, actorID: aid, consumerType: in.Consumer.Type,
			consumerID: in.Consumer.ID, requester: call.Caller, configPath: "env." + name, outcome: "success"}
		if in.Consumer.Type == "run" {
			rec.runID = in.Consumer.ID
		}
		sec, value, version, err := s.resolveValue(ctx, companyID, ref.SecretID, sel.number())
		if sec != nil {
			rec.secretID, rec.secretKey = sec.ID, sec.Key
		}
		rec.version = version
		var rf *refusal
		if errors.As(err, &rf) {
			rec.outcome, rec.reason, rec.version = rf.outcome, rf.reason, sel.number()
			s.audit(ctx, rec)
			return nil, envErr(name, rf.reason)
		}
		if err != nil {
			return nil, fmt.Errorf("error resolving environment variable %s: %w", name, err)
		}
		s.audit(ctx, rec)
		out.Env[name] = value
	}
	return out, nil
}

// agentInCompany returns the company of an agent, which must match the call's company
// when it has one (404 "Agent not found" otherwise).
func (s *Secrets) agentInCompany(ctx context.Context, call *sdk.MethodCall, agentID string) (string, error) {
	a, err := s.agentOf(ctx, agentID)
	if err != nil {
		return "", err
	}
	if a == nil || (call.CompanyID != "" && a.CompanyId != call.CompanyID) {
		return "", notFound("Agent not found")
	}
	return a.CompanyId, nil
}

// grantRow is one secret bound to an agent, with its binding's selector.
type grantRow struct {
	GrantedSecret
	secretID string
	status   string
}

// grantsForAgent lists the non-deleted secrets bound to an agent, one per secret (its
// oldest binding wins), ordered by key: explicit bindings, then the secret refs of the
// agent's adapterConfig.env (delivery env, their version selector). key, when set, narrows to
// one alias.
func (s *Secrets) grantsForAgent(ctx context.Context, companyID, agentID, key string, configRefs []ConfigSecretRef) ([]grantRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (s.id) s.id, s.status, s.key, s.name, s.description, b.delivery,
		b.projection_class, s.latest_version, b.version_selector
		FROM company_secret_bindings b JOIN company_secrets s ON s.id = b.secret_id
		WHERE b.company_id = $1 AND s.company_id = $1 AND b.target_type = 'agent' AND b.target_id = $2
		  AND s.deleted_at IS NULL AND ($3 = '' OR s.key = $3)
		ORDER BY s.id, b.created_at, b.id`, companyID, agentID, key)
	if err != nil {
		return nil, fmt.Errorf("error listing secrets granted to agent: %w", err)
	}
	defer rows.Close()
	var out []grantRow
	for rows.Next() {
		var g grantRow
		var sel string
		if err := rows.Scan(&g.secretID, &g.status, &g.Key, &g.Name, &g.Description, &g.Delivery, &g.ProjectionClass,
			&g.LatestVersion, &sel); err != nil {
			return nil, fmt.Errorf("error reading granted secret: %w", err)
		}
		g.VersionSelector = versionSelector(sel)
		g.ResolvedVersion = g.LatestVersion
		if n := g.VersionSelector.number(); n > 0 {
			g.ResolvedVersion = n
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing secrets granted to agent: %w", err)
	}
	configGrants, err := s.configGrants(ctx, companyID, key, configRefs, out)
	if err != nil {
		return nil, err
	}
	out = append(out, configGrants...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// configGrants turns the secret refs of an agent's adapterConfig.env into grants: each
// non-deleted secret of the company, once, unless an explicit binding already grants it.
// Refs that name no secret of the company grant nothing.
func (s *Secrets) configGrants(ctx context.Context, companyID, key string, refs []ConfigSecretRef, bound []grantRow) ([]grantRow, error) {
	seen := map[string]bool{}
	for _, g := range bound {
		seen[g.secretID] = true
	}
	selectors := map[string]versionSelector{}
	var ids []string
	for _, ref := range refs {
		sel, ok := parseSelector(ref.Version)
		if !ok || !isUUID(ref.SecretID) || seen[ref.SecretID] {
			continue
		}
		if _, dup := selectors[ref.SecretID]; !dup {
			ids = append(ids, ref.SecretID)
			selectors[ref.SecretID] = sel
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, status, key, name, description, latest_version FROM company_secrets
		WHERE company_id = $1 AND id = ANY($2::uuid[]) AND deleted_at IS NULL AND ($3 = '' OR key = $3)`, companyID, ids, key)
	if err != nil {
		return nil, fmt.Errorf("error listing secrets of agent config: %w", err)
	}
	defer rows.Close()
	var out []grantRow
	for rows.Next() {
		g := grantRow{GrantedSecret: GrantedSecret{Delivery: "env", ProjectionClass: "unclassified"}}
		if err := rows.Scan(&g.secretID, &g.status, &g.Key, &g.Name, &g.Description, &g.LatestVersion); err != nil {
			return nil, fmt.Errorf("error reading secret of agent config: %w", err)
		}
		g.VersionSelector = selectors[g.secretID]
		g.ResolvedVersion = g.LatestVersion
		if n := g.VersionSelector.number(); n > 0 {
			g.ResolvedVersion = n
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing secrets of agent config: %w", err)
	}
	return out, nil
}

func (s *Secrets) callGrantedForAgent(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in GrantedInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := s.agentInCompany(ctx, call, in.AgentID)
	if err != nil {
		return nil, err
	}
	grants, err := s.grantsForAgent(ctx, companyID, in.AgentID, "", in.ConfigRefs)
	if err != nil {
		return nil, err
	}
	out := &GrantedOutput{Secrets: []GrantedSecret{}}
	for _, g := range grants {
		if g.status == "active" {
			out.Secrets = append(out.Secrets, g.GrantedSecret)
		}
	}
	return out, nil
}

func (s *Secrets) callValueForAgent(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in ValueForAgentInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := s.agentInCompany(ctx, call, in.AgentID)
	if err != nil {
		return nil, err
	}
	rec := accessRecord{companyID: companyID, actorType: "agent", actorID: in.AgentID, consumerType: "agent",
		consumerID: in.AgentID, requester: call.Caller, runID: in.RunID, secretKey: in.Key, outcome: "success"}
	var grants []grantRow
	if in.Key != "" {
		if grants, err = s.grantsForAgent(ctx, companyID, in.AgentID, in.Key, in.ConfigRefs); err != nil {
			return nil, err
		}
	}
	if len(grants) > 0 {
		rec.secretID = grants[0].secretID
	} else if in.Key != "" {
		// Audit a refused read against the secret the key names, when there is one.
		var id string
		if err := s.pool.QueryRow(ctx, `SELECT id FROM company_secrets WHERE company_id = $1 AND key = $2 AND deleted_at IS NULL`,
			companyID, in.Key).Scan(&id); err == nil {
			rec.secretID = id
		}
	}
	if in.LowTrust {
		rec.outcome, rec.reason = "not_allowed", "low-trust token"
		s.audit(ctx, rec)
		return nil, forbidden(msgLowTrust)
	}
	if len(grants) == 0 {
		rec.outcome, rec.reason = "not_allowed", "not granted"
		s.audit(ctx, rec)
		return nil, forbidden(msgNotGranted)
	}
	g := grants[0]
	_, value, version, err := s.resolveValue(ctx, companyID, g.secretID, g.VersionSelector.number())
	rec.version = version
	var rf *refusal
	if errors.As(err, &rf) {
		rec.outcome, rec.reason, rec.version = rf.outcome, rf.reason, g.VersionSelector.number()
		s.audit(ctx, rec)
		return nil, unprocessable("Cannot read secret " + g.Key + ": " + rf.reason)
	}
	if err != nil {
		return nil, err
	}
	s.audit(ctx, rec)
	actor := &extensionv1.Actor{Type: "agent", AgentId: in.AgentID, CompanyId: companyID, RunId: in.RunID}
	s.activity(ctx, actor, companyID, "secret.value_read", "secret", g.secretID,
		map[string]any{"key": g.Key, "version": version, "runId": in.RunID})
	return &ValueForAgentOutput{Key: g.Key, Value: value, Version: version}, nil
}

// isGRPCNotFound reports whether a host call failed with NotFound.
func isGRPCNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// BoundInput is the input of secrets.boundToAgent.
type BoundInput struct {
	AgentID   string   `json:"agentId"`
	SecretIDs []string `json:"secretIds"`
}

// callBoundToAgent answers which of the given secrets are bound to the agent through an
// explicit binding (made by the board), so an agent cannot grant itself a secret by naming it
// in agent configuration.
func (s *Secrets) callBoundToAgent(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in BoundInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := s.agentInCompany(ctx, call, in.AgentID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(in.SecretIDs))
	for _, id := range in.SecretIDs {
		if isUUID(id) {
			ids = append(ids, id)
		}
	}
	bound := []string{}
	if len(ids) == 0 {
		return map[string]any{"bound": bound}, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT b.secret_id::text FROM company_secret_bindings b
		JOIN company_secrets s ON s.id = b.secret_id
		WHERE b.company_id = $1 AND s.company_id = $1 AND b.target_type = 'agent' AND b.target_id = $2
		  AND s.deleted_at IS NULL AND b.secret_id = ANY($3::uuid[])`, companyID, in.AgentID, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading the bindings of agent %s: %w", in.AgentID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("error reading the bindings of agent %s: %w", in.AgentID, err)
		}
		bound = append(bound, id)
	}
	return map[string]any{"bound": bound}, rows.Err()
}
