package decisions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
)

// CreateBody is the body of POST /api/companies/{companyId}/decisions and of each entry of a
// bundle. Unknown fields are rejected.
type CreateBody struct {
	// Title is 1-500 characters.
	Title *string `json:"title" jsonschema:"required,minLength=1,maxLength=500"`
	// Body is Markdown, up to 100000 characters.
	Body *string `json:"body" jsonschema:"required,maxLength=100000"`
	// Options are 1-8 choices with unique ids.
	Options []Option `json:"options" jsonschema:"required,minItems=1,maxItems=8"`
	// RuleKey groups decisions in the stats route (up to 240 characters).
	RuleKey *string `json:"ruleKey,omitempty" jsonschema:"maxLength=240"`
	// Inputs are up to 4 values the board supplies when deciding.
	Inputs []Input `json:"inputs,omitempty" jsonschema:"maxItems=4"`
	// ExpiresAt defaults to seven days out; it must be in the future and within 30 days.
	ExpiresAt *string `json:"expiresAt,omitempty" jsonschema:"format=date-time"`
	// IdempotencyKey (1-500) makes a replay of the same payload return the original decision.
	IdempotencyKey *string `json:"idempotencyKey,omitempty" jsonschema:"minLength=1,maxLength=500"`
	// ContinuationPolicy is none (default) or wake_origin_agent.
	ContinuationPolicy *string `json:"continuationPolicy,omitempty" jsonschema:"enum=none,enum=wake_origin_agent"`
	// Metadata is a free-form object.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// BundleBody is the body of POST /api/companies/{companyId}/decision-bundles.
type BundleBody struct {
	// Title is 1-500 characters.
	Title *string `json:"title" jsonschema:"required,minLength=1,maxLength=500"`
	// Summary is up to 100000 characters.
	Summary *string `json:"summary,omitempty" jsonschema:"maxLength=100000"`
	// Decisions are 1-50 create bodies, created together or not at all.
	Decisions []CreateBody `json:"decisions" jsonschema:"required,minItems=1,maxItems=50"`
}

// Limits (spec part 1 "Limits").
const (
	maxTitle        = 500
	maxBody         = 100000
	maxOptions      = 8
	maxEffects      = 10
	maxInputs       = 4
	maxOptionID     = 120
	maxOptionLabel  = 240
	maxOptionDesc   = 2000
	maxInputLength  = 20000
	maxRuleKey      = 240
	maxIdemKey      = 500
	maxBundleItems  = 50
	defaultExpiry   = 7 * 24 * time.Hour
	maxExpiry       = 30 * 24 * time.Hour
	maxReasonLength = 20000
)

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/companies/{companyId}/decisions", Status: http.StatusCreated, Response: new(Decision), CompanyFromPath: true, Access: sdk.AccessEither,
			Summary: "Propose a decision (an agent in an issue-scoped run of its own); unknown fields rejected",
			Body:    CreateBody{}, Handle: (*Decisions).createRoute},
		route{Method: "POST", Path: "/api/companies/{companyId}/decision-bundles", Status: http.StatusCreated, Response: new(Bundle), CompanyFromPath: true, Access: sdk.AccessEither,
			Summary: "Propose 1-50 decisions as one bundle, all or nothing; unknown fields rejected",
			Body:    BundleBody{}, Handle: (*Decisions).bundleRoute},
	)
}

// origin is the proposing agent's run context.
type origin struct {
	actor   *sdk.Actor
	agentID string
	runID   string
	issueID string
}

// requireOrigin checks rule 1: an agent token in a run of that agent in the company, and
// the run issue-scoped.
func (x *Decisions) requireOrigin(ctx context.Context, companyID string) (*origin, error) {
	a := sdk.ActorFrom(ctx)
	if a == nil || a.Type != "agent" || a.RunId == "" {
		return nil, forbidden(msgRunRequired)
	}
	var run struct {
		Found   bool   `json:"found"`
		AgentID string `json:"agentId"`
		IssueID string `json:"issueId"`
	}
	if !isUUID(a.RunId) {
		return nil, forbidden(msgProvenance)
	}
	if err := x.call(ctx, sdk.SystemActor(), "agents.runStatus", companyID, map[string]string{"runId": a.RunId}, &run); err != nil {
		return nil, fmt.Errorf("error reading origin run: %w", err)
	}
	if !run.Found || run.AgentID != a.AgentId {
		return nil, forbidden(msgProvenance)
	}
	if run.IssueID == "" {
		return nil, unprocessable(msgRunNotIssue)
	}
	return &origin{actor: a, agentID: a.AgentId, runID: a.RunId, issueID: run.IssueID}, nil
}

// prepared is a validated create body ready to insert.
type prepared struct {
	body        *CreateBody
	ruleKey     *string
	options     json.RawMessage
	inputs      json.RawMessage
	expiresAt   time.Time
	policy      string
	metadata    json.RawMessage
	payloadHash string
	targets     []string
	snapshots   map[string]Snapshot
}

var inputRefRe = regexp.MustCompile(`\{\{\s*input\.([^}\s]+)\s*\}\}`)

// check validates a create body's own fields (400 details under prefix) and the expiry
// window (422); it normalizes option styles and effect staleness.
func (b *CreateBody) check(prefix string, now time.Time) (*prepared, []detail, error) {
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: prefix + path, Message: msg}) }
	textLen := func(path string, v *string, minLen, maxLen int, required bool) {
		switch {
		case v == nil:
			if required {
				bad(path, "is required")
			}
		case utf8.RuneCountInString(*v) < minLen:
			bad(path, fmt.Sprintf("must be at least %d characters", minLen))
		case utf8.RuneCountInString(*v) > maxLen:
			bad(path, fmt.Sprintf("must be at most %d characters", maxLen))
		}
	}
	if b.Title != nil {
		b.Title = ptr(strings.TrimSpace(*b.Title))
	}
	textLen("title", b.Title, 1, maxTitle, true)
	textLen("body", b.Body, 0, maxBody, true)
	textLen("ruleKey", b.RuleKey, 0, maxRuleKey, false)
	textLen("idempotencyKey", b.IdempotencyKey, 1, maxIdemKey, false)
	p := &prepared{body: b, ruleKey: b.RuleKey, policy: policyNone, snapshots: map[string]Snapshot{}}
	if b.ContinuationPolicy != nil {
		switch *b.ContinuationPolicy {
		case policyNone, policyWake:
			p.policy = *b.ContinuationPolicy
		default:
			bad("continuationPolicy", "must be one of none, wake_origin_agent")
		}
	}
	inputIDs := map[string]bool{}
	if len(b.Inputs) > maxInputs {
		bad("inputs", fmt.Sprintf("must have at most %d entries", maxInputs))
	}
	for i, in := range b.Inputs {
		path := fmt.Sprintf("inputs.%d.", i)
		textLen(path+"id", &in.ID, 1, maxOptionID, true)
		textLen(path+"label", &in.Label, 1, maxOptionLabel, true)
		if in.MaxLength != nil && (*in.MaxLength < 1 || *in.MaxLength > maxInputLength) {
			bad(path+"maxLength", fmt.Sprintf("must be from 1 to %d", maxInputLength))
		}
		if inputIDs[in.ID] {
			bad(path+"id", "must be unique")
		}
		inputIDs[in.ID] = true
	}
	switch n := len(b.Options); {
	case n == 0:
		bad("options", "must have at least 1 entry")
	case n > maxOptions:
		bad("options", fmt.Sprintf("must have at most %d entries", maxOptions))
	}
	optionIDs := map[string]bool{}
	targets := map[string]bool{}
	for i := range b.Options {
		o := &b.Options[i]
		path := fmt.Sprintf("options.%d.", i)
		textLen(path+"id", &o.ID, 1, maxOptionID, true)
		textLen(path+"label", &o.Label, 1, maxOptionLabel, true)
		textLen(path+"description", o.Description, 0, maxOptionDesc, false)
		if optionIDs[o.ID] {
			bad(path+"id", "must be unique")
		}
		optionIDs[o.ID] = true
		if o.ID == chosenDismissed {
			bad(path+"id", "is reserved")
		}
		if o.Style == "" {
			o.Style = "default"
		}
		if !slices.Contains([]string{"default", "primary", "destructive"}, o.Style) {
			bad(path+"style", "must be one of default, primary, destructive")
		}
		if o.Effects == nil {
			o.Effects = []Effect{}
		}
		if len(o.Effects) > maxEffects {
			bad(path+"effects", fmt.Sprintf("must have at most %d entries", maxEffects))
		}
		for j := range o.Effects {
			e := &o.Effects[j]
			epath := fmt.Sprintf("%seffects.%d.", path, j)
			for _, m := range checkEffect(e, o.Style) {
				bad(epath+m.Path, m.Message)
			}
			if isUUID(strings.ToLower(e.TargetIssueID)) {
				e.TargetIssueID = strings.ToLower(e.TargetIssueID)
				targets[e.TargetIssueID] = true
			}
			for _, ref := range effectRefs(e) {
				if !inputIDs[ref] {
					bad(epath+"type", fmt.Sprintf("references unknown input %s", ref))
				}
			}
		}
	}
	p.expiresAt = now.Add(defaultExpiry)
	if b.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *b.ExpiresAt)
		if err != nil {
			bad("expiresAt", "must be an ISO 8601 date-time")
		} else {
			p.expiresAt = t.UTC()
		}
	}
	if len(d) > 0 {
		return nil, d, nil
	}
	if !p.expiresAt.After(now) || p.expiresAt.After(now.Add(maxExpiry)) {
		return nil, nil, unprocessable(msgExpiresWindow)
	}
	for id := range targets {
		p.targets = append(p.targets, id)
	}
	slices.Sort(p.targets)
	var err error
	if p.options, err = json.Marshal(b.Options); err != nil {
		return nil, nil, fmt.Errorf("error encoding options: %w", err)
	}
	if b.Inputs != nil {
		if p.inputs, err = json.Marshal(b.Inputs); err != nil {
			return nil, nil, fmt.Errorf("error encoding inputs: %w", err)
		}
	}
	meta := b.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	if p.metadata, err = json.Marshal(meta); err != nil {
		return nil, nil, fmt.Errorf("error encoding metadata: %w", err)
	}
	canon, err := canonical(b)
	if err != nil {
		return nil, nil, fmt.Errorf("error hashing payload: %w", err)
	}
	sum := sha256.Sum256(canon)
	p.payloadHash = hex.EncodeToString(sum[:])
	return p, nil, nil
}

// checkEffect validates one effect's fields (paths relative to the effect).
func checkEffect(e *Effect, style string) []detail {
	var d []detail
	bad := func(path, msg string) { d = append(d, detail{Path: path, Message: msg}) }
	if !slices.Contains(effectTypes, e.Type) {
		bad("type", "must be one of "+strings.Join(effectTypes, ", "))
		return d
	}
	if !isUUID(strings.ToLower(e.TargetIssueID)) {
		bad("targetIssueId", "must be a UUID")
	}
	switch e.Staleness {
	case "":
		e.Staleness = "strict"
	case "strict", "lenient":
	default:
		bad("staleness", "must be one of strict, lenient")
	}
	text := func(path string, v *string, required bool) {
		switch {
		case v == nil && required:
			bad(path, "is required")
		case v != nil && utf8.RuneCountInString(*v) > maxBody:
			bad(path, fmt.Sprintf("must be at most %d characters", maxBody))
		case v != nil && required && strings.TrimSpace(*v) == "":
			bad(path, "must not be empty")
		}
	}
	switch e.Type {
	case effectComment:
		text("bodyMarkdown", e.BodyMarkdown, true)
	case effectCreateIssue:
		var draft map[string]any
		if len(e.Draft) == 0 || json.Unmarshal(e.Draft, &draft) != nil || draft == nil {
			bad("draft", "must be an issue create object")
		} else if t, _ := draft["title"].(string); strings.TrimSpace(t) == "" {
			bad("draft.title", "is required")
		}
	case effectStatus:
		if e.Status == nil || !slices.Contains([]string{"backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"}, *e.Status) {
			bad("status", "must be one of backlog, todo, in_progress, in_review, blocked, done, cancelled")
		}
		text("comment", e.Comment, false)
	case effectAssign:
		if (e.AssigneeAgentID == nil) == (e.AssigneeUserID == nil) {
			bad("assigneeAgentId", "exactly one of assigneeAgentId and assigneeUserId is required")
		}
		if e.AssigneeAgentID != nil && !isUUID(strings.ToLower(*e.AssigneeAgentID)) {
			bad("assigneeAgentId", "must be a UUID")
		}
		text("comment", e.Comment, false)
	case effectCancelTree:
		text("reasonComment", e.ReasonComment, true)
		if e.Staleness != "strict" {
			bad("staleness", "cancel_issue_tree is always strict")
		}
		if style != "destructive" {
			bad("type", "cancel_issue_tree needs an option with style destructive")
		}
	case effectResolve:
		if len(e.RemoveBlockedByIssueIDs) == 0 {
			bad("removeBlockedByIssueIds", "must have at least 1 entry")
		}
		for i, id := range e.RemoveBlockedByIssueIDs {
			if !isUUID(strings.ToLower(id)) {
				bad(fmt.Sprintf("removeBlockedByIssueIds.%d", i), "must be a UUID")
			}
		}
	}
	return d
}

// effectRefs lists the input ids an effect's texts reference.
func effectRefs(e *Effect) []string {
	var out []string
	for _, s := range []*string{e.BodyMarkdown, e.Comment, e.ReasonComment} {
		if s == nil {
			continue
		}
		for _, m := range inputRefRe.FindAllStringSubmatch(*s, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// substitute replaces {{input.<id>}} with the input's value ("" when none was given).
func substitute(s string, values map[string]string) string {
	return inputRefRe.ReplaceAllStringFunc(s, func(m string) string {
		return values[inputRefRe.FindStringSubmatch(m)[1]]
	})
}

// target is a target issue's current state as the work owner reports it.
type target struct {
	ID              string    `json:"id"`
	Status          string    `json:"status"`
	AssigneeAgentID *string   `json:"assigneeAgentId"`
	AssigneeUserID  *string   `json:"assigneeUserId"`
	UpdatedAt       time.Time `json:"updatedAt"`
	ChildCount      int       `json:"childCount"`
	DescendantCount int       `json:"descendantCount"`
}

// readTargets snapshots issues through work.targets.read as actor; a missing issue is 422.
func (x *Decisions) readTargets(ctx context.Context, actor *sdk.Actor, companyID string, ids []string) (map[string]target, error) {
	out := map[string]target{}
	if len(ids) == 0 {
		return out, nil
	}
	var list []target
	if err := x.call(ctx, actor, "work.targets.read", companyID, map[string]any{"issueIds": ids}, &list); err != nil {
		return nil, err
	}
	for _, t := range list {
		out[t.ID] = t
	}
	return out, nil
}

// authorize checks rule 2 for every effect of every option: the target is visible to the
// origin (it is an issue of the company the origin reads) and the origin holds the effect's
// authority: issue:comment for comments, issue:mutate for the rest, or the target is the
// origin issue or assigned to the origin agent.
func (x *Decisions) authorize(ctx context.Context, companyID string, o *origin, p *prepared, cache map[string]bool) error {
	snaps, err := x.readTargets(ctx, o.actor, companyID, p.targets)
	if err != nil {
		var e *sdk.Error
		if errors.As(err, &e) && e.Status == http.StatusForbidden {
			return forbidden(msgVisibility)
		}
		return err
	}
	for id, t := range snaps {
		p.snapshots[id] = Snapshot{Status: t.Status, AssigneeAgentID: t.AssigneeAgentID, AssigneeUserID: t.AssigneeUserID,
			UpdatedAt: t.UpdatedAt, ChildCount: ptr(t.ChildCount), DescendantCount: ptr(t.DescendantCount)}
	}
	for _, opt := range p.body.Options {
		for _, e := range opt.Effects {
			t := snaps[e.TargetIssueID]
			if e.TargetIssueID == o.issueID || deref(t.AssigneeAgentID) == o.agentID {
				continue
			}
			perm := "issue:mutate"
			if e.Type == effectComment {
				perm = "issue:comment"
			}
			ok, seen := cache[perm]
			if !seen {
				err := x.host.RequirePermission(ctx, companyID, perm)
				var se *sdk.Error
				switch {
				case err == nil:
					ok = true
				case errors.As(err, &se) && se.Status == http.StatusForbidden:
					ok = false
				default:
					return err
				}
				cache[perm] = ok
			}
			if !ok {
				return forbidden(msgAuthority)
			}
		}
	}
	return nil
}

// prepare validates a body (400 details under prefix), checks its targets and authority,
// and signs nothing yet (the id is assigned at insert).
func (x *Decisions) prepare(ctx context.Context, companyID string, o *origin, b *CreateBody, prefix string, cache map[string]bool) (*prepared, []detail, error) {
	p, d, err := b.check(prefix, nowUTC())
	if err != nil || len(d) > 0 {
		return nil, d, err
	}
	if err := x.authorize(ctx, companyID, o, p, cache); err != nil {
		return nil, nil, err
	}
	return p, nil, nil
}

// replay returns the decision already stored under p's idempotency key: the original when
// the payload matches, 409 when it does not, nil when the key is unused.
func (x *Decisions) replay(ctx context.Context, q querier, companyID string, p *prepared) (*Decision, error) {
	if p.body.IdempotencyKey == nil {
		return nil, nil
	}
	d, err := scanDecision(q.QueryRow(ctx, `SELECT `+decisionCols+` FROM decisions WHERE company_id = $1 AND idempotency_key = $2`,
		companyID, *p.body.IdempotencyKey))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading idempotent decision: %w", err)
	}
	if d.payloadHash != p.payloadHash {
		return nil, sdk.Conflict(msgIdemConflict)
	}
	return d, nil
}

// checkCap refuses (429) when adding n open decisions would pass the agent's open cap.
func (x *Decisions) checkCap(ctx context.Context, companyID, agentID string, n int) error {
	var open int
	if err := x.pool.QueryRow(ctx, `SELECT count(*) FROM decisions WHERE company_id = $1 AND origin_agent_id = $2 AND status = 'open'`,
		companyID, agentID).Scan(&open); err != nil {
		return fmt.Errorf("error counting open decisions: %w", err)
	}
	if open+n > x.openCap {
		return sdk.NewError(http.StatusTooManyRequests, msgOpenCap)
	}
	return nil
}

// insert stores a prepared decision in tx with a fresh id and its signature.
func (x *Decisions) insert(ctx context.Context, tx pgx.Tx, companyID string, o *origin, p *prepared, bundleID *string) (*Decision, error) {
	id := uuid.NewString()
	snaps, err := json.Marshal(p.snapshots)
	if err != nil {
		return nil, fmt.Errorf("error encoding snapshots: %w", err)
	}
	signed, err := x.signer.sign(id, p.options, snaps)
	if err != nil {
		return nil, err
	}
	var inputs any
	if p.inputs != nil {
		inputs = p.inputs
	}
	d, err := scanDecision(tx.QueryRow(ctx, `INSERT INTO decisions (id, company_id, bundle_id, origin_agent_id, origin_issue_id,
		origin_run_id, rule_key, title, body, options, inputs, expires_at, idempotency_key, payload_hash, signed_spec,
		target_snapshots, continuation_policy, metadata)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18) RETURNING `+decisionCols,
		id, companyID, bundleID, o.agentID, o.issueID, o.runID, p.ruleKey, *p.body.Title, *p.body.Body, p.options, inputs,
		p.expiresAt, p.body.IdempotencyKey, p.payloadHash, signed, snaps, p.policy, p.metadata))
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return nil, sdk.Conflict(msgIdemConflict)
		}
		return nil, fmt.Errorf("error inserting decision: %w", err)
	}
	return d, nil
}

// createdActivity records decision.created for each decision.
func (x *Decisions) createdActivity(ctx context.Context, o *origin, ds ...*Decision) {
	for _, d := range ds {
		x.activity(ctx, o.actor, "", d.CompanyID, "decision.created", activityEntityType, d.ID, map[string]any{
			"decisionId": d.ID, "title": d.Title, "bundleId": d.BundleID, "ruleKey": d.RuleKey, "issueId": d.OriginIssueID})
	}
}

func (x *Decisions) createRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	o, err := x.requireOrigin(ctx, companyID)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body CreateBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	p, d, err := x.prepare(ctx, companyID, o, &body, "", map[string]bool{})
	if err == nil {
		err = validation(d)
	}
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if prev, err := x.replay(ctx, x.pool, companyID, p); err != nil || prev != nil {
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		sdk.WriteJSON(rw, http.StatusCreated, prev)
		return
	}
	if err := x.checkCap(ctx, companyID, o.agentID, 1); err != nil {
		x.writeErr(rw, err)
		return
	}
	var out *Decision
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		if out, err = x.insert(ctx, tx, companyID, o, p, nil); err != nil {
			return err
		}
		// An Idempotency-Key header is answered from the create's own transaction.
		return idem.RecordJSON(ctx, tx, http.StatusCreated, out)
	})
	var se *sdk.Error
	if errors.As(err, &se) && se.Message == msgIdemConflict {
		// A concurrent create with the same key won: answer as a replay would.
		if prev, rerr := x.replay(ctx, x.pool, companyID, p); rerr == nil && prev != nil {
			sdk.WriteJSON(rw, http.StatusCreated, prev)
			return
		}
	}
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.createdActivity(ctx, o, out)
	sdk.WriteJSON(rw, http.StatusCreated, out)
}

// Bundle is a decision bundle and its API shape.
type Bundle struct {
	ID            string      `json:"id"`
	CompanyID     string      `json:"companyId"`
	OriginAgentID string      `json:"originAgentId"`
	Title         string      `json:"title"`
	Summary       *string     `json:"summary"`
	CreatedAt     time.Time   `json:"createdAt"`
	Decisions     []*Decision `json:"decisions"`
}

func (x *Decisions) bundleRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	o, err := x.requireOrigin(ctx, companyID)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body BundleBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	switch {
	case body.Title == nil || strings.TrimSpace(*body.Title) == "":
		d = append(d, detail{Path: "title", Message: "is required"})
	case utf8.RuneCountInString(strings.TrimSpace(*body.Title)) > maxTitle:
		d = append(d, detail{Path: "title", Message: fmt.Sprintf("must be at most %d characters", maxTitle)})
	}
	if body.Summary != nil && utf8.RuneCountInString(*body.Summary) > maxBody {
		d = append(d, detail{Path: "summary", Message: fmt.Sprintf("must be at most %d characters", maxBody)})
	}
	if n := len(body.Decisions); n < 1 || n > maxBundleItems {
		d = append(d, detail{Path: "decisions", Message: fmt.Sprintf("must have 1 to %d entries", maxBundleItems)})
	}
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	cache := map[string]bool{}
	preps := make([]*prepared, len(body.Decisions))
	for i := range body.Decisions {
		p, dd, err := x.prepare(ctx, companyID, o, &body.Decisions[i], fmt.Sprintf("decisions.%d.", i), cache)
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		d = append(d, dd...)
		preps[i] = p
	}
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	for _, p := range preps {
		if p.body.IdempotencyKey == nil {
			continue
		}
		// In a bundle a used key is a conflict whatever its payload: the bundle is new.
		if prev, err := x.replay(ctx, x.pool, companyID, p); err != nil || prev != nil {
			if err == nil {
				err = sdk.Conflict(msgIdemConflict)
			}
			x.writeErr(rw, err)
			return
		}
	}
	if err := x.checkCap(ctx, companyID, o.agentID, len(preps)); err != nil {
		x.writeErr(rw, err)
		return
	}
	b := &Bundle{ID: uuid.NewString(), CompanyID: companyID, OriginAgentID: o.agentID, Title: strings.TrimSpace(*body.Title),
		Summary: body.Summary}
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO decision_bundles (id, company_id, origin_agent_id, title, summary)
			VALUES ($1,$2,$3,$4,$5) RETURNING created_at`, b.ID, companyID, o.agentID, b.Title, b.Summary).Scan(&b.CreatedAt); err != nil {
			return fmt.Errorf("error inserting bundle: %w", err)
		}
		for _, p := range preps {
			dec, err := x.insert(ctx, tx, companyID, o, p, &b.ID)
			if err != nil {
				return err
			}
			b.Decisions = append(b.Decisions, dec)
		}
		return idem.RecordJSON(ctx, tx, http.StatusCreated, b)
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, o.actor, "", companyID, "decision_bundle.created", bundleEntityType, b.ID, map[string]any{
		"bundleId": b.ID, "title": b.Title, "decisionCount": len(b.Decisions)})
	x.createdActivity(ctx, o, b.Decisions...)
	sdk.WriteJSON(rw, http.StatusCreated, b)
}
