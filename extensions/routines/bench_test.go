package routines_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelhq/keel/sdktest"
)

// BenchmarkPublicFireHMAC measures HTTP requests per second to the public fire route of a
// webhook trigger in hmac_sha256 mode, through a real host: signature and replay checks,
// the cached secret, the run record and its activity entry. always_enqueue creates an
// execution issue per request (work wakes the assignee); skip_if_active records a skipped
// run against the live execution issue after the first request. 32 concurrent clients.
func BenchmarkPublicFireHMAC(b *testing.B) {
	h := startHost(b, sdktest.Options{})
	co := h.CreateCompany("Bench")
	agent := h.CreateAgent(co, "Bench Worker", "engineer")
	for _, policy := range []string{"always_enqueue", "skip_if_active"} {
		b.Run(policy, func(b *testing.B) {
			res := h.Do("POST", "/api/companies/"+co+"/routines", map[string]any{"title": "Bench " + policy,
				"assigneeAgentId": agent.ID, "concurrencyPolicy": policy})
			if res.Status != http.StatusCreated {
				b.Fatalf("create routine: %d %s", res.Status, res.Body)
			}
			id := res.Map(b)["id"].(string)
			res = h.Do("POST", "/api/routines/"+id+"/triggers", map[string]any{"kind": "webhook", "signingMode": "hmac_sha256"})
			if res.Status != http.StatusCreated {
				b.Fatalf("create trigger: %d %s", res.Status, res.Body)
			}
			mat := res.Map(b)["secretMaterial"].(map[string]any)
			url, secret := mat["webhookUrl"].(string), mat["webhookSecret"].(string)
			client := &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}, Timeout: time.Minute}
			var seq, failed atomic.Int64
			var firstErr atomic.Value
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := []byte(fmt.Sprintf(`{"payload":{"seq":%d}}`, seq.Add(1)))
					ts := strconv.FormatInt(time.Now().Unix(), 10)
					req, err := http.NewRequest("POST", url, bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Service-Timestamp", ts)
					req.Header.Set("X-Service-Signature", "sha256="+hexHMAC(secret, ts+"."+string(body)))
					resp, err := client.Do(req)
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted || !bytes.Contains(out, []byte(`"source":"webhook"`)) {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(out))))
					}
				}
			})
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d of %d requests failed; first: %v", n, b.N, firstErr.Load())
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
