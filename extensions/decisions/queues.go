package decisions

import (
	"context"
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
)

// Queue permission keys.
const (
	permQueueRead   = "decision_queue:read"
	permQueueManage = "decision_queue:manage"
)

// Queue texts and limits (REFERENCE.md 5 "Decision queues").
const (
	msgQueueNotFound   = "Decision queue not found"
	msgQueueKeyTaken   = "Decision queue key already exists"
	msgQueueFieldsNone = "At least one queue field is required"
	maxQueueKey        = 80
	maxQueueTitle      = 120
	maxQueueDesc       = 2000
	maxSourceID        = 500
)

// sourceKinds are the attention item kinds a queue may point at.
var sourceKinds = []string{"approval", "decision", "issue_thread_interaction", "join_request", "recovery_action",
	"productivity_review", "blocker_attention", "review", "failed_run", "budget_alert", "agent_error_alert"}

var queueKeyRe = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// SeedRule is one rule of a seed-rule entry: items carrying the signal join the queue.
type SeedRule struct {
	Key         string `json:"key"`
	Signal      string `json:"signal"`
	Description string `json:"description"`
}

// SeedEntry is a built-in queue and the rules that seed it.
type SeedEntry struct {
	Key         string     `json:"key"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Rules       []SeedRule `json:"rules"`
}

// seedCatalogue is the static seed-rule catalogue (spec part 1 "Decision queue and seed rule").
var seedCatalogue = []SeedEntry{
	{Key: "prs", Title: "PRs", Description: "Issues with pull-request work products waiting on a decision.",
		Rules: []SeedRule{{Key: "issue-has-pull-request", Signal: "issue_has_pull_request_work_product",
			Description: "An issue has a pull-request work product."}}},
	{Key: "plans", Title: "Plans", Description: "Plan documents waiting for confirmation.",
		Rules: []SeedRule{{Key: "plan-confirmation", Signal: "plan_document_confirmation",
			Description: "A plan document asks the board to confirm it."}}},
	{Key: "questions", Title: "Questions", Description: "Questions agents asked the board.",
		Rules: []SeedRule{{Key: "ask-user-questions", Signal: "ask_user_questions",
			Description: "An agent asked the board a question."}}},
}

// Queue is a row of ext_decisions.decision_queues and its API shape.
type Queue struct {
	ID               string     `json:"id"`
	CompanyID        string     `json:"companyId"`
	Key              string     `json:"key"`
	Title            string     `json:"title"`
	Description      *string    `json:"description"`
	SeedRulesEnabled bool       `json:"seedRulesEnabled"`
	RetentionDays    *int       `json:"retentionDays"`
	SeedRules        []SeedRule `json:"seedRules"`
	CreatedByType    string     `json:"createdByType"`
	CreatedByAgentID *string    `json:"createdByAgentId"`
	CreatedByUserID  *string    `json:"createdByUserId"`
	CreatedByRunID   *string    `json:"createdByRunId"`
	ItemCount        int        `json:"itemCount"`
	CreatedAt        time.Time  `json:"createdAt"`
	UpdatedAt        time.Time  `json:"updatedAt"`
}

// QueueItem is one item a queue points at, with the item's triage state (decisions-triage,
// decision-retention).
type QueueItem struct {
	SourceKind   string     `json:"sourceKind"`
	SourceID     string     `json:"sourceId"`
	AddedBy      string     `json:"addedBy"`
	CreatedAt    time.Time  `json:"createdAt"`
	DecideBy     *string    `json:"decideBy"`
	DecideByDate *string    `json:"decideByDate"`
	SnoozedUntil *time.Time `json:"snoozedUntil"`
	Keep         bool       `json:"keep"`
	ArchivedAt   *time.Time `json:"archivedAt"`
}

// QueueCreateBody is the body of POST /api/companies/{companyId}/decision-queues.
type QueueCreateBody struct {
	// Key is kebab-case, up to 80 characters, unique in the company.
	Key *string `json:"key" jsonschema:"required,maxLength=80"`
	// Title is 1-120 characters.
	Title *string `json:"title" jsonschema:"required,maxLength=120"`
	// Description is up to 2000 characters.
	Description *string `json:"description,omitempty" jsonschema:"maxLength=2000"`
	// RetentionDays is 1-3650.
	RetentionDays *int `json:"retentionDays,omitempty" jsonschema:"minimum=1,maximum=3650"`
}

// QueuePatchBody is the body of PATCH /api/companies/{companyId}/decision-queues/{key}.
type QueuePatchBody struct {
	Title            *string                `json:"title,omitempty" jsonschema:"maxLength=120"`
	Description      sdk.PatchField[string] `json:"description,omitempty"`
	RetentionDays    sdk.PatchField[int]    `json:"retentionDays,omitempty"`
	SeedRulesEnabled *bool                  `json:"seedRulesEnabled,omitempty"`
}

// QueueItemBody is the body of POST …/decision-queues/{key}/items.
type QueueItemBody struct {
	SourceKind *string `json:"sourceKind" jsonschema:"required"`
	SourceID   *string `json:"sourceId" jsonschema:"required,maxLength=500"`
}

func init() {
	base := "/api/companies/{companyId}/decision-queue"
	addRoutes(
		route{Method: "GET", Path: base + "-seed-rules", Response: new([]SeedEntry), CompanyFromPath: true, Access: sdk.AccessEither, Permission: permQueueRead,
			Summary: "The static seed-rule catalogue", Handle: (*Decisions).seedRulesRoute},
		route{Method: "GET", Path: base + "s", Response: new([]*Queue), CompanyFromPath: true, Access: sdk.AccessEither, Permission: permQueueRead,
			Summary: "Decision queues, most recently updated first", Handle: (*Decisions).queueListRoute},
		route{Method: "POST", Path: base + "s", Status: http.StatusCreated, Response: new(Queue), CompanyFromPath: true, Access: sdk.AccessEither, Permission: permQueueManage,
			Summary: "Create a decision queue", Body: QueueCreateBody{}, Handle: (*Decisions).queueCreateRoute},
		route{Method: "PATCH", Path: base + "s/{key}", Response: new(Queue), CompanyFromPath: true, Access: sdk.AccessEither, Permission: permQueueManage,
			Summary: "Update a decision queue (seedRulesEnabled false stops seeding)", Body: QueuePatchBody{},
			Handle: (*Decisions).queuePatchRoute},
		route{Method: "GET", Path: base + "s/{key}/items", Response: new([]QueueItem), CompanyFromPath: true, Access: sdk.AccessEither, Permission: permQueueRead,
			Summary: "A queue's items, newest first, without archived or snoozed ones unless includeArchived or includeSnoozed is true",
			Handle:  (*Decisions).queueItemsRoute},
		route{Method: "POST", Path: base + "s/{key}/items", Status: http.StatusCreated, Response: new(QueueItem), CompanyFromPath: true, Access: sdk.AccessEither, Permission: permQueueManage,
			Summary: "Add an item to a queue", Body: QueueItemBody{}, Handle: (*Decisions).queueItemAddRoute},
		route{Method: "DELETE", Path: base + "s/{key}/items/{sourceKind}/{sourceId}", Response: new(map[string]any), CompanyFromPath: true, Access: sdk.AccessEither,
			Permission: permQueueManage, Summary: "Remove an item from a queue", Handle: (*Decisions).queueItemRemoveRoute},
	)
	addMethods(map[string]method{
		"queues.seed": {
			Description: "Seed the built-in queues from attention items (called while the attention feed is built). Input {items: " +
				"[{signal, sourceKind, sourceId}]}. A matching item creates its queue if missing and joins it unless the queue's " +
				"seedRulesEnabled is false. Output {queuesSeeded: keys, itemsSeeded}. The extension's own open decisions are " +
				"offered (signal ask_user_questions) whenever a queue list or a queue's items are read.",
			Call: (*Decisions).methodSeed,
		},
	})
}

func (x *Decisions) seedRulesRoute(rw http.ResponseWriter, _ *http.Request) {
	sdk.WriteJSON(rw, http.StatusOK, seedCatalogue)
}

const queueCols = `q.id, q.company_id, q.key, q.title, q.description, q.seed_rules_enabled, q.retention_days, q.created_by_type,
	q.created_by_agent_id, q.created_by_user_id, q.created_by_run_id, q.created_at, q.updated_at,
	(SELECT count(*) FROM decision_queue_items i WHERE i.queue_id = q.id)`

func scanQueue(row pgx.Row) (*Queue, error) {
	var q Queue
	if err := row.Scan(&q.ID, &q.CompanyID, &q.Key, &q.Title, &q.Description, &q.SeedRulesEnabled, &q.RetentionDays,
		&q.CreatedByType, &q.CreatedByAgentID, &q.CreatedByUserID, &q.CreatedByRunID, &q.CreatedAt, &q.UpdatedAt, &q.ItemCount); err != nil {
		return nil, err
	}
	q.SeedRules = []SeedRule{}
	for _, e := range seedCatalogue {
		if e.Key == q.Key && q.SeedRulesEnabled {
			q.SeedRules = e.Rules
		}
	}
	return &q, nil
}

// queueByKey loads a company's queue by key (404 when missing).
func (x *Decisions) queueByKey(ctx context.Context, q querier, companyID, key string) (*Queue, error) {
	out, err := scanQueue(q.QueryRow(ctx, `SELECT `+queueCols+` FROM decision_queues q WHERE q.company_id = $1 AND q.key = $2`,
		companyID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(msgQueueNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error loading decision queue %s: %w", key, err)
	}
	return out, nil
}

func (x *Decisions) queueListRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	x.feed(ctx, sdk.CompanyIDFrom(ctx))
	rows, err := x.pool.Query(ctx, `SELECT `+queueCols+` FROM decision_queues q WHERE q.company_id = $1
		ORDER BY q.updated_at DESC, q.id`, sdk.CompanyIDFrom(ctx))
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing decision queues: %w", err))
		return
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Queue, error) { return scanQueue(r) })
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error reading decision queues: %w", err))
		return
	}
	if list == nil {
		list = []*Queue{}
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

// checkQueueText validates the text fields shared by create and update.
func checkQueueText(title, description *string, retention *int) []detail {
	var d []detail
	if title != nil {
		if n := utf8.RuneCountInString(strings.TrimSpace(*title)); n < 1 || n > maxQueueTitle {
			d = append(d, detail{Path: "title", Message: fmt.Sprintf("must be 1 to %d characters", maxQueueTitle)})
		}
	}
	if description != nil && utf8.RuneCountInString(*description) > maxQueueDesc {
		d = append(d, detail{Path: "description", Message: fmt.Sprintf("must be at most %d characters", maxQueueDesc)})
	}
	if retention != nil && (*retention < 1 || *retention > 3650) {
		d = append(d, detail{Path: "retentionDays", Message: "must be from 1 to 3650"})
	}
	return d
}

func (x *Decisions) queueCreateRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body QueueCreateBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	if body.Key == nil || len(*body.Key) > maxQueueKey || !queueKeyRe.MatchString(*body.Key) {
		d = append(d, detail{Path: "key", Message: fmt.Sprintf("must be kebab-case, 1 to %d characters", maxQueueKey)})
	}
	if body.Title == nil {
		d = append(d, detail{Path: "title", Message: "is required"})
	}
	d = append(d, checkQueueText(body.Title, body.Description, body.RetentionDays)...)
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	q, err := x.queueInsert(ctx, x.pool, sdk.ActorFrom(ctx), companyID, *body.Key, strings.TrimSpace(*body.Title), body.Description,
		body.RetentionDays, false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, sdk.ActorFrom(ctx), "", companyID, "decision_queue.created", "decision_queue", q.ID, map[string]any{"key": q.Key})
	sdk.WriteJSON(rw, http.StatusCreated, q)
}

// queueInsert creates a queue; a taken key is 409.
func (x *Decisions) queueInsert(ctx context.Context, db querier, actor *sdk.Actor, companyID, key, title string, description *string,
	retention *int, seeded bool) (*Queue, error) {
	byType, agentID, userID, runID := "system", (*string)(nil), (*string)(nil), (*string)(nil)
	switch {
	case actor != nil && actor.Type == "agent":
		byType, agentID, runID = "agent", &actor.AgentId, nilIfEmpty(actor.RunId)
	case actor != nil && actor.Type == "board":
		byType, userID = "user", &actor.UserId
	}
	id := uuid.NewString()
	_, err := db.Exec(ctx, `INSERT INTO decision_queues (id, company_id, key, title, description, retention_days, seed_rules_enabled,
		created_by_type, created_by_agent_id, created_by_user_id, created_by_run_id) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`,
		id, companyID, key, title, description, retention, seeded, byType, agentID, userID, runID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return nil, sdk.Conflict(msgQueueKeyTaken)
	}
	if err != nil {
		return nil, fmt.Errorf("error creating decision queue: %w", err)
	}
	return x.queueByKey(ctx, db, companyID, key)
}

func (x *Decisions) queuePatchRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body QueuePatchBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if body.Title == nil && !body.Description.Set && !body.RetentionDays.Set && body.SeedRulesEnabled == nil {
		x.writeErr(rw, sdk.Invalid("", msgQueueFieldsNone))
		return
	}
	var desc *string
	if body.Description.Set && !body.Description.Null {
		desc = &body.Description.Value
	}
	var retention *int
	if body.RetentionDays.Set && !body.RetentionDays.Null {
		retention = &body.RetentionDays.Value
	}
	if err := validation(checkQueueText(body.Title, desc, retention)); err != nil {
		x.writeErr(rw, err)
		return
	}
	q, err := x.queueByKey(ctx, x.pool, companyID, r.PathValue("key"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	title := q.Title
	if body.Title != nil {
		title = strings.TrimSpace(*body.Title)
	}
	if !body.Description.Set {
		desc = q.Description
	}
	if !body.RetentionDays.Set {
		retention = q.RetentionDays
	}
	seed := q.SeedRulesEnabled
	if body.SeedRulesEnabled != nil {
		seed = *body.SeedRulesEnabled
	}
	if _, err := x.pool.Exec(ctx, `UPDATE decision_queues SET title = $2, description = $3, retention_days = $4,
		seed_rules_enabled = $5, updated_at = clock_timestamp() WHERE id = $1`, q.ID, title, desc, retention, seed); err != nil {
		x.writeErr(rw, fmt.Errorf("error updating decision queue: %w", err))
		return
	}
	if q, err = x.queueByKey(ctx, x.pool, companyID, q.Key); err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, sdk.ActorFrom(ctx), "", companyID, "decision_queue.updated", "decision_queue", q.ID, map[string]any{"key": q.Key})
	sdk.WriteJSON(rw, http.StatusOK, q)
}

func (x *Decisions) queueItemsRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	x.feed(ctx, sdk.CompanyIDFrom(ctx))
	q, err := x.queueByKey(ctx, x.pool, sdk.CompanyIDFrom(ctx), r.PathValue("key"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var det []detail
	flag := func(name string) bool {
		switch v := r.URL.Query().Get(name); v {
		case "", "false":
			return false
		case "true":
			return true
		}
		det = append(det, detail{Path: name, Message: "must be true or false"})
		return false
	}
	archived, snoozed := flag("includeArchived"), flag("includeSnoozed")
	if err := validation(det); err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT i.source_kind, i.source_id, i.added_by, i.created_at, s.decide_by,
			to_char(s.decide_by_date, 'YYYY-MM-DD'), s.snoozed_until, COALESCE(s.keep, false), s.archived_at
		FROM decision_queue_items i
		LEFT JOIN decision_item_states s ON s.company_id = $2 AND s.source_kind = i.source_kind AND s.source_id = i.source_id
		WHERE i.queue_id = $1 AND ($3 OR s.archived_at IS NULL) AND ($4 OR s.snoozed_until IS NULL OR s.snoozed_until <= now())
		ORDER BY i.created_at DESC, i.source_kind, i.source_id`, q.ID, q.CompanyID, archived, snoozed)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing queue items: %w", err))
		return
	}
	items, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueueItem])
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error reading queue items: %w", err))
		return
	}
	if items == nil {
		items = []QueueItem{}
	}
	sdk.WriteJSON(rw, http.StatusOK, items)
}

// checkItem validates an item reference.
func checkItem(kind, id *string) error { return validation(itemDetails("", kind, id)) }

// itemDetails lists what is wrong with an item reference, paths under prefix.
func itemDetails(prefix string, kind, id *string) []detail {
	var d []detail
	if kind == nil || !slices.Contains(sourceKinds, *kind) {
		d = append(d, detail{Path: prefix + "sourceKind", Message: "must be one of " + strings.Join(sourceKinds, ", ")})
	}
	if id == nil || *id == "" || utf8.RuneCountInString(*id) > maxSourceID {
		d = append(d, detail{Path: prefix + "sourceId", Message: fmt.Sprintf("must be 1 to %d characters", maxSourceID)})
	}
	return d
}

func (x *Decisions) queueItemAddRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body QueueItemBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := checkItem(body.SourceKind, body.SourceID); err != nil {
		x.writeErr(rw, err)
		return
	}
	q, err := x.queueByKey(ctx, x.pool, sdk.CompanyIDFrom(ctx), r.PathValue("key"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if _, err := x.addItem(ctx, x.pool, q, *body.SourceKind, *body.SourceID, "manual"); err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, QueueItem{SourceKind: *body.SourceKind, SourceID: *body.SourceID, AddedBy: "manual",
		CreatedAt: nowUTC()})
}

// addItem adds an item to a queue (a repeat changes nothing) and reports whether it was new.
func (x *Decisions) addItem(ctx context.Context, db querier, q *Queue, kind, id, by string) (bool, error) {
	tag, err := db.Exec(ctx, `INSERT INTO decision_queue_items (queue_id, source_kind, source_id, added_by) VALUES ($1,$2,$3,$4)
		ON CONFLICT DO NOTHING`, q.ID, kind, id, by)
	if err != nil {
		return false, fmt.Errorf("error adding queue item: %w", err)
	}
	if tag.RowsAffected() > 0 {
		if _, err := db.Exec(ctx, `UPDATE decision_queues SET updated_at = clock_timestamp() WHERE id = $1`, q.ID); err != nil {
			return false, fmt.Errorf("error touching decision queue: %w", err)
		}
	}
	return tag.RowsAffected() > 0, nil
}

func (x *Decisions) queueItemRemoveRoute(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q, err := x.queueByKey(ctx, x.pool, sdk.CompanyIDFrom(ctx), r.PathValue("key"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	tag, err := x.pool.Exec(ctx, `DELETE FROM decision_queue_items WHERE queue_id = $1 AND source_kind = $2 AND source_id = $3`,
		q.ID, r.PathValue("sourceKind"), r.PathValue("sourceId"))
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error removing queue item: %w", err))
		return
	}
	if tag.RowsAffected() == 0 {
		x.writeErr(rw, notFound("Decision queue item not found"))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"ok": true})
}

// seedItem is one attention item offered for seeding.
type seedItem struct {
	Signal     string `json:"signal"`
	SourceKind string `json:"sourceKind"`
	SourceID   string `json:"sourceId"`
}

func (x *Decisions) methodSeed(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		Items []seedItem `json:"items"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if call.CompanyID == "" || !isUUID(call.CompanyID) {
		return nil, sdk.Invalid("companyId", "the call needs a company")
	}
	for _, it := range in.Items {
		if err := checkItem(&it.SourceKind, &it.SourceID); err != nil {
			return nil, err
		}
	}
	return x.seed(ctx, call.CompanyID, in.Items)
}

// seedResult is what a seeding did.
type seedResult struct {
	QueuesSeeded []string `json:"queuesSeeded"`
	ItemsSeeded  int      `json:"itemsSeeded"`
}

// seed offers attention items to the seed rules: an item whose signal a built-in queue's
// rule carries creates that queue when missing (decision_queue.seeded) and joins it
// (decision_queue_item.seeded) unless the queue's seedRulesEnabled is false.
func (x *Decisions) seed(ctx context.Context, companyID string, in []seedItem) (*seedResult, error) {
	seeded := []string{}
	items := 0
	for _, it := range in {
		for _, e := range seedCatalogue {
			if !slices.ContainsFunc(e.Rules, func(r SeedRule) bool { return r.Signal == it.Signal }) {
				continue
			}
			q, err := x.queueByKey(ctx, x.pool, companyID, e.Key)
			var se *sdk.Error
			if errors.As(err, &se) && se.Status == http.StatusNotFound {
				desc := e.Description
				q, err = x.queueInsert(ctx, x.pool, nil, companyID, e.Key, e.Title, &desc, nil, true)
				if errors.As(err, &se) && se.Status == http.StatusConflict {
					q, err = x.queueByKey(ctx, x.pool, companyID, e.Key)
				} else if err == nil {
					seeded = append(seeded, e.Key)
					x.activity(ctx, nil, "decision-seeder", companyID, "decision_queue.seeded", "decision_queue", q.ID,
						map[string]any{"key": q.Key})
				}
			}
			if err != nil {
				return nil, err
			}
			if !q.SeedRulesEnabled {
				continue
			}
			added, err := x.addItem(ctx, x.pool, q, it.SourceKind, it.SourceID, "seed:"+it.Signal)
			if err != nil {
				return nil, err
			}
			if added {
				items++
				x.activity(ctx, nil, "decision-seeder", companyID, "decision_queue_item.seeded", "decision_queue", q.ID,
					map[string]any{"key": q.Key, "sourceKind": it.SourceKind, "sourceId": it.SourceID, "signal": it.Signal})
			}
		}
	}
	return &seedResult{QueuesSeeded: seeded, ItemsSeeded: items}, nil
}

// feedSignal is the seed signal of an open decision in the attention feed: an agent asking
// the board to choose is an ask-user question.
const feedSignal = "ask_user_questions"

// feedBatch is how many open decisions one feed build offers at most.
const feedBatch = 200

// buildFeed builds the company's attention feed of what this extension owns (its open
// decisions not yet offered, oldest first, up to feedBatch per build) and seeds the queues
// from it. A per-company mark records how far the feed has read, so a build reads only the
// decisions created since (with a minute of overlap for transactions that committed late).
// Other owners offer their items through the decisions.queues.seed method.
func (x *Decisions) buildFeed(ctx context.Context, companyID string) (*seedResult, error) {
	var disabled bool
	err := x.pool.QueryRow(ctx, `SELECT NOT q.seed_rules_enabled FROM decision_queues q WHERE q.company_id = $1 AND q.key = 'questions'`,
		companyID).Scan(&disabled)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("error reading the questions queue: %w", err)
	}
	if disabled {
		return &seedResult{QueuesSeeded: []string{}}, nil
	}
	rows, err := x.pool.Query(ctx, `SELECT d.id::text, d.created_at FROM decisions d WHERE d.company_id = $1 AND d.status = 'open'
		AND d.created_at > COALESCE((SELECT m.seen_until FROM decision_feed_marks m WHERE m.company_id = $1), '-infinity')
			- interval '1 minute'
		AND NOT EXISTS (SELECT 1 FROM decision_queue_items i JOIN decision_queues q ON q.id = i.queue_id
			WHERE q.company_id = $1 AND q.key = 'questions' AND i.source_kind = 'decision' AND i.source_id = d.id::text)
		AND NOT EXISTS (SELECT 1 FROM decision_item_states s WHERE s.company_id = $1 AND s.source_kind = 'decision'
			AND s.source_id = d.id::text AND s.archived_at IS NOT NULL)
		ORDER BY d.created_at LIMIT $2`, companyID, feedBatch)
	if err != nil {
		return nil, fmt.Errorf("error building the attention feed: %w", err)
	}
	type row struct {
		ID        string
		CreatedAt time.Time
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, fmt.Errorf("error reading the attention feed: %w", err)
	}
	items := make([]seedItem, len(list))
	for i, r := range list {
		items[i] = seedItem{Signal: feedSignal, SourceKind: "decision", SourceID: r.ID}
	}
	out, err := x.seed(ctx, companyID, items)
	if err != nil {
		return nil, err
	}
	// A full batch leaves more to read from its last row; a short one read everything
	// committed, so the mark moves to a minute ago.
	mark := "now() - interval '1 minute'"
	var lastAt any
	if len(list) == feedBatch {
		mark, lastAt = "$2::timestamptz", list[len(list)-1].CreatedAt
	}
	if _, err := x.pool.Exec(ctx, `INSERT INTO decision_feed_marks (company_id, seen_until) VALUES ($1, `+mark+`)
		ON CONFLICT (company_id) DO UPDATE SET seen_until = GREATEST(decision_feed_marks.seen_until, EXCLUDED.seen_until)`,
		append([]any{companyID}, nonNil(lastAt)...)...); err != nil {
		return nil, fmt.Errorf("error marking the attention feed: %w", err)
	}
	return out, nil
}

// nonNil returns v as a one-element list, or none when v is nil.
func nonNil(v any) []any {
	if v == nil {
		return nil
	}
	return []any{v}
}

// feed builds the attention feed before a queue read; a failure is logged, not returned:
// the queues read as they stand.
func (x *Decisions) feed(ctx context.Context, companyID string) {
	if _, err := x.buildFeed(ctx, companyID); err != nil {
		x.log.Warn("error seeding decision queues from the attention feed", "company", companyID, "error", err)
	}
}
