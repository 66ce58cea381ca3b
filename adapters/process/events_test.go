package process_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// eventsDirEnv names the directory the fake agents sink appends run events to.
const eventsDirEnv = "KEEL_TEST_RUNEVENTS_DIR"

// sink is a stand-in for the agents extension that provides only agents.runEvents and
// appends every event it receives to <dir>/<runId>.jsonl.
type sink struct{}

func init() { extensions.Register("agents", func() sdk.Extension { return sink{} }) }

func (sink) Manifest() *sdk.Manifest {
	return &sdk.Manifest{Key: "agents", Version: "0.0.1", Kind: sdk.KindFeature,
		Runtime: sdk.Runtime{Kind: sdk.RuntimeProcess}, Provides: []sdk.Method{{Name: "runEvents"}}}
}

func (sink) CallMethod(_ context.Context, call *sdk.MethodCall) (any, error) {
	var req adapter.RunEventsRequest
	if err := call.Bind(&req); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(os.Getenv(eventsDirEnv), filepath.Base(req.RunID)+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, ev := range req.Events {
		if err := enc.Encode(ev); err != nil {
			return nil, err
		}
	}
	return map[string]any{"accepted": len(req.Events)}, nil
}

func readEvents(t *testing.T, runID string) []adapter.RunEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(os.Getenv(eventsDirEnv), runID+".jsonl"))
	require.NoError(t, err)
	var out []adapter.RunEvent
	dec := json.NewDecoder(strings.NewReader(string(b)))
	for dec.More() {
		var ev adapter.RunEvent
		require.NoError(t, dec.Decode(&ev))
		out = append(out, ev)
	}
	return out
}

func TestRunEventsStreamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runID := uuid.NewString()
	res := e.execute(t, runID, map[string]any{"command": "sh", "args": []string{"-c",
		"echo one; echo two >&2; sleep 0.3; echo three"}}, nil)
	require.Equal(t, adapter.StatusSucceeded, res.Status)

	// Events are delivered before execute returns.
	events := readEvents(t, runID)
	require.NotEmpty(t, events)
	require.Equal(t, "spawn", events[0].Kind, "the spawn event comes first")
	require.Equal(t, res.PID, events[0].PID)
	var stdout, stderr strings.Builder
	for i, ev := range events {
		require.Equal(t, int64(i+1), ev.Seq, "events are numbered in order")
		require.WithinDuration(t, time.Now(), ev.At, time.Minute)
		if ev.Kind == "log" {
			map[string]*strings.Builder{"stdout": &stdout, "stderr": &stderr}[ev.Stream].WriteString(ev.Text)
		}
	}
	require.Equal(t, "one\nthree\n", stdout.String())
	require.Equal(t, "two\n", stderr.String())
}

// TestRunEventsLargeOutput checks that a run with much output (several 64 KiB batches)
// delivers every byte. A host without any agents.runEvents provider is covered by the http
// adapter's tests.
func TestRunEventsLargeOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runID := uuid.NewString()
	res := e.execute(t, runID, map[string]any{"command": "sh", "args": []string{"-c",
		`i=0; while [ $i -lt 30000 ]; do printf '%09d\n' $i; i=$((i+1)); done`}}, nil)
	require.Equal(t, adapter.StatusSucceeded, res.Status)
	total := 0
	for _, ev := range readEvents(t, runID) {
		if ev.Kind == "log" && ev.Stream == "stdout" {
			total += len(ev.Text)
		}
	}
	require.Equal(t, 300000, total)
}
