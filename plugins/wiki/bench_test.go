package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/sdktest"
)

// benchPages is how many pages the search benchmark's wiki holds.
const benchPages = 10_000

// BenchmarkWikiSearch measures wiki_search (ranked full-text search with snippets over
// page and source text) in a wiki of 10,000 pages, through the real path an agent takes:
// POST /api/plugins/tools/execute, the kernel, the plugin process and PostgreSQL. The
// pages are written straight to the folder and indexed by one index refresh. It prints
// the p50 and p99 latency of each query.
func BenchmarkWikiSearch(b *testing.B) {
	root := bundledRoot(b)
	h := sdktest.Start(b, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.BundledRoot = root }})
	company := h.CreateCompany("Wiki Bench Co")
	res := h.Do("POST", "/api/plugins/install", map[string]any{"packageName": filepath.Join(root, "plugins", "wiki"), "isLocalPath": true})
	require.Equal(b, http.StatusOK, res.Status, "%s", res.Body)
	wikiRoot := filepath.Join(b.TempDir(), "wiki")
	ok(b, h.Do("POST", api("/bootstrap"), map[string]any{"companyId": company, "path": wikiRoot}), http.StatusCreated)

	// Pages of 150 words each from a vocabulary of 5,000 made-up words plus a few real
	// ones: "invoice" is on about one page in ten, "zephyr" on about one in a thousand.
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("term%04x", i*7919%65536)
	}
	dirs := []string{"concepts", "entities", "synthesis", "sources"}
	start := time.Now()
	for i := range benchPages {
		var body strings.Builder
		fmt.Fprintf(&body, "# Page %d\n\n", i)
		for j := range 150 {
			if j > 0 {
				body.WriteByte(' ')
			}
			body.WriteString(vocab[rng.IntN(len(vocab))])
		}
		if i%10 == 0 {
			body.WriteString(" the monthly invoice is issued by finance")
		}
		if i%1000 == 7 {
			body.WriteString(" the zephyr migration")
		}
		fmt.Fprintf(&body, "\n\nSee [next](wiki/%s/page-%d.md).\n", dirs[(i+1)%len(dirs)], i+1)
		p := filepath.Join(wikiRoot, "wiki", dirs[i%len(dirs)], fmt.Sprintf("page-%d.md", i))
		require.NoError(b, os.WriteFile(p, []byte(body.String()), 0o644))
	}
	indexed := 0
	for {
		ref := ok(b, h.Do("POST", api("/index-refresh"), map[string]any{"companyId": company}), http.StatusOK)
		indexed += len(ref["indexed"].([]any))
		if ref["complete"] == true {
			break
		}
	}
	require.GreaterOrEqual(b, indexed, benchPages)
	fmt.Printf("%s: wrote and indexed %d pages in %s\n", b.Name(), benchPages, time.Since(start).Round(time.Millisecond))

	// The hop alone: a tool call that reads one small page.
	b.Run("ReadPageBaseline", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if r := execTool(b, h, company, "wiki_read_page", map[string]any{"path": "wiki/index.md"}); r.Error != "" {
				b.Fatal(r.Error)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		fmt.Printf("%s: wiki_read_page p50 %.2f ms (%d calls)\n", b.Name(), float64(lat[len(lat)/2].Microseconds())/1000, len(lat))
	})
	for _, q := range []struct{ name, query string }{
		{"Common", "invoice"},
		{"Rare", "zephyr"},
		{"TwoWords", "monthly finance"},
		{"NoMatch", "nonexistentword"},
		{"Path", "page-4242"},
		{"Prefix", "zeph"},
	} {
		b.Run(q.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				r := execTool(b, h, company, "wiki_search", map[string]any{"query": q.query, "limit": 20})
				lat = append(lat, time.Since(t0))
				if r.Error != "" {
					b.Fatalf("wiki_search %q: %s", q.query, r.Error)
				}
			}
			slices.Sort(lat)
			p50, p99 := lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
			fmt.Printf("%s: %d pages, %q p50 %.2f ms, p99 %.2f ms (%d calls)\n", b.Name(), benchPages, q.query,
				float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000, len(lat))
		})
	}
}
