package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// companyKeys are the fields of a company record, as reference-samples/company_get.json
// shows them plus the fields the brief adds.
var companyKeys = []string{
	"id", "name", "description", "status", "issuePrefix", "issueCounter", "budgetMonthlyCents", "spentMonthlyCents",
	"defaultResponsibleUserId", "requireBoardApprovalForNewAgents", "interactionResolverGovernance",
	"feedbackDataSharingEnabled", "feedbackDataSharingConsentAt", "feedbackDataSharingConsentByUserId",
	"feedbackDataSharingTermsVersion", "logoAssetId", "brandColor", "logoUrl", "attachmentMaxBytes", "pauseReason",
	"pausedAt", "createdAt", "updatedAt",
}

func TestCompanyCreateAndGet(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())

	c := env.Company(t, map[string]any{"name": "Smoke Co 20261125231314", "description": "peer smoke test"})
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	want := append([]string(nil), companyKeys...)
	sort.Strings(keys)
	sort.Strings(want)
	require.Equal(t, want, keys)
	require.Equal(t, "Smoke Co 20261125231314", c["name"])
	require.Equal(t, "peer smoke test", c["description"])
	require.Equal(t, "active", c["status"])
	require.Equal(t, "SMO", c["issuePrefix"])
	require.EqualValues(t, 0, c["issueCounter"])
	require.EqualValues(t, 0, c["budgetMonthlyCents"])
	require.Equal(t, "local-board", c["defaultResponsibleUserId"])
	require.Equal(t, false, c["requireBoardApprovalForNewAgents"])
	require.Equal(t, map[string]any{}, c["interactionResolverGovernance"])
	require.Nil(t, c["logoUrl"])
	require.Nil(t, c["pausedAt"])
	require.EqualValues(t, 10<<20, c["attachmentMaxBytes"])
	require.Regexp(t, `Z$`, c["createdAt"])

	id := c["id"].(string)
	got := env.Do(t, "GET", "/api/companies/"+id, nil).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, c, got)

	var role, status string
	require.NoError(t, env.K.Pool.QueryRow(context.Background(), `SELECT membership_role, status FROM kernel.company_memberships
		WHERE company_id = $1 AND principal_type = 'user' AND principal_id = 'local-board'`, id).Scan(&role, &status))
	require.Equal(t, "owner", role)
	require.Equal(t, "active", status)
	require.Equal(t, []string{"company.created"}, env.Actions(t, id))

	fromStore, err := env.K.CompanyGetByID(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "SMO", fromStore.IssuePrefix)
	missing, err := env.K.CompanyGetByID(context.Background(), uuid.NewString())
	require.NoError(t, err)
	require.Nil(t, missing)
	malformed, err := env.K.CompanyGetByID(context.Background(), "nope")
	require.NoError(t, err)
	require.Nil(t, malformed)

	t.Run("AllCreateFields", func(t *testing.T) {
		c := env.Company(t, map[string]any{"name": "  Full Fields  ", "budgetMonthlyCents": 5000, "attachmentMaxBytes": 1 << 30,
			"requireBoardApprovalForNewAgents": true, "issuePrefix": "full"})
		require.Equal(t, "Full Fields", c["name"])
		require.Equal(t, "FULL", c["issuePrefix"])
		require.EqualValues(t, 5000, c["budgetMonthlyCents"])
		require.EqualValues(t, 1<<30, c["attachmentMaxBytes"])
		require.Equal(t, true, c["requireBoardApprovalForNewAgents"])
		require.Nil(t, c["description"])
	})

	t.Run("MissingCompany", func(t *testing.T) {
		env.Do(t, "GET", "/api/companies/"+uuid.NewString(), nil).RequireError(t, http.StatusNotFound, "Company not found")
		env.Do(t, "GET", "/api/companies/not-a-uuid", nil).RequireError(t, http.StatusNotFound, "Company not found")
		env.Do(t, "PATCH", "/api/companies/"+uuid.NewString(), map[string]any{"name": "x"}).RequireError(t, http.StatusNotFound, "Company not found")
	})
}

func TestCompanyIssuePrefix(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())

	steps := []struct {
		name, explicit, want string
		status               int
	}{
		{name: "Smoke Co", want: "SMO"},
		{name: "Smooth Operators", want: "SMOA"},
		{name: "smog", want: "SMOAA"},
		{name: "123 !!!", want: "CMP"},
		{name: "456", want: "CMPA"},
		{name: "a1b2c3d4", want: "ABC"},
		{name: "Ünïcode Xy", want: "NCO"},
		{name: "X", want: "X"},
		{name: "Explicit", explicit: "smo", status: http.StatusConflict},
		{name: "Explicit", explicit: "ZZZ", want: "ZZZ"},
		{name: "Zzz Corp", want: "ZZZA"},
		{name: "Smo", want: "SMOAAA"},
	}
	for _, s := range steps {
		body := map[string]any{"name": s.name}
		if s.explicit != "" {
			body["issuePrefix"] = s.explicit
		}
		r := env.Do(t, "POST", "/api/companies", body)
		if s.status == http.StatusConflict {
			r.RequireError(t, http.StatusConflict, "Issue prefix already in use")
			continue
		}
		require.Equal(t, s.want, r.RequireStatus(t, http.StatusCreated).Object(t)["issuePrefix"], "name %q", s.name)
	}
	require.Equal(t, "SMO", kernel.DeriveIssuePrefix("Smoke"))
	require.Equal(t, "CMP", kernel.DeriveIssuePrefix(""))
}

func TestCompanyConcurrentCreatesGetDistinctPrefixes(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())
	const n = 12
	var wg sync.WaitGroup
	responses := make([]*http.Response, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.NewReader(fmt.Sprintf(`{"name":"Same Name Co %d"}`, i))
			responses[i], errs[i] = http.Post(env.URL+"/api/companies", "application/json", body)
		}()
	}
	wg.Wait()
	want := map[string]bool{}
	got := map[string]bool{}
	var prefixes []string
	for i := range n {
		require.NoError(t, errs[i])
		var c struct {
			IssuePrefix string `json:"issuePrefix"`
		}
		require.Equal(t, http.StatusCreated, responses[i].StatusCode)
		require.NoError(t, json.NewDecoder(responses[i].Body).Decode(&c))
		responses[i].Body.Close()
		require.Regexp(t, regexp.MustCompile(`^SAMA*$`), c.IssuePrefix)
		prefixes = append(prefixes, c.IssuePrefix)
		got[c.IssuePrefix] = true
		want["SAM"+strings.Repeat("A", i)] = true
	}
	require.Equal(t, want, got, "prefixes %v", prefixes)
}

func TestCompanyValidation(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())
	id := env.Company(t, map[string]any{"name": "Valid Co"})["id"].(string)

	create := []struct {
		name string
		body any
		path string
	}{
		{"MissingName", map[string]any{}, "name"},
		{"BlankName", map[string]any{"name": "   "}, "name"},
		{"LongName", map[string]any{"name": strings.Repeat("x", 201)}, "name"},
		{"NameNotString", map[string]any{"name": 5}, "name"},
		{"NegativeBudget", map[string]any{"name": "A", "budgetMonthlyCents": -1}, "budgetMonthlyCents"},
		{"ZeroAttachment", map[string]any{"name": "A", "attachmentMaxBytes": 0}, "attachmentMaxBytes"},
		{"HugeAttachment", map[string]any{"name": "A", "attachmentMaxBytes": 1<<30 + 1}, "attachmentMaxBytes"},
		{"PrefixDigits", map[string]any{"name": "A", "issuePrefix": "A1"}, "issuePrefix"},
		{"PrefixShort", map[string]any{"name": "A", "issuePrefix": "A"}, "issuePrefix"},
		{"PrefixLong", map[string]any{"name": "A", "issuePrefix": "ABCDEFGHIJK"}, "issuePrefix"},
		{"UnknownResponsible", map[string]any{"name": "A", "defaultResponsibleUserId": "nobody"}, "defaultResponsibleUserId"},
	}
	for _, tc := range create {
		t.Run("Create"+tc.name, func(t *testing.T) {
			t.Parallel()
			env.Do(t, "POST", "/api/companies", tc.body).RequireValidation(t, tc.path)
		})
	}
	t.Run("CreateMalformedJSON", func(t *testing.T) {
		t.Parallel()
		env.Do(t, "POST", "/api/companies", `{"name":`).RequireError(t, http.StatusBadRequest, "Validation error")
	})

	patch := []struct {
		name string
		body any
		path string
	}{
		{"NullName", map[string]any{"name": nil}, "name"},
		{"EmptyName", map[string]any{"name": ""}, "name"},
		{"BadStatus", map[string]any{"status": "deleted"}, "status"},
		{"NegativeSpent", map[string]any{"spentMonthlyCents": -5}, "spentMonthlyCents"},
		{"BudgetNotNumber", map[string]any{"budgetMonthlyCents": "100"}, "budgetMonthlyCents"},
		{"HugeAttachment", map[string]any{"attachmentMaxBytes": 2 << 30}, "attachmentMaxBytes"},
		{"BadColor", map[string]any{"brandColor": "red"}, "brandColor"},
		{"BadLogo", map[string]any{"logoUrl": "javascript:alert(1)"}, "logoUrl"},
		{"UnknownResponsible", map[string]any{"defaultResponsibleUserId": "nobody"}, "defaultResponsibleUserId"},
		{"GovernanceNotObject", map[string]any{"interactionResolverGovernance": []int{1}}, "interactionResolverGovernance"},
	}
	for _, tc := range patch {
		t.Run("Patch"+tc.name, func(t *testing.T) {
			t.Parallel()
			env.Do(t, "PATCH", "/api/companies/"+id, tc.body).RequireValidation(t, tc.path)
		})
	}
}

func TestCompanyUpdate(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())
	c := env.Company(t, map[string]any{"name": "Update Co", "description": "first"})
	id := c["id"].(string)
	path := "/api/companies/" + id

	u := env.Do(t, "PATCH", path, map[string]any{"name": "Renamed Co", "budgetMonthlyCents": 12345, "spentMonthlyCents": 10,
		"requireBoardApprovalForNewAgents": true, "attachmentMaxBytes": 2048, "brandColor": "#aabbcc",
		"logoUrl": "https://example.com/logo.png", "description": nil,
		"interactionResolverGovernance": map[string]any{"mode": "board"}}).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, "Renamed Co", u["name"])
	require.Nil(t, u["description"])
	require.EqualValues(t, 12345, u["budgetMonthlyCents"])
	require.EqualValues(t, 10, u["spentMonthlyCents"])
	require.EqualValues(t, 2048, u["attachmentMaxBytes"])
	require.Equal(t, true, u["requireBoardApprovalForNewAgents"])
	require.Equal(t, "#aabbcc", u["brandColor"])
	require.Equal(t, "https://example.com/logo.png", u["logoUrl"])
	require.Equal(t, map[string]any{"mode": "board"}, u["interactionResolverGovernance"])
	require.Equal(t, c["issuePrefix"], u["issuePrefix"])

	paused := env.Do(t, "PATCH", path, map[string]any{"status": "paused", "pauseReason": "budget"}).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, "paused", paused["status"])
	require.Equal(t, "budget", paused["pauseReason"])
	require.NotNil(t, paused["pausedAt"])
	active := env.Do(t, "PATCH", path, map[string]any{"status": "active"}).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, "active", active["status"])
	require.Nil(t, active["pausedAt"])
	require.Nil(t, active["pauseReason"])

	fb := env.Do(t, "PATCH", path, map[string]any{"feedbackDataSharingEnabled": true, "feedbackDataSharingTermsVersion": "v1"}).
		RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, true, fb["feedbackDataSharingEnabled"])
	require.Equal(t, "local-board", fb["feedbackDataSharingConsentByUserId"])
	require.NotNil(t, fb["feedbackDataSharingConsentAt"])
	require.Equal(t, "v1", fb["feedbackDataSharingTermsVersion"])

	// An empty patch changes nothing and records nothing.
	before := len(env.Actions(t, id))
	same := env.Do(t, "PATCH", path, map[string]any{}).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, fb["updatedAt"], same["updatedAt"])
	require.Len(t, env.Actions(t, id), before)
	require.Equal(t, []string{"company.updated", "company.updated", "company.updated", "company.updated", "company.created"}, env.Actions(t, id))

	t.Run("Branding", func(t *testing.T) {
		b := env.Do(t, "PATCH", path+"/branding", map[string]any{"brandColor": "#12ABef", "logoUrl": "http://cdn.test/x.svg"}).
			RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, "#12ABef", b["brandColor"])
		require.Equal(t, "http://cdn.test/x.svg", b["logoUrl"])
		cleared := env.Do(t, "PATCH", path+"/branding", map[string]any{"brandColor": nil, "logoUrl": nil}).RequireStatus(t, http.StatusOK).Object(t)
		require.Nil(t, cleared["brandColor"])
		require.Nil(t, cleared["logoUrl"])
		require.Equal(t, "company.branding_updated", env.Actions(t, id)[0])

		env.Do(t, "PATCH", path+"/branding", map[string]any{"brandColor": "#12345"}).RequireValidation(t, "brandColor")
		env.Do(t, "PATCH", path+"/branding", map[string]any{"brandColor": "red"}).RequireValidation(t, "brandColor")
		env.Do(t, "PATCH", path+"/branding", map[string]any{"logoUrl": "ftp://cdn.test/x.svg"}).RequireValidation(t, "logoUrl")
		env.Do(t, "PATCH", path+"/branding", map[string]any{"logoUrl": "/relative.png"}).RequireValidation(t, "logoUrl")
		// No branding field (other fields are ignored): 400 with the reference's text.
		name := env.Do(t, "GET", path, nil).Object(t)["name"]
		for _, body := range []any{map[string]any{}, map[string]any{"name": "Not Branding"}, nil} {
			res := env.Do(t, "PATCH", path+"/branding", body)
			res.RequireValidation(t, "")
			require.Contains(t, string(res.Body), `"message":"At least one branding field must be provided"`)
		}
		require.Equal(t, name, env.Do(t, "GET", path, nil).Object(t)["name"], "name is not changed by the branding route")
	})
}

func TestCompanyArchiveListAndDelete(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())
	a := env.Company(t, map[string]any{"name": "Alpha"})["id"].(string)
	b := env.Company(t, map[string]any{"name": "Beta"})["id"].(string)
	ids := func(r *ktResp) []string {
		var out []string
		for _, c := range r.RequireStatus(t, http.StatusOK).List(t) {
			out = append(out, c["id"].(string))
		}
		return out
	}
	require.Equal(t, []string{a, b}, ids(env.Do(t, "GET", "/api/companies", nil)))

	archived := env.Do(t, "POST", "/api/companies/"+b+"/archive", nil).RequireStatus(t, http.StatusOK).Object(t)
	require.Equal(t, "archived", archived["status"])
	require.Equal(t, "company.archived", env.Actions(t, b)[0])
	require.Equal(t, []string{a}, ids(env.Do(t, "GET", "/api/companies", nil)))
	require.Equal(t, []string{a, b}, ids(env.Do(t, "GET", "/api/companies?includeArchived=true", nil)))
	// Archiving again is a no-op; unknown body fields are ignored.
	env.Do(t, "POST", "/api/companies/"+b+"/archive", nil).RequireStatus(t, http.StatusOK)
	env.Do(t, "POST", "/api/companies/"+b+"/archive", map[string]any{"reason": "x"}).RequireStatus(t, http.StatusOK)
	require.Equal(t, 1, strings.Count(strings.Join(env.Actions(t, b), ","), "company.archived"))

	// Reversible with PATCH status active.
	env.Do(t, "PATCH", "/api/companies/"+b, map[string]any{"status": "active"}).RequireStatus(t, http.StatusOK)
	require.Equal(t, []string{a, b}, ids(env.Do(t, "GET", "/api/companies", nil)))
	env.Do(t, "GET", "/api/companies?includeArchived=maybe", nil).RequireValidation(t, "includeArchived")

	stats := env.Do(t, "GET", "/api/companies/stats", nil).RequireStatus(t, http.StatusOK).Object(t)
	require.EqualValues(t, 2, stats["total"])
	require.Equal(t, map[string]any{"active": 2.0, "paused": 0.0, "archived": 0.0}, stats["byStatus"])
	require.Len(t, stats["companies"], 2)

	env.Do(t, "DELETE", "/api/companies/"+a, nil).RequireError(t, http.StatusForbidden, "Company deletion is disabled")
	env.Do(t, "GET", "/api/companies/"+a, nil).RequireStatus(t, http.StatusOK)

	t.Run("DeletionEnabled", func(t *testing.T) {
		cfg := ktLocal()
		cfg.EnableCompanyDeletion = true
		env := ktStart(t, cfg)
		id := env.Company(t, map[string]any{"name": "Doomed"})["id"].(string)
		env.Agent(t, id, "Worker")
		del := env.Do(t, "DELETE", "/api/companies/"+id, nil).RequireStatus(t, http.StatusOK).Object(t)
		require.Equal(t, true, del["ok"])
		env.Do(t, "GET", "/api/companies/"+id, nil).RequireError(t, http.StatusNotFound, "Company not found")
		env.Do(t, "DELETE", "/api/companies/"+id, nil).RequireError(t, http.StatusNotFound, "Company not found")
		require.Equal(t, "company.deleted", env.Actions(t, id)[0])
	})
}

func TestCompanyAccess(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktAuthenticated())
	adminID, admin := env.User(t, "Admin", true)
	_, outsider := env.User(t, "Outsider", false)
	viewerID, viewer := env.User(t, "Viewer", false)

	c := env.Company(t, map[string]any{"name": "Admin Co"}, ktSession(admin))
	id := c["id"].(string)
	require.Equal(t, adminID, c["defaultResponsibleUserId"])
	require.NoError(t, env.K.MembershipEnsure(context.Background(), id, "user", viewerID, "viewer"))

	t.Run("Unauthenticated", func(t *testing.T) {
		t.Parallel()
		env.Do(t, "GET", "/api/companies", nil).RequireStatus(t, http.StatusUnauthorized)
		env.Do(t, "GET", "/api/companies/"+id, nil).RequireStatus(t, http.StatusUnauthorized)
		env.Do(t, "POST", "/api/companies", map[string]any{"name": "Anon"}).RequireStatus(t, http.StatusUnauthorized)
	})
	t.Run("WrongCompanyIsForbidden", func(t *testing.T) {
		t.Parallel()
		env.Do(t, "GET", "/api/companies/"+id, nil, ktSession(outsider)).RequireError(t, http.StatusForbidden, "You do not have access to this company")
		env.Do(t, "PATCH", "/api/companies/"+id, map[string]any{"name": "Mine"}, ktSession(outsider)).RequireStatus(t, http.StatusForbidden)
		env.Do(t, "GET", "/api/companies/"+id+"/activity", nil, ktSession(outsider)).RequireStatus(t, http.StatusForbidden)
		require.Empty(t, env.Do(t, "GET", "/api/companies", nil, ktSession(outsider)).RequireStatus(t, http.StatusOK).List(t))
	})
	t.Run("MissingCompanyForAdmin", func(t *testing.T) {
		t.Parallel()
		env.Do(t, "GET", "/api/companies/"+uuid.NewString(), nil, ktSession(admin)).RequireError(t, http.StatusNotFound, "Company not found")
	})
	t.Run("ViewerReadsButCannotUpdate", func(t *testing.T) {
		t.Parallel()
		env.Do(t, "GET", "/api/companies/"+id, nil, ktSession(viewer)).RequireStatus(t, http.StatusOK)
		env.Do(t, "PATCH", "/api/companies/"+id, map[string]any{"name": "Viewer Co"}, ktSession(viewer)).
			RequireError(t, http.StatusForbidden, "Viewers cannot change anything in this company")
		env.Do(t, "POST", "/api/companies/"+id+"/archive", nil, ktSession(viewer)).RequireStatus(t, http.StatusForbidden)
	})
	t.Run("BoardUserSeesOwnCompanies", func(t *testing.T) {
		t.Parallel()
		_, founder := env.User(t, "Founder", false)
		own := env.Company(t, map[string]any{"name": "Founder Co"}, ktSession(founder))
		list := env.Do(t, "GET", "/api/companies", nil, ktSession(founder)).RequireStatus(t, http.StatusOK).List(t)
		require.Len(t, list, 1)
		require.Equal(t, own["id"], list[0]["id"])
		env.Do(t, "PATCH", "/api/companies/"+own["id"].(string), map[string]any{"budgetMonthlyCents": 1}, ktSession(founder)).
			RequireStatus(t, http.StatusOK)
		stats := env.Do(t, "GET", "/api/companies/stats", nil, ktSession(founder)).RequireStatus(t, http.StatusOK).Object(t)
		require.EqualValues(t, 1, stats["total"])
	})
	t.Run("AgentSeesOnlyItsCompany", func(t *testing.T) {
		t.Parallel()
		other := env.Company(t, map[string]any{"name": "Other Co"}, ktSession(admin))["id"].(string)
		_, key := env.Agent(t, id, "Scout")
		list := env.Do(t, "GET", "/api/companies", nil, ktBearer(key)).RequireStatus(t, http.StatusOK).List(t)
		require.Len(t, list, 1)
		require.Equal(t, id, list[0]["id"])
		env.Do(t, "GET", "/api/companies/"+id, nil, ktBearer(key)).RequireStatus(t, http.StatusOK)
		env.Do(t, "GET", "/api/companies/"+other, nil, ktBearer(key)).RequireStatus(t, http.StatusForbidden)
		env.Do(t, "POST", "/api/companies", map[string]any{"name": "Agent Co"}, ktBearer(key)).RequireStatus(t, http.StatusForbidden)
		env.Do(t, "GET", "/api/companies/stats", nil, ktBearer(key)).RequireStatus(t, http.StatusForbidden)
	})
}

// TestCompanyIssueNumberRanges reserves issue numbers concurrently, one at a time and in
// ranges: every range comes back whole, no number is handed out twice, together they cover
// 1..total without a gap, and the company's issueCounter is the last number.
func TestCompanyIssueNumberRanges(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktLocal())
	ctx := context.Background()
	c := env.Company(t, map[string]any{"name": "Numbering Co"})
	id := c["id"].(string)

	counts := []int{1, 1, 3, 256, 1, 7, 2, 1, 64, 1, 5, 1}
	type reserved struct{ first, last int64 }
	got := make([]reserved, len(counts))
	var wg sync.WaitGroup
	for i, n := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prefix, first, last, err := env.K.CompanyNextIssueNumbers(ctx, id, n)
			if !assert.NoError(t, err) {
				return
			}
			assert.Equal(t, c["issuePrefix"], prefix)
			got[i] = reserved{first, last}
		}()
	}
	wg.Wait()
	total := 0
	seen := map[int64]bool{}
	for i, r := range got {
		require.Equal(t, int64(counts[i]), r.last-r.first+1, "range %d: %d..%d", i, r.first, r.last)
		for n := r.first; n <= r.last; n++ {
			require.False(t, seen[n], "number %d handed out twice", n)
			seen[n] = true
		}
		total += counts[i]
	}
	for n := int64(1); n <= int64(total); n++ {
		require.True(t, seen[n], "number %d never handed out", n)
	}
	got1 := env.Do(t, "GET", "/api/companies/"+id, nil).RequireStatus(t, http.StatusOK).Object(t)
	require.EqualValues(t, total, got1["issueCounter"])

	// One more goes on from there.
	_, first, last, err := env.K.CompanyNextIssueNumbers(ctx, id, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{int64(total) + 1, int64(total) + 1}, []int64{first, last})

	for _, n := range []int{0, -1, kernel.IssueNumbersMax + 1} {
		_, _, _, err := env.K.CompanyNextIssueNumbers(ctx, id, n)
		var apiErr *kernel.APIError
		require.ErrorAs(t, err, &apiErr, "count %d", n)
		require.Equal(t, http.StatusBadRequest, apiErr.Status, "count %d", n)
	}
	_, _, _, err = env.K.CompanyNextIssueNumbers(ctx, uuid.NewString(), 1)
	var apiErr *kernel.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusNotFound, apiErr.Status)
}
