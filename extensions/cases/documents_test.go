package cases_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

func testDocuments(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Writer Co")
	c := f.create(t, http.StatusCreated, map[string]any{"caseType": "brief", "title": "docs"})
	doc := "/api/cases/" + c["identifier"].(string) + "/documents/brief.v1:main"
	put := func(body map[string]any) *sdktest.Response { return h.Do("PUT", doc, body) }

	// Rule 1.
	wantErr(t, put(map[string]any{"body": "x", "baseRevisionId": uuid.NewString()}), http.StatusConflict, "Case document does not exist yet")
	wantErr(t, h.Do("GET", doc, nil), http.StatusNotFound, "Case document not found")
	v1 := ok(t, put(map[string]any{"title": "Brief", "body": "# Brief v1", "changeSummary": "initial"}), http.StatusCreated)
	r1 := v1["revision"].(map[string]any)["id"].(string)
	require.EqualValues(t, 1, v1["document"].(map[string]any)["latestRevisionNumber"])
	got := ok(t, h.Do("GET", doc, nil), http.StatusOK)
	require.Equal(t, "# Brief v1", got["body"])
	require.Equal(t, "markdown", got["format"])
	require.Equal(t, "Brief", got["title"])

	// Rule 2 and rule 3 (with the current latest revision).
	e := wantErr(t, put(map[string]any{"body": "no base"}), http.StatusConflict, "Case document update requires baseRevisionId")
	require.Equal(t, r1, e["details"].(map[string]any)["latestRevisionId"])
	v2 := ok(t, put(map[string]any{"body": "# Brief v2", "baseRevisionId": r1}), http.StatusOK)
	r2 := v2["revision"].(map[string]any)["id"].(string)
	require.Equal(t, "Brief", v2["document"].(map[string]any)["title"], "the title carries over")
	e = wantErr(t, put(map[string]any{"body": "stale", "baseRevisionId": r1}), http.StatusConflict, "Case document was updated by someone else")
	details := e["details"].(map[string]any)
	require.Equal(t, r2, details["latestRevisionId"])
	require.Equal(t, "# Brief v2", details["latestRevision"].(map[string]any)["body"])

	// Concurrent writes on one base: exactly one wins.
	const n = 8
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = put(map[string]any{"body": fmt.Sprintf("racer %d", i), "baseRevisionId": r2}).Status
		}()
	}
	wg.Wait()
	won := 0
	for _, code := range codes {
		require.Contains(t, []int{http.StatusOK, http.StatusConflict}, code)
		if code == http.StatusOK {
			won++
		}
	}
	require.Equal(t, 1, won, "codes %v", codes)
	// Concurrent creates of one key: exactly one creates.
	var cwg sync.WaitGroup
	created := make([]int, n)
	for i := range n {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			created[i] = h.Do("PUT", "/api/cases/"+c["id"].(string)+"/documents/fresh", map[string]any{"body": fmt.Sprint(i)}).Status
		}()
	}
	cwg.Wait()
	n201 := 0
	for _, code := range created {
		require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, code)
		if code == http.StatusCreated {
			n201++
		}
	}
	require.Equal(t, 1, n201, "codes %v", created)

	revs := ok(t, h.Do("GET", doc+"/revisions", nil), http.StatusOK)
	list := revs["revisions"].([]any)
	require.Len(t, list, 3)
	require.EqualValues(t, 3, list[0].(map[string]any)["revisionNumber"])
	require.Contains(t, list[0].(map[string]any), "actorAgentName")
	require.Contains(t, list[0].(map[string]any), "issue")
	r3 := list[0].(map[string]any)["id"].(string)

	// Rule 5 and restore.
	wantErr(t, h.Do("POST", doc+"/revisions/"+r3+"/restore", nil), http.StatusConflict, "Revision is already the latest")
	wantErr(t, h.Do("POST", doc+"/revisions/"+uuid.NewString()+"/restore", nil), http.StatusNotFound, "Case document revision not found")
	rs := ok(t, h.Do("POST", doc+"/revisions/"+r1+"/restore", nil), http.StatusOK)
	require.Equal(t, "# Brief v1", rs["document"].(map[string]any)["latestBody"])
	require.EqualValues(t, 4, rs["revision"].(map[string]any)["revisionNumber"])
	r4 := rs["revision"].(map[string]any)["id"].(string)

	// Rule 4: locks.
	lk := ok(t, h.Do("POST", doc+"/lock", nil), http.StatusOK)
	require.Equal(t, true, lk["locked"])
	lk2 := ok(t, h.Do("POST", doc+"/lock", nil), http.StatusOK)
	require.Equal(t, lk["lockedAt"], lk2["lockedAt"], "lock is idempotent")
	wantErr(t, put(map[string]any{"body": "locked out", "baseRevisionId": r4}), http.StatusConflict, "Document is locked")
	wantErr(t, h.Do("POST", doc+"/revisions/"+r2+"/restore", nil), http.StatusConflict, "Document is locked")
	wantErr(t, h.Do("DELETE", doc, nil), http.StatusConflict, "Document is locked")
	require.Equal(t, false, ok(t, h.Do("POST", doc+"/unlock", nil), http.StatusOK)["locked"])
	require.Equal(t, false, ok(t, h.Do("POST", doc+"/unlock", nil), http.StatusOK)["locked"])
	wantErr(t, h.Do("POST", "/api/cases/"+c["id"].(string)+"/documents/nothing/lock", nil), http.StatusNotFound, "Case document not found")

	// Limits.
	big := strings.Repeat("é", 200000)
	ok(t, h.Do("PUT", "/api/cases/"+c["id"].(string)+"/documents/big", map[string]any{"body": big}), http.StatusCreated)
	wantErr(t, h.Do("PUT", "/api/cases/"+c["id"].(string)+"/documents/big2", map[string]any{"body": big + "x"}), http.StatusBadRequest, "Validation error")
	wantErr(t, put(map[string]any{"body": "x", "baseRevisionId": r4, "changeSummary": strings.Repeat("c", 1001)}), http.StatusBadRequest, "Validation error")
	wantErr(t, put(map[string]any{"baseRevisionId": r4}), http.StatusBadRequest, "Validation error")
	wantErr(t, h.Do("PUT", "/api/cases/"+c["id"].(string)+"/documents/bad%20key", map[string]any{"body": "x"}), http.StatusBadRequest, "Validation error")
	wantErr(t, h.Do("PUT", "/api/cases/"+c["id"].(string)+"/documents/"+strings.Repeat("k", 121), map[string]any{"body": "x"}), http.StatusBadRequest, "Validation error")

	d := ok(t, h.Do("GET", "/api/cases/"+c["id"].(string), nil), http.StatusOK)
	var keys []string
	for _, e := range d["documents"].([]any) {
		keys = append(keys, e.(map[string]any)["key"].(string))
	}
	require.Equal(t, []string{"big", "brief.v1:main", "fresh"}, keys)

	// Delete, also of a missing key.
	require.Equal(t, true, ok(t, h.Do("DELETE", doc, nil), http.StatusOK)["ok"])
	wantErr(t, h.Do("GET", doc, nil), http.StatusNotFound, "Case document not found")
	wantErr(t, h.Do("GET", doc+"/revisions", nil), http.StatusNotFound, "Case document not found")
	require.Equal(t, true, ok(t, h.Do("DELETE", doc, nil), http.StatusOK)["ok"])

	revised := 0
	for _, k := range kinds(t, h, c["id"].(string)) {
		if k == "document_revised" {
			revised++
		}
	}
	require.Equal(t, 6, revised, "v1, v2, the race winner, restore, fresh and big")
}

func testAnnotations(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Annotator Co")
	c := f.create(t, http.StatusCreated, map[string]any{"caseType": "brief", "title": "notes"})
	doc := "/api/cases/" + c["id"].(string) + "/documents/memo"
	ann := doc + "/annotations"
	wantErr(t, h.Do("POST", ann, map[string]any{"quote": "x", "body": "?"}), http.StatusNotFound, "Case document not found")
	v1 := ok(t, h.Do("PUT", doc, map[string]any{"body": "The quick brown fox jumps over the lazy dog. The dog sleeps."}), http.StatusCreated)
	r1 := v1["revision"].(map[string]any)["id"].(string)

	t1 := ok(t, h.Do("POST", ann, map[string]any{"quote": "lazy dog", "body": "which dog?", "baseRevisionId": r1}), http.StatusCreated)
	require.Equal(t, "open", t1["status"])
	require.Equal(t, "anchored", t1["anchorState"])
	require.Equal(t, r1, t1["revisionId"])
	a := t1["anchor"].(map[string]any)
	require.EqualValues(t, 35, a["startOffset"])
	require.EqualValues(t, 43, a["endOffset"])
	require.Equal(t, " quick brown fox jumps over the ", a["prefix"], "32 characters of context")
	require.Equal(t, ". The dog sleeps.", a["suffix"])
	require.Len(t, t1["comments"], 1)
	// The W3C selector shape: context picks the second "dog".
	t2 := ok(t, h.Do("POST", ann, map[string]any{"selector": map[string]any{"type": "TextQuoteSelector", "exact": "dog", "prefix": "The "},
		"comment": "this one"}), http.StatusCreated)
	require.EqualValues(t, 49, t2["anchor"].(map[string]any)["startOffset"])
	// Offsets alone.
	t3 := ok(t, h.Do("POST", ann, map[string]any{"anchor": map[string]any{"startOffset": 4, "endOffset": 9}, "body": "fast?"}), http.StatusCreated)
	require.Equal(t, "quick", t3["anchor"].(map[string]any)["quote"])

	wantErr(t, h.Do("POST", ann, map[string]any{"quote": "purple cat", "body": "?"}), http.StatusUnprocessableEntity, "Annotation selector does not match the document")
	wantErr(t, h.Do("POST", ann, map[string]any{"quote": "dog"}), http.StatusBadRequest, "Validation error")
	wantErr(t, h.Do("POST", ann, map[string]any{"body": "no passage"}), http.StatusBadRequest, "Validation error")

	// Three revisions: text moves, then a passage disappears (orphaned, kept), then returns.
	v2 := ok(t, h.Do("PUT", doc, map[string]any{"body": "Intro. The quick brown fox jumps over the lazy dog. The dog sleeps.", "baseRevisionId": r1}), http.StatusOK)
	r2 := v2["revision"].(map[string]any)["id"].(string)
	wantErr(t, h.Do("POST", ann, map[string]any{"quote": "fox", "body": "stale", "baseRevisionId": r1}), http.StatusConflict,
		"Annotation base revision is not the latest revision")
	th := ok(t, h.Do("GET", ann+"/"+t1["id"].(string), nil), http.StatusOK)
	require.Equal(t, r2, th["revisionId"])
	require.EqualValues(t, 42, th["anchor"].(map[string]any)["startOffset"])
	require.Equal(t, "anchored", th["anchorState"])

	v3 := ok(t, h.Do("PUT", doc, map[string]any{"body": "Intro. The quick brown fox jumps over the sleepy cat. The dog sleeps.", "baseRevisionId": r2}), http.StatusOK)
	r3 := v3["revision"].(map[string]any)["id"].(string)
	th = ok(t, h.Do("GET", ann+"/"+t1["id"].(string), nil), http.StatusOK)
	require.Equal(t, "orphaned", th["anchorState"])
	require.Equal(t, r2, th["revisionId"], "an orphaned thread keeps its last anchor")
	require.Equal(t, "open", th["status"])
	t2now := ok(t, h.Do("GET", ann+"/"+t2["id"].(string), nil), http.StatusOK)
	require.Equal(t, r3, t2now["revisionId"])
	require.Equal(t, "anchored", t2now["anchorState"])
	require.EqualValues(t, 58, t2now["anchor"].(map[string]any)["startOffset"])

	ok(t, h.Do("PUT", doc, map[string]any{"body": "Intro. The quick brown fox jumps over the lazy dog again. The dog sleeps.", "baseRevisionId": r3}), http.StatusOK)
	th = ok(t, h.Do("GET", ann+"/"+t1["id"].(string), nil), http.StatusOK)
	require.Equal(t, "anchored", th["anchorState"], "an orphaned open thread is tried again on each revision")

	// Comments, resolve, reopen and the filters.
	ok(t, h.Do("POST", ann+"/"+t1["id"].(string)+"/comments", map[string]any{"body": "the lazy one"}), http.StatusCreated)
	wantErr(t, h.Do("POST", ann+"/"+t1["id"].(string)+"/comments", map[string]any{"body": ""}), http.StatusBadRequest, "Validation error")
	wantErr(t, h.Do("POST", ann+"/"+uuid.NewString()+"/comments", map[string]any{"body": "x"}), http.StatusNotFound, "Annotation thread not found")
	wantErr(t, h.Do("GET", ann+"/"+uuid.NewString(), nil), http.StatusNotFound, "Annotation thread not found")
	th = ok(t, h.Do("GET", ann+"/"+t1["id"].(string), nil), http.StatusOK)
	require.Len(t, th["comments"], 2)
	res := ok(t, h.Do("PATCH", ann+"/"+t1["id"].(string), map[string]any{"status": "resolved"}), http.StatusOK)
	require.Equal(t, "resolved", res["status"])
	require.NotNil(t, res["resolvedAt"])
	wantErr(t, h.Do("PATCH", ann+"/"+t1["id"].(string), map[string]any{"status": "done"}), http.StatusBadRequest, "Validation error")

	count := func(q string) int { return len(list(t, h.Do("GET", ann+q, nil))) }
	require.Equal(t, 2, count(""))
	require.Equal(t, 2, count("?status=open"))
	require.Equal(t, 1, count("?status=resolved"))
	require.Equal(t, 3, count("?status=all"))
	withComments := list(t, h.Do("GET", ann+"?status=resolved&includeComments=true", nil))
	require.Len(t, withComments[0]["comments"], 2)
	require.NotContains(t, list(t, h.Do("GET", ann+"?status=resolved", nil))[0], "comments")
	wantErr(t, h.Do("GET", ann+"?status=closed", nil), http.StatusBadRequest, "Validation error")

	re := ok(t, h.Do("PATCH", ann+"/"+t1["id"].(string), map[string]any{"status": "open"}), http.StatusOK)
	require.Equal(t, "open", re["status"])
	require.Nil(t, re["resolvedAt"])
}

func testAttachments(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Filer Co")
	c := f.create(t, http.StatusCreated, map[string]any{"caseType": "matter", "title": "files"})
	path := "/api/cases/" + c["id"].(string) + "/attachments"
	upload := func(parts ...part) *sdktest.Response {
		body, ct := multipartBody(t, parts...)
		return h.Do("POST", path, body, "Content-Type", ct)
	}
	data := []byte("hello, case\n")
	sum := sha256.Sum256(data)
	a := ok(t, upload(part{field: "note", data: []byte("ignored")}, part{field: "file", fileName: "hello.txt", data: data}), http.StatusCreated)
	require.Equal(t, "hello.txt", a["fileName"])
	asset := a["asset"].(map[string]any)
	require.Equal(t, hex.EncodeToString(sum[:]), asset["sha256"])
	require.EqualValues(t, len(data), asset["byteSize"])
	b := ok(t, upload(part{field: "file", fileName: "again.txt", data: data}), http.StatusCreated)
	require.Equal(t, asset["id"], b["asset"].(map[string]any)["id"], "one stored asset per content")
	require.NotEqual(t, a["id"], b["id"])

	res := h.Do("GET", a["contentPath"].(string), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, data, res.Body)

	wantErr(t, upload(part{field: "other", fileName: "x.txt", data: data}), http.StatusUnprocessableEntity, "Missing file field 'file'")
	wantErr(t, upload(part{field: "file", fileName: "empty.txt"}), http.StatusUnprocessableEntity, "Attachment is empty")
	wantErr(t, upload(part{field: "file", fileName: "big.txt", data: make([]byte, attachmentMax+1)}), http.StatusUnprocessableEntity,
		fmt.Sprintf("Attachment exceeds %d bytes", attachmentMax))
	wantErr(t, upload(part{field: "file", fileName: "a.txt", data: data}, part{field: "file", fileName: "b.txt", data: data}),
		http.StatusUnprocessableEntity, "Expected exactly one file in field 'file'")

	d := ok(t, h.Do("GET", "/api/cases/"+c["id"].(string), nil), http.StatusOK)
	require.Len(t, d["attachments"], 2)
	require.Equal(t, []string{"attachment_added", "attachment_added", "created"}, kinds(t, h, c["id"].(string)))
}

func testForeign(t *testing.T, h *sdktest.Host) {
	f := newCompany(t, h, "Owner Co")
	c := f.create(t, http.StatusCreated, map[string]any{"caseType": "secret", "title": "ours"})
	iss := f.issue(t, map[string]any{"title": "ours too"})
	ok(t, h.Do("POST", "/api/cases/"+c["id"].(string)+"/links", map[string]any{"issueId": iss["id"], "role": "reference"}), http.StatusCreated)
	ok(t, h.Do("PUT", "/api/cases/"+c["id"].(string)+"/documents/plan", map[string]any{"body": "x"}), http.StatusCreated)
	g := newCompany(t, h, "Outsider Co")
	outsider := h.CreateAgent(g.co, "Outsider", "engineer")
	as := outsider.As("")
	for _, ref := range []string{c["id"].(string), c["identifier"].(string), strings.ToLower(c["identifier"].(string))} {
		wantErr(t, h.Do("GET", "/api/cases/"+ref, nil, as...), http.StatusNotFound, "Case not found")
		wantErr(t, h.Do("PATCH", "/api/cases/"+ref, map[string]any{"title": "mine"}, as...), http.StatusNotFound, "Case not found")
		wantErr(t, h.Do("GET", "/api/cases/"+ref+"/events", nil, as...), http.StatusNotFound, "Case not found")
		wantErr(t, h.Do("GET", "/api/cases/"+ref+"/documents/plan", nil, as...), http.StatusNotFound, "Case not found")
		wantErr(t, h.Do("DELETE", "/api/cases/"+ref+"/documents/plan", nil, as...), http.StatusNotFound, "Case not found")
	}
	wantErr(t, h.Do("GET", "/api/issues/"+iss["id"].(string)+"/cases", nil, as...), http.StatusNotFound, "Issue not found")
	require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+f.co+"/cases", nil, as...).Status)
	// The owner company's agent reaches it.
	insider := h.CreateAgent(f.co, "Insider", "engineer")
	ok(t, h.Do("GET", "/api/cases/"+c["identifier"].(string), nil, insider.As("")...), http.StatusOK)
	require.Equal(t, "ours", ok(t, h.Do("GET", "/api/cases/"+c["id"].(string), nil), http.StatusOK)["title"])
}
