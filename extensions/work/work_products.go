package work

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
)

// Work product enums (REFERENCE 2.2 Work products).
var (
	WorkProductTypes          = []string{"preview_url", "runtime_service", "pull_request", "branch", "commit", "artifact", "document"}
	WorkProductStatuses       = []string{"active", "ready_for_review", "approved", "changes_requested", "merged", "closed", "failed", "archived", "draft"}
	WorkProductReviewStates   = []string{"none", "needs_board_review", "approved", "changes_requested"}
	WorkProductHealthStatuses = []string{"unknown", "healthy", "unhealthy"}
)

// Work product limits.
const (
	workProductTitleMaxLen    = 500
	workProductProviderMaxLen = 100
	workProductRefMaxLen      = 500
	workProductURLMaxLen      = 2048
	workProductSummaryMaxLen  = 10000
	workProductJSONMaxBytes   = 64 << 10
)

// The work product routes are registered in a package-level initializer rather than
// in init: work.go's init registers the extension, which builds (and memoizes) the manifest
// from the routes added so far, and init functions run in file-name order, so routes added
// by the init of a file sorted after work.go would be missing from the manifest.
var _ = func() bool {
	addRoutes(
		route{Method: http.MethodGet, Path: "/api/issues/{id}/work-products", Response: new([]*WorkProduct), Summary: "List an issue's work products",
			Handle: handleWorkProductList},
		route{Method: http.MethodPost, Path: "/api/issues/{id}/work-products", Status: http.StatusCreated, Response: new(WorkProduct), Summary: "Record a work product of an issue (pull request, branch, preview, artifact, …)",
			Body: workProductBody{}, Handle: handleWorkProductCreate},
		route{Method: http.MethodPatch, Path: "/api/work-products/{id}", Response: new(WorkProduct), Summary: "Update a work product",
			Body: workProductBody{}, Handle: handleWorkProductUpdate},
		route{Method: http.MethodDelete, Path: "/api/work-products/{id}", Response: new(WorkProduct), Summary: "Delete a work product",
			Handle: handleWorkProductDelete},
	)
	return true
}()

// WorkProduct is a row of ext_work.issue_work_products and its API shape.
type WorkProduct struct {
	bun.BaseModel `bun:"table:issue_work_products,alias:wp"`

	ID                   string          `bun:"id,pk,type:uuid" json:"id"`
	CompanyID            string          `bun:"company_id,type:uuid" json:"companyId"`
	IssueID              string          `bun:"issue_id,type:uuid" json:"issueId"`
	ProjectID            *string         `bun:"project_id,type:uuid" json:"projectId"`
	ExecutionWorkspaceID *string         `bun:"execution_workspace_id" json:"executionWorkspaceId"`
	RuntimeServiceID     *string         `bun:"runtime_service_id" json:"runtimeServiceId"`
	Type                 string          `bun:"type" json:"type"`
	Provider             string          `bun:"provider" json:"provider"`
	ExternalID           *string         `bun:"external_id" json:"externalId"`
	Title                string          `bun:"title" json:"title"`
	URL                  *string         `bun:"url" json:"url"`
	Status               string          `bun:"status" json:"status"`
	ReviewState          string          `bun:"review_state" json:"reviewState"`
	IsPrimary            bool            `bun:"is_primary" json:"isPrimary"`
	HealthStatus         string          `bun:"health_status" json:"healthStatus"`
	Summary              *string         `bun:"summary" json:"summary"`
	Metadata             json.RawMessage `bun:"metadata,type:jsonb,nullzero" json:"metadata"`
	CreatedByRunID       *string         `bun:"created_by_run_id" json:"createdByRunId"`
	CreatedAt            time.Time       `bun:"created_at" json:"createdAt"`
	UpdatedAt            time.Time       `bun:"updated_at" json:"updatedAt"`
}

// workProductBody is the body of POST /api/issues/{id}/work-products (type, provider and
// title required) and of PATCH /api/work-products/{id} (every field optional; null clears
// the optional ones).
type workProductBody struct {
	Type                 *string         `json:"type,omitempty" jsonschema:"enum=preview_url,enum=runtime_service,enum=pull_request,enum=branch,enum=commit,enum=artifact,enum=document"`
	Provider             *string         `json:"provider,omitempty"`
	ExternalID           *string         `json:"externalId,omitempty"`
	Title                *string         `json:"title,omitempty"`
	URL                  *string         `json:"url,omitempty"`
	Status               *string         `json:"status,omitempty" jsonschema:"enum=active,enum=ready_for_review,enum=approved,enum=changes_requested,enum=merged,enum=closed,enum=failed,enum=archived,enum=draft"`
	ReviewState          *string         `json:"reviewState,omitempty" jsonschema:"enum=none,enum=needs_board_review,enum=approved,enum=changes_requested"`
	IsPrimary            *bool           `json:"isPrimary,omitempty"`
	HealthStatus         *string         `json:"healthStatus,omitempty" jsonschema:"enum=unknown,enum=healthy,enum=unhealthy"`
	Summary              *string         `json:"summary,omitempty"`
	Metadata             json.RawMessage `json:"metadata,omitempty"`
	ProjectID            *string         `json:"projectId,omitempty"`
	ExecutionWorkspaceID *string         `json:"executionWorkspaceId,omitempty"`
	RuntimeServiceID     *string         `json:"runtimeServiceId,omitempty"`
}

// decodeWorkProductBody decodes the body strictly and reports which fields it names (so
// that an explicit null can clear an optional field).
func decodeWorkProductBody(r *http.Request) (*workProductBody, map[string]bool, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, invalid("", "unreadable body")
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var body workProductBody
	if err := decodeBody(r, &body); err != nil {
		return nil, nil, err
	}
	present := map[string]bool{}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		for k := range fields {
			present[k] = true
		}
	}
	return &body, present, nil
}

// apply validates the named fields of body and applies them to wp.
func (body *workProductBody) apply(wp *WorkProduct, present map[string]bool) error {
	required := func(name string, v *string, maxLen int, set func(string)) error {
		if !present[name] {
			return nil
		}
		if v == nil || strings.TrimSpace(*v) == "" {
			return invalid(name, "required")
		}
		if utf8.RuneCountInString(*v) > maxLen {
			return invalid(name, fmt.Sprintf("must be at most %d characters", maxLen))
		}
		set(strings.TrimSpace(*v))
		return nil
	}
	enum := func(name string, v *string, values []string, set func(string)) error {
		if !present[name] {
			return nil
		}
		if v == nil || !containsString(values, *v) {
			return invalid(name, "must be one of "+strings.Join(values, ", "))
		}
		set(*v)
		return nil
	}
	optional := func(name string, v *string, maxLen int, set func(*string)) error {
		if !present[name] {
			return nil
		}
		if v != nil && utf8.RuneCountInString(*v) > maxLen {
			return invalid(name, fmt.Sprintf("must be at most %d characters", maxLen))
		}
		if v != nil && *v == "" {
			v = nil
		}
		set(v)
		return nil
	}
	steps := []func() error{
		func() error { return enum("type", body.Type, WorkProductTypes, func(s string) { wp.Type = s }) },
		func() error {
			return required("provider", body.Provider, workProductProviderMaxLen, func(s string) { wp.Provider = s })
		},
		func() error {
			return required("title", body.Title, workProductTitleMaxLen, func(s string) { wp.Title = s })
		},
		func() error {
			return enum("status", body.Status, WorkProductStatuses, func(s string) { wp.Status = s })
		},
		func() error {
			return enum("reviewState", body.ReviewState, WorkProductReviewStates, func(s string) { wp.ReviewState = s })
		},
		func() error {
			return enum("healthStatus", body.HealthStatus, WorkProductHealthStatuses, func(s string) { wp.HealthStatus = s })
		},
		func() error {
			return optional("externalId", body.ExternalID, workProductRefMaxLen, func(s *string) { wp.ExternalID = s })
		},
		func() error {
			return optional("summary", body.Summary, workProductSummaryMaxLen, func(s *string) { wp.Summary = s })
		},
		func() error {
			return optional("executionWorkspaceId", body.ExecutionWorkspaceID, workProductRefMaxLen, func(s *string) { wp.ExecutionWorkspaceID = s })
		},
		func() error {
			return optional("runtimeServiceId", body.RuntimeServiceID, workProductRefMaxLen, func(s *string) { wp.RuntimeServiceID = s })
		},
		func() error {
			return optional("url", body.URL, workProductURLMaxLen, func(s *string) {
				wp.URL = s
			})
		},
		func() error {
			if wp.URL == nil {
				return nil
			}
			u, err := url.Parse(*wp.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return invalid("url", "must be an http or https URL")
			}
			return nil
		},
		func() error {
			if !present["isPrimary"] {
				return nil
			}
			if body.IsPrimary == nil {
				return invalid("isPrimary", "must be a boolean")
			}
			wp.IsPrimary = *body.IsPrimary
			return nil
		},
		func() error {
			if !present["metadata"] {
				return nil
			}
			m, err := rawObjectField("metadata", body.Metadata, workProductJSONMaxBytes)
			wp.Metadata = m
			return err
		},
		func() error {
			if !present["projectId"] {
				return nil
			}
			if body.ProjectID != nil && !isUUID(*body.ProjectID) {
				return invalid("projectId", "must be a UUID")
			}
			wp.ProjectID = body.ProjectID
			return nil
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// workProductSave checks the project, clears other primaries of the same issue and type
// when wp is primary, and inserts or updates wp.
func workProductSave(ctx context.Context, tx bun.Tx, wp *WorkProduct, insert bool) error {
	if wp.ProjectID != nil {
		ok, err := tx.NewSelect().Table("projects").Where("id = ? AND company_id = ?", *wp.ProjectID, wp.CompanyID).Exists(ctx)
		if err != nil {
			return fmt.Errorf("error checking project %s: %w", *wp.ProjectID, err)
		}
		if !ok {
			return unprocessable("Project does not belong to company")
		}
	}
	if wp.IsPrimary {
		if _, err := tx.NewUpdate().Table("issue_work_products").Set("is_primary = false, updated_at = now()").
			Where("issue_id = ? AND type = ? AND id <> ? AND is_primary", wp.IssueID, wp.Type, wp.ID).Exec(ctx); err != nil {
			return fmt.Errorf("error clearing primary work products of issue %s: %w", wp.IssueID, err)
		}
	}
	var err error
	if insert {
		_, err = tx.NewInsert().Model(wp).Exec(ctx)
	} else {
		_, err = tx.NewUpdate().Model(wp).WherePK().Exec(ctx)
	}
	if err != nil {
		return fmt.Errorf("error saving work product %s: %w", wp.ID, err)
	}
	return nil
}

func (w *Work) workProductActivity(ctx context.Context, wp *WorkProduct, action string) {
	if err := w.activity(ctx, wp.CompanyID, action, "issue", wp.IssueID,
		map[string]any{"workProductId": wp.ID, "type": wp.Type, "title": wp.Title}); err != nil {
		w.log.Warn("error recording work product activity", "action", action, "workProduct", wp.ID, "error", err)
	}
}

// workProductByID loads a work product the caller's company may see: 404 "Work product not
// found" when missing, 403 for another company's.
func (w *Work) workProductByID(ctx context.Context, db bun.IDB, id string) (*WorkProduct, error) {
	if !isUUID(id) {
		return nil, notFound("Work product not found")
	}
	wp := new(WorkProduct)
	q := db.NewSelect().Model(wp).Where("wp.id = ?", id)
	if _, ok := db.(bun.Tx); ok {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("Work product not found")
		}
		return nil, fmt.Errorf("error reading work product %s: %w", id, err)
	}
	if err := requireCompanyAccess(ctx, wp.CompanyID); err != nil {
		return nil, err
	}
	return wp, nil
}

func handleWorkProductList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	out := []*WorkProduct{}
	if err := w.db.NewSelect().Model(&out).Where("wp.issue_id = ?", iss.ID).OrderExpr("wp.created_at ASC, wp.id ASC").Scan(ctx); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing work products of issue %s: %w", iss.ID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func handleWorkProductCreate(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := w.issueByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	body, present, err := decodeWorkProductBody(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	for _, name := range []string{"type", "provider", "title"} {
		if !present[name] {
			w.writeErr(rw, invalid(name, "required"))
			return
		}
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	wp := &WorkProduct{
		ID: uuid.Must(uuid.NewV7()).String(), CompanyID: iss.CompanyID, IssueID: iss.ID, ProjectID: iss.ProjectID,
		Status: "active", ReviewState: "none", HealthStatus: "unknown",
		CreatedByRunID: attributionOf(sdk.ActorFrom(ctx)).RunID, CreatedAt: now, UpdatedAt: now,
	}
	if err := body.apply(wp, present); err != nil {
		w.writeErr(rw, err)
		return
	}
	if err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		return workProductSave(ctx, tx, wp, true)
	}); err != nil {
		w.writeErr(rw, err)
		return
	}
	w.workProductActivity(ctx, wp, "issue.work_product.created")
	sdk.WriteJSON(rw, http.StatusCreated, wp)
}

func handleWorkProductUpdate(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, present, err := decodeWorkProductBody(r)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var wp *WorkProduct
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if wp, err = w.workProductByID(ctx, tx, r.PathValue("id")); err != nil {
			return err
		}
		if err := body.apply(wp, present); err != nil {
			return err
		}
		wp.UpdatedAt = time.Now().UTC().Truncate(time.Microsecond)
		return workProductSave(ctx, tx, wp, false)
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.workProductActivity(ctx, wp, "issue.work_product.updated")
	sdk.WriteJSON(rw, http.StatusOK, wp)
}

func handleWorkProductDelete(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var wp *WorkProduct
	err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if wp, err = w.workProductByID(ctx, tx, r.PathValue("id")); err != nil {
			return err
		}
		_, err = tx.NewDelete().Model(wp).WherePK().Exec(ctx)
		return err
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.workProductActivity(ctx, wp, "issue.work_product.deleted")
	sdk.WriteJSON(rw, http.StatusOK, wp)
}
