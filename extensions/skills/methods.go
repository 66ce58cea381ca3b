package skills

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Provided methods: the folders owner files skills through folderItems.*; portability and
// plugins that manage skills read and write them through list, get and upsert. Each acts
// in the call's company.
func init() {
	addMethods(map[string]method{
		"folderItems.counts": {
			Description: "Count the company's skills for the folder list. Input {}. Output {total, unfiled, byFolder: {folderId: n}}.",
			Call:        (*Skills).methodFolderCounts,
		},
		"folderItems.get": {
			Description: "Read where a skill is filed. Input {itemId}. Output {folderId, bundled}. 404 \"Skill not found\".",
			Call:        (*Skills).methodFolderGet,
		},
		"folderItems.set": {
			Description: "File a skill into a folder (checked by the caller) or unfile it. Input {itemId, folderId|null}. Output {folderId}.",
			Call:        (*Skills).methodFolderSet,
		},
		"folderItems.unfile": {
			Description: "Unfile every skill of the given folders. Input {folderIds}. Output {unfiled}.",
			Call:        (*Skills).methodFolderUnfile,
		},
		"list": {
			Description: "List the company's skills. Input {includeFiles?: bool, includeBundled?: bool (default true)}. Output " +
				"{skills: [skill as the API shows it, plus files: [{path, content, encoding: utf8|base64}] when includeFiles]}.",
			Call: (*Skills).methodList,
		},
		"get": {
			Description: "Read one skill by {skillId} or {key}, with {includeFiles?, materialize?}. Output the skill (plus files; with " +
				"materialize, localPath: the folder its files were written to on this node, for agent runs). 404 \"Skill not found\".",
			Call: (*Skills).methodGet,
		},
		"upsert": {
			Description: "Create or update a skill keyed on (company, key). Input {key?, slug?, name?, description?, sourceType? " +
				"(default managed_local), sourceLocator?, sourceRef?, metadata?, managedBy?, folderId?, files: [{path, content, " +
				"encoding?: utf8|base64}] with a SKILL.md}. Name, description and slug default to the SKILL.md's; key defaults to " +
				"company/{companyId}/{slug} for managed skills. Bundled keys are refused. Output {skill, created, changed}.",
			Call: (*Skills).methodUpsert,
		},
	})
}

// methodInput is the input of the skill methods.
type methodInput struct {
	ItemID         string         `json:"itemId"`
	FolderID       *string        `json:"folderId"`
	FolderIDs      []string       `json:"folderIds"`
	SkillID        string         `json:"skillId"`
	Key            string         `json:"key"`
	IncludeFiles   bool           `json:"includeFiles"`
	IncludeBundled *bool          `json:"includeBundled"`
	Materialize    bool           `json:"materialize"`
	Slug           string         `json:"slug"`
	Name           string         `json:"name"`
	Description    *string        `json:"description"`
	SourceType     string         `json:"sourceType"`
	SourceLocator  *string        `json:"sourceLocator"`
	SourceRef      *string        `json:"sourceRef"`
	Metadata       map[string]any `json:"metadata"`
	ManagedBy      *string        `json:"managedBy"`
	Files          []MethodFile   `json:"files"`
}

// MethodFile is one file crossing the methods.
type MethodFile struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
}

// SkillWithFiles is a skill with its files.
type SkillWithFiles struct {
	*Skill
	Files []MethodFile `json:"files,omitempty"`
	// LocalPath is the folder the skill's files were materialised in on this node.
	LocalPath string `json:"localPath,omitempty"`
}

// bindCall decodes a call that needs a company.
func bindCall(call *sdk.MethodCall) (*methodInput, error) {
	in := &methodInput{}
	if err := call.Bind(in); err != nil {
		return nil, err
	}
	if !sdk.IsUUID(call.CompanyID) {
		return nil, sdk.Invalid("companyId", "the call must name a company")
	}
	in.ItemID = strings.ToLower(strings.TrimSpace(in.ItemID))
	return in, nil
}

func (x *Skills) methodFolderCounts(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if _, err := bindCall(call); err != nil {
		return nil, err
	}
	rows, err := x.pool.Query(ctx, `SELECT folder_id, count(*) FROM skills WHERE company_id = $1 GROUP BY folder_id`, call.CompanyID)
	if err != nil {
		return nil, fmt.Errorf("error counting skills by folder: %w", err)
	}
	defer rows.Close()
	out := struct {
		Total    int            `json:"total"`
		Unfiled  int            `json:"unfiled"`
		ByFolder map[string]int `json:"byFolder"`
	}{ByFolder: map[string]int{}}
	for rows.Next() {
		var folder *string
		var n int
		if err := rows.Scan(&folder, &n); err != nil {
			return nil, fmt.Errorf("error counting skills by folder: %w", err)
		}
		out.Total += n
		if folder == nil {
			out.Unfiled += n
		} else {
			out.ByFolder[*folder] = n
		}
	}
	return out, rows.Err()
}

func (x *Skills) methodFolderGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindCall(call)
	if err != nil {
		return nil, err
	}
	s, err := skillGet(ctx, x.pool, call.CompanyID, in.ItemID)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, sdk.NotFound(msgSkillNotFound)
	}
	return map[string]any{"folderId": s.FolderID, "bundled": s.SourceType == SourceBundled}, nil
}

func (x *Skills) methodFolderSet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindCall(call)
	if err != nil {
		return nil, err
	}
	if in.FolderID != nil && !sdk.IsUUID(*in.FolderID) {
		return nil, sdk.Invalid("folderId", "must be a UUID or null")
	}
	if !sdk.IsUUID(in.ItemID) {
		return nil, sdk.NotFound(msgSkillNotFound)
	}
	tag, err := x.pool.Exec(ctx, `UPDATE skills SET folder_id = $3 WHERE id = $1 AND company_id = $2`, in.ItemID, call.CompanyID, in.FolderID)
	if err != nil {
		return nil, fmt.Errorf("error filing skill %s: %w", in.ItemID, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, sdk.NotFound(msgSkillNotFound)
	}
	return map[string]any{"folderId": in.FolderID}, nil
}

func (x *Skills) methodFolderUnfile(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindCall(call)
	if err != nil {
		return nil, err
	}
	for _, id := range in.FolderIDs {
		if !sdk.IsUUID(id) {
			return nil, sdk.Invalid("folderIds", "must be UUIDs")
		}
	}
	tag, err := x.pool.Exec(ctx, `UPDATE skills SET folder_id = NULL WHERE company_id = $1 AND folder_id = ANY($2::uuid[])`,
		call.CompanyID, in.FolderIDs)
	if err != nil {
		return nil, fmt.Errorf("error unfiling skills: %w", err)
	}
	return map[string]any{"unfiled": tag.RowsAffected()}, nil
}

// withFiles attaches a skill's files.
func (x *Skills) withFiles(ctx context.Context, s *Skill, include bool) (*SkillWithFiles, error) {
	out := &SkillWithFiles{Skill: s}
	if !include {
		return out, nil
	}
	files, err := skillFiles(ctx, x.pool, s.ID)
	if err != nil {
		return nil, err
	}
	out.Files = []MethodFile{}
	for _, e := range inventory(files) {
		b := files[e.Path]
		if utf8.Valid(b) {
			out.Files = append(out.Files, MethodFile{Path: e.Path, Content: string(b), Encoding: "utf8"})
		} else {
			out.Files = append(out.Files, MethodFile{Path: e.Path, Content: base64.StdEncoding.EncodeToString(b), Encoding: "base64"})
		}
	}
	return out, nil
}

func (x *Skills) methodList(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindCall(call)
	if err != nil {
		return nil, err
	}
	list, err := skillList(ctx, x.pool, call.CompanyID)
	if err != nil {
		return nil, err
	}
	out := []*SkillWithFiles{}
	for _, s := range list {
		if s.SourceType == SourceBundled && in.IncludeBundled != nil && !*in.IncludeBundled {
			continue
		}
		sw, err := x.withFiles(ctx, s, in.IncludeFiles)
		if err != nil {
			return nil, err
		}
		out = append(out, sw)
	}
	return map[string]any{"skills": out}, nil
}

func (x *Skills) methodGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindCall(call)
	if err != nil {
		return nil, err
	}
	var s *Skill
	switch {
	case in.SkillID != "":
		s, err = skillGet(ctx, x.pool, call.CompanyID, strings.ToLower(in.SkillID))
	case in.Key != "":
		s, err = skillGetByKey(ctx, x.pool, call.CompanyID, strings.ToLower(strings.TrimSpace(in.Key)))
	default:
		return nil, sdk.Invalid("skillId", "skillId or key is required")
	}
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, sdk.NotFound(msgSkillNotFound)
	}
	out, err := x.withFiles(ctx, s, in.IncludeFiles)
	if err != nil {
		return nil, err
	}
	if in.Materialize {
		if out.LocalPath, err = x.materialize(ctx, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (x *Skills) methodUpsert(ctx context.Context, call *sdk.MethodCall) (any, error) {
	in, err := bindCall(call)
	if err != nil {
		return nil, err
	}
	res, err := x.upsert(ctx, call, in)
	if err != nil {
		return nil, err
	}
	return map[string]any{"skill": res.Skill, "created": res.Created, "changed": res.Changed}, nil
}

// upsert creates or updates a skill keyed on (company, key) from the files of in.
func (x *Skills) upsert(ctx context.Context, call *sdk.MethodCall, in *methodInput) (*upsertResult, error) {
	var err error
	var d []sdk.ValidationDetail
	bad := func(p, m string) { d = append(d, sdk.ValidationDetail{Path: p, Message: m}) }
	files := map[string][]byte{}
	total := 0
	for i, f := range in.Files {
		p, ok := cleanRelPath(f.Path)
		if !ok {
			bad(fmt.Sprintf("files.%d.path", i), "must be a relative path inside the skill")
			continue
		}
		b := []byte(f.Content)
		if f.Encoding == "base64" {
			if b, err = base64.StdEncoding.DecodeString(f.Content); err != nil {
				bad(fmt.Sprintf("files.%d.content", i), "must be base64")
				continue
			}
		}
		total += len(b)
		files[p] = b
	}
	if _, ok := files[SkillFile]; !ok {
		bad("files", "must hold a SKILL.md")
	}
	if len(files) > importMaxFiles || total > importMaxBytes {
		bad("files", fmt.Sprintf("must hold at most %d files and %d bytes", importMaxFiles, importMaxBytes))
	}
	sourceType := in.SourceType
	if sourceType == "" {
		sourceType = SourceManagedLocal
	}
	if !validSourceKinds[sourceType] || sourceType == SourceBundled {
		bad("sourceType", "must be a source kind other than service_bundled")
	}
	if in.FolderID != nil && !sdk.IsUUID(*in.FolderID) {
		bad("folderId", "must be a UUID")
	}
	if len(d) > 0 {
		return nil, sdk.ValidationError(d...)
	}
	parsed, err := ParseSkill(string(files[SkillFile]))
	if err != nil {
		return nil, sdk.Invalid("files", "the SKILL.md frontmatter cannot be read: "+err.Error())
	}
	slug := strings.TrimSpace(in.Slug)
	if slug == "" {
		slug = deriveSlug(parsed, "")
	} else if !slugPattern.MatchString(slug) {
		return nil, sdk.Invalid("slug", "must be kebab-case")
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		if name = parsed.Name; name == "" {
			name = slug
		}
	}
	desc := parsed.Description
	if in.Description != nil {
		desc = strings.TrimSpace(*in.Description)
	}
	key := normalizeKey(in.Key)
	switch {
	case in.Key != "" && key == "":
		return nil, sdk.Invalid("key", "must be slash-separated lowercase segments")
	case key == "" && parsed.KeyOverride != "":
		key = parsed.KeyOverride
	case key == "":
		key = "company/" + call.CompanyID + "/" + slug
	}
	if strings.HasPrefix(key, bundledKeyPrefix) {
		return nil, sdk.Forbidden(msgBundledReadOnly)
	}
	meta := in.Metadata
	if meta == nil {
		meta = parsed.Metadata
	}
	meta["sourceKind"] = sourceType
	if in.FolderID != nil {
		err := x.host.Call(ctx, "folders.get", sdk.SystemActor(), call.CompanyID, map[string]any{"folderId": *in.FolderID, "kind": "skill"}, nil)
		var e *sdk.Error
		if errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusUnprocessableEntity) {
			return nil, e
		}
		if err != nil {
			return nil, fmt.Errorf("error reading folder %s: %w", *in.FolderID, err)
		}
	}
	var res *upsertResult
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := skillGetByKey(ctx, tx, call.CompanyID, key)
		if err != nil {
			return err
		}
		if cur != nil && cur.SourceType == SourceBundled {
			return sdk.Forbidden(msgBundledReadOnly)
		}
		res, err = skillUpsert(ctx, tx, &upsertParams{CompanyID: call.CompanyID, Key: key, Slug: slug, Name: name, Description: desc,
			SourceType: sourceType, Locator: in.SourceLocator, Ref: in.SourceRef, Metadata: meta, Files: files, ManagedBy: in.ManagedBy,
			FolderID: in.FolderID, Refile: in.FolderID != nil})
		return err
	})
	if err != nil {
		return nil, err
	}
	// A plugin's skills are filed in its own folder of the bundled tree when they arrive.
	if res.Created && in.ManagedBy != nil && in.FolderID == nil {
		if slug := Slugify(*in.ManagedBy); slug != "" {
			folder, err := x.systemFolder(ctx, call.CompanyID, "bundled:"+slug, *in.ManagedBy, slug, "bundled")
			if err != nil {
				x.log.Warn("error filing a plugin's skill", "skill", res.Skill.ID, "error", err)
			} else if _, err := x.pool.Exec(ctx, `UPDATE skills SET folder_id = $2 WHERE id = $1`, res.Skill.ID, folder); err != nil {
				return nil, fmt.Errorf("error filing skill %s: %w", res.Skill.ID, err)
			} else {
				res.Skill.FolderID = &folder
			}
		}
	}
	if res.Changed {
		src := &Source{Type: sourceType, Locator: deref(in.SourceLocator)}
		out := &importOutcome{}
		if res.Created {
			out.Imported = []*Skill{res.Skill}
		} else {
			out.Updated = []*Skill{res.Skill}
		}
		x.logImport(sdk.WithRequestInfo(ctx, call.Actor, call.CompanyID, "", nil), call.CompanyID, src, out, "upsert:"+call.Caller)
	}
	return res, nil
}
