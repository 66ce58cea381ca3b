package cases_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// benchStart starts a host with enableCases on and the cases extension ready.
func benchStart(b *testing.B) *sdktest.Host {
	b.Helper()
	h, _ := startHost(b)
	setFlag(b, h, true)
	waitStatus(b, h, "cases", "ready")
	return h
}

// caseSeed is what seedCases put in a company.
type caseSeed struct{ CompanyID, ProjectID, LabelID, ParentID string }

// seedCases creates a company and bulk-loads n cases into it with one INSERT … SELECT
// generate_series through the superuser pool (seeding only). Case k has type k%4 of four,
// status k%6 of the six, the project when k%4 = 0, the label when k%5 = 0, case 1 as parent
// when k%5 = 1, a title word k%5 of five (the q benchmarks search one) and activity
// decreasing with k: every filter matches at least a page of 10 in the company of 100.
func seedCases(b testing.TB, h *sdktest.Host, name, prefix string, n int) *caseSeed {
	b.Helper()
	ctx := context.Background()
	s := &caseSeed{CompanyID: h.CreateCompany(name), ProjectID: uuid.NewString(), LabelID: uuid.NewString()}
	pool := h.Kernel.Pool
	_, err := pool.Exec(ctx, `INSERT INTO ext_cases.cases (id, company_id, case_number, identifier, case_type, key, title,
			summary, status, project_id, created_at, updated_at, last_activity_at)
		SELECT gen_random_uuid(), $1, k, $2 || '-C' || k,
			(ARRAY['contract','memo','claim','audit'])[1 + k % 4], 'k' || k,
			'Case ' || k || ' ' || (ARRAY['alpha','bravo','charlie','delta','echo'])[1 + k % 5],
			'seeded', (ARRAY['draft','in_progress','in_review','approved','done','cancelled'])[1 + k % 6],
			CASE WHEN k % 4 = 0 THEN $4::uuid END,
			now() - k * interval '1 second', now() - k * interval '1 second', now() - k * interval '1 second'
		FROM generate_series(1, $3) AS k`, s.CompanyID, prefix, n, s.ProjectID)
	require.NoError(b, err)
	require.NoError(b, pool.QueryRow(ctx, `SELECT id::text FROM ext_cases.cases WHERE company_id = $1 AND case_number = 1`,
		s.CompanyID).Scan(&s.ParentID))
	_, err = pool.Exec(ctx, `UPDATE ext_cases.cases SET parent_case_id = $2 WHERE company_id = $1 AND case_number % 5 = 1 AND case_number > 1`,
		s.CompanyID, s.ParentID)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `INSERT INTO ext_cases.case_labels (case_id, label_id, company_id)
		SELECT id, $2, $1 FROM ext_cases.cases WHERE company_id = $1 AND case_number % 5 = 0`, s.CompanyID, s.LabelID)
	require.NoError(b, err)
	for _, table := range []string{"ext_cases.cases", "ext_cases.case_labels"} {
		_, err = pool.Exec(ctx, `VACUUM ANALYZE `+table)
		require.NoError(b, err)
	}
	return s
}

// caseBenchSizes are the company sizes compared.
var caseBenchSizes = []int{100, 50_000}

// BenchmarkCaseList lists cases in a company of 100 cases and in one of 50,000, the first
// page of 100 unfiltered and a page of 10 under each filter (both companies fill it), and
// prints the ratio per filter set.
func BenchmarkCaseList(b *testing.B) {
	h := benchStart(b)
	start := time.Now()
	seeds := map[int]*caseSeed{}
	for _, n := range caseBenchSizes {
		seeds[n] = seedCases(b, h, fmt.Sprintf("Cases %d Co", n), fmt.Sprintf("S%d", n), n)
	}
	fmt.Printf("%s: seeded %v cases in %s\n", b.Name(), caseBenchSizes, time.Since(start).Round(time.Millisecond))
	for _, q := range []struct{ name, query string }{
		{"Default", ""},
		{"TypeActive", "?type=contract&status=active&limit=10"},
		{"TypesStatuses", "?types=contract,memo&statuses=draft,in_review&limit=10"},
		{"Project", "?projectId={project}&limit=10"},
		{"ProjectOrNone", "?projectId={project}&includeNoProject=1&type=memo&limit=10"},
		{"Label", "?label={label}&limit=10"},
		{"Parent", "?parent={parent}&limit=10"},
		{"Q", "?q=charlie&limit=10"},
		{"TypesQ", "?types=contract,memo&q=charlie&limit=10"},
		// A term no page fills: a substring search reads every case of the company.
		{"QRare", "?q=no-such-term"},
		{"IncludeAncestors", "?parent={parent}&includeAncestors=true&limit=10"},
	} {
		nsPerOp := map[int]float64{}
		for _, n := range caseBenchSizes {
			s := seeds[n]
			path := "/api/companies/" + s.CompanyID + "/cases" + strings.NewReplacer("{project}", s.ProjectID,
				"{label}", s.LabelID, "{parent}", s.ParentID).Replace(q.query)
			b.Run(fmt.Sprintf("%s/%d", q.name, n), func(b *testing.B) {
				if res := h.Do("GET", path, nil); res.Status != http.StatusOK {
					b.Fatalf("GET %s: %d %s", path, res.Status, res.Body)
				}
				for b.Loop() {
					if res := h.Do("GET", path, nil); res.Status != http.StatusOK {
						b.Fatalf("GET %s: %d %s", path, res.Status, res.Body)
					}
				}
				nsPerOp[n] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
		}
		small, large := caseBenchSizes[0], caseBenchSizes[len(caseBenchSizes)-1]
		if nsPerOp[small] > 0 {
			// Printed, not logged: benchmark logs only show with -v.
			fmt.Printf("%s/%s: %d cases %.2f ms/op, %d cases %.2f ms/op, ratio %.2fx\n", b.Name(), q.name,
				small, nsPerOp[small]/1e6, large, nsPerOp[large]/1e6, nsPerOp[large]/nsPerOp[small])
		}
	}
}

// BenchmarkCaseDocumentPut revises one case document with a 200 KB body, each write on the
// previous revision, with three open annotation threads re-anchored every time, and prints
// the p50 and p99 latency.
func BenchmarkCaseDocumentPut(b *testing.B) {
	h := benchStart(b)
	co := h.CreateCompany("Docs Bench Co")
	res := h.Do("POST", "/api/companies/"+co+"/cases", map[string]any{"caseType": "bench", "title": "big documents"})
	require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
	path := "/api/cases/" + res.Map(b)["id"].(string) + "/documents/body"
	para := "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore. "
	body := func(i int) string {
		return fmt.Sprintf("revision %d\n", i) + strings.Repeat(para, 200_000/len(para)) + "the end"
	}
	res = h.Do("PUT", path, map[string]any{"body": body(0)})
	require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
	base := res.Map(b)["revision"].(map[string]any)["id"].(string)
	for _, quote := range []string{"consectetur adipiscing", "the end", "tempor incididunt"} {
		res = h.Do("POST", path+"/annotations", map[string]any{"quote": quote, "body": "note"})
		require.Equal(b, http.StatusCreated, res.Status, "%s", res.Body)
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		res := h.Do("PUT", path, map[string]any{"body": body(i), "baseRevisionId": base})
		lat = append(lat, time.Since(t0))
		if res.Status != http.StatusOK {
			b.Fatalf("PUT: %d %s", res.Status, res.Body)
		}
		var out struct {
			Revision struct {
				ID string `json:"id"`
			} `json:"revision"`
		}
		res.JSON(b, &out)
		base = out.Revision.ID
	}
	b.StopTimer()
	// The same writes to an issue document of the work owner, for scale (no threads there).
	iss := h.Do("POST", "/api/companies/"+co+"/issues", map[string]any{"title": "baseline"})
	require.Equal(b, http.StatusCreated, iss.Status, "%s", iss.Body)
	ipath := "/api/issues/" + iss.Map(b)["id"].(string) + "/documents/body"
	var ilat []time.Duration
	ibase := ""
	for j := range len(lat) {
		in := map[string]any{"body": body(j)}
		if ibase != "" {
			in["baseRevisionId"] = ibase
		}
		t0 := time.Now()
		res := h.Do("PUT", ipath, in)
		ilat = append(ilat, time.Since(t0))
		require.Less(b, res.Status, 300, "%s", res.Body)
		var out struct {
			Revision struct {
				ID string `json:"id"`
			} `json:"revision"`
		}
		res.JSON(b, &out)
		ibase = out.Revision.ID
	}
	pct := func(l []time.Duration, p int) time.Duration {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l[len(l)*p/100].Round(10 * time.Microsecond)
	}
	if len(lat) > 0 {
		fmt.Printf("%s: %d writes of %d KB with 3 open threads, p50 %s, p99 %s; issue document baseline p50 %s, p99 %s\n",
			b.Name(), len(lat), len(body(1))/1000, pct(lat, 50), pct(lat, 99), pct(ilat, 50), pct(ilat, 99))
	}
}
