package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/keelhq/keel/sdk/adapter"
)

// excerptBytes bounds the stdout and stderr excerpts kept on the run row.
const excerptBytes = 4096

// runLogPath is the run's log file: <dataDir>/runs/<runId>.log.
func (a *Agents) runLogPath(runID string) string {
	return filepath.Join(a.dataDir, "runs", runID+".log")
}

// runLogRef is the log reference stored on the run, relative to the data directory.
func runLogRef(runID string) string { return "runs/" + runID + ".log" }

// readLogFrom reads a log file from offset to its end; a missing file reads as empty.
func readLogFrom(path string, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return []byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// runLogLocks serializes writers of one run's log and sequence numbers.
type runLogLocks struct{ m sync.Map }

func (l *runLogLocks) lock(runID string) func() {
	v, _ := l.m.LoadOrStore(runID, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// appendRunEvents appends adapter events to the run's log file and events table. Log
// chunks go to the file (and the stdout/stderr excerpts); spawn events record the process
// (id, group, start time) and turn a starting run running: a run is running once a process
// exists (output from the agent, for an adapter that sends no spawn event, shows one too). Sequence numbers are assigned here, in arrival order, so engine and adapter events
// interleave without collisions.
func (a *Agents) appendRunEvents(ctx context.Context, runID string, events []adapter.RunEvent) error {
	run, err := a.runGet(ctx, a.pool, runID)
	if err != nil {
		return err
	}
	if run == nil {
		return notFound("Heartbeat run not found")
	}
	unlock := a.engine.logLocks.lock(runID)
	defer unlock()
	if err := os.MkdirAll(filepath.Dir(a.runLogPath(runID)), 0o755); err != nil {
		return fmt.Errorf("error creating run log directory: %w", err)
	}
	f, err := os.OpenFile(a.runLogPath(runID), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("error opening log of run %s: %w", runID, err)
	}
	defer f.Close()
	for _, ev := range events {
		ev.Text = a.engine.secrets.redact(runID, ev.Text)
		kind := ev.Kind
		if kind == "" {
			kind = "log"
		}
		stream := ev.Stream
		if kind == "log" && stream == "" {
			stream = "stdout"
		}
		var written int
		if kind == "log" && ev.Text != "" {
			if written, err = f.WriteString(ev.Text); err != nil {
				return fmt.Errorf("error writing log of run %s: %w", runID, err)
			}
		}
		at := ev.At
		if at.IsZero() {
			at = time.Now()
		}
		payload := ev.Payload
		if len(payload) > 0 {
			// A parsed event may quote the agent's output: redact it like the log.
			payload = a.engine.secrets.redactJSON(runID, payload)
		}
		if kind == "spawn" && ev.PID > 0 {
			payload, _ = json.Marshal(map[string]any{"pid": ev.PID})
		}
		var payloadArg any
		if len(payload) > 0 {
			payloadArg = []byte(payload)
		}
		var seq int64
		err := a.pool.QueryRow(ctx, `UPDATE heartbeat_runs SET
				last_output_seq = last_output_seq + 1,
				log_bytes = log_bytes + $2,
				log_ref = coalesce(log_ref, $3),
				last_output_at = CASE WHEN $4 = 'log' THEN $5::timestamptz ELSE last_output_at END,
				last_output_stream = CASE WHEN $4 = 'log' THEN $6 ELSE last_output_stream END,
				last_output_bytes = CASE WHEN $4 = 'log' THEN $2 ELSE last_output_bytes END,
				stdout_excerpt = CASE WHEN $4 = 'log' AND $6 = 'stdout' THEN right(coalesce(stdout_excerpt, '') || $7, $8) ELSE stdout_excerpt END,
				stderr_excerpt = CASE WHEN $4 = 'log' AND $6 = 'stderr' THEN right(coalesce(stderr_excerpt, '') || $7, $8) ELSE stderr_excerpt END,
				process_pid = CASE WHEN $4 = 'spawn' AND $9 > 0 THEN $9 ELSE process_pid END,
				process_started_at = CASE WHEN $4 = 'spawn' THEN $5::timestamptz ELSE process_started_at END,
				process_group_id = CASE WHEN $4 = 'spawn' AND $10 > 0 THEN $10 ELSE process_group_id END,
				process_start_ticks = CASE WHEN $4 = 'spawn' AND $11 > 0 THEN $11 ELSE process_start_ticks END,
				process_boot_id = CASE WHEN $4 = 'spawn' AND $11 > 0 THEN $12 ELSE process_boot_id END,
				status = CASE WHEN ($4 = 'spawn' OR ($4 = 'log' AND $6 IN ('stdout', 'stderr'))) AND status = 'queued' AND claimed_at IS NOT NULL
					THEN 'running' ELSE status END,
				started_at = CASE WHEN ($4 = 'spawn' OR ($4 = 'log' AND $6 IN ('stdout', 'stderr'))) AND status = 'queued' AND claimed_at IS NOT NULL
					THEN $5::timestamptz ELSE started_at END,
				updated_at = now()
			WHERE id = $1 RETURNING last_output_seq`,
			runID, written, runLogRef(runID), kind, at, stream, ev.Text, excerptBytes, ev.PID, ev.PGID, int64(ev.StartTicks), a.engine.bootID).Scan(&seq)
		if err != nil {
			return fmt.Errorf("error updating run %s: %w", runID, err)
		}
		level := "info"
		if stream == "stderr" {
			level = "warn"
		}
		if _, err := a.pool.Exec(ctx, `INSERT INTO heartbeat_run_events (run_id, agent_id, seq, event_type, stream, level, message, payload, created_at)
			VALUES ($1, $2, $3, $4, nullif($5, ''), $6, nullif($7, ''), $8, $9)`,
			runID, run.AgentID, seq, kind, stream, level, ev.Text, payloadArg, at); err != nil {
			return fmt.Errorf("error recording event of run %s: %w", runID, err)
		}
	}
	return nil
}

// systemEvent records an engine event (stream system) on the run, also in the log file.
func (a *Agents) systemEvent(ctx context.Context, runID, text string) {
	err := a.appendRunEvents(ctx, runID, []adapter.RunEvent{{Kind: "log", Stream: "system", Text: "[keel] " + text + "\n", At: time.Now()}})
	if err != nil {
		a.log.Warn("error recording run event", "run", runID, "error", err)
	}
}

// finalizeLog stores the log's size and SHA-256 on the run.
func (a *Agents) finalizeLog(ctx context.Context, runID string) {
	unlock := a.engine.logLocks.lock(runID)
	defer unlock()
	f, err := os.Open(a.runLogPath(runID))
	if err != nil {
		return
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return
	}
	if _, err := a.pool.Exec(ctx, `UPDATE heartbeat_runs SET log_bytes = $2, log_sha256 = $3, log_ref = $4 WHERE id = $1`,
		runID, n, hex.EncodeToString(h.Sum(nil)), runLogRef(runID)); err != nil {
		a.log.Warn("error finalizing run log", "run", runID, "error", err)
	}
}
