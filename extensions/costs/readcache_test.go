package costs

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestSummaryReadCache: repeated cost summaries are answered from the host's read cache,
// and a cost event or a budget change shows in the next summary.
func TestSummaryReadCache(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	company := h.CreateCompany("Cached Costs")
	agent := h.CreateAgent(company, "Spender", "engineer")
	path := "/api/companies/" + company + "/costs/summary"
	cost(t, h, company, agent.ID, 100)
	require.EqualValues(t, 100, obj(t, do(t, h, http.StatusOK, "GET", path, nil))["spendCents"])
	sdktest.WaitFor(t, 30*time.Second, func() bool {
		before, _ := h.Kernel.ReadCache.Stats()
		do(t, h, http.StatusOK, "GET", path, nil)
		after, _ := h.Kernel.ReadCache.Stats()
		return after > before
	}, "repeated summaries are answered from the read cache")

	cost(t, h, company, agent.ID, 250)
	require.EqualValues(t, 350, obj(t, do(t, h, http.StatusOK, "GET", path, nil))["spendCents"])
	do(t, h, http.StatusOK, "PATCH", "/api/companies/"+company+"/budgets", map[string]any{"budgetMonthlyCents": 1000})
	sum := obj(t, do(t, h, http.StatusOK, "GET", path, nil))
	require.EqualValues(t, 1000, sum["budgetCents"])
	require.EqualValues(t, 35, sum["utilizationPercent"])
}
