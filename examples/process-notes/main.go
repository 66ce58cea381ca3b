// Command notes is the smallest useful process extension: it serves routes at the spec's
// kind of paths, keeps state in its own PostgreSQL schema (migrated from embedded SQL),
// appends activity, calls a host service and handles an event. Build it, put the binary
// beside manifest.json, and point keel at the directory (SERVICE_EXTENSIONS_PATH).
package main

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

//go:embed manifest.json
var manifestJSON []byte

//go:embed migrations/*.sql
var migrations embed.FS

// Notes is the extension.
type Notes struct {
	manifest *sdk.Manifest
	host     *sdk.Host
	db       *sql.DB
	// maxNotes is the config's maxNotesPerCompany (0: no limit); it changes while the
	// extension runs (OnConfigChange).
	maxNotes atomic.Int64
	// created counts notes created, shown on the host's GET /metrics (see Configure).
	created prometheus.Counter
}

// Note is one note as the API shows it.
type Note struct {
	ID         int64     `json:"id"`
	CompanyID  string    `json:"companyId"`
	Text       string    `json:"text"`
	AuthorType string    `json:"authorType"`
	AuthorID   string    `json:"authorId"`
	CreatedAt  time.Time `json:"createdAt"`
}

func newNotes() *Notes {
	m, err := sdk.ParseManifest(manifestJSON)
	if err != nil {
		panic(err)
	}
	return &Notes{manifest: m}
}

// Manifest returns the embedded manifest.
func (n *Notes) Manifest() *sdk.Manifest { return n.manifest }

// Configure opens the extension's own database and migrates its schema.
func (n *Notes) Configure(ctx context.Context, env *sdk.Env) error {
	n.host = env.Host
	cfg, err := readConfig(env.Config)
	if err != nil {
		return err
	}
	n.maxNotes.Store(int64(cfg.MaxNotesPerCompany))
	// An extension's own metrics: register them in env.Metrics and the host serves them on
	// GET /metrics with extension="example.notes".
	n.created = prometheus.NewCounter(prometheus.CounterOpts{Name: "example_notes_created_total", Help: "Notes created."})
	if env.Metrics != nil {
		if err := env.Metrics.Register(n.created); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("error registering metrics: %w", err)
			}
			n.created = are.ExistingCollector.(prometheus.Counter)
		}
	}
	// Env supplies the database URL, the migration line (the key), the schema and metrics.
	db, err := migrate.Open(ctx, migrate.OpenParams{Env: env, Migrations: migrations, Dir: "migrations"})
	if err != nil {
		return err
	}
	n.db = db.SQL
	return nil
}

// HTTPHandler serves the manifest routes with an ordinary ServeMux.
func (n *Notes) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/companies/{companyId}/notes", n.list)
	mux.HandleFunc("POST /api/companies/{companyId}/notes", n.create)
	mux.HandleFunc("DELETE /api/companies/{companyId}/notes/{noteId}", n.delete)
	mux.HandleFunc("GET /api/companies/{companyId}/notes/stats", n.stats)
	return mux
}

func (n *Notes) list(w http.ResponseWriter, r *http.Request) {
	companyID := sdk.CompanyIDFrom(r.Context())
	rows, err := n.db.QueryContext(r.Context(), `SELECT id, company_id, text, author_type, author_id, created_at
		FROM notes WHERE company_id = $1 ORDER BY created_at DESC, id DESC LIMIT 200`, companyID)
	if err != nil {
		sdk.WriteErr(w, err)
		return
	}
	defer rows.Close()
	out := []Note{}
	for rows.Next() {
		var nt Note
		if err := rows.Scan(&nt.ID, &nt.CompanyID, &nt.Text, &nt.AuthorType, &nt.AuthorID, &nt.CreatedAt); err != nil {
			sdk.WriteErr(w, err)
			return
		}
		out = append(out, nt)
	}
	sdk.WriteJSON(w, http.StatusOK, out)
}

func (n *Notes) create(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	var body struct {
		Text string `json:"text"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Text == "" || len(body.Text) > 10000 {
		sdk.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": "Validation error",
			"details": []map[string]string{{"path": "text", "message": "text is required (1-10000 characters)"}}})
		return
	}
	if max := n.maxNotes.Load(); max > 0 {
		var count int64
		if err := n.db.QueryRowContext(ctx, `SELECT count(*) FROM notes WHERE company_id = $1`, companyID).Scan(&count); err != nil {
			sdk.WriteErr(w, err)
			return
		}
		if count >= max {
			sdk.WriteError(w, http.StatusUnprocessableEntity, "Note limit reached for this company")
			return
		}
	}
	// A host service call: read the company through the kernel, never its tables.
	company, err := n.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: companyID})
	if err != nil {
		sdk.WriteErr(w, &sdk.Error{Status: http.StatusBadGateway, Message: "could not read company", Source: sdk.SourceDownstream})
		return
	}
	var c struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(company.CompanyJson, &c)
	actor := sdk.ActorFrom(ctx)
	authorType, authorID := actor.Type, actor.UserId
	if actor.Type == "agent" {
		authorID = actor.AgentId
	}
	nt := Note{CompanyID: companyID, Text: body.Text, AuthorType: authorType, AuthorID: authorID}
	err = n.db.QueryRowContext(ctx, `INSERT INTO notes (company_id, text, author_type, author_id) VALUES ($1, $2, $3, $4)
		RETURNING id, created_at`, companyID, nt.Text, nt.AuthorType, nt.AuthorID).Scan(&nt.ID, &nt.CreatedAt)
	if err != nil {
		sdk.WriteErr(w, err)
		return
	}
	if _, err := n.db.ExecContext(ctx, `INSERT INTO company_names (company_id, name) VALUES ($1, $2)
		ON CONFLICT (company_id) DO UPDATE SET name = EXCLUDED.name, updated_at = now()`, companyID, c.Name); err != nil {
		sdk.WriteErr(w, err)
		return
	}
	if err := n.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Actor: actor, Action: "note.created",
		EntityType: "note", EntityID: strconv.FormatInt(nt.ID, 10), Details: map[string]any{"companyName": c.Name}}); err != nil {
		sdk.WriteErr(w, err)
		return
	}
	// Recount in the background; the unique key coalesces bursts of notes into one job.
	args, _ := json.Marshal(map[string]string{"companyId": companyID})
	if _, err := n.host.Jobs.Enqueue(ctx, &hostv1.EnqueueRequest{JobKey: "refresh-stats", ArgsJson: args, UniqueKey: companyID}); err != nil {
		sdk.WriteErr(w, err)
		return
	}
	n.created.Inc()
	// sdk.LoggerFrom carries the request's request_id into the host's log.
	sdk.LoggerFrom(ctx).Info("note created", "note", nt.ID)
	sdk.WriteJSON(w, http.StatusCreated, nt)
}

func (n *Notes) stats(w http.ResponseWriter, r *http.Request) {
	var out struct {
		NoteCount   int        `json:"noteCount"`
		RefreshedAt *time.Time `json:"refreshedAt"`
	}
	err := n.db.QueryRowContext(r.Context(), `SELECT note_count, refreshed_at FROM company_stats WHERE company_id = $1`,
		sdk.CompanyIDFrom(r.Context())).Scan(&out.NoteCount, &out.RefreshedAt)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		sdk.WriteErr(w, err)
		return
	}
	sdk.WriteJSON(w, http.StatusOK, out)
}

// RunJob recounts notes: one company when enqueued for it, every company on the schedule.
func (n *Notes) RunJob(ctx context.Context, job *sdk.JobRun) error {
	if job.Key != "refresh-stats" {
		return &sdk.Error{Status: http.StatusNotImplemented, Message: "unknown job " + job.Key}
	}
	var args struct {
		CompanyID string `json:"companyId"`
	}
	if len(job.Args) > 0 {
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return fmt.Errorf("error reading job args: %w", err)
		}
	}
	_, err := n.db.ExecContext(ctx, `INSERT INTO company_stats (company_id, note_count)
		SELECT company_id, count(*) FROM notes WHERE $1 = '' OR company_id::text = $1 GROUP BY company_id
		ON CONFLICT (company_id) DO UPDATE SET note_count = EXCLUDED.note_count, refreshed_at = now()`, args.CompanyID)
	return err
}

func (n *Notes) delete(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := strconv.ParseInt(r.PathValue("noteId"), 10, 64)
	if err != nil {
		sdk.WriteError(w, http.StatusNotFound, "Note not found")
		return
	}
	res, err := n.db.ExecContext(ctx, `DELETE FROM notes WHERE id = $1 AND company_id = $2`, id, sdk.CompanyIDFrom(ctx))
	if err != nil {
		sdk.WriteErr(w, err)
		return
	}
	if c, _ := res.RowsAffected(); c == 0 {
		sdk.WriteError(w, http.StatusNotFound, "Note not found")
		return
	}
	if err := n.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: sdk.CompanyIDFrom(ctx), Actor: sdk.ActorFrom(ctx),
		Action: "note.deleted", EntityType: "note", EntityID: strconv.FormatInt(id, 10)}); err != nil {
		sdk.WriteErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// CallMethod serves the provided method "count".
func (n *Notes) CallMethod(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Method != "count" {
		return nil, &sdk.Error{Status: http.StatusNotImplemented, Message: "unknown method " + call.Method}
	}
	var count int
	if err := n.db.QueryRowContext(ctx, `SELECT count(*) FROM notes WHERE company_id = $1`, call.CompanyID).Scan(&count); err != nil {
		return nil, err
	}
	return map[string]int{"count": count}, nil
}

// OnEvent keeps the cached company name fresh when the company is renamed.
func (n *Notes) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if ev.Type != "company.updated" || ev.CompanyID == "" {
		return nil
	}
	company, err := n.host.Companies.Get(ctx, &hostv1.GetCompanyRequest{CompanyId: ev.CompanyID})
	if err != nil {
		return fmt.Errorf("error reading company %s: %w", ev.CompanyID, err)
	}
	var c struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(company.CompanyJson, &c)
	_, err = n.db.ExecContext(ctx, `UPDATE company_names SET name = $2, updated_at = now() WHERE company_id = $1`, ev.CompanyID, c.Name)
	return err
}

// Health checks the database connection.
func (n *Notes) Health(ctx context.Context) error {
	if n.db == nil {
		return errors.New("not configured")
	}
	return n.db.PingContext(ctx)
}

// notesConfig is the extension's config (see configSchema in the manifest).
type notesConfig struct {
	MaxNotesPerCompany int `json:"maxNotesPerCompany"`
}

func readConfig(raw json.RawMessage) (notesConfig, error) {
	var cfg notesConfig
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return cfg, fmt.Errorf("error reading config: %w", err)
		}
	}
	return cfg, nil
}

// OnConfigChange takes a config saved through POST /api/plugins/example.notes/config
// while the extension runs: the next note created sees the new limit.
func (n *Notes) OnConfigChange(_ context.Context, raw json.RawMessage) error {
	cfg, err := readConfig(raw)
	if err != nil {
		return err
	}
	n.maxNotes.Store(int64(cfg.MaxNotesPerCompany))
	return nil
}

// ValidateConfig checks a config beyond its schema (POST .../config/test): a limit above
// a million is refused, one above ten thousand draws a warning.
func (n *Notes) ValidateConfig(_ context.Context, raw json.RawMessage) ([]string, error) {
	cfg, err := readConfig(raw)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.MaxNotesPerCompany > 1_000_000:
		return nil, errors.New("maxNotesPerCompany above 1000000 is not supported")
	case cfg.MaxNotesPerCompany > 10_000:
		return []string{"maxNotesPerCompany above 10000 makes the notes list slow"}, nil
	}
	return nil, nil
}

// Stop closes the database.
func (n *Notes) Stop(context.Context) error {
	if n.db != nil {
		return n.db.Close()
	}
	return nil
}

func main() { sdk.Serve(newNotes()) }

var (
	_ sdk.Configurer     = (*Notes)(nil)
	_ sdk.HTTPProvider   = (*Notes)(nil)
	_ sdk.MethodProvider = (*Notes)(nil)
	_ sdk.EventHandler   = (*Notes)(nil)
	_ sdk.JobRunner      = (*Notes)(nil)
	_ sdk.HealthChecker  = (*Notes)(nil)
	_ sdk.Stopper        = (*Notes)(nil)

	_ sdk.ConfigChangeHandler = (*Notes)(nil)
	_ sdk.ConfigValidator     = (*Notes)(nil)
)
