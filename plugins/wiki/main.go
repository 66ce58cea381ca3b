// Command llm-wiki is keel's first-party LLM Wiki plugin: a company knowledge base kept in
// a local folder (the wiki-root mount) by a managed maintainer agent. Sources are captured
// under raw/, pages live under wiki/, and the plugin indexes both in its own PostgreSQL
// schema for full-text search and backlinks. It is written only against the public SDK
// (github.com/keelhq/keel/sdk) and ships as a keel package in the bundled catalog.
package main

import (
	"context"
	"crypto/md5"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

//go:embed manifest.json
var manifestJSON []byte

//go:embed migrations/*.sql
var migrations embed.FS

// Identity of the plugin and its declared resources.
const (
	pluginKey      = "keelhq.llm_wiki"
	folderKey      = "wiki-root"
	maintainerKey  = "wiki-maintainer"
	projectKey     = "llm-wiki"
	defaultWikiID  = "default"
	defaultSpace   = "default"
	defaultLogText = "# Log\n\nAppend-only chronological record of wiki operations (ingest, query, lint, index).\n"
)

// Config is the plugin's config (the manifest's configSchema).
type Config struct {
	// MaxSourceBytes is the largest captured source.
	MaxSourceBytes int `json:"maxSourceBytes"`
	// MaxIssueSourceCharacters caps each ingested issue, comment or document.
	MaxIssueSourceCharacters int `json:"maxIssueSourceCharacters"`
	// MaxCursorWindowCharacters caps a cursor window or bundle.
	MaxCursorWindowCharacters int `json:"maxCursorWindowCharacters"`
	// MaxRoutineRunCharacters caps a routine run.
	MaxRoutineRunCharacters int `json:"maxRoutineRunCharacters"`
	// EventIngestion captures issue, comment and document events as sources.
	EventIngestion bool `json:"eventIngestion"`
	// CostCentsPerThousandSourceCharacters is the operations' cost estimate rate.
	CostCentsPerThousandSourceCharacters *int `json:"costCentsPerThousandSourceCharacters"`
}

// defaults fills the reference product's defaults.
func (c *Config) defaults() {
	if c.MaxSourceBytes == 0 {
		c.MaxSourceBytes = 250000
	}
	if c.MaxIssueSourceCharacters == 0 {
		c.MaxIssueSourceCharacters = 12000
	}
	if c.MaxCursorWindowCharacters == 0 {
		c.MaxCursorWindowCharacters = 60000
	}
	if c.MaxRoutineRunCharacters == 0 {
		c.MaxRoutineRunCharacters = 120000
	}
	if c.CostCentsPerThousandSourceCharacters == nil {
		one := 1
		c.CostCentsPerThousandSourceCharacters = &one
	}
}

// Wiki is the extension.
type Wiki struct {
	sdk.Features
	manifest *sdk.Manifest
	host     *sdk.Host
	db       *sql.DB
	cfg      atomic.Pointer[Config]
	now      func() time.Time
	// bg is cancelled by Stop: background work (following a query's run) ends with it.
	bg     context.Context
	cancel context.CancelFunc
}

func newWiki() *Wiki {
	m, err := sdk.ParseManifest(manifestJSON)
	if err != nil {
		panic(err)
	}
	w := &Wiki{manifest: m, now: func() time.Time { return time.Now().UTC() }}
	w.bg, w.cancel = context.WithCancel(context.Background())
	w.cfg.Store(&Config{})
	w.cfg.Load().defaults()
	w.registerTools()
	return w
}

// Manifest returns the embedded manifest.
func (w *Wiki) Manifest() *sdk.Manifest { return w.manifest }

// Configure reads the config and opens and migrates the plugin's own schema.
func (w *Wiki) Configure(ctx context.Context, env *sdk.Env) error {
	w.host = env.Host
	if err := w.setConfig(env.Config); err != nil {
		return err
	}
	db, err := migrate.Open(ctx, migrate.OpenParams{Env: env, Migrations: migrations, Dir: "migrations"})
	if err != nil {
		return err
	}
	if err := refuseNewerSchema(ctx, db.SQL); err != nil {
		db.SQL.Close()
		return err
	}
	w.db = db.SQL
	return nil
}

// refuseNewerSchema refuses to run on a schema a newer version of the wiki migrated (a
// downgrade below a schema change): the schema's migration ledger names migrations this
// build does not have, whose tables and columns it would not keep. The host then keeps the
// newer version serving (the upgrade route answers 422 upgrade_failed). A downgrade to a
// version with the same migrations runs.
func refuseNewerSchema(ctx context.Context, db *sql.DB) error {
	known := map[string]bool{}
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("error listing the wiki's migrations: %w", err)
	}
	for _, e := range entries {
		known[strings.TrimSuffix(e.Name(), ".up.sql")] = true
		known[e.Name()] = true
	}
	rows, err := db.QueryContext(ctx, `SELECT name FROM schema_migrations WHERE line = $1 ORDER BY name`, pluginKey)
	if err != nil {
		return fmt.Errorf("error reading the wiki's migration ledger: %w", err)
	}
	defer rows.Close()
	var unknown []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return fmt.Errorf("error reading the wiki's migration ledger: %w", err)
		}
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error reading the wiki's migration ledger: %w", err)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("the wiki's schema was migrated by a newer version (%s); version %s does not know those "+
			"migrations, so it refuses to run on that schema: a downgrade below a schema change is refused",
			strings.Join(unknown, ", "), manifestVersion())
	}
	return nil
}

// manifestVersion is the version of the embedded manifest.
func manifestVersion() string {
	var m struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(manifestJSON, &m)
	return m.Version
}

// OnConfigChange takes a new config without a restart.
func (w *Wiki) OnConfigChange(_ context.Context, raw json.RawMessage) error { return w.setConfig(raw) }

func (w *Wiki) setConfig(raw json.RawMessage) error {
	var c Config
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("error decoding wiki config: %w", err)
		}
	}
	c.defaults()
	w.cfg.Store(&c)
	return nil
}

// Health checks the database.
func (w *Wiki) Health(ctx context.Context) error {
	if w.db == nil {
		return errors.New("not configured")
	}
	return w.db.PingContext(ctx)
}

// Stop ends background work and closes the database.
func (w *Wiki) Stop(context.Context) error {
	w.cancel()
	if w.db != nil {
		return w.db.Close()
	}
	return nil
}

// Space is a wiki space as the API shows it.
type Space struct {
	ID                 string          `json:"id"`
	CompanyID          string          `json:"companyId"`
	WikiID             string          `json:"wikiId"`
	Slug               string          `json:"slug"`
	DisplayName        string          `json:"displayName"`
	SpaceType          string          `json:"spaceType"`
	FolderMode         string          `json:"folderMode"`
	RootFolderKey      string          `json:"rootFolderKey"`
	PathPrefix         *string         `json:"pathPrefix"`
	ConfiguredRootPath *string         `json:"configuredRootPath"`
	AccessScope        string          `json:"accessScope"`
	OwnerUserID        *string         `json:"ownerUserId"`
	OwnerAgentID       *string         `json:"ownerAgentId"`
	TeamKey            *string         `json:"teamKey"`
	Settings           json.RawMessage `json:"settings"`
	Status             string          `json:"status"`
	CreatedAt          time.Time       `json:"createdAt"`
	UpdatedAt          time.Time       `json:"updatedAt"`
}

// stableSpaceID is the default space's id: the md5 of "<companyId>:<wikiId>:default" shaped
// as a v4 UUID, as the reference product makes it.
func stableSpaceID(companyID, wikiID string) string {
	sum := md5.Sum([]byte(companyID + ":" + wikiID + ":default"))
	sum[6] = (sum[6] & 0x0f) | 0x40
	sum[8] = (sum[8] & 0x3f) | 0x80
	id, _ := uuid.FromBytes(sum[:])
	return id.String()
}

const spaceColumns = `id, company_id, wiki_id, slug, display_name, space_type, folder_mode, root_folder_key, path_prefix,
	(SELECT configured_root_path FROM wiki_instances i WHERE i.company_id = s.company_id AND i.wiki_id = s.wiki_id),
	access_scope, owner_user_id, owner_agent_id, team_key, settings, status, created_at, updated_at`

type scanner interface{ Scan(...any) error }

func scanSpace(r scanner) (*Space, error) {
	var s Space
	var settings []byte
	err := r.Scan(&s.ID, &s.CompanyID, &s.WikiID, &s.Slug, &s.DisplayName, &s.SpaceType, &s.FolderMode, &s.RootFolderKey,
		&s.PathPrefix, &s.ConfiguredRootPath, &s.AccessScope, &s.OwnerUserID, &s.OwnerAgentID, &s.TeamKey, &settings,
		&s.Status, &s.CreatedAt, &s.UpdatedAt)
	s.Settings = settings
	return &s, err
}

// ensureDefault makes the wiki instance and its default space when missing.
func (w *Wiki) ensureDefault(ctx context.Context, companyID, wikiID string) error {
	if _, err := w.db.ExecContext(ctx, `INSERT INTO wiki_instances (company_id, wiki_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		companyID, wikiID); err != nil {
		return fmt.Errorf("error making wiki %s: %w", wikiID, err)
	}
	if _, err := w.db.ExecContext(ctx, `INSERT INTO wiki_spaces (id, company_id, wiki_id, slug, display_name)
		VALUES ($1, $2, $3, 'default', 'Default') ON CONFLICT DO NOTHING`, stableSpaceID(companyID, wikiID), companyID, wikiID); err != nil {
		return fmt.Errorf("error making the default space of wiki %s: %w", wikiID, err)
	}
	return nil
}

// space returns a space of a company's wiki (the default one is made when missing); an
// unknown or archived one is a 404 unless archived ones are allowed.
func (w *Wiki) space(ctx context.Context, companyID, wikiID, slug string, allowArchived bool) (*Space, error) {
	if err := w.ensureDefault(ctx, companyID, wikiID); err != nil {
		return nil, err
	}
	sp, err := scanSpace(w.db.QueryRowContext(ctx, `SELECT `+spaceColumns+` FROM wiki_spaces s
		WHERE company_id = $1 AND wiki_id = $2 AND slug = $3`, companyID, wikiID, slug))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && sp.Status == "archived" && !allowArchived) {
		return nil, sdk.NotFound("LLM Wiki space not found")
	}
	if err != nil {
		return nil, fmt.Errorf("error reading space %s: %w", slug, err)
	}
	return sp, nil
}

// rootPath returns the company's wiki root: the wiki-root folder the company set in keel
// (delivered with tool calls, data reads and actions, or told through LocalFolderChanged),
// else the path the wiki was bootstrapped with.
func (w *Wiki) rootPath(ctx context.Context, companyID, wikiID string, folders map[string]sdk.LocalFolderPath) (string, error) {
	if f, ok := folders[folderKey]; ok && f.Path != "" {
		return f.Path, nil
	}
	var p sql.NullString
	err := w.db.QueryRowContext(ctx, `SELECT configured_root_path FROM wiki_instances WHERE company_id = $1 AND wiki_id = $2`,
		companyID, wikiID).Scan(&p)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("error reading the wiki root: %w", err)
	}
	if !p.Valid || p.String == "" {
		return "", &sdk.Error{Status: http.StatusConflict, Code: "folder_not_configured",
			Message: "The wiki-root folder is not configured for this company: set it or bootstrap the wiki with a path"}
	}
	return p.String, nil
}

// spaceFolder returns the folder of a space under the wiki root.
func spaceFolder(root string, sp *Space) *folder {
	f := &folder{root: root}
	if sp.PathPrefix != nil {
		f.prefix = *sp.PathPrefix
	}
	return f
}

// LocalFolderChanged keeps the path the company set for wiki-root as the wiki's root, so
// routes (which carry no folders) use the same folder as tools.
func (w *Wiki) LocalFolderChanged(ctx context.Context, f *sdk.LocalFolderPath) error {
	if f.FolderKey != folderKey || !sdk.IsUUID(f.CompanyID) || w.db == nil {
		return nil
	}
	if err := w.ensureDefault(ctx, f.CompanyID, defaultWikiID); err != nil {
		return err
	}
	_, err := w.db.ExecContext(ctx, `UPDATE wiki_instances SET configured_root_path = $3, updated_at = now()
		WHERE company_id = $1 AND wiki_id = $2`, f.CompanyID, defaultWikiID, f.Path)
	if err != nil {
		return fmt.Errorf("error keeping the wiki root: %w", err)
	}
	return nil
}

func main() { sdk.Serve(newWiki()) }

var (
	_ sdk.Configurer          = (*Wiki)(nil)
	_ sdk.ToolExecutor        = (*Wiki)(nil)
	_ sdk.LocalFolderListener = (*Wiki)(nil)
	_ sdk.EventHandler        = (*Wiki)(nil)
	_ sdk.HTTPProvider        = (*Wiki)(nil)
	_ sdk.ConfigChangeHandler = (*Wiki)(nil)
)
