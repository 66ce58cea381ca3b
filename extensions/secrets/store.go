package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Secret is a company secret as the API shows it; it never carries a value.
type Secret struct {
	ID             string     `json:"id"`
	CompanyID      string     `json:"companyId"`
	Key            string     `json:"key"`
	Name           string     `json:"name"`
	Description    *string    `json:"description"`
	Provider       string     `json:"provider"`
	Status         string     `json:"status"`
	ManagedMode    string     `json:"managedMode"`
	ExternalRef    *string    `json:"externalRef,omitempty"`
	LatestVersion  int        `json:"latestVersion"`
	LastRotatedAt  *time.Time `json:"lastRotatedAt"`
	LastResolvedAt *time.Time `json:"lastResolvedAt"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

const secretCols = `id, company_id, key, name, description, provider, status, managed_mode, external_ref,
	latest_version, last_rotated_at, last_resolved_at, created_at, updated_at`

func scanSecret(row pgx.Row) (*Secret, error) {
	var x Secret
	err := row.Scan(&x.ID, &x.CompanyID, &x.Key, &x.Name, &x.Description, &x.Provider, &x.Status, &x.ManagedMode,
		&x.ExternalRef, &x.LatestVersion, &x.LastRotatedAt, &x.LastResolvedAt, &x.CreatedAt, &x.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading secret: %w", err)
	}
	return &x, nil
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// getSecret returns a secret by id (nil when absent or id is not a UUID).
func getSecret(ctx context.Context, q querier, id string, forUpdate bool) (*Secret, error) {
	if !isUUID(id) {
		return nil, nil
	}
	sql := `SELECT ` + secretCols + ` FROM company_secrets WHERE id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	return scanSecret(q.QueryRow(ctx, sql, id))
}

// versionSelector is "latest" or a version number; it marshals as the string "latest" or
// as a number.
type versionSelector string

const selectorLatest versionSelector = "latest"

// MarshalJSON writes "latest" or the number.
func (v versionSelector) MarshalJSON() ([]byte, error) {
	if n, err := strconv.Atoi(string(v)); err == nil {
		return json.Marshal(n)
	}
	return json.Marshal(string(v))
}

// number returns the pinned version, or 0 for latest.
func (v versionSelector) number() int {
	n, _ := strconv.Atoi(string(v))
	return n
}

// parseSelector reads "latest", a positive number or a numeric string; empty, null and 0
// are latest.
func parseSelector(raw json.RawMessage) (versionSelector, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return selectorLatest, true
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		if n == 0 {
			return selectorLatest, true
		}
		return versionSelector(strconv.Itoa(n)), n > 0
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	if s == "" || s == string(selectorLatest) {
		return selectorLatest, true
	}
	n, err := strconv.Atoi(s)
	return versionSelector(strconv.Itoa(n)), err == nil && n > 0
}

// Binding grants a secret to a target (an agent, a project, …).
type Binding struct {
	ID              string          `json:"id"`
	CompanyID       string          `json:"companyId"`
	SecretID        string          `json:"secretId"`
	TargetType      string          `json:"targetType"`
	TargetID        string          `json:"targetId"`
	ConfigPath      *string         `json:"configPath"`
	VersionSelector versionSelector `json:"versionSelector"`
	Required        bool            `json:"required"`
	Delivery        string          `json:"delivery"`
	ProjectionClass string          `json:"projectionClass"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
}

const bindingCols = `id, company_id, secret_id, target_type, target_id, config_path, version_selector, required,
	delivery, projection_class, created_at, updated_at`

func scanBinding(row pgx.Row) (*Binding, error) {
	var b Binding
	var sel string
	err := row.Scan(&b.ID, &b.CompanyID, &b.SecretID, &b.TargetType, &b.TargetID, &b.ConfigPath, &sel, &b.Required,
		&b.Delivery, &b.ProjectionClass, &b.CreatedAt, &b.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading secret binding: %w", err)
	}
	b.VersionSelector = versionSelector(sel)
	return &b, nil
}

// AccessEvent is one entry of the secret access audit.
type AccessEvent struct {
	ID           string    `json:"id"`
	CompanyID    string    `json:"companyId"`
	SecretID     *string   `json:"secretId"`
	SecretKey    *string   `json:"secretKey"`
	Version      *int      `json:"version"`
	Provider     *string   `json:"provider"`
	ActorType    *string   `json:"actorType"`
	ActorID      *string   `json:"actorId"`
	ConsumerType *string   `json:"consumerType"`
	ConsumerID   *string   `json:"consumerId"`
	Requester    *string   `json:"requester"`
	ConfigPath   *string   `json:"configPath"`
	RunID        *string   `json:"runId"`
	Outcome      string    `json:"outcome"`
	Reason       *string   `json:"reason"`
	CreatedAt    time.Time `json:"createdAt"`
}

// accessRecord is what one audited access writes.
type accessRecord struct {
	companyID, secretID, secretKey string
	version                        int
	actorType, actorID             string
	consumerType, consumerID       string
	requester, configPath, runID   string
	outcome, reason                string
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// audit appends an access event; a failure is logged, never returned, and never includes
// a value (records carry none).
func (s *Secrets) audit(ctx context.Context, rec accessRecord) {
	var version *int
	if rec.version > 0 {
		version = &rec.version
	}
	var provider *string
	if rec.secretID != "" {
		provider = nullable("local_encrypted")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO secret_access_events (id, company_id, secret_id, secret_key, version, provider,
		actor_type, actor_id, consumer_type, consumer_id, requester, config_path, run_id, outcome, reason)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15)`,
		uuid.NewString(), rec.companyID, nullable(rec.secretID), nullable(rec.secretKey), version, provider,
		nullable(rec.actorType), nullable(rec.actorID), nullable(rec.consumerType), nullable(rec.consumerID),
		nullable(rec.requester), nullable(rec.configPath), nullable(rec.runID), rec.outcome, nullable(rec.reason))
	if err != nil {
		s.log.Error("error recording secret access", "secret", rec.secretID, "outcome", rec.outcome, "error", err)
	}
}

// refusal is a resolution that did not yield a value: its audit outcome, a short reason
// (never a value) and the HTTP status for callers that surface it directly.
type refusal struct {
	outcome string
	reason  string
	status  int
}

func (r *refusal) Error() string { return r.reason }

// resolveValue decrypts a version (0 = latest) of a secret of companyID. It returns the
// secret (nil when it is not in the company), the value and the version, or a *refusal.
func (s *Secrets) resolveValue(ctx context.Context, companyID, secretID string, version int) (*Secret, string, int, error) {
	sec, err := getSecret(ctx, s.pool, secretID, false)
	if err != nil {
		return nil, "", 0, err
	}
	if sec == nil || sec.CompanyID != companyID {
		return nil, "", 0, &refusal{outcome: "missing", reason: "secret not found", status: 404}
	}
	if sec.Status != "active" {
		return sec, "", 0, &refusal{outcome: "inactive", reason: "secret is " + sec.Status, status: 422}
	}
	if version <= 0 {
		version = sec.LatestVersion
	}
	if version <= 0 {
		return sec, "", 0, &refusal{outcome: "missing", reason: "secret has no stored value", status: 422}
	}
	var material *Material
	var status string
	err = s.pool.QueryRow(ctx, `SELECT material, status FROM company_secret_versions WHERE secret_id = $1 AND version = $2`,
		sec.ID, version).Scan(&material, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return sec, "", 0, &refusal{outcome: "missing", reason: fmt.Sprintf("secret version %d not found", version), status: 422}
	}
	if err != nil {
		return sec, "", 0, fmt.Errorf("error reading secret version: %w", err)
	}
	if status != "current" && status != "previous" || material == nil {
		return sec, "", 0, &refusal{outcome: "inactive", reason: fmt.Sprintf("secret version %d is %s", version, status), status: 422}
	}
	pt, err := s.sealer.open(material, versionAAD(sec.ID, version))
	if err != nil {
		return sec, "", 0, &refusal{outcome: "failure", reason: err.Error(), status: 500}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE company_secrets SET last_resolved_at = now() WHERE id = $1`, sec.ID); err != nil {
		s.log.Warn("error recording secret resolution time", "secret", sec.ID, "error", err)
	}
	return sec, string(pt), version, nil
}
