package work_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestWorkProducts(t *testing.T) {
	t.Parallel()
	h := waitWorkReady(t, startWork(t))
	companyID := h.CreateCompany("Product Co")
	builder := h.CreateAgent(companyID, "Builder", "engineer")
	outsider := h.CreateAgent(h.CreateCompany("Far Away"), "Outsider", "engineer")

	pullRequest := func(title string) map[string]any {
		return map[string]any{"type": "pull_request", "provider": "github", "title": title, "url": "https://example.com/pr/1", "externalId": "1"}
	}

	t.Run("CreateListUpdateDelete", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, builder.ID)
		runID := uuid.NewString()
		res := h.Do("POST", "/api/issues/"+iss.Identifier+"/work-products", pullRequest("Add login"), builder.As(runID)...)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		wp := res.Map(t)
		require.Equal(t, iss.ID, wp["issueId"])
		require.Equal(t, companyID, wp["companyId"])
		require.Equal(t, "pull_request", wp["type"])
		require.Equal(t, "github", wp["provider"])
		require.Equal(t, "Add login", wp["title"])
		require.Equal(t, "active", wp["status"])
		require.Equal(t, "none", wp["reviewState"])
		require.Equal(t, "unknown", wp["healthStatus"])
		require.Equal(t, false, wp["isPrimary"])
		require.Equal(t, runID, wp["createdByRunId"])
		require.Equal(t, "1", wp["externalId"])
		require.Nil(t, wp["summary"])
		id := wp["id"].(string)
		requireActivity(t, h, companyID, iss.ID, "issue.work_product.created", "workProductId", id)

		res = h.Do("GET", "/api/issues/"+iss.ID+"/work-products", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 1)
		require.Equal(t, id, list[0]["id"])

		res = h.Do("PATCH", "/api/work-products/"+id, map[string]any{
			"status": "merged", "reviewState": "approved", "healthStatus": "healthy", "summary": "Merged after review",
			"metadata": map[string]any{"resourceRef": "pr-1"},
		})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		wp = res.Map(t)
		require.Equal(t, "merged", wp["status"])
		require.Equal(t, "approved", wp["reviewState"])
		require.Equal(t, "healthy", wp["healthStatus"])
		require.Equal(t, "Merged after review", wp["summary"])
		require.Equal(t, "Add login", wp["title"], "fields not named stay")
		require.Equal(t, "pr-1", wp["metadata"].(map[string]any)["resourceRef"])
		requireActivity(t, h, companyID, iss.ID, "issue.work_product.updated", "workProductId", id)

		res = h.Do("PATCH", "/api/work-products/"+id, map[string]any{"summary": nil, "url": nil, "metadata": nil})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		wp = res.Map(t)
		require.Nil(t, wp["summary"], "null clears")
		require.Nil(t, wp["url"])
		require.Nil(t, wp["metadata"])
		require.Equal(t, "merged", wp["status"])

		res = h.Do("DELETE", "/api/work-products/"+id, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, id, res.Map(t)["id"])
		requireActivity(t, h, companyID, iss.ID, "issue.work_product.deleted", "workProductId", id)
		res = h.Do("GET", "/api/issues/"+iss.ID+"/work-products", nil)
		require.JSONEq(t, "[]", string(res.Body))
		requireError(t, h.Do("DELETE", "/api/work-products/"+id, nil), http.StatusNotFound, "Work product not found")
		requireError(t, h.Do("PATCH", "/api/work-products/"+id, map[string]any{"status": "closed"}), http.StatusNotFound, "Work product not found")
		requireError(t, h.Do("PATCH", "/api/work-products/not-an-id", map[string]any{"status": "closed"}), http.StatusNotFound, "Work product not found")
	})

	t.Run("PrimaryPerType", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		first := pullRequest("First")
		first["isPrimary"] = true
		res := h.Do("POST", "/api/issues/"+iss.ID+"/work-products", first)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		firstID := res.Map(t)["id"].(string)
		branch := map[string]any{"type": "branch", "provider": "git", "title": "feature/x", "isPrimary": true}
		res = h.Do("POST", "/api/issues/"+iss.ID+"/work-products", branch)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		branchID := res.Map(t)["id"].(string)
		res = h.Do("POST", "/api/issues/"+iss.ID+"/work-products", pullRequest("Second"))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		secondID := res.Map(t)["id"].(string)

		res = h.Do("PATCH", "/api/work-products/"+secondID, map[string]any{"isPrimary": true})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

		res = h.Do("GET", "/api/issues/"+iss.ID+"/work-products", nil)
		var list []map[string]any
		res.JSON(t, &list)
		primary := map[string]bool{}
		for _, wp := range list {
			primary[wp["id"].(string)] = wp["isPrimary"].(bool)
		}
		require.Equal(t, map[string]bool{firstID: false, branchID: true, secondID: true}, primary)
	})

	t.Run("Validation", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		path := "/api/issues/" + iss.ID + "/work-products"
		without := func(field string) map[string]any {
			b := pullRequest("T")
			delete(b, field)
			return b
		}
		with := func(field string, v any) map[string]any {
			b := pullRequest("T")
			b[field] = v
			return b
		}
		requireValidation(t, h.Do("POST", path, without("type")), "type")
		requireValidation(t, h.Do("POST", path, without("provider")), "provider")
		requireValidation(t, h.Do("POST", path, without("title")), "title")
		requireValidation(t, h.Do("POST", path, with("title", "  ")), "title")
		requireValidation(t, h.Do("POST", path, with("title", strings.Repeat("t", 501))), "title")
		requireValidation(t, h.Do("POST", path, with("type", "video")), "type")
		requireValidation(t, h.Do("POST", path, with("status", "done")), "status")
		requireValidation(t, h.Do("POST", path, with("reviewState", "maybe")), "reviewState")
		requireValidation(t, h.Do("POST", path, with("healthStatus", "sick")), "healthStatus")
		requireValidation(t, h.Do("POST", path, with("url", "javascript:alert(1)")), "url")
		requireValidation(t, h.Do("POST", path, with("metadata", "flat")), "metadata")
		requireValidation(t, h.Do("POST", path, with("projectId", "p1")), "projectId")
		requireError(t, h.Do("POST", path, with("projectId", uuid.NewString())), http.StatusUnprocessableEntity, "Project does not belong to company")

		for _, typ := range []string{"preview_url", "runtime_service", "pull_request", "branch", "commit", "artifact", "document"} {
			res := h.Do("POST", path, with("type", typ))
			require.Equal(t, http.StatusCreated, res.Status, "%s: %s", typ, res.Body)
		}
		res := h.Do("POST", path, with("status", "draft"))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		id := res.Map(t)["id"].(string)
		requireValidation(t, h.Do("PATCH", "/api/work-products/"+id, map[string]any{"status": "finished"}), "status")
		requireValidation(t, h.Do("PATCH", "/api/work-products/"+id, map[string]any{"title": nil}), "title")
		requireValidation(t, h.Do("PATCH", "/api/work-products/"+id, map[string]any{"isPrimary": nil}), "isPrimary")
		requireError(t, h.Do("POST", "/api/issues/"+uuid.NewString()+"/work-products", pullRequest("x")), http.StatusNotFound, "Issue not found")
	})

	t.Run("CrossCompanyRefused", func(t *testing.T) {
		iss := newAreaIssue(t, h, companyID, "")
		res := h.Do("POST", "/api/issues/"+iss.ID+"/work-products", pullRequest("Mine"))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		id := res.Map(t)["id"].(string)
		denied := "You do not have access to this company"
		requireError(t, h.Do("GET", "/api/issues/"+iss.ID+"/work-products", nil, outsider.As("")...), http.StatusForbidden, denied)
		requireError(t, h.Do("POST", "/api/issues/"+iss.ID+"/work-products", pullRequest("Theirs"), outsider.As("")...), http.StatusForbidden, denied)
		requireError(t, h.Do("PATCH", "/api/work-products/"+id, map[string]any{"status": "closed"}, outsider.As("")...), http.StatusForbidden, denied)
		requireError(t, h.Do("DELETE", "/api/work-products/"+id, nil, outsider.As("")...), http.StatusForbidden, denied)
	})
}
