package work

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
)

// Goal levels and statuses (REFERENCE 2.4).
var (
	goalLevels   = []string{"company", "team", "agent", "task"}
	goalStatuses = []string{"planned", "active", "achieved", "cancelled"}
)

// goalTitleMax is the longest goal title, in characters.
const goalTitleMax = 500

// Goal is a row of ext_work.goals and its API shape. Goals form a tree within a company.
type Goal struct {
	bun.BaseModel `bun:"table:goals"`

	ID           string    `bun:"id,pk,type:uuid" json:"id"`
	CompanyID    string    `bun:"company_id,type:uuid" json:"companyId"`
	Title        string    `bun:"title" json:"title"`
	Description  *string   `bun:"description" json:"description"`
	Level        string    `bun:"level" json:"level"`
	Status       string    `bun:"status" json:"status"`
	ParentID     *string   `bun:"parent_id,type:uuid" json:"parentId"`
	OwnerAgentID *string   `bun:"owner_agent_id,type:uuid" json:"ownerAgentId"`
	CreatedAt    time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
	UpdatedAt    time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp" json:"updatedAt"`
}

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/goals", Query: goalListQuery{}, Response: new([]*Goal), CompanyFromPath: true,
			Summary: "List the company's goals (filters status, level, parentId — 'null' for top-level goals)", Handle: handleGoalList},
		route{Method: "POST", Path: "/api/companies/{companyId}/goals", Status: http.StatusCreated, Response: new(Goal), CompanyFromPath: true,
			Summary: "Create a goal", Body: goalBody{}, Handle: handleGoalCreate},
		route{Method: "GET", Path: "/api/goals/{id}", Response: new(Goal), Summary: "Read a goal", Handle: handleGoalGet},
		route{Method: "PATCH", Path: "/api/goals/{id}", Response: new(Goal), Summary: "Update a goal (the partial create body)", Body: goalBody{}, Handle: handleGoalPatch},
		route{Method: "DELETE", Path: "/api/goals/{id}", Response: new(Goal), Summary: "Delete a goal; its children become top-level", Handle: handleGoalDelete},
	)
}

// goalBody is the create body (title required) and, partially, the update body of a goal.
type goalBody struct {
	Title        patchField[string] `json:"title"`
	Description  patchField[string] `json:"description"`
	Level        patchField[string] `json:"level"`
	Status       patchField[string] `json:"status"`
	ParentID     patchField[string] `json:"parentId"`
	OwnerAgentID patchField[string] `json:"ownerAgentId"`
}

// apply applies the fields that need no lookups and returns the changed columns.
func (b *goalBody) apply(probs *fieldProblems, g *Goal, creating bool) []string {
	var cols []string
	if b.Title.Set || creating {
		title := ""
		if b.Title.Set && !b.Title.Null {
			title = cleanText(probs, "title", b.Title.Value, goalTitleMax)
		}
		if title == "" {
			probs.add("title", "is required")
		}
		g.Title = title
		cols = append(cols, "title")
	}
	if optText(probs, "description", b.Description, 0, &g.Description) {
		cols = append(cols, "description")
	}
	enum := func(name string, f patchField[string], list []string, dst *string) {
		if !f.Set {
			return
		}
		if f.Null {
			probs.add(name, "must be one of "+strings.Join(list, ", "))
			return
		}
		if oneOf(probs, name, f.Value, list) {
			*dst = f.Value
			cols = append(cols, name)
		}
	}
	enum("level", b.Level, goalLevels, &g.Level)
	enum("status", b.Status, goalStatuses, &g.Status)
	ref := func(name, col string, f patchField[string], dst **string) {
		if !f.Set {
			return
		}
		cols = append(cols, col)
		if f.Null || strings.TrimSpace(f.Value) == "" {
			*dst = nil
			return
		}
		id := strings.ToLower(strings.TrimSpace(f.Value))
		if !isUUID(id) {
			probs.add(name, "must be a UUID")
		}
		*dst = &id
	}
	ref("parentId", "parent_id", b.ParentID, &g.ParentID)
	ref("ownerAgentId", "owner_agent_id", b.OwnerAgentID, &g.OwnerAgentID)
	return cols
}

// goalGet loads a goal by id (nil when missing).
func goalGet(ctx context.Context, db bun.IDB, id string) (*Goal, error) {
	if !isUUID(id) {
		return nil, nil
	}
	g := new(Goal)
	if err := db.NewSelect().Model(g).Where("id = ?", id).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading goal %s: %w", id, err)
	}
	return g, nil
}

// goalByRef loads the goal a route names and checks company access (404, 403).
func (w *Work) goalByRef(ctx context.Context, id string) (*Goal, error) {
	g, err := goalGet(ctx, w.db, id)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, notFound("Goal not found")
	}
	if err := requireCompanyAccess(ctx, g.CompanyID); err != nil {
		return nil, err
	}
	return g, nil
}

// goalCheckParent checks, inside a transaction holding the company's goal-tree lock, that
// the goal's parent is a goal of the same company and not the goal itself or one of its
// descendants.
func goalCheckParent(ctx context.Context, tx bun.Tx, probs *fieldProblems, g *Goal) error {
	if g.ParentID == nil || !isUUID(*g.ParentID) {
		return nil
	}
	if _, err := tx.NewRaw(`SELECT pg_advisory_xact_lock(hashtext('work.goals.tree'), hashtext(?))`, g.CompanyID).Exec(ctx); err != nil {
		return fmt.Errorf("error locking goals of company %s: %w", g.CompanyID, err)
	}
	parent, err := goalGet(ctx, tx, *g.ParentID)
	if err != nil {
		return err
	}
	if parent == nil || parent.CompanyID != g.CompanyID {
		probs.add("parentId", "must be a goal of this company")
		return nil
	}
	var cycle bool
	if err := tx.NewRaw(`WITH RECURSIVE up (id, parent_id, depth) AS (
			SELECT id, parent_id, 1 FROM goals WHERE id = ?
			UNION ALL
			SELECT g.id, g.parent_id, up.depth + 1 FROM goals g JOIN up ON g.id = up.parent_id WHERE up.depth < 10000
		) SELECT EXISTS (SELECT 1 FROM up WHERE id = ?)`, parent.ID, g.ID).Scan(ctx, &cycle); err != nil {
		return fmt.Errorf("error checking the ancestors of goal %s: %w", parent.ID, err)
	}
	if cycle {
		probs.add("parentId", "would make the goal its own ancestor")
	}
	return nil
}

func handleGoalList(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	limit, offset, err := page(r, 200, 500)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	qs := r.URL.Query()
	q := w.db.NewSelect().Model((*Goal)(nil)).Where("company_id = ?", r.PathValue("companyId"))
	var probs fieldProblems
	for _, f := range []struct {
		name, col string
		list      []string
	}{{"status", "status", goalStatuses}, {"level", "level", goalLevels}} {
		if s := qs.Get(f.name); s != "" {
			vals := strings.Split(strings.ReplaceAll(s, " ", ""), ",")
			for _, v := range vals {
				oneOf(&probs, f.name, v, f.list)
			}
			q = q.Where("? IN (?)", bun.Ident(f.col), bun.In(vals))
		}
	}
	switch s := qs.Get("parentId"); {
	case s == "":
	case s == "null":
		q = q.Where("parent_id IS NULL")
	case isUUID(s):
		q = q.Where("parent_id = ?", s)
	default:
		probs.add("parentId", "must be a goal id or null")
	}
	if err := probs.err(); err != nil {
		w.writeErr(rw, err)
		return
	}
	goals := []*Goal{}
	if err := q.Order("created_at DESC", "id DESC").Limit(int64(limit)).Offset(int64(offset)).Scan(ctx, &goals); err != nil {
		w.writeErr(rw, fmt.Errorf("error listing goals: %w", err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, goals)
}

func handleGoalCreate(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body goalBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	g := &Goal{ID: uuid.NewString(), CompanyID: r.PathValue("companyId"), Level: "task", Status: "planned"}
	var probs fieldProblems
	body.apply(&probs, g, true)
	if err := w.checkCompanyAgent(ctx, &probs, "ownerAgentId", g.CompanyID, g.OwnerAgentID); err != nil {
		w.writeErr(rw, err)
		return
	}
	if err := probs.err(); err != nil {
		w.writeErr(rw, err)
		return
	}
	err := w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := goalCheckParent(ctx, tx, &probs, g); err != nil {
			return err
		}
		if err := probs.err(); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(g).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("error inserting goal: %w", err)
		}
		return idem.Record(ctx, tx, http.StatusCreated, "/api/goals/"+g.ID)
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	w.activityOrLog(ctx, g.CompanyID, "goal.created", "goal", g.ID, map[string]any{"title": g.Title, "level": g.Level})
	sdk.WriteJSON(rw, http.StatusCreated, g)
}

func handleGoalGet(w *Work, rw http.ResponseWriter, r *http.Request) {
	g, err := w.goalByRef(r.Context(), r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, g)
}

func handleGoalPatch(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	cur, err := w.goalByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	var body goalBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	var probs fieldProblems
	if body.OwnerAgentID.Set && !body.OwnerAgentID.Null && strings.TrimSpace(body.OwnerAgentID.Value) != "" {
		id := strings.TrimSpace(body.OwnerAgentID.Value)
		if err := w.checkCompanyAgent(ctx, &probs, "ownerAgentId", cur.CompanyID, &id); err != nil {
			w.writeErr(rw, err)
			return
		}
	}
	var g *Goal
	var cols []string
	err = w.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		g = new(Goal)
		if err := tx.NewSelect().Model(g).Where("id = ?", cur.ID).For("UPDATE").Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("Goal not found")
			}
			return fmt.Errorf("error reading goal %s: %w", cur.ID, err)
		}
		cols = uniqueStrings(body.apply(&probs, g, false))
		if body.ParentID.Set {
			if err := goalCheckParent(ctx, tx, &probs, g); err != nil {
				return err
			}
		}
		if err := probs.err(); err != nil {
			return err
		}
		if len(cols) == 0 {
			return nil
		}
		g.UpdatedAt = time.Now().UTC()
		if _, err := tx.NewUpdate().Model(g).Column(append(cols, "updated_at")...).WherePK().Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("error updating goal %s: %w", g.ID, err)
		}
		return nil
	})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	if len(cols) > 0 {
		w.activityOrLog(ctx, g.CompanyID, "goal.updated", "goal", g.ID, map[string]any{"changes": cols})
	}
	sdk.WriteJSON(rw, http.StatusOK, g)
}

func handleGoalDelete(w *Work, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	g, err := w.goalByRef(ctx, r.PathValue("id"))
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	res, err := w.db.NewDelete().Model((*Goal)(nil)).Where("id = ?", g.ID).Exec(ctx)
	if err != nil {
		w.writeErr(rw, fmt.Errorf("error deleting goal %s: %w", g.ID, err))
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		w.writeErr(rw, notFound("Goal not found"))
		return
	}
	w.activityOrLog(ctx, g.CompanyID, "goal.deleted", "goal", g.ID, map[string]any{"title": g.Title})
	sdk.WriteJSON(rw, http.StatusOK, g)
}

// goalListQuery documents the query parameters of the goal list.
type goalListQuery struct {
	ParentID string `query:"parentId"`
}
