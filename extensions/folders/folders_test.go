package folders_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions/folders"
	"github.com/keelhq/keel/sdktest"
)

func TestSlugify(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Smoke Ops Répörts!":     "smoke-ops-reports",
		"  Héllo   Wörld  ":      "hello-world",
		"ÀÉÎÕÜ ça":               "aeiou-ca",
		"a--b__c":                "a-b-c",
		"日本":                     "",
		"Nightly":                "nightly",
		strings.Repeat("x", 130): strings.Repeat("x", 120),
	} {
		require.Equal(t, want, folders.Slugify(in), in)
	}
}

// fixture is a company on a shared host.
type fixture struct {
	h  *sdktest.Host
	co string
}

func (f *fixture) path(p string) string { return "/api/companies/" + f.co + "/folders" + p }

// create creates a folder (201 required).
func (f *fixture) create(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	return ok(t, f.h.Do("POST", f.path(""), body), http.StatusCreated)
}

// list lists a tree.
func (f *fixture) list(t *testing.T, kind string) map[string]any {
	t.Helper()
	return ok(t, f.h.Do("GET", f.path("?kind="+kind), nil), http.StatusOK)
}

// byID returns the listed folder with an id.
func byID(t *testing.T, list map[string]any, id string) map[string]any {
	t.Helper()
	for _, f := range list["folders"].([]any) {
		if m := f.(map[string]any); m["id"] == id {
			return m
		}
	}
	t.Fatalf("folder %s not listed", id)
	return nil
}

// actions returns the company's folder activity actions, oldest first.
func (f *fixture) actions(t *testing.T) []string {
	t.Helper()
	res := f.h.Do("GET", "/api/companies/"+f.co+"/activity?limit=500", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var entries []map[string]any
	res.JSON(t, &entries)
	var out []string
	for i := len(entries) - 1; i >= 0; i-- {
		if a, _ := entries[i]["action"].(string); strings.HasPrefix(a, "folder.") {
			out = append(out, a)
		}
	}
	return out
}

func TestFolders(t *testing.T) {
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	newCo := func(t *testing.T, name string) *fixture { return &fixture{h: h, co: h.CreateCompany(name)} }

	t.Run("CreateAndList", func(t *testing.T) {
		t.Parallel()
		f := newCo(t, "Folder Create")
		wantErr(t, h.Do("GET", f.path(""), nil), http.StatusBadRequest, "Folder kind query parameter is required")
		wantErr(t, h.Do("GET", f.path("?kind=task"), nil), http.StatusBadRequest, "Folder kind query parameter is required")
		root := f.create(t, map[string]any{"kind": "routine", "name": "Smoke Ops Répörts!"})
		require.Equal(t, "smoke-ops-reports", root["slug"])
		require.Equal(t, "smoke-ops-reports", root["path"])
		require.EqualValues(t, 1, root["depth"])
		require.EqualValues(t, 0, root["position"])
		require.Nil(t, root["parentId"])
		require.Nil(t, root["systemKey"])
		require.Nil(t, root["color"])
		child := f.create(t, map[string]any{"kind": "routine", "name": "Nightly", "parentId": root["id"], "color": "#ff0000"})
		require.Equal(t, "smoke-ops-reports/nightly", child["path"])
		require.EqualValues(t, 2, child["depth"])
		require.Equal(t, "#ff0000", child["color"])
		second := f.create(t, map[string]any{"kind": "routine", "name": "Weekly", "slug": "wk"})
		require.EqualValues(t, 1, second["position"], "one past the highest sibling")
		require.Equal(t, "wk", second["slug"])

		l := f.list(t, "routine")
		require.Equal(t, "routine", l["kind"])
		names := []string{}
		for _, x := range l["folders"].([]any) {
			names = append(names, x.(map[string]any)["name"].(string))
			require.EqualValues(t, 0, x.(map[string]any)["itemCount"])
		}
		require.Equal(t, []string{"Nightly", "Smoke Ops Répörts!", "Weekly"}, names, "sorted by position, name, id")
		require.EqualValues(t, 0, l["allCount"])
		require.EqualValues(t, 0, l["unfiledCount"])
		require.Empty(t, f.list(t, "skill")["folders"], "the trees are separate")

		// Validation and conflicts.
		for _, body := range []map[string]any{
			{"name": "no kind"},
			{"kind": "task", "name": "x"},
			{"kind": "routine"},
			{"kind": "routine", "name": strings.Repeat("n", 121)},
			{"kind": "routine", "name": "x", "slug": "Bad Slug"},
			{"kind": "routine", "name": "x", "slug": "a--b"},
			{"kind": "routine", "name": "x", "color": ""},
			{"kind": "routine", "name": "x", "position": -1},
			{"kind": "routine", "name": "x", "parentId": "nope"},
			{"kind": "routine", "name": "日本"},
		} {
			wantErr(t, h.Do("POST", f.path(""), body), http.StatusBadRequest, "Validation error")
		}
		wantErr(t, h.Do("POST", f.path(""), map[string]any{"kind": "routine", "name": "Smoke ops reports"}),
			http.StatusConflict, "Folder slug already exists under this parent")
		f.create(t, map[string]any{"kind": "skill", "name": "Smoke ops reports"})
		wantErr(t, h.Do("POST", f.path(""), map[string]any{"kind": "routine", "name": "x", "parentId": uuid.NewString()}),
			http.StatusNotFound, "Parent folder not found")
		wantErr(t, h.Do("POST", f.path(""), map[string]any{"kind": "skill", "name": "x", "parentId": root["id"]}),
			http.StatusNotFound, "Parent folder not found")

		// Depth at most 4.
		parent := child["id"]
		for _, n := range []string{"three", "four"} {
			parent = f.create(t, map[string]any{"kind": "routine", "name": n, "parentId": parent})["id"]
		}
		wantErr(t, h.Do("POST", f.path(""), map[string]any{"kind": "routine", "name": "five", "parentId": parent}),
			http.StatusUnprocessableEntity, "Folder depth cannot exceed 4")
	})

	t.Run("PatchAndReserved", func(t *testing.T) {
		t.Parallel()
		f := newCo(t, "Folder Patch")
		a := f.create(t, map[string]any{"kind": "skill", "name": "Alpha"})
		f.create(t, map[string]any{"kind": "skill", "name": "Beta"})
		id := a["id"].(string)
		wantErr(t, h.Do("PATCH", f.path("/"+id), map[string]any{}), http.StatusBadRequest, "At least one folder field is required")
		wantErr(t, h.Do("PATCH", f.path("/"+id), map[string]any{"parentId": nil}), http.StatusBadRequest, "At least one folder field is required")
		p := ok(t, h.Do("PATCH", f.path("/"+id), map[string]any{"name": "Gamma Ray"}), http.StatusOK)
		require.Equal(t, "gamma-ray", p["slug"], "a new name without a slug re-derives the slug")
		p = ok(t, h.Do("PATCH", f.path("/"+id), map[string]any{"name": "Delta", "slug": "keep-me", "color": "blue", "position": 7}), http.StatusOK)
		require.Equal(t, "keep-me", p["slug"])
		require.Equal(t, "blue", p["color"])
		require.EqualValues(t, 7, p["position"])
		p = ok(t, h.Do("PATCH", f.path("/"+id), map[string]any{"color": nil}), http.StatusOK)
		require.Nil(t, p["color"])
		wantErr(t, h.Do("PATCH", f.path("/"+id), map[string]any{"slug": "beta"}), http.StatusConflict, "Folder slug already exists under this parent")
		wantErr(t, h.Do("PATCH", f.path("/"+uuid.NewString()), map[string]any{"name": "x"}), http.StatusNotFound, "Folder not found")
		wantErr(t, h.Do("PATCH", f.path("/"+id), map[string]any{"slug": "NO"}), http.StatusBadRequest, "Validation error")

		// Reserved root skill slugs; routine trees have none.
		for _, slug := range []string{"bundled", "my", "projects"} {
			wantErr(t, h.Do("POST", f.path(""), map[string]any{"kind": "skill", "name": slug}), http.StatusForbidden,
				"Reserved skill folders are system-managed")
			f.create(t, map[string]any{"kind": "routine", "name": slug})
		}
		wantErr(t, h.Do("PATCH", f.path("/"+id), map[string]any{"name": "My"}), http.StatusForbidden, "Reserved skill folders are system-managed")

		// Personal folder: board users only, idempotent, under the system-managed my container.
		agent := h.CreateAgent(f.co, "Folder Agent", "engineer")
		wantErr(t, h.Do("POST", f.path("/ensure-my"), map[string]any{}, agent.As("")...), http.StatusForbidden,
			"A signed-in board user is required to create a personal skill folder")
		my := ok(t, h.Do("POST", f.path("/ensure-my"), map[string]any{"slug": "mine"}), http.StatusOK)
		require.Equal(t, "my/mine", my["path"])
		require.EqualValues(t, 2, my["depth"])
		require.True(t, strings.HasPrefix(my["systemKey"].(string), "my:"))
		again := ok(t, h.Do("POST", f.path("/ensure-my"), nil), http.StatusOK)
		require.Equal(t, my["id"], again["id"])
		var container map[string]any
		for _, x := range f.list(t, "skill")["folders"].([]any) {
			if m := x.(map[string]any); m["systemKey"] == "my" {
				container = m
			}
		}
		require.NotNil(t, container)
		wantErr(t, h.Do("POST", f.path(""), map[string]any{"kind": "skill", "name": "x", "parentId": container["id"]}),
			http.StatusForbidden, "Reserved skill folders are system-managed")
		for _, target := range []string{container["id"].(string), my["id"].(string)} {
			wantErr(t, h.Do("PATCH", f.path("/"+target), map[string]any{"name": "x"}), http.StatusForbidden, "System-managed folders cannot be changed")
			wantErr(t, h.Do("POST", f.path("/"+target+"/move"), map[string]any{"position": 0, "parentId": nil}), http.StatusForbidden,
				"System-managed folders cannot be changed")
			wantErr(t, h.Do("DELETE", f.path("/"+target), nil), http.StatusForbidden, "System-managed folders cannot be changed")
		}
		// A personal folder takes hand-made children.
		sub := f.create(t, map[string]any{"kind": "skill", "name": "Drafts", "parentId": my["id"]})
		require.Equal(t, "my/mine/drafts", sub["path"])

		// Bundled folders (made by the skills owner through folders.ensureSystem) are read-only.
		out, perr := call(t, h, "folders.ensureSystem", f.co, map[string]any{"kind": "skill", "systemKey": "bundled:core",
			"name": "Core", "parentSystemKey": "bundled"})
		require.Nil(t, perr)
		var bundled map[string]any
		require.NoError(t, json.Unmarshal(out, &bundled))
		require.Equal(t, "bundled/core", bundled["path"])
		bid := bundled["id"].(string)
		wantErr(t, h.Do("PATCH", f.path("/"+bid), map[string]any{"name": "x"}), http.StatusForbidden, "Bundled folders are read-only")
		wantErr(t, h.Do("DELETE", f.path("/"+bid), nil), http.StatusForbidden, "Bundled folders are read-only")
		wantErr(t, h.Do("POST", f.path(""), map[string]any{"kind": "skill", "name": "x", "parentId": bid}),
			http.StatusForbidden, "Bundled folders are read-only")
		wantErr(t, h.Do("POST", f.path("/"+a["id"].(string)+"/move"), map[string]any{"position": 0, "parentId": bid}),
			http.StatusForbidden, "Bundled folders are read-only")
		_, perr = call(t, h, "folders.get", f.co, map[string]any{"folderId": bid, "kind": "routine"})
		require.NotNil(t, perr)
		require.EqualValues(t, http.StatusUnprocessableEntity, perr.Status)
		// One entry per write: three patches, six creates, one personal folder (system folders
		// made through the provided method are not user writes).
		count := func(action string) int {
			n := 0
			for _, a := range f.actions(t) {
				if a == action {
					n++
				}
			}
			return n
		}
		sdktest.WaitFor(t, 30*time.Second, func() bool { return count("folder.updated") == 3 }, "folder.updated entries")
		require.Equal(t, 1, count("folder.personal_ensured"))
		require.Equal(t, 6, count("folder.created"))
	})

	t.Run("Move", func(t *testing.T) {
		t.Parallel()
		f := newCo(t, "Folder Move")
		mk := func(name string, parent any) string {
			return f.create(t, map[string]any{"kind": "routine", "name": name, "parentId": parent})["id"].(string)
		}
		a := mk("A", nil)
		b := mk("B", nil)
		c := mk("C", nil)
		a1 := mk("A1", a)
		a2 := mk("A2", a1)
		d := mk("D", nil)
		d1 := mk("D1", d)
		d2 := mk("D2", d1)
		mv := func(id string, body map[string]any) *sdktest.Response {
			return h.Do("POST", f.path("/"+id+"/move"), body)
		}

		wantErr(t, mv(a, map[string]any{"parentId": a}), http.StatusBadRequest, "Validation error")
		wantErr(t, mv(a, map[string]any{"position": 0, "parentId": a}), http.StatusUnprocessableEntity, "A folder cannot be its own parent")
		wantErr(t, mv(a, map[string]any{"position": 0, "parentId": a2}), http.StatusUnprocessableEntity, "A folder cannot be moved into its own subtree")
		wantErr(t, mv(a, map[string]any{"position": 0, "parentId": uuid.NewString()}), http.StatusNotFound, "Parent folder not found")
		wantErr(t, mv(uuid.NewString(), map[string]any{"position": 0}), http.StatusNotFound, "Folder not found")
		// A (3 levels) under D1 (depth 2) would reach depth 5: the whole subtree counts.
		wantErr(t, mv(a, map[string]any{"position": 0, "parentId": d1}), http.StatusUnprocessableEntity, "Folder depth cannot exceed 4")
		_ = d2
		// Under D (depth 1) it fits: A at 2, A1 at 3, A2 at 4.
		moved := ok(t, mv(a, map[string]any{"position": 0, "parentId": d}), http.StatusOK)
		require.Equal(t, "d/a", moved["path"])
		require.EqualValues(t, 0, moved["position"])
		kids := moved["children"].([]any)
		require.Len(t, kids, 2)
		require.Equal(t, "d/a/a1", kids[0].(map[string]any)["path"])
		require.Equal(t, "d/a/a1/a2", kids[1].(map[string]any)["path"])
		require.EqualValues(t, 4, kids[1].(map[string]any)["depth"])
		l := f.list(t, "routine")
		require.EqualValues(t, 1, byID(t, l, d1)["position"], "siblings renumbered after the moved folder")
		// Reorder among roots, keeping the parent (parentId omitted).
		ok(t, mv(c, map[string]any{"position": 0}), http.StatusOK)
		l = f.list(t, "routine")
		require.EqualValues(t, 0, byID(t, l, c)["position"])
		require.EqualValues(t, 1, byID(t, l, b)["position"])
		require.EqualValues(t, 2, byID(t, l, d)["position"])
		// Back to the root with null; a slug clash under the new parent is a conflict.
		mk("A", c)
		ok(t, mv(a, map[string]any{"position": 5, "parentId": nil}), http.StatusOK)
		require.Nil(t, byID(t, f.list(t, "routine"), a)["parentId"])
		wantErr(t, mv(a, map[string]any{"position": 0, "parentId": c}), http.StatusConflict, "Folder slug already exists under this parent")
		moves := 0
		for _, a := range f.actions(t) {
			if a == "folder.moved" {
				moves++
			}
		}
		require.Equal(t, 3, moves, "one entry per successful move")
	})

	t.Run("ItemsAndDelete", func(t *testing.T) {
		t.Parallel()
		f := newCo(t, "Folder Items")
		root := f.create(t, map[string]any{"kind": "routine", "name": "Ops"})["id"].(string)
		leaf := f.create(t, map[string]any{"kind": "routine", "name": "Nightly", "parentId": root})["id"].(string)
		skill := f.create(t, map[string]any{"kind": "skill", "name": "Ops"})["id"].(string)
		rt := ok(t, h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": "Filed"}), http.StatusCreated)["id"].(string)
		ok(t, h.Do("POST", "/api/companies/"+f.co+"/routines", map[string]any{"title": "Loose"}), http.StatusCreated)
		im := func(body map[string]any) *sdktest.Response { return h.Do("POST", f.path("/items/move"), body) }

		wantErr(t, im(map[string]any{"kind": "task", "itemId": rt}), http.StatusBadRequest, "Validation error")
		wantErr(t, im(map[string]any{"kind": "routine", "itemId": "nope"}), http.StatusBadRequest, "Validation error")
		wantErr(t, im(map[string]any{"kind": "routine", "itemId": rt, "folderId": skill}), http.StatusUnprocessableEntity,
			"Folder kind must match item kind")
		wantErr(t, im(map[string]any{"kind": "routine", "itemId": rt, "folderId": uuid.NewString()}), http.StatusNotFound, "Folder not found")
		wantErr(t, im(map[string]any{"kind": "routine", "itemId": uuid.NewString(), "folderId": leaf}), http.StatusNotFound, "Routine not found")

		m := ok(t, im(map[string]any{"kind": "routine", "itemId": rt, "folderId": leaf}), http.StatusOK)
		require.Equal(t, map[string]any{"kind": "routine", "itemId": rt, "folderId": leaf}, m)
		require.Equal(t, leaf, ok(t, h.Do("GET", "/api/routines/"+rt, nil), http.StatusOK)["folderId"])
		l := f.list(t, "routine")
		require.EqualValues(t, 1, byID(t, l, leaf)["itemCount"])
		require.EqualValues(t, 0, byID(t, l, root)["itemCount"], "direct, not cumulative")
		require.EqualValues(t, 2, l["allCount"])
		require.EqualValues(t, 1, l["unfiledCount"])

		// Folders with children refuse deletion; a leaf's items become unfiled.
		wantErr(t, h.Do("DELETE", f.path("/"+root), nil), http.StatusConflict, "Move or delete nested folders first")
		del := ok(t, h.Do("DELETE", f.path("/"+leaf), nil), http.StatusOK)
		require.Equal(t, leaf, del["deleted"].(map[string]any)["id"])
		require.Nil(t, ok(t, h.Do("GET", "/api/routines/"+rt, nil), http.StatusOK)["folderId"])
		l = f.list(t, "routine")
		require.EqualValues(t, 2, l["unfiledCount"])
		wantErr(t, h.Do("DELETE", f.path("/"+leaf), nil), http.StatusNotFound, "Folder not found")
		// Unfile with null.
		ok(t, im(map[string]any{"kind": "routine", "itemId": rt, "folderId": root}), http.StatusOK)
		m = ok(t, im(map[string]any{"kind": "routine", "itemId": rt}), http.StatusOK)
		require.Nil(t, m["folderId"])

		// One activity entry per write.
		sdktest.WaitFor(t, 30*time.Second, func() bool { return len(f.actions(t)) >= 7 }, "folder activity")
		require.Equal(t, []string{"folder.created", "folder.created", "folder.created", "folder.item_moved", "folder.deleted",
			"folder.item_moved", "folder.item_moved"}, f.actions(t))
	})

	t.Run("ForeignCompany", func(t *testing.T) {
		t.Parallel()
		f := newCo(t, "Folder Owner")
		g := newCo(t, "Folder Other")
		id := f.create(t, map[string]any{"kind": "routine", "name": "Mine"})["id"].(string)
		wantErr(t, h.Do("PATCH", g.path("/"+id), map[string]any{"name": "x"}), http.StatusNotFound, "Folder not found")
		wantErr(t, h.Do("DELETE", g.path("/"+id), nil), http.StatusNotFound, "Folder not found")
		other := h.CreateAgent(g.co, "Other", "engineer")
		require.Equal(t, http.StatusForbidden, h.Do("GET", f.path("?kind=routine"), nil, other.As("")...).Status)
	})
}
