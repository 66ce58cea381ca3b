// Package idem makes create requests safe to retry: a POST carrying an Idempotency-Key
// header is answered once, and a retry with the same key and the same request gets the
// original answer back instead of creating a second resource.
//
// The key is remembered by the owner of the data, in its own schema: migrate.Open creates
// the table idempotency_keys in every extension's schema, and Wrap serves an extension's
// handler with the key looked up before the handler runs. A create handler that calls
// Record inside its write transaction remembers the key atomically with the write, so a
// request whose process died after the commit but before the answer is still replayed
// (from the Location it recorded); any other POST is remembered after it succeeded
// (best effort: a crash between its commit and that record is not covered).
//
// A key is remembered per actor (the agent, or the board user) for 24 hours. The same key
// with another request (method, path, query or body) is a 409; a malformed key (empty,
// over 255 characters, or not printable ASCII) is a 400 Validation error.
package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelhq/keel/sdk"
)

// Header is the request header carrying the key.
const Header = "Idempotency-Key"

// ReplayedHeader is set to "true" on an answer replayed from a remembered key.
const ReplayedHeader = "Idempotent-Replayed"

// TTL is how long a key is remembered.
const TTL = 24 * time.Hour

// MaxKeyLen is the longest key accepted.
const MaxKeyLen = 255

// DefaultTable is the table migrate.Open creates in every extension's schema (reached
// through the extension role's search_path).
const DefaultTable = "idempotency_keys"

// ReusedMessage is the 409's error text for a key already used with another request.
const ReusedMessage = "Idempotency-Key was already used with a different request"

// ReusedCode is the 409's error code.
const ReusedCode = "idempotency_key_reused"

// TableSQL returns the DDL of the key table (schema-qualified name).
func TableSQL(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + table + ` (
    principal     text NOT NULL,
    key           text NOT NULL,
    fingerprint   text NOT NULL,
    status        integer NOT NULL,
    location      text,
    content_type  text,
    body          bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, key)
);
CREATE INDEX IF NOT EXISTS ` + indexName(table) + ` ON ` + table + ` (created_at);
`
}

func indexName(table string) string {
	for i := len(table) - 1; i >= 0; i-- {
		if table[i] == '.' {
			return table[i+1:] + "_created_at_idx"
		}
	}
	return table + "_created_at_idx"
}

// CheckKey returns the reason a key is malformed, or "" when it is acceptable: 1 to 255
// characters of printable ASCII.
func CheckKey(key string) string {
	if key == "" {
		return "must not be empty"
	}
	if len(key) > MaxKeyLen {
		return fmt.Sprintf("must be at most %d characters", MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "must be printable ASCII"
		}
	}
	return ""
}

// Principal names the actor a key belongs to: "agent:<id>", "user:<id>" or "system"; ""
// for an unauthenticated caller, whose requests are not deduplicated.
func Principal(actorType, userID, agentID string) string {
	switch actorType {
	case "agent":
		if agentID != "" {
			return "agent:" + agentID
		}
	case "board":
		if userID != "" {
			return "user:" + userID
		}
		return "board"
	case "system":
		return "system"
	}
	return ""
}

// Fingerprint identifies a request: a sha256 of its method, path, query and body.
func Fingerprint(method, path, rawQuery string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method + "\n" + path + "\n" + rawQuery + "\n"))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Answer is a remembered answer.
type Answer struct {
	Fingerprint string
	Status      int
	// Location is the path that reads the created resource, when the answer's body was not
	// remembered (the process died between its commit and the answer).
	Location    string
	ContentType string
	// Body is nil when only the Location is known.
	Body []byte
}

// DB is what the store needs of a pool.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store reads and writes one key table.
type Store struct {
	DB DB
	// Table is the key table (DefaultTable when empty).
	Table string
}

func (s *Store) table() string {
	if s.Table == "" {
		return DefaultTable
	}
	return s.Table
}

// Lookup returns the live answer remembered for a principal's key, or nil. An expired one
// is deleted, so the key counts as new.
func (s *Store) Lookup(ctx context.Context, principal, key string) (*Answer, error) {
	var a Answer
	var location, contentType *string
	var expired bool
	err := s.DB.QueryRow(ctx, `SELECT fingerprint, status, location, content_type, body, created_at < now() - make_interval(secs => $3)
		FROM `+s.table()+` WHERE principal = $1 AND key = $2`, principal, key, TTL.Seconds()).
		Scan(&a.Fingerprint, &a.Status, &location, &contentType, &a.Body, &expired)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error looking up idempotency key: %w", err)
	}
	if expired {
		if _, err := s.DB.Exec(ctx, `DELETE FROM `+s.table()+` WHERE principal = $1 AND key = $2 AND created_at < now() - make_interval(secs => $3)`,
			principal, key, TTL.Seconds()); err != nil {
			return nil, fmt.Errorf("error deleting expired idempotency key: %w", err)
		}
		return nil, nil
	}
	if location != nil {
		a.Location = *location
	}
	if contentType != nil {
		a.ContentType = *contentType
	}
	return &a, nil
}

// upsertSQL inserts a key, or takes over an expired one; it changes no row when a live
// one exists (which the caller reports as a reused key or a concurrent request).
func upsertSQL(table string) string {
	return `INSERT INTO ` + table + ` AS k (principal, key, fingerprint, status, location, content_type, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (principal, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status,
			location = EXCLUDED.location, content_type = EXCLUDED.content_type, body = EXCLUDED.body, created_at = now()
		WHERE k.created_at < now() - make_interval(secs => $8)`
}

// Save remembers an answer after the request succeeded (the best-effort path). It reports
// false when a live answer for the key already existed.
func (s *Store) Save(ctx context.Context, principal, key string, a *Answer) (bool, error) {
	tag, err := s.DB.Exec(ctx, upsertSQL(s.table()), principal, key, a.Fingerprint, a.Status, nullable(a.Location),
		nullable(a.ContentType), a.Body, TTL.Seconds())
	if err != nil {
		return false, fmt.Errorf("error saving idempotency key: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Complete fills in the answer of a key its request recorded in its write transaction; it
// reports false when there was no such key (the transaction did not commit).
func (s *Store) Complete(ctx context.Context, principal, key string, a *Answer) (bool, error) {
	tag, err := s.DB.Exec(ctx, `UPDATE `+s.table()+` SET status = $4, content_type = $5, body = $6
		WHERE principal = $1 AND key = $2 AND fingerprint = $3`, principal, key, a.Fingerprint, a.Status,
		nullable(a.ContentType), a.Body)
	if err != nil {
		return false, fmt.Errorf("error completing idempotency key: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Sweep deletes expired keys.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.DB.Exec(ctx, `DELETE FROM `+s.table()+` WHERE created_at < now() - make_interval(secs => $1)`, TTL.Seconds())
	if err != nil {
		return 0, fmt.Errorf("error deleting expired idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ErrKeyInUse is returned by Record when the key already has a live answer: another
// request with the key committed first. The handler should abort its transaction and
// answer anything; Wrap replaces the answer with the other request's.
var ErrKeyInUse = &sdk.Error{Status: http.StatusConflict, Code: ReusedCode, Message: "Idempotency-Key is in use by another request"}
