package bench

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk/sdktest"
)

// BenchmarkUpgradeUnderLoad installs the notes example through the API, puts a steady load
// of reads on its routes (8 clients), upgrades it to a new version and reports the
// requests served while the upgrade ran, the failed ones (the budget is zero), the
// longest request and how long the upgrade took end to end.
func BenchmarkUpgradeUnderLoad(b *testing.B) {
	v1 := sdktest.BuildProcessExtension(b, "../../examples/process-notes")
	v2 := sdktest.BuildProcessExtensionVersion(b, "../../examples/process-notes", "0.2.0", nil)
	v3 := sdktest.BuildProcessExtensionVersion(b, "../../examples/process-notes", "0.3.0", nil)
	pub := filepath.Join(b.TempDir(), "notes-package")
	sdktest.Publish(b, pub, v1)
	h := sdktest.Start(b, sdktest.Options{})
	res := h.Do("POST", "/api/plugins/install", map[string]any{"packageName": pub, "isLocalPath": true})
	require.Equal(b, http.StatusOK, res.Status, "%s", res.Body)
	company := h.CreateCompany("Upgrade Bench Co")
	notes := "/api/companies/" + company + "/notes"
	require.Equal(b, http.StatusCreated, h.Do("POST", notes, map[string]any{"text": "n"}).Status)

	var served, failed int64
	var longest, took time.Duration
	next := v2
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sdktest.Publish(b, pub, next)
		load := sdktest.StartLoad(h.URL, []string{notes, notes + "/stats"}, 8, nil)
		sdktest.WaitFor(b, time.Minute, func() bool { return load.Served() >= 50 }, "the load to start")
		before := load.Served()
		began := time.Now()
		res := h.Do("POST", "/api/plugins/example.notes/upgrade", nil)
		took += time.Since(began)
		during := load.Served() - before
		got := load.Stop()
		require.Equal(b, http.StatusOK, res.Status, "%s", res.Body)
		served += during
		failed += got.Failed
		longest = max(longest, got.Longest)
		if next == v2 {
			next = v3
		} else {
			next = v2
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(served)/float64(b.N), "served-during-upgrade")
	b.ReportMetric(float64(failed), "failed-requests")
	b.ReportMetric(float64(longest.Milliseconds()), "longest-request-ms")
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "upgrade-ms")
}
