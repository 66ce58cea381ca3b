package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Activity list bounds.
const (
	ActivityListDefaultLimit = 50
	ActivityListMaxLimit     = 500
)

// ActivityActorTypes are the actor types an activity entry may carry.
var ActivityActorTypes = []string{"agent", "user", "system", "plugin"}

// ActivityListParams filters ActivityList; empty filters match everything.
type ActivityListParams struct {
	CompanyID  string
	AgentID    string
	EntityType string
	EntityID   string
	Action     string
	Limit      int
	Offset     int
}

// ActivityList returns a company's activity entries, newest first.
func (k *Kernel) ActivityList(ctx context.Context, p *ActivityListParams) ([]*ActivityEntry, error) {
	args := []any{p.CompanyID}
	where := []string{"company_id = $1"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if p.AgentID != "" {
		add("agent_id = $%d", p.AgentID)
	}
	if p.EntityType != "" {
		add("entity_type = $%d", p.EntityType)
	}
	if p.EntityID != "" {
		add("entity_id = $%d", p.EntityID)
	}
	if p.Action != "" {
		add("action = $%d", p.Action)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = ActivityListDefaultLimit
	}
	args = append(args, limit, max(p.Offset, 0))
	q := `SELECT id::text, company_id::text, actor_type, actor_id, action, entity_type, entity_id, agent_id::text, run_id,
			responsible_user_id, details, created_at
		FROM kernel.activity_log WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY created_at DESC, id DESC LIMIT $` + strconv.Itoa(len(args)-1) + ` OFFSET $` + strconv.Itoa(len(args))
	rows, err := k.Pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("error listing activity: %w", err)
	}
	defer rows.Close()
	out := []*ActivityEntry{}
	for rows.Next() {
		e := &ActivityEntry{}
		if err := rows.Scan(&e.ID, &e.CompanyID, &e.ActorType, &e.ActorID, &e.Action, &e.EntityType, &e.EntityID,
			&e.AgentID, &e.RunID, &e.ResponsibleUserID, &e.Details, &e.CreatedAt); err != nil {
			return nil, fmt.Errorf("error listing activity: %w", err)
		}
		e.CreatedAt = e.CreatedAt.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing activity: %w", err)
	}
	return out, nil
}

type activityListRequest struct {
	CompanyID  string `path:"companyId"`
	AgentID    string `query:"agentId"`
	EntityType string `query:"entityType"`
	EntityID   string `query:"entityId"`
	Action     string `query:"action"`
	Limit      *int   `query:"limit"`
	Offset     *int   `query:"offset"`
}

type activityListEndpoint struct{ k *Kernel }

func (e *activityListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/activity", Access: AccessEither, CompanyFrom: CompanyFromPath,
		Summary: "List a company's activity, newest first (filters agentId, entityType, entityId, action; limit 1-500, default 50; offset)"}
}

func (e *activityListEndpoint) Execute(ctx context.Context, req *activityListRequest) (*[]*ActivityEntry, error) {
	var d detailList
	if req.AgentID != "" && !isUUID(req.AgentID) {
		d.add("agentId", "must be a UUID")
	}
	limit := ActivityListDefaultLimit
	if req.Limit != nil {
		limit = *req.Limit
		if limit < 1 || limit > ActivityListMaxLimit {
			d.add("limit", fmt.Sprintf("must be between 1 and %d", ActivityListMaxLimit))
		}
	}
	offset := 0
	if req.Offset != nil {
		offset = *req.Offset
		if offset < 0 {
			d.add("offset", "must be at least 0")
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	list, err := e.k.ActivityList(ctx, &ActivityListParams{
		CompanyID: req.CompanyID, AgentID: req.AgentID, EntityType: req.EntityType, EntityID: req.EntityID,
		Action: req.Action, Limit: limit, Offset: offset,
	})
	if err != nil {
		return nil, Internal(err)
	}
	return &list, nil
}

type activityCreateRequest struct {
	CompanyID  string           `path:"companyId" json:"-"`
	ActorType  *string          `json:"actorType,omitempty" jsonschema:"enum=agent,enum=user,enum=system,enum=plugin"`
	ActorID    string           `json:"actorId" jsonschema:"required,minLength=1"`
	Action     string           `json:"action" jsonschema:"required,minLength=1,maxLength=200"`
	EntityType string           `json:"entityType" jsonschema:"required,minLength=1"`
	EntityID   string           `json:"entityId" jsonschema:"required,minLength=1"`
	AgentID    *string          `json:"agentId,omitempty" jsonschema:"format=uuid"`
	Details    *json.RawMessage `json:"details,omitempty"`
}

type activityCreateEndpoint struct{ k *Kernel }

func (e *activityCreateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies/{companyId}/activity", Status: http.StatusCreated, Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Summary: "Append an activity entry (board only); it is recorded, never delivered to extensions as an event"}
}

func (e *activityCreateEndpoint) Execute(ctx context.Context, req *activityCreateRequest) (*ActivityEntry, error) {
	var d detailList
	actorType := "system"
	if req.ActorType != nil {
		actorType = *req.ActorType
		if !slices.Contains(ActivityActorTypes, actorType) {
			d.add("actorType", "must be one of "+strings.Join(ActivityActorTypes, ", "))
		}
	}
	for _, f := range []struct{ path, v string }{
		{"actorId", req.ActorID}, {"action", req.Action}, {"entityType", req.EntityType}, {"entityId", req.EntityID},
	} {
		if strings.TrimSpace(f.v) == "" {
			d.add(f.path, "is required")
		} else if len(f.v) > 500 {
			d.add(f.path, "must be at most 500 characters")
		}
	}
	agentID := ""
	if req.AgentID != nil && *req.AgentID != "" {
		agentID = *req.AgentID
		if !isUUID(agentID) {
			d.add("agentId", "must be a UUID")
		} else {
			var ok bool
			if err := e.k.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kernel.agents WHERE id = $1 AND company_id = $2)`,
				agentID, req.CompanyID).Scan(&ok); err != nil {
				return nil, Internal(fmt.Errorf("error reading agent %s: %w", agentID, err))
			}
			if !ok {
				d.add("agentId", "agent not found in this company")
			}
		}
	}
	var details json.RawMessage
	if req.Details != nil {
		details = bytes.TrimSpace(*req.Details)
		if bytes.Equal(details, []byte("null")) {
			details = nil
		} else if len(details) == 0 || details[0] != '{' {
			d.add("details", "must be an object or null")
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	a := ActorFrom(ctx)
	entry, err := e.k.ActivityInsert(ctx, &ActivityInsertParams{
		CompanyID: req.CompanyID, ActorType: actorType, ActorID: req.ActorID, Action: req.Action,
		EntityType: req.EntityType, EntityID: req.EntityID, AgentID: agentID, RunID: a.RunID, Details: details, Source: SourceAPI,
	})
	if err != nil {
		return nil, Internal(err)
	}
	return entry, nil
}

func (k *Kernel) activityRoutes() []*Route {
	return []*Route{
		Mount[activityListRequest, []*ActivityEntry](&activityListEndpoint{k}),
		Mount[activityCreateRequest, ActivityEntry](&activityCreateEndpoint{k}),
		Mount[activityStreamRequest, activityStream](&activityStreamEndpoint{k}),
	}
}

// ActivityScanParams selects a company's activity in chronological order for extensions
// that evaluate it (the routines activity gate): entries strictly after the cursor
// (After, AfterID) and no later than Until.
type ActivityScanParams struct {
	CompanyID string
	// After and AfterID are the exclusive cursor; a zero After starts at the beginning.
	After   time.Time
	AfterID string
	// Until bounds createdAt inclusively; zero means no bound.
	Until time.Time
	// ExcludeActions drops entries with these actions.
	ExcludeActions []string
	// ProjectID keeps only entries about the project itself or whose details carry
	// projectId = ProjectID.
	ProjectID string
	Limit     int
}

// Activity scan bounds.
const (
	ActivityScanDefaultLimit = 100
	ActivityScanMaxLimit     = 1000
)

// ActivityScan returns entries matching p, oldest first.
func (k *Kernel) ActivityScan(ctx context.Context, p *ActivityScanParams) ([]*ActivityEntry, error) {
	if !isUUID(p.CompanyID) {
		return []*ActivityEntry{}, nil
	}
	args := []any{p.CompanyID}
	where := []string{"company_id = $1"}
	add := func(cond string, vs ...any) {
		idx := make([]any, len(vs))
		for i, v := range vs {
			args = append(args, v)
			idx[i] = len(args)
		}
		where = append(where, fmt.Sprintf(cond, idx...))
	}
	if !p.After.IsZero() {
		// Without an id the cursor excludes every entry at After itself.
		afterID := "ffffffff-ffff-ffff-ffff-ffffffffffff"
		if p.AfterID != "" {
			if !isUUID(p.AfterID) {
				return nil, fmt.Errorf("error scanning activity: cursor id %q is not a UUID", p.AfterID)
			}
			afterID = p.AfterID
		}
		add("(created_at, id) > ($%d, $%d::uuid)", p.After, afterID)
	}
	if !p.Until.IsZero() {
		add("created_at <= $%d", p.Until)
	}
	if len(p.ExcludeActions) > 0 {
		add("action <> ALL($%d::text[])", p.ExcludeActions)
	}
	if p.ProjectID != "" {
		add("((entity_type = 'project' AND entity_id = $%d) OR details->>'projectId' = $%d)", p.ProjectID, p.ProjectID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = ActivityScanDefaultLimit
	}
	limit = min(limit, ActivityScanMaxLimit)
	args = append(args, limit)
	q := `SELECT id::text, company_id::text, actor_type, actor_id, action, entity_type, entity_id, agent_id::text, run_id,
			responsible_user_id, details, created_at
		FROM kernel.activity_log WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY created_at, id LIMIT $` + strconv.Itoa(len(args))
	rows, err := k.Pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("error scanning activity: %w", err)
	}
	defer rows.Close()
	out := []*ActivityEntry{}
	for rows.Next() {
		e := &ActivityEntry{}
		if err := rows.Scan(&e.ID, &e.CompanyID, &e.ActorType, &e.ActorID, &e.Action, &e.EntityType, &e.EntityID,
			&e.AgentID, &e.RunID, &e.ResponsibleUserID, &e.Details, &e.CreatedAt); err != nil {
			return nil, fmt.Errorf("error scanning activity: %w", err)
		}
		e.CreatedAt = e.CreatedAt.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error scanning activity: %w", err)
	}
	return out, nil
}
