package sdktest_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// fatalRecorder is a testing.TB whose failures are recorded instead of failing the test,
// so a test can check how the harness fails. FailNow ends the calling goroutine, as the
// real one does.
type fatalRecorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *fatalRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.FailNow()
}

func (r *fatalRecorder) FailNow() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *fatalRecorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// startRecorded runs sdktest.Start with a recorder and returns what it failed with.
func startRecorded(t *testing.T, opts sdktest.Options) (failure string, took time.Duration) {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	begin := time.Now()
	go func() {
		defer close(done)
		sdktest.Start(rec, opts)
	}()
	<-done
	took = time.Since(begin)
	require.True(t, rec.Failed(), "Start did not fail")
	require.NotEmpty(t, rec.msgs)
	return rec.msgs[0], took
}

// TestStartFailsFast checks that the harness fails within seconds, not at its two-minute
// timeout, when the extension under test cannot start, and that it prints the extension's
// last error and its log lines.
func TestStartFailsFast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, dir string
		want      []string
	}{
		{"ConfigureFails", "testdata/broken-configure", []string{
			"sdktest: extension test.broken_configure cannot start",
			"ledger unavailable",
			"last log lines of test.broken_configure:",
			"the ledger file is unreadable",
		}},
		{"ExitsBeforeServing", "testdata/broken-exit", []string{
			"sdktest: extension test.broken_exit cannot start",
			"error launching test.broken_exit",
			"broken: BROKEN_LEDGER_URL is not set",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := sdktest.BuildProcessExtension(t, tc.dir)
			msg, took := startRecorded(t, sdktest.Options{ExtensionDirs: []string{dir}})
			t.Logf("failed after %s:\n%s", took.Round(time.Millisecond), msg)
			for _, w := range tc.want {
				require.Contains(t, msg, w)
			}
		})
	}

	t.Run("RefusedAtLoad", func(t *testing.T) {
		t.Parallel()
		dir := sdktest.BuildProcessExtension(t, "testdata/broken-configure")
		msg, _ := startRecorded(t, sdktest.Options{ExtensionDirs: []string{dir, "testdata/typo"}})
		require.Contains(t, msg, "some extensions were refused at load (set Options.ExpectFailures to test that)")
		require.Contains(t, msg, "unknown field capabilites, did you mean capabilities")
	})

	t.Run("ExpectFailuresStarts", func(t *testing.T) {
		t.Parallel()
		h := sdktest.Start(t, sdktest.Options{ExtensionDirs: []string{"testdata/typo"}, ExpectFailures: true})
		require.Error(t, h.LoadErr)
	})
}
