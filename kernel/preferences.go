package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Personal preferences of board users (spec part 2 "Access, profile, …": sidebar
// preferences and inbox dismissals). They belong to the user, not to the company: a viewer
// may keep them too, and nobody reads another user's.

// MaxSidebarOrderedIDs is the most ids a sidebar order may hold.
const MaxSidebarOrderedIDs = 500

// SidebarPreferences is a user's sidebar order: at the instance level the order of their
// companies, at the company level the order of the company's projects. UpdatedAt is null
// until the order was first saved.
type SidebarPreferences struct {
	OrderedIDs []string   `json:"orderedIds"`
	UpdatedAt  *time.Time `json:"updatedAt"`
}

// boardUserID returns the board user a personal route acts for (session, board key or
// the local board).
func boardUserID(ctx context.Context) (string, error) {
	a := ActorFrom(ctx)
	if !a.IsBoard() || a.UserID == "" {
		return "", Forbidden("Board user context required")
	}
	return a.UserID, nil
}

// sidebarPreferencesGet reads a user's sidebar order at the instance level (companyID
// empty) or in a company.
func (k *Kernel) sidebarPreferencesGet(ctx context.Context, userID, companyID string) (*SidebarPreferences, error) {
	var raw []byte
	var updated time.Time
	err := k.Pool.QueryRow(ctx, `SELECT ordered_ids, updated_at FROM kernel.sidebar_preferences
		WHERE user_id = $1 AND company_id IS NOT DISTINCT FROM $2::uuid`, userID, nullIfEmpty(companyID)).Scan(&raw, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return &SidebarPreferences{OrderedIDs: []string{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading sidebar preferences of user %s: %w", userID, err)
	}
	p := &SidebarPreferences{OrderedIDs: []string{}}
	if err := json.Unmarshal(raw, &p.OrderedIDs); err != nil {
		return nil, fmt.Errorf("error decoding sidebar preferences of user %s: %w", userID, err)
	}
	updated = updated.UTC()
	p.UpdatedAt = &updated
	return p, nil
}

// sidebarPreferencesPut replaces a user's sidebar order at the instance level (companyID
// empty) or in a company.
func (k *Kernel) sidebarPreferencesPut(ctx context.Context, userID, companyID string, ids []string) (*SidebarPreferences, error) {
	raw, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("error encoding sidebar order: %w", err)
	}
	conflict := `(user_id) WHERE company_id IS NULL`
	if companyID != "" {
		conflict = `(user_id, company_id) WHERE company_id IS NOT NULL`
	}
	var updated time.Time
	err = k.Pool.QueryRow(ctx, `INSERT INTO kernel.sidebar_preferences (user_id, company_id, ordered_ids) VALUES ($1, $2::uuid, $3)
		ON CONFLICT `+conflict+` DO UPDATE SET ordered_ids = EXCLUDED.ordered_ids, updated_at = now()
		RETURNING updated_at`, userID, nullIfEmpty(companyID), raw).Scan(&updated)
	if err != nil {
		return nil, fmt.Errorf("error saving sidebar preferences of user %s: %w", userID, err)
	}
	updated = updated.UTC()
	return &SidebarPreferences{OrderedIDs: ids, UpdatedAt: &updated}, nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// validateOrderedIDs checks a sidebar order: required, at most MaxSidebarOrderedIDs UUIDs,
// none repeated. It returns the ids lowercased.
func validateOrderedIDs(ids *[]string) ([]string, error) {
	var d detailList
	if ids == nil {
		d.add("orderedIds", "is required")
		return nil, d.err()
	}
	if len(*ids) > MaxSidebarOrderedIDs {
		d.add("orderedIds", fmt.Sprintf("must hold at most %d ids", MaxSidebarOrderedIDs))
		return nil, d.err()
	}
	out := make([]string, 0, len(*ids))
	seen := make(map[string]bool, len(*ids))
	for i, id := range *ids {
		id = strings.ToLower(strings.TrimSpace(id))
		switch {
		case !isUUID(id):
			d.add(fmt.Sprintf("orderedIds[%d]", i), "must be a UUID")
		case seen[id]:
			d.add(fmt.Sprintf("orderedIds[%d]", i), "must not repeat an id")
		}
		seen[id] = true
		out = append(out, id)
	}
	return out, d.err()
}

type sidebarPreferencesRequest struct {
	CompanyID string `path:"companyId" json:"-"`
	// OrderedIDs is the order of the sidebar's entries (companies at the instance level,
	// projects in a company): up to 500 UUIDs, none repeated.
	OrderedIDs *[]string `json:"orderedIds,omitempty"`
}

type sidebarPreferencesGetEndpoint struct {
	k       *Kernel
	company bool
}

func (e *sidebarPreferencesGetEndpoint) Meta() *EndpointMeta {
	if e.company {
		return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/sidebar-preferences/me", Access: AccessBoard,
			CompanyFrom: CompanyFromPath, Summary: "Read your sidebar order of this company's projects"}
	}
	return &EndpointMeta{Pattern: "GET /api/sidebar-preferences/me", Access: AccessBoard,
		Summary: "Read your sidebar order of companies"}
}

func (e *sidebarPreferencesGetEndpoint) Execute(ctx context.Context, req *sidebarPreferencesRequest) (*SidebarPreferences, error) {
	userID, err := boardUserID(ctx)
	if err != nil {
		return nil, err
	}
	return e.k.sidebarPreferencesGet(ctx, userID, req.CompanyID)
}

type sidebarPreferencesPutEndpoint struct {
	k       *Kernel
	pattern string
}

func (e *sidebarPreferencesPutEndpoint) Meta() *EndpointMeta {
	m := &EndpointMeta{Pattern: e.pattern, Access: AccessBoard, Personal: true,
		Summary: "Save your sidebar order of companies (orderedIds: up to 500 company ids)"}
	if strings.Contains(e.pattern, "{companyId}") {
		m.CompanyFrom = CompanyFromPath
		m.Summary = "Save your sidebar order of this company's projects (orderedIds: up to 500 project ids)"
	}
	return m
}

func (e *sidebarPreferencesPutEndpoint) Execute(ctx context.Context, req *sidebarPreferencesRequest) (*SidebarPreferences, error) {
	userID, err := boardUserID(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := validateOrderedIDs(req.OrderedIDs)
	if err != nil {
		return nil, err
	}
	return e.k.sidebarPreferencesPut(ctx, userID, req.CompanyID, ids)
}

// Inbox item key prefixes: what a dismissal may name.
var inboxItemKeyPrefixes = []string{"approval:", "join:", "run:", "attention:"}

// Inbox dismissal kinds.
const (
	InboxDismiss = "dismiss"
	InboxSnooze  = "snooze"
)

// maxInboxItemKeyLen bounds an inbox item key.
const maxInboxItemKeyLen = 500

// InboxDismissal is a user's dismissal or snooze of one inbox item of a company. A
// dismissal hides the item for good; a snooze hides it until SnoozedUntil.
type InboxDismissal struct {
	ID        string `json:"id"`
	CompanyID string `json:"companyId"`
	UserID    string `json:"userId"`
	// ItemKey names the item: approval:<id>, join:<id>, run:<id> or attention:<key>.
	ItemKey      string     `json:"itemKey"`
	Kind         string     `json:"kind" jsonschema:"enum=dismiss,enum=snooze"`
	SnoozedUntil *time.Time `json:"snoozedUntil"`
	DismissedAt  time.Time  `json:"dismissedAt"`
	CreatedAt    time.Time  `json:"createdAt"`
	UpdatedAt    time.Time  `json:"updatedAt"`
}

const inboxDismissalColumns = `id::text, company_id::text, user_id, item_key, kind, snoozed_until, dismissed_at, created_at, updated_at`

func scanInboxDismissal(row pgx.Row) (*InboxDismissal, error) {
	var d InboxDismissal
	if err := row.Scan(&d.ID, &d.CompanyID, &d.UserID, &d.ItemKey, &d.Kind, &d.SnoozedUntil, &d.DismissedAt, &d.CreatedAt, &d.UpdatedAt); err != nil {
		return nil, err
	}
	if d.SnoozedUntil != nil {
		u := d.SnoozedUntil.UTC()
		d.SnoozedUntil = &u
	}
	d.DismissedAt, d.CreatedAt, d.UpdatedAt = d.DismissedAt.UTC(), d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return &d, nil
}

// activeInboxDismissals lists the user's dismissals in the company that are in effect now:
// every dismissal, and snoozes whose time has not come, newest first.
func (k *Kernel) activeInboxDismissals(ctx context.Context, companyID, userID string) ([]*InboxDismissal, error) {
	rows, err := k.Pool.Query(ctx, `SELECT `+inboxDismissalColumns+` FROM kernel.inbox_dismissals
		WHERE company_id = $1 AND user_id = $2 AND (kind = 'dismiss' OR snoozed_until > now())
		ORDER BY updated_at DESC, id DESC`, companyID, userID)
	if err != nil {
		return nil, fmt.Errorf("error listing inbox dismissals: %w", err)
	}
	defer rows.Close()
	out := []*InboxDismissal{}
	for rows.Next() {
		d, err := scanInboxDismissal(rows)
		if err != nil {
			return nil, fmt.Errorf("error listing inbox dismissals: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

type inboxDismissalListRequest struct {
	CompanyID string `path:"companyId"`
}

type inboxDismissalListEndpoint struct{ k *Kernel }

func (e *inboxDismissalListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/companies/{companyId}/inbox-dismissals", Access: AccessBoard, CompanyFrom: CompanyFromPath,
		Summary: "List your dismissed and snoozed inbox items of this company that are in effect (expired snoozes are left out)"}
}

func (e *inboxDismissalListEndpoint) Execute(ctx context.Context, req *inboxDismissalListRequest) (*[]*InboxDismissal, error) {
	userID, err := boardUserID(ctx)
	if err != nil {
		return nil, err
	}
	out, err := e.k.activeInboxDismissals(ctx, req.CompanyID, userID)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

type inboxDismissalCreateRequest struct {
	CompanyID string `path:"companyId" json:"-"`
	// ItemKey names the item: approval:<id>, join:<id>, run:<id> or attention:<key>.
	ItemKey string `json:"itemKey"`
	// Kind is dismiss (default) or snooze.
	Kind string `json:"kind,omitempty" jsonschema:"enum=dismiss,enum=snooze"`
	// SnoozedUntil is a future ISO 8601 timestamp, required with snooze and refused with dismiss.
	SnoozedUntil json.RawMessage `json:"snoozedUntil,omitempty" jsonschema:"type=string,format=date-time"`
}

// validate checks the body and returns the item key, the kind and the snooze time.
func (r *inboxDismissalCreateRequest) validate(now time.Time) (key, kind string, until *time.Time, err error) {
	var d detailList
	key = strings.TrimSpace(r.ItemKey)
	switch {
	case key == "":
		d.add("itemKey", "is required")
	case len(key) > maxInboxItemKeyLen || !hasInboxItemPrefix(key):
		d.add("itemKey", "Unsupported inbox item key")
	}
	kind = strings.TrimSpace(r.Kind)
	if kind == "" {
		kind = InboxDismiss
	}
	raw := strings.TrimSpace(string(r.SnoozedUntil))
	present := raw != "" && raw != "null"
	switch kind {
	case InboxDismiss:
		if present {
			d.add("snoozedUntil", "snoozedUntil is only allowed when kind is snooze")
		}
	case InboxSnooze:
		var s string
		switch {
		case !present:
			d.add("snoozedUntil", "snoozedUntil is required when kind is snooze")
		case json.Unmarshal(r.SnoozedUntil, &s) != nil:
			d.add("snoozedUntil", "snoozedUntil must be an ISO timestamp")
		default:
			t, perr := time.Parse(time.RFC3339Nano, s)
			switch {
			case perr != nil:
				d.add("snoozedUntil", "snoozedUntil must be an ISO timestamp")
			case !t.After(now):
				d.add("snoozedUntil", "snoozedUntil must be in the future")
			default:
				t = t.UTC()
				until = &t
			}
		}
	default:
		d.add("kind", "kind must be dismiss or snooze")
	}
	return key, kind, until, d.err()
}

func hasInboxItemPrefix(key string) bool {
	for _, p := range inboxItemKeyPrefixes {
		if strings.HasPrefix(key, p) && len(key) > len(p) {
			return true
		}
	}
	return false
}

type inboxDismissalCreateEndpoint struct{ k *Kernel }

func (e *inboxDismissalCreateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/companies/{companyId}/inbox-dismissals", Status: http.StatusCreated, Access: AccessBoard,
		CompanyFrom: CompanyFromPath, Personal: true,
		Summary: "Dismiss an inbox item for yourself, or snooze it until a future time (itemKey approval:, join:, run: or attention:)"}
}

func (e *inboxDismissalCreateEndpoint) Execute(ctx context.Context, req *inboxDismissalCreateRequest) (*InboxDismissal, error) {
	userID, err := boardUserID(ctx)
	if err != nil {
		return nil, err
	}
	key, kind, until, err := req.validate(time.Now())
	if err != nil {
		return nil, err
	}
	d, err := scanInboxDismissal(e.k.Pool.QueryRow(ctx, `INSERT INTO kernel.inbox_dismissals (id, company_id, user_id, item_key, kind, snoozed_until)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (company_id, user_id, item_key) DO UPDATE SET kind = EXCLUDED.kind, snoozed_until = EXCLUDED.snoozed_until,
			dismissed_at = now(), updated_at = now()
		RETURNING `+inboxDismissalColumns, newID(), req.CompanyID, userID, key, kind, until))
	if err != nil {
		return nil, fmt.Errorf("error saving inbox dismissal: %w", err)
	}
	action := "inbox.dismissed"
	if kind == InboxSnooze {
		action = "inbox.snoozed"
	}
	if _, err := e.k.ActivityInsert(ctx, &ActivityInsertParams{CompanyID: req.CompanyID, ActorType: "user", ActorID: userID,
		Action: action, EntityType: "company", EntityID: req.CompanyID,
		Details: map[string]any{"userId": userID, "itemKey": d.ItemKey, "kind": d.Kind, "snoozedUntil": d.SnoozedUntil}}); err != nil {
		return nil, err
	}
	return d, nil
}

type inboxDismissalDeleteRequest struct {
	CompanyID string `path:"companyId"`
	ItemKey   string `path:"itemKey"`
}

type inboxDismissalDeleteEndpoint struct{ k *Kernel }

func (e *inboxDismissalDeleteEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "DELETE /api/companies/{companyId}/inbox-dismissals/{itemKey}", Status: http.StatusNoContent,
		Access: AccessBoard, CompanyFrom: CompanyFromPath, Personal: true,
		Summary: "Restore an inbox item you dismissed or snoozed"}
}

func (e *inboxDismissalDeleteEndpoint) Execute(ctx context.Context, req *inboxDismissalDeleteRequest) (*struct{}, error) {
	userID, err := boardUserID(ctx)
	if err != nil {
		return nil, err
	}
	// The key may arrive percent-encoded (approval%3A…): the path is matched as sent.
	key := req.ItemKey
	if k, err := url.PathUnescape(key); err == nil {
		key = k
	}
	tag, err := e.k.Pool.Exec(ctx, `DELETE FROM kernel.inbox_dismissals WHERE company_id = $1 AND user_id = $2 AND item_key = $3`,
		req.CompanyID, userID, key)
	if err != nil {
		return nil, fmt.Errorf("error deleting inbox dismissal: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, NotFound("Inbox dismissal not found")
	}
	if _, err := e.k.ActivityInsert(ctx, &ActivityInsertParams{CompanyID: req.CompanyID, ActorType: "user", ActorID: userID,
		Action: "inbox.restored", EntityType: "company", EntityID: req.CompanyID,
		Details: map[string]any{"userId": userID, "itemKey": key}}); err != nil {
		return nil, err
	}
	return nil, nil
}

func (k *Kernel) preferenceRoutes() []*Route {
	return []*Route{
		Mount[sidebarPreferencesRequest, SidebarPreferences](&sidebarPreferencesGetEndpoint{k: k}),
		Mount[sidebarPreferencesRequest, SidebarPreferences](&sidebarPreferencesPutEndpoint{k: k, pattern: "PATCH /api/sidebar-preferences/me"}),
		// PUT is the reference product's verb for the same replacement.
		Mount[sidebarPreferencesRequest, SidebarPreferences](&sidebarPreferencesPutEndpoint{k: k, pattern: "PUT /api/sidebar-preferences/me"}),
		Mount[sidebarPreferencesRequest, SidebarPreferences](&sidebarPreferencesGetEndpoint{k: k, company: true}),
		Mount[sidebarPreferencesRequest, SidebarPreferences](&sidebarPreferencesPutEndpoint{k: k,
			pattern: "PUT /api/companies/{companyId}/sidebar-preferences/me"}),
		Mount[inboxDismissalListRequest, []*InboxDismissal](&inboxDismissalListEndpoint{k}),
		Mount[inboxDismissalCreateRequest, InboxDismissal](&inboxDismissalCreateEndpoint{k}),
		Mount[inboxDismissalDeleteRequest, struct{}](&inboxDismissalDeleteEndpoint{k}),
		Mount[sidebarBadgesRequest, SidebarBadges](&sidebarBadgesEndpoint{k}),
	}
}
