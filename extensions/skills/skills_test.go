package skills_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions/skills"
	"github.com/keelhq/keel/sdktest"
)

// repoC1 is acme/skills at its first commit: three skills of three trust levels.
var repoC1 = map[string]string{
	"README.md":                  "# acme skills",
	"pdf/SKILL.md":               skillMD("PDF Tools", "Read PDFs"),
	"pdf/scripts/extract.py":     "print('x')",
	"docs-only/SKILL.md":         skillMD("Docs Only", "Just markdown"),
	"docs-only/references/x.md":  "# ref",
	"design/SKILL.md":            skillMD("Design", "Brand kit", "slug: design-kit"),
	"design/assets/logo.svg":     "<svg/>",
	"design/nested/deep/note.md": "deep",
}

// TestSkills drives the skill routes through a real host with a local forge, registry site
// and raw file server. It sets the forge endpoints for the extension processes, so it does
// not run in parallel with other tests.
func TestSkills(t *testing.T) {
	f := newForge(t)
	f.push("acme/skills", "c1c1c1", repoC1, "main", "v1")
	// The registry site only names forge repositories; it serves nothing the import reads.
	reg := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(reg.Close)
	raw := http.NewServeMux()
	raw.HandleFunc("GET /x/pdf-raw/SKILL.md", func(rw http.ResponseWriter, _ *http.Request) {
		_, _ = rw.Write([]byte(skillMD("Raw PDF", "From a raw URL")))
	})
	raw.HandleFunc("GET /redirect/SKILL.md", func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, "ftp://127.0.0.1/SKILL.md", http.StatusFound)
	})
	raw.HandleFunc("GET /big/SKILL.md", func(rw http.ResponseWriter, _ *http.Request) {
		_, _ = rw.Write([]byte("---\nname: big\n---\n" + strings.Repeat("x", 3<<20)))
	})
	rawSrv := httptest.NewServer(raw)
	t.Cleanup(rawSrv.Close)
	t.Setenv(skills.EnvForgeAPI, f.srv.URL+"/api")
	t.Setenv(skills.EnvForgeRaw, f.srv.URL+"/raw")
	t.Setenv(skills.EnvForgeWeb, f.srv.URL)
	t.Setenv(skills.EnvRegistryWeb, reg.URL)
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	co := func(name string) string { return h.CreateCompany(name) }
	imp := func(t *testing.T, company, source string) map[string]any {
		t.Helper()
		return ok(t, h.Do("POST", "/api/companies/"+company+"/skills/import", map[string]any{"source": source}), http.StatusCreated)
	}

	t.Run("Catalog", func(t *testing.T) {
		t.Parallel()
		av := ok(t, h.Do("GET", "/api/skills/available", nil), http.StatusOK)["skills"].([]any)
		bySlug := map[string]map[string]any{}
		for _, s := range av {
			bySlug[s.(map[string]any)["slug"].(string)] = s.(map[string]any)
		}
		require.Equal(t, "bundled", bySlug["heartbeat"]["kind"])
		require.Equal(t, true, bySlug["heartbeat"]["defaultInstall"])
		require.Equal(t, "core", bySlug["heartbeat"]["category"])
		require.Contains(t, bySlug["heartbeat"]["recommendedRoles"], "engineer")
		require.Equal(t, "optional", bySlug["issue-triage"]["kind"])
		idx := ok(t, h.Do("GET", "/api/skills/index", nil), http.StatusOK)["skills"].([]any)
		require.Len(t, idx, len(av))
		res := h.Do("GET", "/api/skills/heartbeat", nil)
		require.Equal(t, http.StatusOK, res.Status)
		require.Contains(t, res.Header.Get("Content-Type"), "text/markdown")
		require.Contains(t, string(res.Body), "/api/agents/me/inbox-lite")
		wantErr(t, h.Do("GET", "/api/skills/nope", nil), http.StatusNotFound, "Skill not found")
	})

	t.Run("BundledReadOnly", func(t *testing.T) {
		t.Parallel()
		c := co("Bundled Co")
		first := list(t, h.Do("GET", "/api/companies/"+c+"/skills", nil))
		second := list(t, h.Do("GET", "/api/companies/"+c+"/skills", nil))
		require.Len(t, second, len(first), "a re-import on list does not duplicate")
		var hb map[string]any
		for _, s := range second {
			require.Equal(t, "service_bundled", s["sourceType"])
			if s["slug"] == "heartbeat" {
				hb = s
			}
		}
		require.NotNil(t, hb)
		require.Equal(t, "keelhq/keel/heartbeat", hb["key"])
		require.Equal(t, false, hb["editable"])
		require.Equal(t, "markdown_only", hb["trustLevel"])
		require.NotNil(t, hb["folderId"], "filed in the bundled folder")
		id := hb["id"].(string)
		wantErr(t, h.Do("DELETE", "/api/companies/"+c+"/skills/"+id, nil), http.StatusForbidden, "Bundled skills are read-only")
		wantErr(t, h.Do("PATCH", "/api/companies/"+c+"/skills/"+id+"/files", map[string]any{"path": "SKILL.md", "content": "x"}),
			http.StatusForbidden, "Bundled skills are read-only")
		folders := ok(t, h.Do("GET", "/api/companies/"+c+"/folders?kind=skill", nil), http.StatusOK)
		var bundled map[string]any
		for _, fo := range folders["folders"].([]any) {
			if fo.(map[string]any)["systemKey"] == "bundled" {
				bundled = fo.(map[string]any)
			}
		}
		require.NotNil(t, bundled)
		require.Equal(t, hb["folderId"], bundled["id"])
		require.EqualValues(t, len(second), bundled["itemCount"])
		require.EqualValues(t, len(second), folders["allCount"])
		mine := ok(t, h.Do("POST", "/api/companies/"+c+"/folders", map[string]any{"kind": "skill", "name": "Mine"}), http.StatusCreated)
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/folders/items/move", map[string]any{"kind": "skill", "itemId": id, "folderId": mine["id"]}),
			http.StatusForbidden, "Bundled skills cannot be moved")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/folders/items/move", map[string]any{"kind": "skill", "itemId": id}),
			http.StatusForbidden, "Bundled skills cannot be moved")
		// Nothing enters the bundled tree by hand.
		managed := ok(t, h.Do("POST", "/api/companies/"+c+"/skills", map[string]any{"name": "Hand made"}), http.StatusCreated)
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/folders/items/move", map[string]any{"kind": "skill", "itemId": managed["id"],
			"folderId": bundled["id"]}), http.StatusForbidden, "Bundled folders are read-only")
		// The file read works on bundled skills.
		file := ok(t, h.Do("GET", "/api/companies/"+c+"/skills/"+id+"/files?path=SKILL.md", nil), http.StatusOK)
		require.Contains(t, file["content"], "Heartbeat")
	})

	t.Run("ManagedSkill", func(t *testing.T) {
		t.Parallel()
		c := co("Managed Co")
		base := "/api/companies/" + c + "/skills"
		s := ok(t, h.Do("POST", base, map[string]any{"name": "Release Notes", "description": "Write notes"}), http.StatusCreated)
		require.Equal(t, "release-notes", s["slug"])
		require.Equal(t, "company/"+c+"/release-notes", s["key"])
		require.Equal(t, "managed_local", s["sourceType"])
		require.Equal(t, true, s["editable"])
		require.Equal(t, "markdown_only", s["trustLevel"])
		wantErr(t, h.Do("POST", base, map[string]any{"name": "Release  notes!"}), http.StatusConflict, "")
		wantErr(t, h.Do("POST", base, map[string]any{"name": ""}), http.StatusBadRequest, "Validation error")
		wantErr(t, h.Do("POST", base, map[string]any{"name": "x", "slug": "Not Kebab"}), http.StatusBadRequest, "Validation error")
		id := s["id"].(string)
		f0 := ok(t, h.Do("GET", base+"/"+id+"/files", nil), http.StatusOK)
		require.Equal(t, "SKILL.md", f0["path"])
		require.Contains(t, f0["content"], "name: \"Release Notes\"")
		fp := ok(t, h.Do("PATCH", base+"/"+id+"/files", map[string]any{"path": "SKILL.md",
			"content": skillMD("Release Notes v2", "Better notes")}), http.StatusOK)
		require.Equal(t, true, fp["markdown"])
		got := ok(t, h.Do("GET", base+"/"+id, nil), http.StatusOK)
		require.Equal(t, "Release Notes v2", got["name"])
		require.Equal(t, "release-notes", got["slug"], "the slug and key stay")
		require.Contains(t, got["markdown"], "Better notes")
		ok(t, h.Do("PATCH", base+"/"+id+"/files", map[string]any{"path": "scripts/run.sh", "content": "echo hi"}), http.StatusOK)
		require.Equal(t, "scripts_executables", ok(t, h.Do("GET", base+"/"+id, nil), http.StatusOK)["trustLevel"])
		for _, p := range []string{"../x", "/etc/passwd", "a/./b", ""} {
			wantErr(t, h.Do("PATCH", base+"/"+id+"/files", map[string]any{"path": p, "content": "x"}), http.StatusBadRequest, "Validation error")
		}
		wantErr(t, h.Do("GET", base+"/"+id+"/files?path=missing.md", nil), http.StatusNotFound, "Skill file not found")
		wantErr(t, h.Do("GET", base+"/"+uuid.NewString(), nil), http.StatusNotFound, "Skill not found")
		st := ok(t, h.Do("GET", base+"/"+id+"/update-status", nil), http.StatusOK)
		require.Equal(t, false, st["supported"])
		wantErr(t, h.Do("POST", base+"/"+id+"/install-update", nil), http.StatusUnprocessableEntity, "Only forge-managed skills can be updated")

		// Folders file managed skills; the kinds stay apart.
		sf := ok(t, h.Do("POST", "/api/companies/"+c+"/folders", map[string]any{"kind": "skill", "name": "Writing"}), http.StatusCreated)
		rf := ok(t, h.Do("POST", "/api/companies/"+c+"/folders", map[string]any{"kind": "routine", "name": "Writing"}), http.StatusCreated)
		ok(t, h.Do("POST", "/api/companies/"+c+"/folders/items/move", map[string]any{"kind": "skill", "itemId": id, "folderId": sf["id"]}), http.StatusOK)
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/folders/items/move", map[string]any{"kind": "skill", "itemId": id, "folderId": rf["id"]}),
			http.StatusUnprocessableEntity, "Folder kind must match item kind")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/folders/items/move", map[string]any{"kind": "skill", "itemId": uuid.NewString()}),
			http.StatusNotFound, "Skill not found")
		require.Equal(t, sf["id"], ok(t, h.Do("GET", base+"/"+id, nil), http.StatusOK)["folderId"])
		ok(t, h.Do("DELETE", "/api/companies/"+c+"/folders/"+sf["id"].(string), nil), http.StatusOK)
		require.Nil(t, ok(t, h.Do("GET", base+"/"+id, nil), http.StatusOK)["folderId"], "a deleted folder unfiles its skills")

		// Usage: an agent that wants the skill by key.
		ok(t, h.Do("POST", "/api/companies/"+c+"/agents", map[string]any{"name": "Writer", "role": "engineer",
			"desiredSkills": []string{"company/" + c + "/release-notes"}}), http.StatusCreated)
		got = ok(t, h.Do("GET", base+"/"+id, nil), http.StatusOK)
		require.Len(t, got["usedByAgents"], 1)
		require.Equal(t, "Writer", got["usedByAgents"].([]any)[0].(map[string]any)["name"])

		del := ok(t, h.Do("DELETE", base+"/"+id, nil), http.StatusOK)
		require.Equal(t, id, del["id"])
		wantErr(t, h.Do("GET", base+"/"+id, nil), http.StatusNotFound, "Skill not found")
	})

	t.Run("Permissions", func(t *testing.T) {
		t.Parallel()
		c := co("Perm Co")
		worker := h.CreateAgent(c, "Worker", "engineer")
		base := "/api/companies/" + c + "/skills"
		wantErr(t, h.Do("POST", base, map[string]any{"name": "x"}, worker.As("")...), http.StatusForbidden,
			"Missing permission agents:create for this company")
		wantErr(t, h.Do("POST", base+"/import", map[string]any{"source": "acme/skills"}, worker.As("")...), http.StatusForbidden, "")
		list(t, h.Do("GET", base, nil, worker.As("")...))
		// The legacy canCreateAgents flag is enough.
		ok(t, h.Do("PATCH", "/api/agents/"+worker.ID+"/permissions", map[string]any{"canCreateAgents": true}), http.StatusOK)
		ok(t, h.Do("POST", base, map[string]any{"name": "By agent"}, worker.As("")...), http.StatusCreated)
		other := h.CreateAgent(co("Perm Other"), "Other", "ceo")
		require.Equal(t, http.StatusForbidden, h.Do("GET", base, nil, other.As("")...).Status)
	})

	t.Run("ForgeForms", func(t *testing.T) {
		t.Parallel()
		c := co("Forge Co")
		out := imp(t, c, f.srv.URL+"/acme/skills")
		require.Equal(t, []string{"acme/skills/design-kit", "acme/skills/docs-only", "acme/skills/pdf-tools"}, keys(out["imported"].([]any)))
		src := out["source"].(map[string]any)
		require.Equal(t, "forge", src["sourceType"])
		require.Equal(t, "c1c1c1", src["commit"])
		trust := map[string]string{}
		for _, s := range out["imported"].([]any) {
			m := s.(map[string]any)
			trust[m["slug"].(string)] = m["trustLevel"].(string)
			require.Equal(t, "c1c1c1", m["sourceRef"])
			require.Equal(t, "main", m["metadata"].(map[string]any)["trackingRef"])
		}
		require.Equal(t, map[string]string{"pdf-tools": "scripts_executables", "docs-only": "markdown_only", "design-kit": "assets"}, trust)
		// The same repository as owner/repo: one row per key, nothing new.
		again := imp(t, c, "acme/skills")
		require.Len(t, again["imported"], 3)
		require.Len(t, again["skipped"], 3)
		skillsNow := list(t, h.Do("GET", "/api/companies/"+c+"/skills", nil))
		n := 0
		for _, s := range skillsNow {
			if s["sourceType"] == "forge" {
				n++
			}
		}
		require.Equal(t, 3, n)

		for _, tc := range []struct{ source, key string }{
			{f.srv.URL + "/acme/skills/tree/v1/pdf", "acme/skills/pdf-tools"},
			{f.srv.URL + "/acme/skills/blob/main/docs-only/SKILL.md", "acme/skills/docs-only"},
			{"acme/skills/design", "acme/skills/design-kit"},
		} {
			out := imp(t, co("Forge Form"), tc.source)
			require.Equal(t, []string{tc.key}, keys(out["imported"].([]any)), tc.source)
		}
		// Registry URL and npx command unwrap to the forge and keep the original locator.
		for _, source := range []string{reg.URL + "/acme/skills/pdf", "npx skills add acme/skills --skill pdf"} {
			out := imp(t, co("Registry Form"), source)
			require.Len(t, out["imported"], 1, source)
			s := out["imported"].([]any)[0].(map[string]any)
			require.Equal(t, "registry_site", s["sourceType"])
			require.Equal(t, source, s["metadata"].(map[string]any)["originalLocator"])
			require.Equal(t, "acme/skills/pdf-tools", s["key"])
		}
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": "acme/missing"}), http.StatusUnprocessableEntity, "")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": "acme/skills/nope"}), http.StatusUnprocessableEntity, "")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": "ftp://x/y"}), http.StatusUnprocessableEntity, "")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": ""}), http.StatusBadRequest, "")

		// The import is logged once as company.skills_imported.
		sdktest.WaitFor(t, 30*time.Second, func() bool {
			for _, e := range list(t, h.Do("GET", "/api/companies/"+c+"/activity?action=company.skills_imported", nil)) {
				if e["action"] == "company.skills_imported" {
					return true
				}
			}
			return false
		}, "the import activity")
	})

	t.Run("UpdateStatusAndInstall", func(t *testing.T) {
		t.Parallel()
		f.push("acme/tracked", "t1", map[string]string{"one/SKILL.md": skillMD("One", "v1")}, "main")
		c := co("Tracked Co")
		s := imp(t, c, "acme/tracked")["imported"].([]any)[0].(map[string]any)
		id := s["id"].(string)
		base := "/api/companies/" + c + "/skills/" + id
		st := ok(t, h.Do("GET", base+"/update-status", nil), http.StatusOK)
		require.Equal(t, true, st["supported"])
		require.Equal(t, false, st["hasUpdate"])
		f.push("acme/tracked", "t2", map[string]string{"one/SKILL.md": skillMD("One", "v2"), "one/tool.sh": "echo"}, "main")
		st = ok(t, h.Do("GET", base+"/update-status", nil), http.StatusOK)
		require.Equal(t, true, st["hasUpdate"])
		require.Equal(t, "t2", st["latestCommit"])
		require.Equal(t, "t1", st["currentCommit"])
		up := ok(t, h.Do("POST", base+"/install-update", nil), http.StatusOK)
		require.Equal(t, "t2", up["sourceRef"])
		require.Equal(t, "v2", up["description"])
		require.Equal(t, "scripts_executables", up["trustLevel"])
		require.Equal(t, id, up["id"])
		require.Equal(t, false, ok(t, h.Do("GET", base+"/update-status", nil), http.StatusOK)["hasUpdate"])
		wantErr(t, h.Do("PATCH", base+"/files", map[string]any{"path": "SKILL.md", "content": "x"}), http.StatusForbidden,
			"Only managed skills can be edited")
	})

	t.Run("URLAndLocal", func(t *testing.T) {
		t.Parallel()
		c := co("Local Co")
		out := imp(t, c, rawSrv.URL+"/x/pdf-raw/SKILL.md")
		s := out["imported"].([]any)[0].(map[string]any)
		require.Equal(t, "url", s["sourceType"])
		require.True(t, strings.HasPrefix(s["key"].(string), "url/127.0.0.1/"), s["key"])
		require.True(t, strings.HasSuffix(s["key"].(string), "/raw-pdf"), s["key"])
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": rawSrv.URL + "/redirect/SKILL.md"}),
			http.StatusBadGateway, "")
		m := wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": rawSrv.URL + "/big/SKILL.md"}),
			http.StatusBadGateway, "")
		require.Contains(t, m["error"], "larger than")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": rawSrv.URL + "/missing/SKILL.md"}),
			http.StatusUnprocessableEntity, "")

		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{
			"single/SKILL.md":              skillMD("Single", "one", "metadata:\n  skillKey: team/single"),
			"many/a/SKILL.md":              skillMD("Alpha", "a"),
			"many/a/references/notes.md":   "n",
			"many/group/b/SKILL.md":        skillMD("Beta", "b"),
			"many/group/b/assets/img.png":  "png",
			"many/node_modules/x/SKILL.md": skillMD("Hidden", "never"),
			"many/c/SKILL.md":              skillMD("Gamma", "c", "key: team/dup"),
			"many/d/SKILL.md":              skillMD("Delta", "d", "key: team/dup"),
			"plain/README.md":              "no skill",
		})
		one := imp(t, c, filepath.Join(dir, "single", "SKILL.md"))
		require.Equal(t, []string{"team/single"}, keys(one["imported"].([]any)))
		require.Equal(t, "local_path", one["imported"].([]any)[0].(map[string]any)["sourceType"])
		require.Equal(t, []string{"team/single"}, keys(imp(t, c, filepath.Join(dir, "single"))["imported"].([]any)))
		many := imp(t, c, filepath.Join(dir, "many"))
		require.Len(t, many["imported"], 3, "a, b and the first of two skills sharing a key")
		require.Len(t, many["warnings"], 1)
		require.Contains(t, many["warnings"].([]any)[0], "also the key of")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": filepath.Join(dir, "plain")}),
			http.StatusUnprocessableEntity, "")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": filepath.Join(dir, "plain", "README.md")}),
			http.StatusUnprocessableEntity, "")
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/import", map[string]any{"source": filepath.Join(dir, "nowhere")}),
			http.StatusUnprocessableEntity, "")
	})

	t.Run("ScanProjects", func(t *testing.T) {
		t.Parallel()
		c := co("Scan Co")
		ws := t.TempDir()
		writeFiles(t, ws, map[string]string{
			"skills/alpha/SKILL.md":         skillMD("Alpha", "a"),
			".claude/skills/beta/SKILL.md":  skillMD("Beta", "b"),
			"skills/clash/SKILL.md":         skillMD("Clash", "c", "key: team/clash"),
			".agents/skills/gamma/SKILL.md": skillMD("Gamma", "g"),
		})
		other := t.TempDir()
		writeFiles(t, other, map[string]string{"SKILL.md": skillMD("Clash", "mine", "key: team/clash")})
		imp(t, c, other)
		p := ok(t, h.Do("POST", "/api/companies/"+c+"/projects", map[string]any{"name": "Scan Project",
			"workspace": map[string]any{"name": "main", "cwd": ws}}), http.StatusCreated)
		res := ok(t, h.Do("POST", "/api/companies/"+c+"/skills/scan-projects", map[string]any{}), http.StatusOK)
		require.Len(t, res["imported"], 3, "%v", res)
		require.Len(t, res["conflicts"], 1)
		cf := res["conflicts"].([]any)[0].(map[string]any)
		require.Equal(t, "team/clash", cf["key"])
		require.Equal(t, "key_conflict", cf["reason"])
		// Non-destructive: the local skill keeps its content.
		var clash map[string]any
		for _, s := range list(t, h.Do("GET", "/api/companies/"+c+"/skills", nil)) {
			if s["key"] == "team/clash" {
				clash = s
			}
		}
		require.Equal(t, "mine", clash["description"])
		// Scanned skills sit in the project's folder under projects.
		var projFolder map[string]any
		for _, fo := range ok(t, h.Do("GET", "/api/companies/"+c+"/folders?kind=skill", nil), http.StatusOK)["folders"].([]any) {
			if fo.(map[string]any)["systemKey"] == "project:"+p["id"].(string) {
				projFolder = fo.(map[string]any)
			}
		}
		require.NotNil(t, projFolder)
		require.Equal(t, "projects/scan-project", projFolder["path"])
		require.EqualValues(t, 3, projFolder["itemCount"])
		again := ok(t, h.Do("POST", "/api/companies/"+c+"/skills/scan-projects", map[string]any{"projectIds": []string{p["id"].(string)}}), http.StatusOK)
		require.Len(t, again["imported"], 0)
		require.Len(t, again["skipped"], 3)
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/skills/scan-projects", map[string]any{"projectIds": []string{"nope"}}),
			http.StatusBadRequest, "Validation error")
		w := ok(t, h.Do("POST", "/api/companies/"+c+"/skills/scan-projects", map[string]any{"projectIds": []string{uuid.NewString()}}), http.StatusOK)
		require.Len(t, w["warnings"], 1)
	})

	t.Run("OwnerMethods", func(t *testing.T) {
		t.Parallel()
		c := co("Methods Co")
		var up struct {
			Skill   map[string]any `json:"skill"`
			Created bool           `json:"created"`
			Changed bool           `json:"changed"`
		}
		in := map[string]any{"managedBy": "plugin.wiki", "sourceType": "catalog", "files": []map[string]any{
			{"path": "SKILL.md", "content": skillMD("Wiki Query", "Ask the wiki")},
			{"path": "assets/icon.png", "content": "/4A=", "encoding": "base64"},
		}}
		require.Nil(t, call(t, h, "skills.upsert", c, in, &up))
		require.True(t, up.Created)
		require.Equal(t, "company/"+c+"/wiki-query", up.Skill["key"])
		require.Equal(t, "assets", up.Skill["trustLevel"])
		require.Equal(t, false, up.Skill["editable"])
		// Filed in the plugin's folder of the bundled tree, which it cannot leave.
		require.NotNil(t, up.Skill["folderId"])
		var folder map[string]any
		require.Nil(t, call(t, h, "folders.get", c, map[string]any{"folderId": up.Skill["folderId"]}, &folder))
		require.Equal(t, "bundled:plugin-wiki", folder["systemKey"])
		require.Equal(t, "bundled/plugin-wiki", folder["path"])
		wantErr(t, h.Do("POST", "/api/companies/"+c+"/folders/items/move", map[string]any{"kind": "skill", "itemId": up.Skill["id"]}),
			http.StatusForbidden, "Bundled skills cannot be moved")
		require.Nil(t, call(t, h, "skills.upsert", c, in, &up))
		require.False(t, up.Created)
		require.False(t, up.Changed)
		var got map[string]any
		require.Nil(t, call(t, h, "skills.get", c, map[string]any{"key": up.Skill["key"], "includeFiles": true}, &got))
		files := got["files"].([]any)
		require.Len(t, files, 2)
		require.Equal(t, "SKILL.md", files[0].(map[string]any)["path"])
		require.Equal(t, "base64", files[1].(map[string]any)["encoding"])
		require.Equal(t, "/4A=", files[1].(map[string]any)["content"])
		// Materialised on this node for agent runs: the files, a script bit where it belongs.
		require.Nil(t, call(t, h, "skills.get", c, map[string]any{"key": up.Skill["key"], "materialize": true}, &got))
		dir := got["localPath"].(string)
		b, err := os.ReadFile(filepath.Join(dir, "SKILL.md"))
		require.NoError(t, err)
		require.Contains(t, string(b), "Wiki Query")
		b, err = os.ReadFile(filepath.Join(dir, "assets", "icon.png"))
		require.NoError(t, err)
		require.Equal(t, []byte{0xff, 0x80}, b)
		var all struct {
			Skills []map[string]any `json:"skills"`
		}
		require.Nil(t, call(t, h, "skills.list", c, map[string]any{"includeBundled": false}, &all))
		require.Len(t, all.Skills, 1)
		e := call(t, h, "skills.upsert", c, map[string]any{"key": "keelhq/keel/heartbeat", "files": in["files"]}, nil)
		require.NotNil(t, e)
		require.EqualValues(t, http.StatusForbidden, e.Status)
		e = call(t, h, "skills.upsert", c, map[string]any{"files": []map[string]any{{"path": "../x", "content": "y"}}}, nil)
		require.NotNil(t, e)
		require.EqualValues(t, http.StatusBadRequest, e.Status)
		e = call(t, h, "skills.get", c, map[string]any{"skillId": uuid.NewString()}, nil)
		require.NotNil(t, e)
		require.EqualValues(t, http.StatusNotFound, e.Status)
	})
}
