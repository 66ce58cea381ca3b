package work_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestIssueLabels(t *testing.T) {
	t.Parallel()
	h := issStart(t)
	company := h.CreateCompany("Label Co")
	other := h.CreateCompany("Other Label Co")
	worker := h.CreateAgent(company, "Worker", "engineer")
	outsider := h.CreateAgent(other, "Outsider", "engineer")
	post := func(companyID string, body any, headers ...string) *struct {
		status int
		m      map[string]any
		raw    string
	} {
		res := h.Do("POST", "/api/companies/"+companyID+"/labels", body, headers...)
		out := &struct {
			status int
			m      map[string]any
			raw    string
		}{status: res.Status, raw: string(res.Body)}
		if res.Status < 300 {
			out.m = res.Map(t)
		}
		return out
	}

	t.Run("CreateListDelete", func(t *testing.T) {
		bug := post(company, map[string]any{"name": " Bug ", "color": "#FF0000"})
		require.Equal(t, http.StatusCreated, bug.status, bug.raw)
		require.Equal(t, "Bug", bug.m["name"])
		require.Equal(t, "#ff0000", bug.m["color"])
		require.Equal(t, company, bug.m["companyId"])
		area := post(company, map[string]any{"name": "area", "color": "#00aa00"}, worker.As("")...)
		require.Equal(t, http.StatusCreated, area.status, area.raw)

		res := h.Do("GET", "/api/companies/"+company+"/labels", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var list []map[string]any
		res.JSON(t, &list)
		require.Len(t, list, 2)
		require.Equal(t, "area", list[0]["name"])
		require.Equal(t, "Bug", list[1]["name"])

		iss := issCreate(t, h, company, map[string]any{"title": "Labelled", "labelIds": []string{bug.m["id"].(string), area.m["id"].(string)}})
		require.Len(t, iss["labels"], 2)
		res = h.Do("DELETE", "/api/labels/"+bug.m["id"].(string), nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, bug.m["id"], res.Map(t)["id"])
		require.Equal(t, []any{area.m["id"]}, issGet(t, h, iss["id"].(string))["labelIds"])
		issWantErr(t, h.Do("DELETE", "/api/labels/"+bug.m["id"].(string), nil), http.StatusNotFound, "Label not found")
		issWantErr(t, h.Do("DELETE", "/api/labels/not-a-uuid", nil), http.StatusNotFound, "Label not found")
	})

	t.Run("NameUniquePerCompanyCaseInsensitive", func(t *testing.T) {
		require.Equal(t, http.StatusCreated, post(company, map[string]any{"name": "Frontend", "color": "#111111"}).status)
		dup := h.Do("POST", "/api/companies/"+company+"/labels", map[string]any{"name": "FRONTEND", "color": "#222222"})
		issWantErr(t, dup, http.StatusConflict, "Label name already exists in this company")
		require.Equal(t, http.StatusCreated, post(other, map[string]any{"name": "frontend", "color": "#111111"}).status)
	})

	t.Run("Validation", func(t *testing.T) {
		for body, path := range map[string]string{
			`{"color":"#000000"}`:                                          "name",
			`{"name":"  ","color":"#000000"}`:                              "name",
			`{"name":"` + strings.Repeat("n", 49) + `","color":"#000000"}`: "name",
			`{"name":"ok","color":"red"}`:                                  "color",
			`{"name":"ok","color":"#12345"}`:                               "color",
			`{"name":"ok","color":"#1234567"}`:                             "color",
		} {
			issWantValidation(t, h.Do("POST", "/api/companies/"+company+"/labels", body), path)
		}
		require.Equal(t, http.StatusCreated, post(company, map[string]any{"name": strings.Repeat("é", 48), "color": "#abcdef"}).status)
	})

	t.Run("IssueLabelsMustBelongToCompany", func(t *testing.T) {
		foreign := post(other, map[string]any{"name": "foreign", "color": "#333333"})
		require.Equal(t, http.StatusCreated, foreign.status, foreign.raw)
		res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "x", "labelIds": []string{foreign.m["id"].(string)}})
		issWantErr(t, res, http.StatusUnprocessableEntity, "One or more labels do not belong to company")
		res = h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "x", "labelIds": []string{uuid.NewString()}})
		issWantErr(t, res, http.StatusUnprocessableEntity, "One or more labels do not belong to company")
	})

	t.Run("CrossCompany", func(t *testing.T) {
		l := post(company, map[string]any{"name": "mine", "color": "#444444"})
		require.Equal(t, http.StatusCreated, l.status, l.raw)
		require.Equal(t, http.StatusForbidden, h.Do("DELETE", "/api/labels/"+l.m["id"].(string), nil, outsider.As("")...).Status)
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+company+"/labels", nil, outsider.As("")...).Status)
		require.Equal(t, http.StatusForbidden, post(company, map[string]any{"name": "x", "color": "#444444"}, outsider.As("")...).status)
	})
}
