package secrets

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk"
)

// Managed secrets are company secrets another extension creates and rotates for its own
// use (the routines extension keeps each webhook trigger's signing secret as one). They are
// ordinary company secrets, stored and resolved like any other (secrets.resolve), except
// that a rotation revokes every earlier version at once: a rotated value must stop working
// immediately, not linger as "previous".

// CreateManagedInput is the input of secrets.createManaged.
type CreateManagedInput struct {
	CompanyID   string  `json:"companyId"`
	Name        string  `json:"name"`
	Description *string `json:"description,omitempty"`
	// Value is stored as version 1; empty generates 32 random bytes as hex.
	Value string `json:"value,omitempty"`
}

// RotateManagedInput is the input of secrets.rotateManaged.
type RotateManagedInput struct {
	CompanyID string `json:"companyId"`
	SecretID  string `json:"secretId"`
	// Value is the new version's value; empty generates 32 random bytes as hex.
	Value string `json:"value,omitempty"`
}

// DeleteManagedInput is the input of secrets.deleteManaged.
type DeleteManagedInput struct {
	CompanyID string `json:"companyId"`
	SecretID  string `json:"secretId"`
}

// ManagedOutput is the output of secrets.createManaged and secrets.rotateManaged: the secret,
// its current version and that version's value (returned once, to the caller that owns it).
type ManagedOutput struct {
	SecretID string `json:"secretId"`
	Version  int    `json:"version"`
	Value    string `json:"value"`
}

// managedValueBytes is the size of a generated managed secret value, before hex encoding.
const managedValueBytes = 32

func init() {
	addMethods(map[string]method{
		"createManaged": {Description: "Create a company secret for the calling extension's own use. Input {companyId, name, description?, " +
			"value? (32 random bytes as hex when empty)}; output {secretId, version, value}. Resolve it later with secrets.resolve.",
			Call: (*Secrets).callCreateManaged, Requires: needsSecrets},
		"rotateManaged": {Description: "Store a new version of a managed secret and revoke every earlier version at once. " +
			"Input {companyId, secretId, value? (generated when empty)}; output {secretId, version, value}.",
			Call: (*Secrets).callRotateManaged, Requires: needsSecrets},
		"deleteManaged": {Description: "Delete a managed secret: status deleted, versions destroyed, bindings removed. " +
			"Input {companyId, secretId}; output {secretId, deleted}.",
			Call: (*Secrets).callDeleteManaged, Requires: needsSecrets},
	})
}

// generateManagedValue returns 32 random bytes as hex.
func generateManagedValue() (string, error) {
	b := make([]byte, managedValueBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("error generating secret value: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// managedActor is the actor a managed-secret write is attributed to: the call's actor, or
// the system when the caller acts on its own behalf.
func managedActor(call *sdk.MethodCall) *sdk.Actor {
	if call.Actor == nil || call.Actor.Type == "" || call.Actor.Type == "none" {
		return sdk.SystemActor()
	}
	return call.Actor
}

func (s *Secrets) callCreateManaged(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in CreateManagedInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	if !isUUID(companyID) {
		return nil, invalid("companyId", "must be a UUID")
	}
	name := strings.TrimSpace(in.Name)
	switch {
	case name == "":
		return nil, invalid("name", "is required")
	case utf8.RuneCountInString(name) > maxNameLen:
		return nil, invalid("name", "must be at most 200 characters")
	}
	value := in.Value
	if value == "" {
		if value, err = generateManagedValue(); err != nil {
			return nil, err
		}
	}
	key := deriveKey(name)
	if len(key) > maxNameLen-9 {
		key = key[:maxNameLen-9]
	}
	// The key is derived from the name; a short random suffix keeps it unique when the same
	// name is used twice.
	key += "_" + strings.ToUpper(uuid.NewString()[:8])
	actor := managedActor(call)
	id := uuid.NewString()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error creating managed secret: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO company_secrets (id, company_id, key, name, description, managed_mode,
		latest_version, last_rotated_at, created_by_user_id, created_by_agent_id)
		VALUES ($1,$2,$3,$4,$5,'service_managed',1,now(),$6,$7)`,
		id, companyID, key, name, trimmedOrNil(in.Description), nullable(actor.GetUserId()), nullable(actor.GetAgentId())); err != nil {
		if isUniqueViolation(err, "company_secrets_company_key_key") {
			return nil, conflict("Secret key already exists in this company")
		}
		return nil, fmt.Errorf("error creating managed secret: %w", err)
	}
	if err := s.insertVersion(ctx, tx, id, 1, value, actor.GetUserId()); err != nil {
		return nil, fmt.Errorf("error storing managed secret version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error creating managed secret: %w", err)
	}
	s.activity(ctx, actor, companyID, "secret.created", "secret", id,
		map[string]any{"key": key, "name": name, "managedMode": "service_managed", "version": 1, "managedBy": call.Caller})
	return &ManagedOutput{SecretID: id, Version: 1, Value: value}, nil
}

func (s *Secrets) callRotateManaged(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in RotateManagedInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	value := in.Value
	if value == "" {
		if value, err = generateManagedValue(); err != nil {
			return nil, err
		}
	}
	actor := managedActor(call)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error rotating managed secret: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	sec, err := getSecret(ctx, tx, in.SecretID, true)
	if err != nil {
		return nil, err
	}
	if sec == nil || sec.CompanyID != companyID {
		return nil, notFound("Secret not found")
	}
	if sec.Status == "deleted" {
		return nil, conflict("Secret has been deleted")
	}
	next := sec.LatestVersion + 1
	// Every earlier version is revoked in the same transaction that stores the new one, so no
	// reader ever sees two usable versions.
	if _, err := tx.Exec(ctx, `UPDATE company_secret_versions SET status = 'destroyed', material = NULL, revoked_at = now()
		WHERE secret_id = $1 AND status <> 'destroyed'`, sec.ID); err != nil {
		return nil, fmt.Errorf("error revoking managed secret versions: %w", err)
	}
	if err := s.insertVersion(ctx, tx, sec.ID, next, value, actor.GetUserId()); err != nil {
		return nil, fmt.Errorf("error storing managed secret version: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE company_secrets SET latest_version = $2, last_rotated_at = now(), updated_at = now()
		WHERE id = $1`, sec.ID, next); err != nil {
		return nil, fmt.Errorf("error rotating managed secret: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error rotating managed secret: %w", err)
	}
	s.activity(ctx, actor, companyID, "secret.rotated", "secret", sec.ID,
		map[string]any{"key": sec.Key, "version": next, "previousVersion": sec.LatestVersion, "managedBy": call.Caller})
	return &ManagedOutput{SecretID: sec.ID, Version: next, Value: value}, nil
}

func (s *Secrets) callDeleteManaged(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in DeleteManagedInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	companyID, err := callCompany(call, in.CompanyID)
	if err != nil {
		return nil, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error deleting managed secret: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	sec, err := getSecret(ctx, tx, in.SecretID, true)
	if err != nil {
		return nil, err
	}
	if sec == nil || sec.CompanyID != companyID {
		return nil, notFound("Secret not found")
	}
	out := map[string]any{"secretId": sec.ID, "deleted": true}
	if sec.Status == "deleted" {
		return out, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE company_secrets SET status = 'deleted', deleted_at = now(), updated_at = now() WHERE id = $1`,
		sec.ID); err != nil {
		return nil, fmt.Errorf("error deleting managed secret: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE company_secret_versions SET status = 'destroyed', material = NULL, revoked_at = now()
		WHERE secret_id = $1`, sec.ID); err != nil {
		return nil, fmt.Errorf("error destroying managed secret versions: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM company_secret_bindings WHERE secret_id = $1`, sec.ID); err != nil {
		return nil, fmt.Errorf("error removing managed secret bindings: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error deleting managed secret: %w", err)
	}
	s.activity(ctx, managedActor(call), companyID, "secret.deleted", "secret", sec.ID,
		map[string]any{"key": sec.Key, "name": sec.Name, "managedBy": call.Caller})
	return out, nil
}
