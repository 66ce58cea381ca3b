package portability_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// writeBenchPackage writes a package of a company with three agents, two projects and n
// issues (one comment each, a document on every hundredth, a parent on every tenth).
func writeBenchPackage(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	put := func(name, content string) {
		full := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(b, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(b, os.WriteFile(full, []byte(content), 0o644))
	}
	m := map[string]any{"kind": "keel.company-package", "schemaVersion": 1, "exportedAt": time.Now().UTC(),
		"source": map[string]any{"companyId": "", "companyName": "Bench"}, "include": []string{"company", "agents", "projects", "issues"},
		"company": "COMPANY.md", "assets": []any{}, "routines": []any{}, "skills": []any{}}
	put("COMPANY.md", "---\nname: Bench\nbudgetMonthlyCents: 1000\n---\nA benchmark company.\n")
	var agents, projects, issues []string
	for _, a := range []string{"alpha", "beta", "gamma"} {
		p := "agents/" + a + "/AGENT.md"
		put(p, "---\nslug: "+a+"\nname: "+strings.ToUpper(a[:1])+a[1:]+"\nrole: engineer\nadapterType: process\nbudgetMonthlyCents: 0\n---\n")
		agents = append(agents, p)
	}
	for _, pr := range []string{"apollo", "gemini"} {
		p := "projects/" + pr + "/PROJECT.md"
		put(p, "---\nslug: "+pr+"\nname: "+pr+"\nstatus: in_progress\n---\nA project.\n")
		projects = append(projects, p)
	}
	statuses := []string{"backlog", "todo", "in_review", "done", "cancelled"}
	for i := range n {
		ref := fmt.Sprintf("BEN-%d", i+1)
		var fm strings.Builder
		fmt.Fprintf(&fm, "---\nref: %s\ntitle: Issue %d\nstatus: %s\npriority: medium\nproject: %s\n", ref, i, statuses[i%5], []string{"apollo", "gemini"}[i%2])
		if i%10 == 9 {
			fmt.Fprintf(&fm, "parent: BEN-%d\n", i)
		}
		fm.WriteString("comments:\n  - comments/0001.md\n")
		if i%100 == 0 {
			fm.WriteString("documents:\n  - documents/plan.md\n")
			put("issues/"+ref+"/documents/plan.md", "---\nkey: plan\ntitle: Plan\nformat: markdown\n---\n# Plan\n")
		}
		fm.WriteString("---\nThe description of issue " + strconv.Itoa(i) + ".\n")
		put("issues/"+ref+"/ISSUE.md", fm.String())
		put("issues/"+ref+"/comments/0001.md", "---\nauthorType: user\n---\nA comment on issue "+strconv.Itoa(i)+".\n")
		issues = append(issues, "issues/"+ref+"/ISSUE.md")
	}
	m["agents"], m["projects"], m["issues"] = agents, projects, issues
	raw, err := json.Marshal(m)
	require.NoError(b, err)
	put("manifest.json", string(raw))
	return dir
}

// peakMB reads a process's peak resident set (VmHWM) in MB; resetPeak starts a new peak.
func peakMB(b *testing.B, pid int) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

func resetPeak(pid int) { _ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) }

// BenchmarkPortability10k imports a generated package of a company with 10,000 issues (each
// with a comment) and exports that company to a directory (KEEL_BENCH_REIMPORT=1 also
// imports the export into a third company): seconds of each step and the peak memory
// (VmHWM) of the portability and work processes. Run with -benchtime 1x.
func BenchmarkPortability10k(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("KEEL_BENCH_ISSUES")); err == nil && v > 0 {
		n = v // a smaller run while iterating
	}
	h := sdktest.Start(b, sdktest.Options{Builtins: true})
	pkgDir := writeBenchPackage(b, n)
	portPID, workPID := h.Supervisor.PID("portability"), h.Supervisor.PID("work")
	require.NotZero(b, portPID)
	step := func(name string, do func()) {
		resetPeak(portPID)
		resetPeak(workPID)
		start := time.Now()
		do()
		b.ReportMetric(time.Since(start).Seconds(), name+"-s")
		b.ReportMetric(peakMB(b, portPID), name+"-peak-MB")
		b.ReportMetric(peakMB(b, workPID), name+"-work-peak-MB")
	}
	for b.Loop() {
		src := h.CreateCompany("Bench Source")
		step("import", func() {
			res := ok(b, h.Do("POST", "/api/companies/"+src+"/imports/apply", map[string]any{"source": pkgDir}), http.StatusOK)
			require.EqualValues(b, n, res["progress"].(map[string]any)["issues"])
		})
		out := filepath.Join(b.TempDir(), "export")
		step("export", func() {
			res := ok(b, h.Do("POST", "/api/companies/"+src+"/exports", map[string]any{"include": []string{"company", "agents", "projects", "issues"},
				"outputPath": out}), http.StatusOK)
			require.EqualValues(b, n, res["counts"].(map[string]any)["issues"])
		})
		if os.Getenv("KEEL_BENCH_REIMPORT") == "" {
			continue
		}
		dst := h.CreateCompany("Bench Copy")
		step("reimport", func() {
			res := ok(b, h.Do("POST", "/api/companies/"+dst+"/imports/apply", map[string]any{"source": out}), http.StatusOK)
			require.EqualValues(b, n, res["progress"].(map[string]any)["issues"])
		})
	}
}
