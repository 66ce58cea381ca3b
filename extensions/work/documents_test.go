package work_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions/work"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	"github.com/keelhq/keel/sdktest"
)

// documentWrite is the answer of a document write.
type documentWrite struct {
	Document struct {
		ID                   string  `json:"id"`
		IssueID              string  `json:"issueId"`
		Key                  string  `json:"key"`
		Title                *string `json:"title"`
		Format               string  `json:"format"`
		Body                 string  `json:"body"`
		LatestBody           string  `json:"latestBody"`
		LatestRevisionID     string  `json:"latestRevisionId"`
		LatestRevisionNumber int     `json:"latestRevisionNumber"`
		Locked               bool    `json:"locked"`
		CreatedByUserID      *string `json:"createdByUserId"`
		UpdatedByAgentID     *string `json:"updatedByAgentId"`
	} `json:"document"`
	Revision struct {
		ID               string  `json:"id"`
		DocumentID       string  `json:"documentId"`
		RevisionNumber   int     `json:"revisionNumber"`
		Title            *string `json:"title"`
		Body             string  `json:"body"`
		ChangeSummary    *string `json:"changeSummary"`
		CreatedByAgentID *string `json:"createdByAgentId"`
		CreatedByUserID  *string `json:"createdByUserId"`
		CreatedByRunID   *string `json:"createdByRunId"`
	} `json:"revision"`
}

func putDocument(t *testing.T, h *sdktest.Host, issueRef, key string, body map[string]any, wantStatus int, headers ...string) *documentWrite {
	t.Helper()
	res := h.Do("PUT", "/api/issues/"+issueRef+"/documents/"+key, body, headers...)
	require.Equal(t, wantStatus, res.Status, "%s", res.Body)
	var out documentWrite
	res.JSON(t, &out)
	return &out
}

func TestDocuments(t *testing.T) {
	t.Parallel()
	h := waitWorkReady(t, startWork(t))
	companyID := h.CreateCompany("Docs Co")
	writer := h.CreateAgent(companyID, "Writer", "engineer")
	editor := h.CreateAgent(companyID, "Editor", "engineer")
	outsider := h.CreateAgent(h.CreateCompany("Elsewhere"), "Outsider", "engineer")

	t.Run("RevisionsConflictsRestore", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		docPath := "/api/issues/" + iss.ID + "/documents/plan"

		v1 := putDocument(t, h, iss.ID, "plan", map[string]any{"title": "Plan", "format": "markdown", "body": "# Plan v1", "changeSummary": "initial"}, http.StatusCreated)
		require.Equal(t, "plan", v1.Document.Key)
		require.Equal(t, iss.ID, v1.Document.IssueID)
		require.Equal(t, "Plan", *v1.Document.Title)
		require.Equal(t, "markdown", v1.Document.Format)
		require.Equal(t, "# Plan v1", v1.Document.Body)
		require.Equal(t, 1, v1.Document.LatestRevisionNumber)
		require.Equal(t, v1.Revision.ID, v1.Document.LatestRevisionID)
		require.Equal(t, 1, v1.Revision.RevisionNumber)
		require.Equal(t, "initial", *v1.Revision.ChangeSummary)
		require.Equal(t, "local-board", *v1.Revision.CreatedByUserID)
		requireActivity(t, h, companyID, iss.ID, "issue.document.created", "key", "plan")

		res := h.Do("GET", docPath, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got := res.Map(t)
		require.Equal(t, "# Plan v1", got["body"])
		require.Equal(t, "# Plan v1", got["latestBody"])
		require.Equal(t, false, got["locked"])
		require.Equal(t, companyID, got["companyId"])

		m := requireError(t, h.Do("PUT", docPath, map[string]any{"body": "no base"}), http.StatusConflict, "Document update requires baseRevisionId")
		require.Equal(t, v1.Revision.ID, m["details"].(map[string]any)["latestRevisionId"])

		runID := uuid.NewString()
		v2 := putDocument(t, h, iss.Identifier, "plan", map[string]any{"body": "# Plan v2", "baseRevisionId": v1.Revision.ID, "changeSummary": "second pass"},
			http.StatusOK, writer.As(runID)...)
		require.Equal(t, 2, v2.Revision.RevisionNumber)
		require.Equal(t, "Plan", *v2.Revision.Title, "an omitted title keeps the current one")
		require.Equal(t, writer.ID, *v2.Revision.CreatedByAgentID)
		require.Equal(t, runID, *v2.Revision.CreatedByRunID)
		require.Equal(t, writer.ID, *v2.Document.UpdatedByAgentID)
		require.Equal(t, "local-board", *v2.Document.CreatedByUserID)
		requireActivity(t, h, companyID, iss.ID, "issue.document.updated", "revisionId", v2.Revision.ID)

		m = requireError(t, h.Do("PUT", docPath, map[string]any{"body": "stale", "baseRevisionId": v1.Revision.ID}), http.StatusConflict, "Document was updated by someone else")
		details := m["details"].(map[string]any)
		require.Equal(t, v2.Revision.ID, details["latestRevisionId"])
		require.EqualValues(t, 2, details["latestRevisionNumber"])
		require.Equal(t, "# Plan v2", details["latestRevision"].(map[string]any)["body"])

		requireError(t, h.Do("PUT", "/api/issues/"+iss.ID+"/documents/notes", map[string]any{"body": "x", "baseRevisionId": v1.Revision.ID}),
			http.StatusConflict, "Document does not exist yet")

		res = h.Do("GET", docPath+"/revisions", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var revs struct {
			Key      string `json:"key"`
			Document struct {
				ID                   string `json:"id"`
				LatestRevisionNumber int    `json:"latestRevisionNumber"`
			} `json:"document"`
			Revisions []struct {
				ID             string  `json:"id"`
				RevisionNumber int     `json:"revisionNumber"`
				Body           string  `json:"body"`
				ActorAgentName *string `json:"actorAgentName"`
			} `json:"revisions"`
		}
		res.JSON(t, &revs)
		require.Equal(t, "plan", revs.Key)
		require.Equal(t, v1.Document.ID, revs.Document.ID)
		require.Len(t, revs.Revisions, 2)
		require.Equal(t, 2, revs.Revisions[0].RevisionNumber, "newest first")
		require.Equal(t, "Writer", *revs.Revisions[0].ActorAgentName)
		require.Nil(t, revs.Revisions[1].ActorAgentName)

		res = h.Do("POST", docPath+"/revisions/"+v1.Revision.ID+"/restore", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var v3 documentWrite
		res.JSON(t, &v3)
		require.Equal(t, 3, v3.Revision.RevisionNumber)
		require.Equal(t, "# Plan v1", v3.Revision.Body)
		require.Equal(t, "# Plan v1", v3.Document.Body)
		require.Equal(t, "Restored revision 1", *v3.Revision.ChangeSummary)
		requireActivity(t, h, companyID, iss.ID, "issue.document.restored", "revisionId", v3.Revision.ID)

		requireError(t, h.Do("POST", docPath+"/revisions/"+v3.Revision.ID+"/restore", nil), http.StatusConflict, "Revision is already the latest")
		requireError(t, h.Do("POST", docPath+"/revisions/"+uuid.NewString()+"/restore", nil), http.StatusNotFound, "Document revision not found")
		requireError(t, h.Do("POST", "/api/issues/"+iss.ID+"/documents/nope/revisions/"+v1.Revision.ID+"/restore", nil), http.StatusNotFound, "Document not found")

		res = h.Do("GET", "/api/issues/"+iss.ID+"/documents", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, "plan", list[0]["key"])
		require.Equal(t, "Plan", list[0]["title"])
		require.EqualValues(t, 3, list[0]["revisionNumber"])
		require.Equal(t, false, list[0]["locked"])
		require.Contains(t, list[0], "updatedAt")
	})

	t.Run("Validation", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		base := "/api/issues/" + iss.ID + "/documents/"
		requireValidation(t, h.Do("PUT", base+"Bad-Key", map[string]any{"body": "x"}), "key")
		requireValidation(t, h.Do("PUT", base+"-dash", map[string]any{"body": "x"}), "key")
		requireValidation(t, h.Do("PUT", base+strings.Repeat("k", work.DocumentKeyMaxLen+1), map[string]any{"body": "x"}), "key")
		requireValidation(t, h.Do("PUT", base+"ok", map[string]any{}), "body")
		requireValidation(t, h.Do("PUT", base+"ok", map[string]any{"body": strings.Repeat("x", work.DocumentBodyMaxBytes+1)}), "body")
		requireValidation(t, h.Do("PUT", base+"ok", map[string]any{"body": "x", "format": "html"}), "format")
		requireValidation(t, h.Do("PUT", base+"ok", map[string]any{"body": "x", "changeSummary": strings.Repeat("s", work.DocumentChangeSummaryMaxLen+1)}), "changeSummary")
		requireValidation(t, h.Do("PUT", base+"ok", map[string]any{"body": "x", "baseRevisionId": "v1"}), "baseRevisionId")

		key := strings.Repeat("k", work.DocumentKeyMaxLen)
		putDocument(t, h, iss.ID, key, map[string]any{"body": strings.Repeat("x", work.DocumentBodyMaxBytes),
			"changeSummary": strings.Repeat("s", work.DocumentChangeSummaryMaxLen)}, http.StatusCreated)
		putDocument(t, h, iss.ID, "a_b-9", map[string]any{"body": ""}, http.StatusCreated)

		requireError(t, h.Do("GET", base+"missing", nil), http.StatusNotFound, "Document not found")
		requireError(t, h.Do("GET", base+"missing/revisions", nil), http.StatusNotFound, "Document not found")
		requireError(t, h.Do("POST", base+"missing/lock", nil), http.StatusNotFound, "Document not found")
		requireError(t, h.Do("POST", base+"missing/unlock", nil), http.StatusNotFound, "Document not found")
		requireError(t, h.Do("GET", "/api/issues/"+uuid.NewString()+"/documents", nil), http.StatusNotFound, "Issue not found")
	})

	t.Run("Locks", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		docPath := "/api/issues/" + iss.ID + "/documents/spec"
		v1 := putDocument(t, h, iss.ID, "spec", map[string]any{"body": "v1"}, http.StatusCreated, writer.As("")...)

		res := h.Do("POST", docPath+"/lock", nil, writer.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		lock := res.Map(t)
		require.Equal(t, true, lock["locked"])
		require.Equal(t, writer.ID, lock["lockedByAgentId"])
		require.NotNil(t, lock["lockedAt"])
		requireActivity(t, h, companyID, iss.ID, "issue.document.locked", "key", "spec")

		// Locking again (by anyone) is idempotent and keeps the holder.
		res = h.Do("POST", docPath+"/lock", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, writer.ID, res.Map(t)["lockedByAgentId"])

		res = h.Do("GET", docPath, nil)
		require.Equal(t, true, res.Map(t)["locked"])

		m := requireError(t, h.Do("PUT", docPath, map[string]any{"body": "board edit", "baseRevisionId": v1.Revision.ID}), http.StatusConflict, "Document is locked")
		require.Equal(t, writer.ID, m["details"].(map[string]any)["lockedByAgentId"])
		requireError(t, h.Do("PUT", docPath, map[string]any{"body": "editor edit", "baseRevisionId": v1.Revision.ID}, editor.As("")...), http.StatusConflict, "Document is locked")
		requireError(t, h.Do("DELETE", docPath, nil), http.StatusConflict, "Document is locked")

		v2 := putDocument(t, h, iss.ID, "spec", map[string]any{"body": "v2", "baseRevisionId": v1.Revision.ID}, http.StatusOK, writer.As("")...)
		requireError(t, h.Do("POST", docPath+"/revisions/"+v1.Revision.ID+"/restore", nil, editor.As("")...), http.StatusConflict, "Document is locked")

		requireError(t, h.Do("POST", docPath+"/unlock", nil, editor.As("")...), http.StatusForbidden, "Only the lock holder or the board can unlock this document")

		// The board may unlock anyone's lock; unlocking again is idempotent.
		res = h.Do("POST", docPath+"/unlock", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, false, res.Map(t)["locked"])
		requireActivity(t, h, companyID, iss.ID, "issue.document.unlocked", "key", "spec")
		res = h.Do("POST", docPath+"/unlock", nil, editor.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, false, res.Map(t)["locked"])

		putDocument(t, h, iss.ID, "spec", map[string]any{"body": "v3", "baseRevisionId": v2.Revision.ID}, http.StatusOK, editor.As("")...)

		// The holder may unlock its own lock.
		res = h.Do("POST", docPath+"/lock", nil, editor.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = h.Do("POST", docPath+"/unlock", nil, editor.As("")...)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, false, res.Map(t)["locked"])
	})

	t.Run("Delete", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		docPath := "/api/issues/" + iss.ID + "/documents/notes"
		v1 := putDocument(t, h, iss.ID, "notes", map[string]any{"body": "n"}, http.StatusCreated)
		res := h.Do("DELETE", docPath, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.JSONEq(t, `{"ok":true}`, string(res.Body))
		requireActivity(t, h, companyID, iss.ID, "issue.document.deleted", "documentId", v1.Document.ID)
		requireError(t, h.Do("GET", docPath, nil), http.StatusNotFound, "Document not found")

		res = h.Do("DELETE", docPath, nil)
		require.Equal(t, http.StatusOK, res.Status, "deleting a missing document is fine: %s", res.Body)

		// The key is free again: a fresh document starts at revision 1.
		again := putDocument(t, h, iss.ID, "notes", map[string]any{"body": "again"}, http.StatusCreated)
		require.Equal(t, 1, again.Revision.RevisionNumber)
		require.NotEqual(t, v1.Document.ID, again.Document.ID)
	})

	t.Run("ConcurrentSameBase", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		v1 := putDocument(t, h, iss.ID, "race", map[string]any{"body": "v1"}, http.StatusCreated)
		const writers = 12
		statuses := make([]int, writers)
		bodies := make([]string, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				b, _ := json.Marshal(map[string]any{"body": "writer " + string(rune('a'+i)), "baseRevisionId": v1.Revision.ID})
				req, err := http.NewRequest("PUT", h.URL+"/api/issues/"+iss.ID+"/documents/race", bytes.NewReader(b))
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				defer res.Body.Close()
				out, _ := io.ReadAll(res.Body)
				statuses[i], bodies[i] = res.StatusCode, string(out)
			})
		}
		wg.Wait()
		won := 0
		for i, st := range statuses {
			switch st {
			case http.StatusOK:
				won++
			case http.StatusConflict:
				require.Contains(t, bodies[i], "Document was updated by someone else")
			default:
				t.Fatalf("writer %d: status %d: %s", i, st, bodies[i])
			}
		}
		require.Equal(t, 1, won, "exactly one writer wins")
		res := h.Do("GET", "/api/issues/"+iss.ID+"/documents/race/revisions", nil)
		var revs struct {
			Revisions []any `json:"revisions"`
		}
		res.JSON(t, &revs)
		require.Len(t, revs.Revisions, 2)
	})

	t.Run("ConcurrentCreate", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		const writers = 8
		statuses := make([]int, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				req, _ := http.NewRequest("PUT", h.URL+"/api/issues/"+iss.ID+"/documents/first", strings.NewReader(`{"body":"hi"}`))
				req.Header.Set("Content-Type", "application/json")
				if res, err := http.DefaultClient.Do(req); err == nil {
					statuses[i] = res.StatusCode
					res.Body.Close()
				}
			})
		}
		wg.Wait()
		created := 0
		for _, st := range statuses {
			if st == http.StatusCreated {
				created++
			} else {
				require.Equal(t, http.StatusConflict, st)
			}
		}
		require.Equal(t, 1, created)
	})

	t.Run("CrossCompanyRefused", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		putDocument(t, h, iss.ID, "private", map[string]any{"body": "secret"}, http.StatusCreated)
		for _, req := range [][2]string{
			{"GET", "/api/issues/" + iss.ID + "/documents"},
			{"GET", "/api/issues/" + iss.ID + "/documents/private"},
			{"PUT", "/api/issues/" + iss.ID + "/documents/private"},
			{"DELETE", "/api/issues/" + iss.ID + "/documents/private"},
			{"GET", "/api/issues/" + iss.ID + "/documents/private/revisions"},
			{"POST", "/api/issues/" + iss.ID + "/documents/private/lock"},
		} {
			requireError(t, h.Do(req[0], req[1], map[string]any{"body": "x"}, outsider.As("")...), http.StatusForbidden, "You do not have access to this company")
		}
	})
}

// TestDocumentsGetMethod reads an issue document's text through work.documents.get: the
// latest body or a named revision's, clipped to maxCharacters with its full length, in the
// call's company only; bad input is a 4xx.
func TestDocumentsGetMethod(t *testing.T) {
	t.Parallel()
	h := waitWorkReady(t, startWork(t))
	companyID := h.CreateCompany("Docs Method Co")
	other := h.CreateCompany("Docs Method Elsewhere")
	system := &extensionv1.Actor{Type: "system"}
	iss := newAreaIssue(t, h, companyID, "")
	v1 := putDocument(t, h, iss.ID, "spec", map[string]any{"title": "Spec", "body": "Första utkast: " + strings.Repeat("a", 50)}, http.StatusCreated)
	v2 := putDocument(t, h, iss.ID, "spec", map[string]any{"body": "Second draft", "baseRevisionId": v1.Revision.ID}, http.StatusOK)

	get := func(company string, in map[string]any) (map[string]any, *extensionv1.Error) {
		out, e := issCall(t, h, "documents.get", company, system, in)
		if e != nil {
			return nil, e
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m))
		return m, nil
	}
	latest, e := get(companyID, map[string]any{"issueId": iss.ID, "key": "spec"})
	require.Nil(t, e, "%v", e)
	require.Equal(t, "Second draft", latest["body"])
	require.Equal(t, false, latest["clipped"])
	require.Equal(t, v2.Revision.ID, latest["revisionId"])
	require.EqualValues(t, 2, latest["revisionNumber"])
	require.Equal(t, "Spec", latest["title"])

	first, e := get(companyID, map[string]any{"issueId": iss.ID, "key": "spec", "revisionId": v1.Revision.ID, "maxCharacters": 10})
	require.Nil(t, e, "%v", e)
	require.Equal(t, "Första utk", first["body"], "clipped by characters, not bytes")
	require.Equal(t, true, first["clipped"])
	require.EqualValues(t, 65, first["bodyLength"])
	require.EqualValues(t, 1, first["revisionNumber"])
	require.EqualValues(t, 2, first["latestRevisionNumber"])

	for name, tc := range map[string]struct {
		company string
		in      map[string]any
		status  int32
		msg     string
	}{
		"other company":    {other, map[string]any{"issueId": iss.ID, "key": "spec"}, http.StatusNotFound, "Document not found"},
		"unknown key":      {companyID, map[string]any{"issueId": iss.ID, "key": "nope"}, http.StatusNotFound, "Document not found"},
		"bad issue":        {companyID, map[string]any{"issueId": "x", "key": "spec"}, http.StatusNotFound, "Document not found"},
		"unknown revision": {companyID, map[string]any{"issueId": iss.ID, "key": "spec", "revisionId": uuid.NewString()}, http.StatusNotFound, "Document revision not found"},
		"zero cap":         {companyID, map[string]any{"issueId": iss.ID, "key": "spec", "maxCharacters": 0}, http.StatusBadRequest, ""},
		"text cap":         {companyID, map[string]any{"issueId": iss.ID, "key": "spec", "maxCharacters": "ten"}, http.StatusBadRequest, ""},
	} {
		_, e := get(tc.company, tc.in)
		require.NotNil(t, e, name)
		require.EqualValues(t, tc.status, e.Status, "%s: %v", name, e)
		require.Contains(t, e.Message, tc.msg, name)
	}
}
