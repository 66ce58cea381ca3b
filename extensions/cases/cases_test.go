package cases_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// attachmentMax is SERVICE_ATTACHMENT_MAX_BYTES for the extension processes of TestCases.
const attachmentMax = 4096

// TestCases drives every case route through a real host: the flag first, then subtests in
// their own companies, then the flag off again. It sets SERVICE_ATTACHMENT_MAX_BYTES for
// the extension processes, so it does not run in parallel with other tests.
func TestCases(t *testing.T) {
	t.Setenv("SERVICE_ATTACHMENT_MAX_BYTES", fmt.Sprint(attachmentMax))
	h, home := startHost(t)
	f0 := newCompany(t, h, "Flagged")

	// Off by default: every route answers 403 Cases are disabled.
	wantErr(t, h.Do("GET", "/api/companies/"+f0.co+"/cases", nil), http.StatusForbidden, "Cases are disabled")
	wantErr(t, h.Do("POST", "/api/companies/"+f0.co+"/cases", map[string]any{"caseType": "x", "title": "y"}), http.StatusForbidden, "Cases are disabled")
	wantErr(t, h.Do("GET", "/api/cases/"+uuid.NewString(), nil), http.StatusForbidden, "Cases are disabled")
	wantErr(t, h.Do("GET", "/api/issues/"+uuid.NewString()+"/cases", nil), http.StatusForbidden, "Cases are disabled")
	// On without a restart.
	setFlag(t, h, true)
	waitStatus(t, h, "cases", "ready")
	ok(t, h.Do("POST", "/api/companies/"+f0.co+"/cases", map[string]any{"caseType": "x", "title": "y"}), http.StatusCreated)

	t.Run("Group", func(t *testing.T) {
		t.Run("CreateUpsertIdentifiers", func(t *testing.T) { t.Parallel(); testCreate(t, h) })
		t.Run("ConcurrentCreates", func(t *testing.T) { t.Parallel(); testConcurrentCreates(t, h) })
		t.Run("PatchAndEvents", func(t *testing.T) { t.Parallel(); testPatch(t, h) })
		t.Run("ListFilters", func(t *testing.T) { t.Parallel(); testList(t, h) })
		t.Run("Links", func(t *testing.T) { t.Parallel(); testLinks(t, h) })
		t.Run("Documents", func(t *testing.T) { t.Parallel(); testDocuments(t, h) })
		t.Run("Annotations", func(t *testing.T) { t.Parallel(); testAnnotations(t, h) })
		t.Run("Attachments", func(t *testing.T) { t.Parallel(); testAttachments(t, h) })
		t.Run("AgentRunAutoLinks", func(t *testing.T) { t.Parallel(); testAutoLinks(t, h) })
		t.Run("ForeignCompany", func(t *testing.T) { t.Parallel(); testForeign(t, h) })
		t.Run("CompanyDeletePurges", func(t *testing.T) { t.Parallel(); testPurge(t, h, home) })
	})

	// Off again: the extension stops and every route answers 403.
	setFlag(t, h, false)
	waitStatus(t, h, "cases", "disabled")
	wantErr(t, h.Do("GET", "/api/companies/"+f0.co+"/cases", nil), http.StatusForbidden, "Cases are disabled")
}

func testCreate(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Creator Co")
	prefix := ok(t, h.Do("GET", "/api/companies/"+f.co, nil), http.StatusOK)["issuePrefix"].(string)
	c := f.create(t, http.StatusCreated, map[string]any{"caseType": "contract", "key": "acme-1", "title": "Review ACME",
		"summary": "first", "fields": map[string]any{"counterparty": "ACME"}})
	require.EqualValues(t, 1, c["caseNumber"])
	require.Equal(t, prefix+"-C1", c["identifier"])
	require.Equal(t, "draft", c["status"])
	require.Nil(t, c["completedAt"])
	require.Equal(t, map[string]any{"counterparty": "ACME"}, c["fields"])
	for _, k := range []string{"parent", "labels", "issueLinks", "documents", "attachments"} {
		require.Contains(t, c, k)
	}
	id := c["id"].(string)

	// By identifier, case-insensitively.
	got := ok(t, h.Do("GET", "/api/cases/"+strings.ToLower(prefix)+"-c1", nil), http.StatusOK)
	require.Equal(t, id, got["id"])

	// Upsert on (caseType, key): 200 updates the same case.
	up := f.create(t, http.StatusOK, map[string]any{"caseType": "contract", "key": "acme-1", "title": "Review ACME v2", "status": "done"})
	require.Equal(t, id, up["id"])
	require.EqualValues(t, 1, up["caseNumber"])
	require.Equal(t, "Review ACME v2", up["title"])
	require.Equal(t, "first", up["summary"], "an upsert leaves absent fields alone")
	require.NotNil(t, up["completedAt"])

	// Null is a key of its own: one keyless case per type.
	k1 := f.create(t, http.StatusCreated, map[string]any{"caseType": "contract", "title": "keyless"})
	k2 := f.create(t, http.StatusOK, map[string]any{"caseType": "contract", "key": nil, "title": "keyless again"})
	require.Equal(t, k1["id"], k2["id"])
	require.Equal(t, prefix+"-C2", k1["identifier"])
	other := f.create(t, http.StatusCreated, map[string]any{"caseType": "memo", "title": "keyless memo"})
	require.Equal(t, prefix+"-C3", other["identifier"])

	// Strict bodies and limits.
	wantErr(t, h.Do("POST", "/api/companies/"+f.co+"/cases", map[string]any{"caseType": "x", "title": "t", "bogus": 1}), http.StatusBadRequest, "Validation error")
	wantErr(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"bogus": 1}), http.StatusBadRequest, "Validation error")
	for _, body := range []map[string]any{
		{"title": "no type"},
		{"caseType": "x"},
		{"caseType": strings.Repeat("t", 121), "title": "t"},
		{"caseType": "x", "title": strings.Repeat("t", 501)},
		{"caseType": "x", "title": "t", "summary": strings.Repeat("s", 8001)},
		{"caseType": "x", "title": "t", "status": "open"},
		{"caseType": "x", "title": "t", "fields": []any{1}},
		{"caseType": "x", "title": "t", "projectId": "nope"},
	} {
		wantErr(t, h.Do("POST", "/api/companies/"+f.co+"/cases", body), http.StatusBadRequest, "Validation error")
	}
	wantErr(t, h.Do("POST", "/api/companies/"+f.co+"/cases", map[string]any{"caseType": "x", "title": "t", "projectId": uuid.NewString()}),
		http.StatusUnprocessableEntity, "Project does not belong to company")
	wantErr(t, h.Do("GET", "/api/cases/"+uuid.NewString(), nil), http.StatusNotFound, "Case not found")
	wantErr(t, h.Do("GET", "/api/cases/NOPE-C99", nil), http.StatusNotFound, "Case not found")

	// A project of the company is accepted; the created event is on the timeline.
	proj := ok(t, h.Do("POST", "/api/companies/"+f.co+"/projects", map[string]any{"name": "Legal"}), http.StatusCreated)
	p := f.create(t, http.StatusCreated, map[string]any{"caseType": "x", "title": "t", "projectId": proj["id"]})
	require.Equal(t, proj["id"], p["projectId"])
	require.Equal(t, []string{"created"}, kinds(t, h, p["id"].(string)))
}

func testConcurrentCreates(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Racing Co")
	const n = 12
	var wg sync.WaitGroup
	numbers := make([]float64, n)
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := h.Do("POST", "/api/companies/"+f.co+"/cases", map[string]any{"caseType": "race", "key": fmt.Sprint(i), "title": "r"})
			statuses[i] = res.Status
			if res.Status == http.StatusCreated {
				numbers[i] = res.Map(t)["caseNumber"].(float64)
			}
		}()
	}
	// The same key from many callers at once: one case.
	same := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := h.Do("POST", "/api/companies/"+f.co+"/cases", map[string]any{"caseType": "race", "key": "same", "title": "s"})
			if res.Status < 300 {
				same[i] = res.Map(t)["id"].(string)
			}
		}()
	}
	wg.Wait()
	seen := map[float64]bool{}
	for i := range n {
		require.Equal(t, http.StatusCreated, statuses[i])
		require.False(t, seen[numbers[i]], "case number %v handed out twice", numbers[i])
		seen[numbers[i]] = true
	}
	for i := range n {
		require.Equal(t, same[0], same[i])
	}
	require.Len(t, list(t, h.Do("GET", "/api/companies/"+f.co+"/cases?limit=200", nil)), n+1)
}

func testPatch(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Patcher Co")
	parent := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "title": "parent"})
	c := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "key": "child", "title": "child"})
	id := c["id"].(string)
	red := ok(t, h.Do("POST", "/api/companies/"+f.co+"/labels", map[string]any{"name": "red", "color": "#ff0000"}), http.StatusCreated)
	blue := ok(t, h.Do("POST", "/api/companies/"+f.co+"/labels", map[string]any{"name": "blue", "color": "#0000ff"}), http.StatusCreated)

	p := ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"status": "in_progress"}), http.StatusOK)
	require.Equal(t, "in_progress", p["status"])
	require.Nil(t, p["completedAt"])
	p = ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"status": "cancelled"}), http.StatusOK)
	require.NotNil(t, p["completedAt"])
	p = ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"status": "in_review"}), http.StatusOK)
	require.Nil(t, p["completedAt"], "any other status clears completedAt")
	ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"fields": map[string]any{"a": 1}}), http.StatusOK)
	ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"title": "child renamed", "summary": nil}), http.StatusOK)
	ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"parentCaseId": parent["id"]}), http.StatusOK)
	ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"labelIds": []string{red["id"].(string), blue["id"].(string)}}), http.StatusOK)
	ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"labels": []string{blue["id"].(string)}}), http.StatusOK)

	d := ok(t, h.Do("GET", "/api/cases/"+id, nil), http.StatusOK)
	require.Equal(t, parent["id"], d["parent"].(map[string]any)["id"])
	require.Len(t, d["labels"], 1)
	require.Equal(t, "blue", d["labels"].([]any)[0].(map[string]any)["name"])
	require.Equal(t, []string{"label_removed", "label_added", "label_added", "updated", "updated", "fields_changed",
		"status_changed", "status_changed", "status_changed", "created"}, kinds(t, h, id))
	require.Equal(t, []string{"child_linked", "created"}, kinds(t, h, parent["id"].(string)))

	ok(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"labelIds": []string{}}), http.StatusOK)
	require.Empty(t, ok(t, h.Do("GET", "/api/cases/"+id, nil), http.StatusOK)["labels"])

	wantErr(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"parentCaseId": id}), http.StatusUnprocessableEntity, "A case cannot be its own parent")
	wantErr(t, h.Do("PATCH", "/api/cases/"+parent["id"].(string), map[string]any{"parentCaseId": id}), http.StatusUnprocessableEntity, "A case cannot be its own ancestor")
	wantErr(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"projectId": uuid.NewString()}), http.StatusUnprocessableEntity, "Project does not belong to company")
	wantErr(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"labelIds": []string{uuid.NewString()}}), http.StatusUnprocessableEntity,
		"One or more labels do not belong to company")
	tooMany := make([]string, 101)
	for i := range tooMany {
		tooMany[i] = uuid.NewString()
	}
	wantErr(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"labelIds": tooMany}), http.StatusBadRequest, "Validation error")
	other := newCompany(t, h, "Patcher Other Co")
	foreignLabel := ok(t, h.Do("POST", "/api/companies/"+other.co+"/labels", map[string]any{"name": "green", "color": "#00ff00"}), http.StatusCreated)
	wantErr(t, h.Do("PATCH", "/api/cases/"+id, map[string]any{"labelIds": []string{foreignLabel["id"].(string)}}), http.StatusUnprocessableEntity,
		"One or more labels do not belong to company")
	// Two cases made each other's parent at once: one wins, the other is refused, no cycle.
	for range 5 {
		a := f.create(t, http.StatusCreated, map[string]any{"caseType": "pair", "key": uuid.NewString(), "title": "a"})["id"].(string)
		b := f.create(t, http.StatusCreated, map[string]any{"caseType": "pair", "key": uuid.NewString(), "title": "b"})["id"].(string)
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i, pair := range [][2]string{{a, b}, {b, a}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i] = h.Do("PATCH", "/api/cases/"+pair[0], map[string]any{"parentCaseId": pair[1]}).Status
			}()
		}
		wg.Wait()
		require.ElementsMatch(t, []int{http.StatusOK, http.StatusUnprocessableEntity}, codes)
	}
	wantErr(t, h.Do("GET", "/api/cases/"+id+"/events?limit=501", nil), http.StatusBadRequest, "Validation error")
	wantErr(t, h.Do("GET", "/api/cases/"+id+"/events?limit=0", nil), http.StatusBadRequest, "Validation error")
	require.Len(t, list(t, h.Do("GET", "/api/cases/"+id+"/events?limit=2", nil)), 2)
}

func testList(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Lister Co")
	proj := ok(t, h.Do("POST", "/api/companies/"+f.co+"/projects", map[string]any{"name": "P"}), http.StatusCreated)["id"].(string)
	label := ok(t, h.Do("POST", "/api/companies/"+f.co+"/labels", map[string]any{"name": "hot", "color": "#ff0000"}), http.StatusCreated)["id"].(string)
	root := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "title": "Root matter"})
	mid := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "key": "mid", "title": "Middle", "parentCaseId": root["id"]})
	leaf := f.create(t, http.StatusCreated, map[string]any{"caseType": "contract", "key": "leaf", "title": "Leaf Needle",
		"parentCaseId": mid["id"], "projectId": proj, "status": "done"})
	memo := f.create(t, http.StatusCreated, map[string]any{"caseType": "memo", "key": "m", "title": "Memo", "summary": "has a needle inside"})
	ok(t, h.Do("PATCH", "/api/cases/"+memo["id"].(string), map[string]any{"labelIds": []string{label}}), http.StatusOK)

	ids := func(q string) []string {
		t.Helper()
		var out []string
		for _, c := range list(t, h.Do("GET", "/api/companies/"+f.co+"/cases"+q, nil)) {
			out = append(out, c["title"].(string))
		}
		return out
	}
	// Newest activity first: the memo was labelled last; a parent's child_linked is activity.
	require.Equal(t, []string{"Memo", "Middle", "Leaf Needle", "Root matter"}, ids(""))
	require.Equal(t, []string{"Middle", "Root matter"}, ids("?type=matter"))
	require.Equal(t, []string{"Memo", "Leaf Needle"}, ids("?types=memo,contract"))
	require.Equal(t, []string{"Leaf Needle"}, ids("?status=done"))
	require.Equal(t, []string{"Memo", "Middle", "Root matter"}, ids("?status=active"))
	require.Equal(t, []string{"Memo", "Leaf Needle"}, ids("?statuses=active&statuses=done&type=memo&type=contract"))
	require.Equal(t, []string{"Leaf Needle"}, ids("?projectId="+proj))
	require.Equal(t, []string{"Leaf Needle"}, ids("?projectIds="+proj))
	require.Equal(t, []string{"Leaf Needle"}, ids("?project="+proj))
	require.Equal(t, []string{"Memo", "Middle", "Leaf Needle", "Root matter"}, ids("?projectId="+proj+"&includeNoProject=1"))
	require.Equal(t, []string{"Memo", "Middle", "Root matter"}, ids("?includeNoProject=true"))
	require.Equal(t, []string{"Memo"}, ids("?label="+label))
	require.Equal(t, []string{"Memo"}, ids("?labelId="+label))
	require.Equal(t, []string{"Middle"}, ids("?parent="+root["id"].(string)))
	require.Equal(t, []string{"Memo", "Leaf Needle"}, ids("?q=NEEDLE"))
	require.Equal(t, []string{"Leaf Needle"}, ids("?q="+strings.ToLower(leaf["identifier"].(string))))
	require.Equal(t, []string{"Middle"}, ids("?q=mid"), "q matches the key")
	require.Equal(t, []string{"Memo"}, ids("?q=Me"), "a term under three characters")
	require.Empty(t, ids("?q=100%25"), "LIKE wildcards are literal")
	require.Equal(t, []string{"Memo"}, ids("?limit=1"))

	rows := list(t, h.Do("GET", "/api/companies/"+f.co+"/cases?type=contract&includeAncestors=true", nil))
	match := map[string]any{}
	for _, r := range rows {
		match[r["title"].(string)] = r["matchesListFilters"]
	}
	require.Equal(t, map[string]any{"Leaf Needle": true, "Middle": false, "Root matter": false}, match)

	for _, q := range []string{"?limit=0", "?limit=201", "?status=open", "?projectId=x", "?parent=x", "?label=x", "?includeAncestors=maybe"} {
		wantErr(t, h.Do("GET", "/api/companies/"+f.co+"/cases"+q, nil), http.StatusBadRequest, "Validation error")
	}
}

func testLinks(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Linker Co")
	c := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "title": "linked"})
	id := c["id"].(string)
	iss := f.issue(t, map[string]any{"title": "some work"})
	l := ok(t, h.Do("POST", "/api/cases/"+id+"/links", map[string]any{"issueId": iss["id"], "role": "reference"}), http.StatusCreated)
	require.Equal(t, "reference", l["role"])
	require.Equal(t, iss["identifier"], l["issue"].(map[string]any)["identifier"])
	again := ok(t, h.Do("POST", "/api/cases/"+id+"/links", map[string]any{"issueId": iss["id"], "role": "work"}), http.StatusCreated)
	require.Equal(t, l["id"], again["id"], "re-posting the pair returns the existing link")
	require.Equal(t, "reference", again["role"])

	wantErr(t, h.Do("POST", "/api/cases/"+id+"/links", map[string]any{"issueId": iss["id"], "role": "boss"}), http.StatusBadRequest, "Validation error")
	wantErr(t, h.Do("POST", "/api/cases/"+id+"/links", map[string]any{"issueId": "SOME-1", "role": "work"}), http.StatusBadRequest, "Validation error")
	wantErr(t, h.Do("POST", "/api/cases/"+id+"/links", map[string]any{"issueId": uuid.NewString(), "role": "work"}), http.StatusUnprocessableEntity,
		"Issue does not belong to case company")
	other := newCompany(t, h, "Linker Other Co")
	foreign := other.issue(t, map[string]any{"title": "not yours"})
	wantErr(t, h.Do("POST", "/api/cases/"+id+"/links", map[string]any{"issueId": foreign["id"], "role": "work"}), http.StatusUnprocessableEntity,
		"Issue does not belong to case company")

	d := ok(t, h.Do("GET", "/api/cases/"+id, nil), http.StatusOK)
	require.Len(t, d["issueLinks"], 1)
	link := d["issueLinks"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"id": iss["id"], "identifier": iss["identifier"], "title": "some work", "status": iss["status"]}, link["issue"])

	for _, ref := range []string{iss["id"].(string), iss["identifier"].(string), strings.ToLower(iss["identifier"].(string))} {
		items := list(t, h.Do("GET", "/api/issues/"+ref+"/cases", nil))
		require.Len(t, items, 1, ref)
		require.Equal(t, l["id"], items[0]["id"])
		require.Equal(t, "reference", items[0]["role"])
		require.Equal(t, map[string]any{"id": id, "identifier": c["identifier"], "title": "linked", "caseType": "matter", "status": "draft"}, items[0]["case"])
	}
	wantErr(t, h.Do("GET", "/api/issues/"+uuid.NewString()+"/cases", nil), http.StatusNotFound, "Issue not found")

	ev := list(t, h.Do("GET", "/api/cases/"+id+"/events", nil))
	require.Equal(t, "issue_linked", ev[0]["kind"])
	require.Equal(t, false, ev[0]["payload"].(map[string]any)["autoLinked"])
	require.Equal(t, iss["identifier"], ev[0]["issue"].(map[string]any)["identifier"])

	ok(t, h.Do("DELETE", "/api/cases/"+id+"/links/"+l["id"].(string), nil), http.StatusOK)
	wantErr(t, h.Do("DELETE", "/api/cases/"+id+"/links/"+l["id"].(string), nil), http.StatusNotFound, "Case issue link not found")
	require.Empty(t, list(t, h.Do("GET", "/api/issues/"+iss["id"].(string)+"/cases", nil)))
	require.Equal(t, "issue_unlinked", kinds(t, h, id)[0])
}

// testPurge deletes a company with a case, a document with a thread, an attachment and a
// link: every ext_cases row of the company and its files go; another company keeps its own.
func testPurge(t *testing.T, h *sdktest.Host, home string) {
	seed := func(name string) string {
		f := newCompany(t, h, name)
		c := f.create(t, http.StatusCreated, map[string]any{"caseType": "doomed", "title": "t"})
		id := c["id"].(string)
		ok(t, h.Do("PUT", "/api/cases/"+id+"/documents/d", map[string]any{"body": "some text"}), http.StatusCreated)
		ok(t, h.Do("POST", "/api/cases/"+id+"/documents/d/annotations", map[string]any{"quote": "text", "body": "?"}), http.StatusCreated)
		iss := f.issue(t, map[string]any{"title": "linked"})
		ok(t, h.Do("POST", "/api/cases/"+id+"/links", map[string]any{"issueId": iss["id"], "role": "work"}), http.StatusCreated)
		body, ct := multipartBody(t, part{field: "file", fileName: "f.txt", data: []byte(name)})
		ok(t, h.Do("POST", "/api/cases/"+id+"/attachments", body, "Content-Type", ct), http.StatusCreated)
		return f.co
	}
	rows := func(co string) int {
		n := 0
		for _, table := range []string{"case_counters", "cases", "case_labels", "case_issue_links", "case_events", "case_documents",
			"case_document_revisions", "case_annotation_threads", "case_annotation_comments", "case_assets", "case_attachments"} {
			var c int
			require.NoError(t, h.Kernel.Pool.QueryRow(context.Background(),
				`SELECT count(*) FROM ext_cases.`+table+` WHERE company_id = $1`, co).Scan(&c))
			n += c
		}
		return n
	}
	doomed, kept := seed("Doomed Cases Co"), seed("Kept Cases Co")
	files := filepath.Join(home, "extensions", "cases", "attachments", doomed)
	_, err := os.Stat(files)
	require.NoError(t, err)
	keptRows := rows(kept)
	require.Equal(t, keptRows, rows(doomed))
	ok(t, h.Do("DELETE", "/api/companies/"+doomed, nil), http.StatusOK)
	sdktest.WaitFor(t, 60*time.Second, func() bool { return rows(doomed) == 0 }, "the cases owner to purge the company")
	sdktest.WaitFor(t, 30*time.Second, func() bool { _, err := os.Stat(files); return os.IsNotExist(err) }, "the company's files to go")
	require.Equal(t, keptRows, rows(kept))
}
