package costs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Finance event kinds, directions and units (REFERENCE.md 2.12).
var (
	financeKinds = []string{"inference_charge", "platform_fee", "credit_purchase", "credit_refund", "credit_expiry", "byok_fee",
		"gateway_overhead", "log_storage_charge", "logpush_charge", "provisioned_capacity_charge", "training_charge",
		"custom_model_import_charge", "custom_model_storage_charge", "manual_adjustment"}
	financeDirections = []string{"debit", "credit"}
	financeUnits      = []string{"input_token", "output_token", "cached_input_token", "request", "credit_usd", "credit_unit",
		"model_unit_minute", "model_unit_hour", "gb_month", "train_token", "unknown"}
	currencyRe = regexp.MustCompile(`^[A-Z]{3}$`)
)

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/companies/{companyId}/finance-events", Status: http.StatusCreated, Response: new(FinanceEvent), Access: sdk.AccessBoard, CompanyFromPath: true,
			Summary: "Record a finance event (non-token accounting record)", Body: financeEventBody{}, Handle: handleFinanceEventCreate},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/finance-summary", Query: costRangeQuery{}, Response: new(map[string]any), CompanyFromPath: true,
			Summary: "Debits, credits, net and estimated debits of finance events over from..to", Handle: handleFinanceSummary},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/finance-by-biller", Query: costRangeQuery{}, Response: new([]map[string]any), CompanyFromPath: true,
			Summary: "Finance totals per biller over from..to", Handle: financeBreakdownHandler("biller", "kindCount", "event_kind")},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/finance-by-kind", Query: costRangeQuery{}, Response: new([]map[string]any), CompanyFromPath: true,
			Summary: "Finance totals per event kind over from..to", Handle: financeBreakdownHandler("event_kind", "billerCount", "biller")},
		route{Method: "GET", Path: "/api/companies/{companyId}/costs/finance-events", Query: financeEventsQuery{}, Response: new([]*FinanceEvent), CompanyFromPath: true,
			Summary: "Finance events over from..to, newest first (limit 1-500, default 100)", Handle: handleFinanceEventList},
	)
}

// FinanceEvent is a row of finance_events and its API shape.
type FinanceEvent struct {
	ID                   string          `json:"id"`
	CompanyID            string          `json:"companyId"`
	AgentID              *string         `json:"agentId"`
	IssueID              *string         `json:"issueId"`
	ProjectID            *string         `json:"projectId"`
	GoalID               *string         `json:"goalId"`
	HeartbeatRunID       *string         `json:"heartbeatRunId"`
	CostEventID          *string         `json:"costEventId"`
	BillingCode          *string         `json:"billingCode"`
	Description          *string         `json:"description"`
	EventKind            string          `json:"eventKind"`
	Direction            string          `json:"direction"`
	Biller               string          `json:"biller"`
	Provider             *string         `json:"provider"`
	ExecutionAdapterType *string         `json:"executionAdapterType"`
	PricingTier          *string         `json:"pricingTier"`
	Region               *string         `json:"region"`
	Model                *string         `json:"model"`
	Quantity             *float64        `json:"quantity"`
	Unit                 *string         `json:"unit"`
	AmountCents          int64           `json:"amountCents"`
	Currency             string          `json:"currency"`
	Estimated            bool            `json:"estimated"`
	ExternalInvoiceID    *string         `json:"externalInvoiceId"`
	MetadataJSON         json.RawMessage `json:"metadataJson"`
	OccurredAt           time.Time       `json:"occurredAt"`
	CreatedAt            time.Time       `json:"createdAt"`
}

const financeColumns = `id::text, company_id::text, agent_id::text, issue_id::text, project_id::text, goal_id::text,
	heartbeat_run_id::text, cost_event_id::text, billing_code, description, event_kind, direction, biller, provider,
	execution_adapter_type, pricing_tier, region, model, quantity, unit, amount_cents, currency, estimated,
	external_invoice_id, metadata_json, occurred_at, created_at`

func scanFinance(row pgx.Row) (*FinanceEvent, error) {
	f := new(FinanceEvent)
	var meta []byte
	err := row.Scan(&f.ID, &f.CompanyID, &f.AgentID, &f.IssueID, &f.ProjectID, &f.GoalID, &f.HeartbeatRunID, &f.CostEventID,
		&f.BillingCode, &f.Description, &f.EventKind, &f.Direction, &f.Biller, &f.Provider, &f.ExecutionAdapterType,
		&f.PricingTier, &f.Region, &f.Model, &f.Quantity, &f.Unit, &f.AmountCents, &f.Currency, &f.Estimated,
		&f.ExternalInvoiceID, &meta, &f.OccurredAt, &f.CreatedAt)
	if meta != nil {
		f.MetadataJSON = meta
	} else {
		f.MetadataJSON = json.RawMessage("null")
	}
	return f, err
}

// financeEventBody is the body of POST /api/companies/{companyId}/finance-events.
type financeEventBody struct {
	// EventKind is the reference product's name for the kind; Kind is the spec's. Either is
	// accepted; when both are given they must agree.
	EventKind   string  `json:"eventKind"`
	Kind        string  `json:"kind,omitempty"`
	Biller      string  `json:"biller" jsonschema:"required"`
	AmountCents *int64  `json:"amountCents" jsonschema:"required,minimum=0"`
	OccurredAt  string  `json:"occurredAt" jsonschema:"required"`
	Direction   *string `json:"direction,omitempty" jsonschema:"enum=debit,enum=credit"`
	// Currency is an ISO 4217 code (default USD).
	Currency             *string  `json:"currency,omitempty"`
	Estimated            *bool    `json:"estimated,omitempty"`
	AgentID              *string  `json:"agentId,omitempty"`
	IssueID              *string  `json:"issueId,omitempty"`
	ProjectID            *string  `json:"projectId,omitempty"`
	GoalID               *string  `json:"goalId,omitempty"`
	HeartbeatRunID       *string  `json:"heartbeatRunId,omitempty"`
	CostEventID          *string  `json:"costEventId,omitempty"`
	BillingCode          *string  `json:"billingCode,omitempty"`
	Description          *string  `json:"description,omitempty"`
	Provider             *string  `json:"provider,omitempty"`
	ExecutionAdapterType *string  `json:"executionAdapterType,omitempty"`
	PricingTier          *string  `json:"pricingTier,omitempty"`
	Region               *string  `json:"region,omitempty"`
	Model                *string  `json:"model,omitempty"`
	Quantity             *float64 `json:"quantity,omitempty" jsonschema:"minimum=0"`
	Unit                 *string  `json:"unit,omitempty"`
	ExternalInvoiceID    *string  `json:"externalInvoiceId,omitempty"`
	// MetadataJSON (or metadata) is a free object.
	MetadataJSON json.RawMessage `json:"metadataJson,omitempty" jsonschema:"type=object"`
	Metadata     json.RawMessage `json:"metadata,omitempty" jsonschema:"type=object"`
}

func handleFinanceEventCreate(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var b financeEventBody
	if err := decodeBody(r, &b); err != nil {
		c.writeErr(rw, err)
		return
	}
	var p problems
	f := &FinanceEvent{ID: uuid.NewString(), CompanyID: companyID, Direction: "debit", Currency: "USD"}
	f.EventKind = strings.TrimSpace(b.EventKind)
	kind := strings.TrimSpace(b.Kind)
	switch {
	case kind != "" && f.EventKind != "" && kind != f.EventKind:
		p.add("kind", "must match eventKind when both are given")
	case f.EventKind == "":
		f.EventKind = kind
	}
	switch {
	case f.EventKind == "":
		p.add("eventKind", "is required")
	case !slices.Contains(financeKinds, f.EventKind):
		p.add("eventKind", "must be one of "+strings.Join(financeKinds, ", "))
	}
	if f.Biller = cleanText(&p, "biller", b.Biller, textMax); f.Biller == "" {
		p.add("biller", "is required")
	}
	switch {
	case b.AmountCents == nil:
		p.add("amountCents", "is required")
	case *b.AmountCents < 0:
		p.add("amountCents", "must be a non-negative integer")
	default:
		f.AmountCents = *b.AmountCents
	}
	if strings.TrimSpace(b.OccurredAt) == "" {
		p.add("occurredAt", "is required")
	} else if t, ok := parseInstant(b.OccurredAt); !ok {
		p.add("occurredAt", "must be an ISO 8601 date-time")
	} else {
		f.OccurredAt = t
	}
	if b.Direction != nil {
		if f.Direction = strings.TrimSpace(*b.Direction); !slices.Contains(financeDirections, f.Direction) {
			p.add("direction", "must be one of debit, credit")
		}
	}
	if b.Currency != nil {
		if f.Currency = strings.ToUpper(strings.TrimSpace(*b.Currency)); !currencyRe.MatchString(f.Currency) {
			p.add("currency", "must be a three-letter ISO 4217 code")
		}
	}
	if b.Estimated != nil {
		f.Estimated = *b.Estimated
	}
	if b.Unit != nil {
		u := strings.TrimSpace(*b.Unit)
		if !slices.Contains(financeUnits, u) {
			p.add("unit", "must be one of "+strings.Join(financeUnits, ", "))
		}
		f.Unit = &u
	}
	if b.Quantity != nil && *b.Quantity < 0 {
		p.add("quantity", "must be a non-negative number")
	}
	f.Quantity = b.Quantity
	f.AgentID = optUUID(&p, "agentId", b.AgentID)
	f.IssueID = optUUID(&p, "issueId", b.IssueID)
	f.ProjectID = optUUID(&p, "projectId", b.ProjectID)
	f.GoalID = optUUID(&p, "goalId", b.GoalID)
	f.HeartbeatRunID = optUUID(&p, "heartbeatRunId", b.HeartbeatRunID)
	f.CostEventID = optUUID(&p, "costEventId", b.CostEventID)
	f.BillingCode = optText(&p, "billingCode", b.BillingCode, textMax)
	f.Description = optText(&p, "description", b.Description, 2000)
	f.Provider = optText(&p, "provider", b.Provider, textMax)
	f.ExecutionAdapterType = optText(&p, "executionAdapterType", b.ExecutionAdapterType, textMax)
	f.PricingTier = optText(&p, "pricingTier", b.PricingTier, textMax)
	f.Region = optText(&p, "region", b.Region, textMax)
	f.Model = optText(&p, "model", b.Model, textMax)
	f.ExternalInvoiceID = optText(&p, "externalInvoiceId", b.ExternalInvoiceID, textMax)
	meta := b.MetadataJSON
	if len(meta) == 0 || string(meta) == "null" {
		meta = b.Metadata
	}
	var metaArg []byte
	if len(meta) > 0 && string(meta) != "null" {
		var obj map[string]any
		if json.Unmarshal(meta, &obj) != nil {
			p.add("metadataJson", "must be an object")
		} else if len(meta) > 64<<10 {
			p.add("metadataJson", "must be at most 65536 bytes")
		}
		metaArg = meta
	}
	if err := p.err(); err != nil {
		c.writeErr(rw, err)
		return
	}
	if err := c.checkFinanceRefs(ctx, f); err != nil {
		c.writeErr(rw, err)
		return
	}
	stored, err := scanFinance(c.pool.QueryRow(ctx, `INSERT INTO finance_events (id, company_id, agent_id, issue_id, project_id,
			goal_id, heartbeat_run_id, cost_event_id, billing_code, description, event_kind, direction, biller, provider,
			execution_adapter_type, pricing_tier, region, model, quantity, unit, amount_cents, currency, estimated,
			external_invoice_id, metadata_json, occurred_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)
		RETURNING `+financeColumns, f.ID, f.CompanyID, f.AgentID, f.IssueID, f.ProjectID, f.GoalID, f.HeartbeatRunID, f.CostEventID,
		f.BillingCode, f.Description, f.EventKind, f.Direction, f.Biller, f.Provider, f.ExecutionAdapterType, f.PricingTier, f.Region,
		f.Model, f.Quantity, f.Unit, f.AmountCents, f.Currency, f.Estimated, f.ExternalInvoiceID, metaArg, f.OccurredAt))
	if err != nil {
		c.writeErr(rw, fmt.Errorf("error storing finance event: %w", err))
		return
	}
	c.activity(ctx, sdk.ActorFrom(ctx), companyID, "finance_event.created", "finance_event", stored.ID, map[string]any{
		"eventKind": stored.EventKind, "direction": stored.Direction, "biller": stored.Biller, "amountCents": stored.AmountCents,
		"currency": stored.Currency, "estimated": stored.Estimated})
	sdk.WriteJSON(rw, http.StatusCreated, stored)
}

// checkFinanceRefs validates what a finance event is attributed to: an agent and a cost
// event of the company, and its issue, project, goal and run.
func (c *Costs) checkFinanceRefs(ctx context.Context, f *FinanceEvent) error {
	var p problems
	agentID := ""
	if f.AgentID != nil {
		ag, err := c.agent(ctx, *f.AgentID)
		if err != nil {
			return err
		}
		if ag == nil || ag.CompanyId != f.CompanyID {
			p.add("agentId", "must be an agent of this company")
		} else {
			agentID = ag.Id
		}
	}
	if f.CostEventID != nil {
		var ok bool
		if err := c.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cost_events WHERE id = $1 AND company_id = $2)`,
			*f.CostEventID, f.CompanyID).Scan(&ok); err != nil {
			return fmt.Errorf("error reading cost event %s: %w", *f.CostEventID, err)
		}
		if !ok {
			p.add("costEventId", "must be a cost event of this company")
		}
	}
	if err := p.err(); err != nil {
		return err
	}
	at := &attribution{CompanyID: f.CompanyID, AgentID: agentID, IssueID: f.IssueID, ProjectID: f.ProjectID, GoalID: f.GoalID, RunID: f.HeartbeatRunID}
	if err := c.checkRefs(ctx, at, true); err != nil {
		return err
	}
	f.ProjectID, f.GoalID = at.ProjectID, at.GoalID
	return nil
}

// financeRange is the WHERE clause of a finance read over [from, to] (to inclusive).
func financeRange(r timeRange) (string, []any) {
	return `company_id = $1 AND ($2::timestamptz IS NULL OR occurred_at >= $2) AND ($3::timestamptz IS NULL OR occurred_at <= $3)`,
		[]any{r.From, r.To}
}

const financeSums = `coalesce(sum(amount_cents) FILTER (WHERE direction = 'debit'), 0)::bigint,
	coalesce(sum(amount_cents) FILTER (WHERE direction = 'credit'), 0)::bigint,
	coalesce(sum(amount_cents) FILTER (WHERE direction = 'debit' AND estimated), 0)::bigint, count(*)`

func handleFinanceSummary(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	rng, err := parseRange(r.URL.Query())
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	where, args := financeRange(rng)
	var debit, credit, estimated, count int64
	if err := c.pool.QueryRow(ctx, `SELECT `+financeSums+` FROM finance_events WHERE `+where,
		append([]any{companyID}, args...)...).Scan(&debit, &credit, &estimated, &count); err != nil {
		c.writeErr(rw, fmt.Errorf("error reading finance summary: %w", err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"companyId": companyID, "debitCents": debit, "creditCents": credit,
		"netCents": debit - credit, "estimatedDebitCents": estimated, "eventCount": count})
}

// financeBreakdownHandler serves finance totals grouped by col (biller or event_kind), with
// the count of distinct values of other under countKey; largest debit first.
func financeBreakdownHandler(col, countKey, other string) func(c *Costs, rw http.ResponseWriter, r *http.Request) {
	key := map[string]string{"biller": "biller", "event_kind": "eventKind"}[col]
	return func(c *Costs, rw http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		companyID := r.PathValue("companyId")
		rng, err := parseRange(r.URL.Query())
		if err != nil {
			c.writeErr(rw, err)
			return
		}
		where, args := financeRange(rng)
		rows, err := c.pool.Query(ctx, `SELECT `+col+`, `+financeSums+`, count(DISTINCT `+other+`) FROM finance_events WHERE `+where+
			` GROUP BY `+col+` ORDER BY 2 DESC, 1`, append([]any{companyID}, args...)...)
		if err != nil {
			c.writeErr(rw, fmt.Errorf("error reading finance breakdown: %w", err))
			return
		}
		out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (map[string]any, error) {
			var name string
			var debit, credit, estimated, count, distinct int64
			if err := row.Scan(&name, &debit, &credit, &estimated, &count, &distinct); err != nil {
				return nil, err
			}
			return map[string]any{key: name, "debitCents": debit, "creditCents": credit, "estimatedDebitCents": estimated,
				"eventCount": count, countKey: distinct, "netCents": debit - credit}, nil
		})
		if err != nil {
			c.writeErr(rw, fmt.Errorf("error reading finance breakdown: %w", err))
			return
		}
		if out == nil {
			out = []map[string]any{}
		}
		sdk.WriteJSON(rw, http.StatusOK, out)
	}
}

func handleFinanceEventList(c *Costs, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	q := r.URL.Query()
	rng, err := parseRange(q)
	if err != nil {
		c.writeErr(rw, err)
		return
	}
	limit := 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			c.writeErr(rw, invalid("limit", "must be an integer from 1 to 500"))
			return
		}
		limit = n
	}
	where, args := financeRange(rng)
	rows, err := c.pool.Query(ctx, `SELECT `+financeColumns+` FROM finance_events WHERE `+where+
		` ORDER BY occurred_at DESC, created_at DESC, id LIMIT $4`, append([]any{companyID}, append(args, limit)...)...)
	if err != nil {
		c.writeErr(rw, fmt.Errorf("error listing finance events: %w", err))
		return
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*FinanceEvent, error) { return scanFinance(row) })
	if err != nil {
		c.writeErr(rw, fmt.Errorf("error listing finance events: %w", err))
		return
	}
	if out == nil {
		out = []*FinanceEvent{}
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}
