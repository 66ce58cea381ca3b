package work

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
)

// Label is a company's issue label (REFERENCE.md 2.2 "Labels").
type Label struct {
	bun.BaseModel `bun:"table:labels"`

	ID        string    `bun:"id,pk,type:uuid" json:"id"`
	CompanyID string    `bun:"company_id,type:uuid" json:"companyId"`
	Name      string    `bun:"name" json:"name"`
	Color     string    `bun:"color" json:"color"`
	CreatedAt time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
}

// LabelCreateBody is the body of POST /api/companies/{companyId}/labels.
type LabelCreateBody struct {
	// Name is unique per company, case-insensitively; at most 48 characters.
	Name string `json:"name" jsonschema:"minLength=1,maxLength=48"`
	// Color is #RRGGBB.
	Color string `json:"color" jsonschema:"pattern=^#[0-9A-Fa-f]{6}$"`
}

var labelColorRE = regexp.MustCompile(`^#[0-9A-Fa-f]{6}$`)

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/labels", Response: new([]Label), CompanyFromPath: true,
			Summary: "List a company's issue labels by name", Handle: (*Work).labelList},
		route{Method: "POST", Path: "/api/companies/{companyId}/labels", Status: http.StatusCreated, Response: new(Label), CompanyFromPath: true,
			Summary: "Create an issue label (name unique per company, color #RRGGBB)", Body: LabelCreateBody{}, Handle: (*Work).labelCreate},
		route{Method: "DELETE", Path: "/api/labels/{labelId}", Response: new(Label),
			Summary: "Delete an issue label; issues lose it", Handle: (*Work).labelDelete},
	)
	addMethods(map[string]method{
		"labels.list": {
			Description: "List the labels of the call's company (the cases extension labels cases with them). Input: {}. " +
				"Output: [{id, companyId, name, color, createdAt}] by name.",
			Call: (*Work).methodLabelsList,
		},
	})
}

// methodLabelsList lists the call's company's labels.
func (w *Work) methodLabelsList(ctx context.Context, call *sdk.MethodCall) (any, error) {
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return nil, err
	}
	return newIssueStore(w.db).LabelList(ctx, &LabelListParams{CompanyID: companyID})
}

func (w *Work) labelList(rw http.ResponseWriter, r *http.Request) {
	list, err := newIssueStore(w.db).LabelList(r.Context(), &LabelListParams{CompanyID: sdk.CompanyIDFrom(r.Context())})
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

func (w *Work) labelCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body LabelCreateBody
	if err := decodeBody(r, &body); err != nil {
		w.writeErr(rw, err)
		return
	}
	l, err := w.labelInsert(ctx, sdk.CompanyIDFrom(ctx), &body)
	if err != nil {
		w.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, l)
}

// labelInsert validates and creates a label and records label.created.
func (w *Work) labelInsert(ctx context.Context, companyID string, body *LabelCreateBody) (*Label, error) {
	name := strings.TrimSpace(body.Name)
	var details []validationDetail
	switch {
	case name == "":
		details = append(details, validationDetail{Path: "name", Message: "is required"})
	case utf8.RuneCountInString(name) > 48:
		details = append(details, validationDetail{Path: "name", Message: "must be at most 48 characters"})
	}
	if !labelColorRE.MatchString(body.Color) {
		details = append(details, validationDetail{Path: "color", Message: "must be a hex color #RRGGBB"})
	}
	if len(details) > 0 {
		return nil, validationError(details...)
	}
	l := &Label{ID: uuid.NewString(), CompanyID: companyID, Name: name, Color: strings.ToLower(body.Color)}
	if err := newIssueStore(w.db).LabelInsert(ctx, &LabelInsertParams{Label: l}); err != nil {
		if issueUniqueViolation(err, "labels_company_name_key") {
			return nil, conflict("Label name already exists in this company")
		}
		return nil, err
	}
	w.activityOrLog(ctx, companyID, "label.created", "label", l.ID, map[string]any{"name": l.Name, "color": l.Color})
	return l, nil
}

func (w *Work) labelDelete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("labelId")
	st := newIssueStore(w.db)
	var l *Label
	var err error
	if isUUID(id) {
		l, err = st.LabelGet(ctx, &LabelGetParams{ID: id})
		if err != nil {
			w.writeErr(rw, err)
			return
		}
	}
	if l == nil {
		w.writeErr(rw, notFound("Label not found"))
		return
	}
	if err := requireCompanyAccess(ctx, l.CompanyID); err != nil {
		w.writeErr(rw, err)
		return
	}
	if err := st.LabelDelete(ctx, &LabelDeleteParams{ID: l.ID}); err != nil {
		w.writeErr(rw, err)
		return
	}
	w.activityOrLog(ctx, l.CompanyID, "label.deleted", "label", l.ID, map[string]any{"name": l.Name})
	sdk.WriteJSON(rw, http.StatusOK, l)
}
