package costs

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestFinanceEvents(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	company := h.CreateCompany("Finance Co")
	agent := createAgent(t, h, company, "Accountant")
	now := time.Now().UTC()
	post := func(body map[string]any) map[string]any {
		t.Helper()
		return obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/finance-events", body))
	}
	fee := post(map[string]any{"eventKind": "platform_fee", "direction": "debit", "biller": "smoke-biller", "amountCents": 99,
		"occurredAt": iso(now.Add(-3 * time.Hour))})
	require.Equal(t, []string{"agentId", "amountCents", "biller", "billingCode", "companyId", "costEventId", "createdAt", "currency",
		"description", "direction", "estimated", "eventKind", "executionAdapterType", "externalInvoiceId", "goalId", "heartbeatRunId", "id",
		"issueId", "metadataJson", "model", "occurredAt", "pricingTier", "projectId", "provider", "quantity", "region", "unit"}, keysOf(fee))
	require.Equal(t, "USD", fee["currency"])
	require.Equal(t, false, fee["estimated"])
	require.Nil(t, fee["metadataJson"])

	cost := postCost(t, h, company, map[string]any{"agentId": agent, "provider": "anthropic", "model": "m", "costCents": 40, "occurredAt": iso(now)})
	charge := post(map[string]any{"eventKind": "inference_charge", "biller": "smoke-biller", "amountCents": 50, "estimated": true,
		"occurredAt": iso(now.Add(-2 * time.Hour)), "agentId": agent, "costEventId": cost["id"], "quantity": 1500, "unit": "input_token",
		"provider": "anthropic", "model": "m", "metadata": map[string]any{"invoiceLine": 3}, "currency": "usd"})
	require.Equal(t, "debit", charge["direction"], "direction defaults to debit")
	require.Equal(t, "USD", charge["currency"])
	require.Equal(t, map[string]any{"invoiceLine": float64(3)}, charge["metadataJson"])
	require.EqualValues(t, 1500, charge["quantity"])
	post(map[string]any{"eventKind": "credit_refund", "direction": "credit", "biller": "other-biller", "amountCents": 30,
		"occurredAt": iso(now.Add(-time.Hour))})
	post(map[string]any{"eventKind": "platform_fee", "biller": "smoke-biller", "amountCents": 1000, "occurredAt": iso(now.Add(-40 * 24 * time.Hour))})

	base := "/api/companies/" + company + "/costs/"
	recent := "?from=" + url.QueryEscape(iso(now.Add(-24*time.Hour)))
	require.Equal(t, map[string]any{"companyId": company, "debitCents": float64(149), "creditCents": float64(30), "netCents": float64(119),
		"estimatedDebitCents": float64(50), "eventCount": float64(3)}, obj(t, do(t, h, http.StatusOK, "GET", base+"finance-summary"+recent, nil)))
	require.EqualValues(t, 1149, obj(t, do(t, h, http.StatusOK, "GET", base+"finance-summary", nil))["debitCents"], "all time when from/to are omitted")

	require.Equal(t, []map[string]any{
		{"biller": "smoke-biller", "debitCents": float64(149), "creditCents": float64(0), "estimatedDebitCents": float64(50), "eventCount": float64(2),
			"kindCount": float64(2), "netCents": float64(149)},
		{"biller": "other-biller", "debitCents": float64(0), "creditCents": float64(30), "estimatedDebitCents": float64(0), "eventCount": float64(1),
			"kindCount": float64(1), "netCents": float64(-30)},
	}, list(t, do(t, h, http.StatusOK, "GET", base+"finance-by-biller"+recent, nil)))
	byKind := list(t, do(t, h, http.StatusOK, "GET", base+"finance-by-kind", nil))
	require.Len(t, byKind, 3)
	require.Equal(t, map[string]any{"eventKind": "platform_fee", "debitCents": float64(1099), "creditCents": float64(0), "estimatedDebitCents": float64(0),
		"eventCount": float64(2), "billerCount": float64(1), "netCents": float64(1099)}, byKind[0])

	evs := list(t, do(t, h, http.StatusOK, "GET", base+"finance-events", nil))
	require.Len(t, evs, 4)
	require.Equal(t, "credit_refund", evs[0]["eventKind"], "newest first")
	evs = list(t, do(t, h, http.StatusOK, "GET", base+"finance-events?limit=2&to="+url.QueryEscape(iso(now.Add(-2*time.Hour))), nil))
	require.Len(t, evs, 2)
	require.Equal(t, charge["id"], evs[0]["id"], "to is inclusive")
	requireValidation(t, h.Do("GET", base+"finance-events?limit=501", nil), "limit")
	requireValidation(t, h.Do("GET", base+"finance-events?limit=0", nil), "limit")
	requireValidation(t, h.Do("GET", base+"finance-summary?to=soon", nil), "to")

	t.Run("Validation", func(t *testing.T) {
		good := func(over map[string]any) map[string]any {
			b := map[string]any{"eventKind": "platform_fee", "biller": "b", "amountCents": 1, "occurredAt": iso(now)}
			for k, v := range over {
				if v == nil {
					delete(b, k)
				} else {
					b[k] = v
				}
			}
			return b
		}
		other := h.CreateCompany("Elsewhere Co")
		stranger := createAgent(t, h, other, "Stranger")
		for _, tc := range []struct {
			name string
			body map[string]any
			path string
		}{
			{"MissingKind", good(map[string]any{"eventKind": nil}), "eventKind"},
			{"UnknownKind", good(map[string]any{"eventKind": "tip"}), "eventKind"},
			{"UnknownSpecKind", good(map[string]any{"eventKind": nil, "kind": "tip"}), "eventKind"},
			{"KindsDisagree", good(map[string]any{"kind": "credit_refund"}), "kind"},
			{"BadDirection", good(map[string]any{"direction": "sideways"}), "direction"},
			{"MissingBiller", good(map[string]any{"biller": ""}), "biller"},
			{"MissingAmount", good(map[string]any{"amountCents": nil}), "amountCents"},
			{"NegativeAmount", good(map[string]any{"amountCents": -5}), "amountCents"},
			{"BadCurrency", good(map[string]any{"currency": "dollars"}), "currency"},
			{"BadUnit", good(map[string]any{"unit": "bytes"}), "unit"},
			{"NegativeQuantity", good(map[string]any{"quantity": -1}), "quantity"},
			{"MissingOccurredAt", good(map[string]any{"occurredAt": nil}), "occurredAt"},
			{"MetadataNotObject", good(map[string]any{"metadataJson": []int{1}}), "metadataJson"},
			{"ForeignAgent", good(map[string]any{"agentId": stranger}), "agentId"},
			{"UnknownCostEvent", good(map[string]any{"costEventId": uuid.NewString()}), "costEventId"},
			{"UnknownProject", good(map[string]any{"projectId": uuid.NewString()}), "projectId"},
		} {
			requireValidation(t, h.Do("POST", "/api/companies/"+company+"/finance-events", tc.body), tc.path)
		}
		// The spec's field name kind is accepted beside the reference's eventKind, and
		// unknown fields are ignored (posted to the other company so the sums above stay put).
		spec := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+other+"/finance-events",
			map[string]any{"kind": "credit_purchase", "direction": "credit", "biller": "b", "amountCents": 7, "currency": "eur",
				"estimated": true, "occurredAt": iso(now), "metadata": map[string]any{"po": "42"}, "bogus": 1}))
		require.Equal(t, "credit_purchase", spec["eventKind"])
		require.Equal(t, "credit", spec["direction"])
		require.Equal(t, "EUR", spec["currency"])
		require.Equal(t, true, spec["estimated"])
		require.Equal(t, map[string]any{"po": "42"}, spec["metadataJson"])
		both := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+other+"/finance-events",
			good(map[string]any{"kind": "platform_fee"})))
		require.Equal(t, "platform_fee", both["eventKind"])
		// Board only: an agent of the company is refused.
		key := agentKey(t, h, agent)
		do(t, h, http.StatusForbidden, "POST", "/api/companies/"+company+"/finance-events", good(nil), key...)
		do(t, h, http.StatusOK, "GET", base+"finance-summary", nil, key...)
	})

	t.Run("QuotaWindows", func(t *testing.T) {
		require.Equal(t, "[]\n", string(do(t, h, http.StatusOK, "GET", base+"quota-windows", nil).Body))
		do(t, h, http.StatusNotFound, "GET", "/api/companies/"+uuid.NewString()+"/costs/quota-windows", nil)
	})

	acts := list(t, do(t, h, http.StatusOK, "GET", "/api/companies/"+company+"/activity?action=finance_event.created", nil))
	require.Len(t, acts, 4)
}
