package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/idem"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// SecretCreateBody is the body of POST /api/companies/{companyId}/secrets.
type SecretCreateBody struct {
	// Name is required, at most 200 characters.
	Name string `json:"name" jsonschema:"minLength=1,maxLength=200"`
	// Key is the alias (default derived from the name), unique per company.
	Key *string `json:"key,omitempty" jsonschema:"pattern=^[A-Za-z_][A-Za-z0-9_]*$"`
	// Provider is local_encrypted (the only provider).
	Provider *string `json:"provider,omitempty" jsonschema:"enum=local_encrypted"`
	// ManagedMode is service_managed (default) or external_reference.
	ManagedMode *string `json:"managedMode,omitempty" jsonschema:"enum=service_managed,enum=external_reference"`
	// Value is the secret value, required unless managedMode is external_reference.
	Value       *string `json:"value,omitempty"`
	Description *string `json:"description,omitempty"`
	ExternalRef *string `json:"externalRef,omitempty"`
}

// SecretPatchBody is the body of PATCH /api/secrets/{id}.
type SecretPatchBody struct {
	Name        *string `json:"name,omitempty" jsonschema:"minLength=1,maxLength=200"`
	Description *string `json:"description,omitempty"`
	Status      *string `json:"status,omitempty" jsonschema:"enum=active,enum=disabled"`
}

// SecretRotateBody is the body of POST /api/secrets/{id}/rotate.
type SecretRotateBody struct {
	Value *string `json:"value,omitempty"`
}

// BindingCreateBody is the body of POST /api/secrets/{id}/bindings.
type BindingCreateBody struct {
	TargetType string  `json:"targetType" jsonschema:"enum=agent,enum=project,enum=routine,enum=plugin,enum=system"`
	TargetID   string  `json:"targetId"`
	ConfigPath *string `json:"configPath,omitempty"`
	// VersionSelector is "latest" (default) or a version number.
	VersionSelector json.RawMessage `json:"versionSelector,omitempty"`
	Required        *bool           `json:"required,omitempty"`
	// Delivery is env, api or both (default both).
	Delivery *string `json:"delivery,omitempty" jsonschema:"enum=env,enum=api,enum=both"`
}

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/secrets", Query: secretListQuery{}, Response: new([]*Secret), Access: sdk.AccessBoard, CompanyFromPath: true,
			Summary: "List a company's secrets (never their values)", Handle: (*Secrets).list},
		route{Method: "POST", Path: "/api/companies/{companyId}/secrets", Status: http.StatusCreated, Response: new(Secret), Access: sdk.AccessBoard, CompanyFromPath: true, Permission: permManageSecrets,
			Summary: "Create a company secret; the value is stored encrypted and never returned", Body: SecretCreateBody{}, Handle: (*Secrets).create},
		route{Method: "GET", Path: "/api/secrets/{id}", Response: new(Secret), Access: sdk.AccessBoard,
			Summary: "Read a secret's record (never its value)", Handle: (*Secrets).get},
		route{Method: "PATCH", Path: "/api/secrets/{id}", Response: new(Secret), Access: sdk.AccessBoard,
			Summary: "Update a secret's name, description or status (active|disabled)", Body: SecretPatchBody{}, Handle: (*Secrets).patch},
		route{Method: "DELETE", Path: "/api/secrets/{id}", Response: new(Secret), Access: sdk.AccessBoard,
			Summary: "Delete a secret: its status becomes deleted and its versions are destroyed", Handle: (*Secrets).delete},
		route{Method: "POST", Path: "/api/secrets/{id}/rotate", Response: new(Secret), Access: sdk.AccessBoard,
			Summary: "Store a new version of a secret; the previous one is kept as previous", Body: SecretRotateBody{}, Handle: (*Secrets).rotate},
		route{Method: "GET", Path: "/api/secrets/{id}/usage", Response: new(map[string]any), Access: sdk.AccessBoard,
			Summary: "List a secret's bindings", Handle: (*Secrets).usage},
		route{Method: "GET", Path: "/api/secrets/{id}/access-events", Response: new([]*AccessEvent), Access: sdk.AccessBoard,
			Summary: "List a secret's access audit, newest first", Handle: (*Secrets).accessEvents},
		route{Method: "POST", Path: "/api/secrets/{id}/bindings", Status: http.StatusCreated, Response: new(Binding), Access: sdk.AccessBoard,
			Summary: "Grant a secret to an agent or another target", Body: BindingCreateBody{}, Handle: (*Secrets).bindingCreate},
		route{Method: "DELETE", Path: "/api/secrets/{id}/bindings/{bindingId}", Response: new(Binding), Access: sdk.AccessBoard,
			Summary: "Remove a secret binding", Handle: (*Secrets).bindingDelete},
	)
}

var keyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

const maxNameLen = 200

// deriveKey turns a name into an alias: upper case, runs of other characters become "_".
func deriveKey(name string) string {
	var b strings.Builder
	under := false
	for _, r := range name {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(unicode.ToUpper(r))
			under = false
		} else if !under && b.Len() > 0 {
			b.WriteByte('_')
			under = true
		}
	}
	k := strings.TrimRight(b.String(), "_")
	if k == "" {
		return "SECRET"
	}
	if k[0] >= '0' && k[0] <= '9' {
		k = "_" + k
	}
	if len(k) > maxNameLen {
		k = k[:maxNameLen]
	}
	return k
}

func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

// loadSecret loads the secret of the {id} path and checks the actor's access to its company.
func (s *Secrets) loadSecret(r *http.Request) (*Secret, error) {
	sec, err := getSecret(r.Context(), s.pool, r.PathValue("id"), false)
	if err != nil {
		return nil, err
	}
	if sec == nil {
		return nil, notFound("Secret not found")
	}
	if err := requireCompanyAccess(r.Context(), sec.CompanyID); err != nil {
		return nil, err
	}
	if sdk.IsWriteRequest(r.Context()) {
		if err := s.host.RequirePermission(r.Context(), sec.CompanyID, permManageSecrets); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// permManageSecrets is the key a board user needs to create, change, rotate, bind or delete
// secrets: owners and admins hold it, operators and viewers do not. Secrets are
// configuration of the company's agents.
const permManageSecrets = "agents:configure"

func (s *Secrets) list(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sql := `SELECT ` + secretCols + ` FROM company_secrets WHERE company_id = $1`
	if r.URL.Query().Get("includeDeleted") != "true" {
		sql += ` AND deleted_at IS NULL`
	}
	rows, err := s.pool.Query(ctx, sql+` ORDER BY name, created_at`, sdk.CompanyIDFrom(ctx))
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	defer rows.Close()
	out := []*Secret{}
	for rows.Next() {
		sec, err := scanSecret(rows)
		if err != nil {
			s.writeErr(rw, err)
			return
		}
		out = append(out, sec)
	}
	if err := rows.Err(); err != nil {
		s.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (s *Secrets) create(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body SecretCreateBody
	if err := decodeBody(r, &body); err != nil {
		s.writeErr(rw, err)
		return
	}
	sec, err := s.insertSecret(ctx, sdk.CompanyIDFrom(ctx), &body)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, sec)
}

// insertSecret validates the body, stores the secret and its first version (encrypted)
// and records secret.created.
func (s *Secrets) insertSecret(ctx context.Context, companyID string, body *SecretCreateBody) (*Secret, error) {
	name := strings.TrimSpace(body.Name)
	var details []validationDetail
	switch {
	case name == "":
		details = append(details, validationDetail{Path: "name", Message: "is required"})
	case utf8.RuneCountInString(name) > maxNameLen:
		details = append(details, validationDetail{Path: "name", Message: "must be at most 200 characters"})
	}
	key := deriveKey(name)
	if body.Key != nil {
		key = strings.TrimSpace(*body.Key)
		if !keyRE.MatchString(key) || len(key) > maxNameLen {
			details = append(details, validationDetail{Path: "key", Message: "must match ^[A-Za-z_][A-Za-z0-9_]*$ (at most 200 characters)"})
		}
	}
	if body.Provider != nil && *body.Provider != "local_encrypted" {
		details = append(details, validationDetail{Path: "provider", Message: "must be local_encrypted"})
	}
	mode := "service_managed"
	if body.ManagedMode != nil {
		mode = *body.ManagedMode
	}
	switch mode {
	case "service_managed":
		if body.Value == nil || *body.Value == "" {
			details = append(details, validationDetail{Path: "value", Message: "is required"})
		}
	case "external_reference":
		if body.Value != nil {
			details = append(details, validationDetail{Path: "value", Message: "must be absent for an external reference"})
		}
		if body.ExternalRef == nil || strings.TrimSpace(*body.ExternalRef) == "" {
			details = append(details, validationDetail{Path: "externalRef", Message: "is required for an external reference"})
		}
	default:
		details = append(details, validationDetail{Path: "managedMode", Message: "must be service_managed or external_reference"})
	}
	if len(details) > 0 {
		return nil, validationError(details...)
	}
	actor := sdk.ActorFrom(ctx)
	id := uuid.NewString()
	latest := 0
	if body.Value != nil {
		latest = 1
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO company_secrets (id, company_id, key, name, description, managed_mode, external_ref,
		latest_version, last_rotated_at, created_by_user_id, created_by_agent_id)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8::int, CASE WHEN $8::int > 0 THEN now() END, $9, $10)`,
		id, companyID, key, name, trimmedOrNil(body.Description), mode, trimmedOrNil(body.ExternalRef), latest,
		nullable(actor.GetUserId()), nullable(actor.GetAgentId()))
	if err != nil {
		if isUniqueViolation(err, "company_secrets_company_key_key") {
			return nil, conflict("Secret key already exists in this company")
		}
		return nil, err
	}
	if latest > 0 {
		if err := s.insertVersion(ctx, tx, id, 1, *body.Value, actor.GetUserId()); err != nil {
			return nil, err
		}
	}
	sec, err := getSecret(ctx, tx, id, false)
	if err != nil {
		return nil, err
	}
	if err := idem.Record(ctx, tx, http.StatusCreated, "/api/secrets/"+id); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	s.activity(ctx, actor, companyID, "secret.created", "secret", sec.ID,
		map[string]any{"key": sec.Key, "name": sec.Name, "managedMode": sec.ManagedMode, "version": sec.LatestVersion})
	return sec, nil
}

func trimmedOrNil(p *string) *string {
	if p == nil {
		return nil
	}
	return nullable(strings.TrimSpace(*p))
}

// insertVersion encrypts value and stores it as the current version.
func (s *Secrets) insertVersion(ctx context.Context, tx pgx.Tx, secretID string, version int, value, userID string) error {
	m, err := s.sealer.seal([]byte(value), versionAAD(secretID, version))
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO company_secret_versions (id, secret_id, version, material, value_sha256, status, created_by_user_id)
		VALUES ($1,$2,$3,$4,$5,'current',$6)`, uuid.NewString(), secretID, version, m, s.sealer.digest([]byte(value)), nullable(userID))
	if err != nil {
		return err
	}
	return nil
}

func (s *Secrets) get(rw http.ResponseWriter, r *http.Request) {
	sec, err := s.loadSecret(r)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, sec)
}

func (s *Secrets) patch(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sec, err := s.loadSecret(r)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	var body SecretPatchBody
	if err := decodeBody(r, &body); err != nil {
		s.writeErr(rw, err)
		return
	}
	if sec.Status == "deleted" {
		s.writeErr(rw, conflict("Secret has been deleted"))
		return
	}
	var details []validationDetail
	changed := []string{}
	name, desc, status := sec.Name, sec.Description, sec.Status
	if body.Name != nil {
		n := strings.TrimSpace(*body.Name)
		switch {
		case n == "":
			details = append(details, validationDetail{Path: "name", Message: "is required"})
		case utf8.RuneCountInString(n) > maxNameLen:
			details = append(details, validationDetail{Path: "name", Message: "must be at most 200 characters"})
		}
		name = n
		changed = append(changed, "name")
	}
	if body.Description != nil {
		desc = trimmedOrNil(body.Description)
		changed = append(changed, "description")
	}
	if body.Status != nil {
		if *body.Status != "active" && *body.Status != "disabled" {
			details = append(details, validationDetail{Path: "status", Message: "must be active or disabled"})
		}
		status = *body.Status
		changed = append(changed, "status")
	}
	if len(details) > 0 {
		s.writeErr(rw, validationError(details...))
		return
	}
	updated, err := scanSecret(s.pool.QueryRow(ctx, `UPDATE company_secrets SET name = $2, description = $3, status = $4, updated_at = now()
		WHERE id = $1 AND deleted_at IS NULL RETURNING `+secretCols, sec.ID, name, desc, status))
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	if updated == nil {
		s.writeErr(rw, conflict("Secret has been deleted"))
		return
	}
	details2 := map[string]any{"key": updated.Key, "changes": changed}
	if status != sec.Status {
		details2["status"] = status
		details2["previousStatus"] = sec.Status
	}
	s.activity(ctx, sdk.ActorFrom(ctx), updated.CompanyID, "secret.updated", "secret", updated.ID, details2)
	sdk.WriteJSON(rw, http.StatusOK, updated)
}

func (s *Secrets) delete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sec, err := s.loadSecret(r)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	if sec.Status == "deleted" {
		sdk.WriteJSON(rw, http.StatusOK, sec)
		return
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	defer func() { _ = tx.Rollback(ctx) }()
	updated, err := scanSecret(tx.QueryRow(ctx, `UPDATE company_secrets SET status = 'deleted', deleted_at = now(), updated_at = now()
		WHERE id = $1 RETURNING `+secretCols, sec.ID))
	if err == nil {
		_, err = tx.Exec(ctx, `UPDATE company_secret_versions SET status = 'destroyed', material = NULL, revoked_at = now()
			WHERE secret_id = $1`, sec.ID)
	}
	if err == nil {
		_, err = tx.Exec(ctx, `DELETE FROM company_secret_bindings WHERE secret_id = $1`, sec.ID)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	s.activity(ctx, sdk.ActorFrom(ctx), sec.CompanyID, "secret.deleted", "secret", sec.ID, map[string]any{"key": sec.Key, "name": sec.Name})
	sdk.WriteJSON(rw, http.StatusOK, updated)
}

func (s *Secrets) rotate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sec, err := s.loadSecret(r)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	var body SecretRotateBody
	if err := decodeBody(r, &body); err != nil {
		s.writeErr(rw, err)
		return
	}
	if body.Value == nil || *body.Value == "" {
		s.writeErr(rw, invalid("value", "is required"))
		return
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	defer func() { _ = tx.Rollback(ctx) }()
	locked, err := getSecret(ctx, tx, sec.ID, true)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	if locked.Status == "deleted" {
		s.writeErr(rw, conflict("Secret has been deleted"))
		return
	}
	next := locked.LatestVersion + 1
	actor := sdk.ActorFrom(ctx)
	_, err = tx.Exec(ctx, `UPDATE company_secret_versions SET status = 'previous' WHERE secret_id = $1 AND status = 'current'`, sec.ID)
	if err == nil {
		err = s.insertVersion(ctx, tx, sec.ID, next, *body.Value, actor.GetUserId())
	}
	var updated *Secret
	if err == nil {
		updated, err = scanSecret(tx.QueryRow(ctx, `UPDATE company_secrets SET latest_version = $2, last_rotated_at = now(), updated_at = now()
			WHERE id = $1 RETURNING `+secretCols, sec.ID, next))
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	s.activity(ctx, actor, sec.CompanyID, "secret.rotated", "secret", sec.ID,
		map[string]any{"key": sec.Key, "version": next, "previousVersion": locked.LatestVersion})
	sdk.WriteJSON(rw, http.StatusOK, updated)
}

func (s *Secrets) usage(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sec, err := s.loadSecret(r)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	rows, err := s.pool.Query(ctx, `SELECT `+bindingCols+` FROM company_secret_bindings WHERE secret_id = $1 ORDER BY created_at, id`, sec.ID)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	defer rows.Close()
	out := []*Binding{}
	for rows.Next() {
		b, err := scanBinding(rows)
		if err != nil {
			s.writeErr(rw, err)
			return
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		s.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"secretId": sec.ID, "bindings": out})
}

func (s *Secrets) accessEvents(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sec, err := s.loadSecret(r)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	limit, err := limitParam(r, 50, 500)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	rows, err := s.pool.Query(ctx, `SELECT id, company_id, secret_id, secret_key, version, provider, actor_type, actor_id,
		consumer_type, consumer_id, requester, config_path, run_id, outcome, reason, created_at
		FROM secret_access_events WHERE secret_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, sec.ID, limit)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	defer rows.Close()
	out := []*AccessEvent{}
	for rows.Next() {
		var e AccessEvent
		if err := rows.Scan(&e.ID, &e.CompanyID, &e.SecretID, &e.SecretKey, &e.Version, &e.Provider, &e.ActorType, &e.ActorID,
			&e.ConsumerType, &e.ConsumerID, &e.Requester, &e.ConfigPath, &e.RunID, &e.Outcome, &e.Reason, &e.CreatedAt); err != nil {
			s.writeErr(rw, err)
			return
		}
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		s.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

var bindingTargets = map[string]bool{"agent": true, "project": true, "routine": true, "plugin": true, "system": true}

func (s *Secrets) bindingCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sec, err := s.loadSecret(r)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	var body BindingCreateBody
	if err := decodeBody(r, &body); err != nil {
		s.writeErr(rw, err)
		return
	}
	var details []validationDetail
	if !bindingTargets[body.TargetType] {
		details = append(details, validationDetail{Path: "targetType", Message: "must be one of agent, project, routine, plugin, system"})
	}
	targetID := strings.TrimSpace(body.TargetID)
	if targetID == "" {
		details = append(details, validationDetail{Path: "targetId", Message: "is required"})
	}
	sel, ok := parseSelector(body.VersionSelector)
	if !ok {
		details = append(details, validationDetail{Path: "versionSelector", Message: `must be "latest" or a positive version number`})
	}
	delivery := "both"
	if body.Delivery != nil {
		delivery = *body.Delivery
		if delivery != "env" && delivery != "api" && delivery != "both" {
			details = append(details, validationDetail{Path: "delivery", Message: "must be env, api or both"})
		}
	}
	if len(details) > 0 {
		s.writeErr(rw, validationError(details...))
		return
	}
	if sec.Status == "deleted" {
		s.writeErr(rw, conflict("Secret has been deleted"))
		return
	}
	if n := sel.number(); n > sec.LatestVersion {
		s.writeErr(rw, unprocessable("Secret version does not exist"))
		return
	}
	if body.TargetType == "agent" {
		a, err := s.agentOf(ctx, targetID)
		if err != nil {
			s.writeErr(rw, err)
			return
		}
		if a == nil || a.CompanyId != sec.CompanyID {
			s.writeErr(rw, unprocessable("Agent not found in this company"))
			return
		}
	}
	required := true
	if body.Required != nil {
		required = *body.Required
	}
	b, err := scanBinding(s.pool.QueryRow(ctx, `INSERT INTO company_secret_bindings (id, company_id, secret_id, target_type, target_id,
		config_path, version_selector, required, delivery) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) RETURNING `+bindingCols,
		uuid.NewString(), sec.CompanyID, sec.ID, body.TargetType, targetID, trimmedOrNil(body.ConfigPath), string(sel), required, delivery))
	if err != nil {
		if isUniqueViolation(err, "company_secret_bindings_target_key") {
			s.writeErr(rw, conflict("Secret is already bound to this target"))
			return
		}
		s.writeErr(rw, err)
		return
	}
	s.activity(ctx, sdk.ActorFrom(ctx), sec.CompanyID, "secret.binding_created", "secret", sec.ID, map[string]any{
		"key": sec.Key, "bindingId": b.ID, "targetType": b.TargetType, "targetId": b.TargetID,
		"configPath": b.ConfigPath, "versionSelector": b.VersionSelector,
	})
	sdk.WriteJSON(rw, http.StatusCreated, b)
}

func (s *Secrets) bindingDelete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sec, err := s.loadSecret(r)
	if err != nil {
		s.writeErr(rw, err)
		return
	}
	bid := r.PathValue("bindingId")
	var b *Binding
	if isUUID(bid) {
		b, err = scanBinding(s.pool.QueryRow(ctx, `DELETE FROM company_secret_bindings WHERE id = $1 AND secret_id = $2 RETURNING `+bindingCols, bid, sec.ID))
		if err != nil {
			s.writeErr(rw, err)
			return
		}
	}
	if b == nil {
		s.writeErr(rw, notFound("Secret binding not found"))
		return
	}
	s.activity(ctx, sdk.ActorFrom(ctx), sec.CompanyID, "secret.binding_deleted", "secret", sec.ID, map[string]any{
		"key": sec.Key, "bindingId": b.ID, "targetType": b.TargetType, "targetId": b.TargetID,
	})
	sdk.WriteJSON(rw, http.StatusOK, b)
}

// agentOf returns the kernel identity of an agent (nil when there is none).
func (s *Secrets) agentOf(ctx context.Context, agentID string) (*hostv1.AgentIdentity, error) {
	if !isUUID(agentID) {
		return nil, nil
	}
	a, err := s.host.Principals.GetAgent(ctx, &hostv1.GetAgentRequest{AgentId: agentID})
	if err != nil {
		if isGRPCNotFound(err) {
			return nil, nil
		}
		return nil, errors.New("error reading agent: " + err.Error())
	}
	return a, nil
}

// secretListQuery documents the query parameters of the secret list.
type secretListQuery struct {
	IncludeDeleted bool `query:"includeDeleted"`
}
