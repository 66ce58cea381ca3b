package host

import (
	"context"
	"net/http"
	"sync"

	"github.com/keelhq/keel/host/backup"
	"github.com/keelhq/keel/kernel"
)

// backupGate lets one backup of the instance run at a time on this node.
type backupGate struct {
	mu      sync.Mutex
	running bool
}

func (g *backupGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running {
		return false
	}
	g.running = true
	return true
}

func (g *backupGate) leave() {
	g.mu.Lock()
	g.running = false
	g.mu.Unlock()
}

// Backup takes a backup of the whole instance (database and data dir files) into a new
// directory under the configured backup dir and applies the retention policy.
func (h *Host) Backup(ctx context.Context, progress func(backup.Progress)) (*backup.Result, error) {
	if !h.backups.enter() {
		return nil, kernel.Conflict("A database backup is already running")
	}
	defer h.backups.leave()
	res, err := backup.Run(ctx, backup.Options{
		Home: h.cfg.Home, DatabaseURL: h.dsn, Root: h.cfg.BackupDir, KeepLast: h.cfg.BackupKeepLast,
		MaxAgeDays: h.cfg.BackupMaxAgeDays, KeelVersion: kernel.Version, Progress: progress,
	})
	if err != nil {
		return nil, err
	}
	h.log.Info("instance backup taken", "directory", res.Directory, "duration_ms", res.DurationMs,
		"database_bytes", res.Database.Bytes, "files", res.Files.Count, "pruned", len(res.Retention.Pruned))
	return res, nil
}

func (h *Host) backupRoutes() []*kernel.Route {
	return []*kernel.Route{kernel.Mount[struct{}, backup.Result](&backupCreateEndpoint{h})}
}

type backupCreateEndpoint struct{ h *Host }

func (e *backupCreateEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: "POST /api/instance/database-backups", Status: http.StatusCreated, Access: kernel.AccessInstanceAdmin,
		Summary: "Back up the whole instance now (every database schema in one snapshot, plus attachments, keys and installed packages); reports the backup directory, retention policy and timing",
		Errors:  []int{http.StatusConflict}}
}

func (e *backupCreateEndpoint) Execute(ctx context.Context, _ *struct{}) (*backup.Result, error) {
	// A backup outlives a client that gives up waiting: it is cheap to keep and costly to
	// leave half-made.
	return e.h.Backup(context.WithoutCancel(ctx), nil)
}
