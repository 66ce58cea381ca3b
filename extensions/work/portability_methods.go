package work

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"sort"
	"strings"

	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// PortabilityCaller is the only extension that may call the portability.* methods: they
// read and write whole issues (comments, documents, work products, attachment bytes) in
// bulk for company export and import.
const PortabilityCaller = "portability"

// portabilityMaxBatch is the most issues one portability call reads or writes.
const portabilityMaxBatch = 200

// Provided methods of the company export and import (spec part 2 "Company administration").
// Each runs the issue routes in-process as the call's actor in the call's company, so the
// routes' own validation and side effects apply; only the portability extension may call them.
func init() {
	addMethods(map[string]method{
		"portability.issueDetails": {
			Description: "Read what an export carries of issues of the call's company (portability only). Input {issueIds} (at most " +
				"200). Output [{issueId, comments (oldest first), documents (with bodies), workProducts, attachments (with sha256)}] " +
				"in input order.",
			Call: (*Work).methodPortabilityIssueDetails,
		},
		"portability.attachmentContent": {
			Description: "Read an attachment's bytes (portability only). Input {attachmentId}. Output {contentType, sizeBytes, " +
				"data: base64}.",
			Call: (*Work).methodPortabilityAttachmentContent,
		},
		"portability.importIssues": {
			Description: "Create issues of the call's company with what they carry (portability only). Input {issues: [{issue: the " +
				"create body of POST /api/companies/{companyId}/issues, comments: [{body, authorType?}], documents: [{key, title?, " +
				"format?, body}], workProducts: [bodies of POST /api/issues/{id}/work-products], attachments: [{fileName, " +
				"contentType, data: base64}]}] (at most 200). Output {issues: [{id, identifier}]} in input order.",
			Call: (*Work).methodPortabilityImportIssues,
		},
	})
}

// requirePortability refuses every caller but the portability extension and returns the
// call's context.
func requirePortability(ctx context.Context, call *sdk.MethodCall) (context.Context, error) {
	if call.Caller != PortabilityCaller {
		return nil, forbidden("only the portability extension may call this method")
	}
	if !isUUID(call.CompanyID) {
		return nil, invalid("companyId", "the call must name a company")
	}
	return issuesMethodContext(ctx, call), nil
}

// serveInternal runs one of the extension's own routes in-process as the call's actor and
// returns the answer's body, or the route's error.
func (w *Work) serveInternal(ctx context.Context, call *sdk.MethodCall, method, path, rawQuery string, body []byte, contentType string) ([]byte, error) {
	actor := call.Actor
	if actor == nil || actor.Type == "" || actor.Type == "none" {
		actor = sdk.SystemActor()
	}
	headers := map[string]*extensionv1.HeaderValues{}
	if contentType != "" {
		headers["Content-Type"] = &extensionv1.HeaderValues{Values: []string{contentType}}
	}
	res := sdk.ServeHTTPRequest(ctx, w.HTTPHandler(), &extensionv1.HTTPRequest{Method: method, Path: path, RawQuery: rawQuery,
		Body: body, Actor: actor, CompanyId: call.CompanyID, Headers: headers})
	if res.Status >= 200 && res.Status < 300 {
		return res.Body, nil
	}
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	_ = json.Unmarshal(res.Body, &e)
	if e.Error == "" {
		e.Error = http.StatusText(int(res.Status))
	}
	return nil, &sdk.Error{Status: int(res.Status), Message: e.Error, Code: e.Code}
}

// serveJSON runs a route with a JSON body and decodes its answer into out (when not nil).
func (w *Work) serveJSON(ctx context.Context, call *sdk.MethodCall, method, path, rawQuery string, in, out any) error {
	var raw []byte
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("error encoding %s %s: %w", method, path, err)
		}
		raw, ctype = b, "application/json"
	}
	b, err := w.serveInternal(ctx, call, method, path, rawQuery, raw, ctype)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("error decoding %s %s: %w", method, path, err)
	}
	return nil
}

// PortableIssueDetails is what an export carries of one issue beyond its own fields.
type PortableIssueDetails struct {
	IssueID string `json:"issueId"`
	// BlockedBy are the identifiers of the issue's blockers.
	BlockedBy    []string          `json:"blockedBy"`
	Comments     []json.RawMessage `json:"comments"`
	Documents    []*IssueDocument  `json:"documents"`
	WorkProducts []json.RawMessage `json:"workProducts"`
	Attachments  []*Attachment     `json:"attachments"`
}

func (w *Work) methodPortabilityIssueDetails(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx, err := requirePortability(ctx, call)
	if err != nil {
		return nil, err
	}
	var in struct {
		IssueIDs []string `json:"issueIds"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if len(in.IssueIDs) > portabilityMaxBatch {
		return nil, invalid("issueIds", fmt.Sprintf("must hold at most %d issues", portabilityMaxBatch))
	}
	out := make([]*PortableIssueDetails, 0, len(in.IssueIDs))
	for _, ref := range in.IssueIDs {
		iss, err := w.issuesMethodIssue(ctx, call, ref)
		if err != nil {
			return nil, err
		}
		d := &PortableIssueDetails{IssueID: iss.ID}
		base := "/api/issues/" + iss.ID
		var detail struct {
			BlockedBy []struct {
				Identifier string `json:"identifier"`
			} `json:"blockedBy"`
		}
		if err := w.serveJSON(ctx, call, http.MethodGet, base, "", nil, &detail); err != nil {
			return nil, fmt.Errorf("error reading issue %s: %w", iss.ID, err)
		}
		d.BlockedBy = []string{}
		for _, b := range detail.BlockedBy {
			d.BlockedBy = append(d.BlockedBy, b.Identifier)
		}
		if err := w.serveJSON(ctx, call, http.MethodGet, base+"/comments", "order=asc&limit=500", nil, &d.Comments); err != nil {
			return nil, fmt.Errorf("error reading comments of issue %s: %w", iss.ID, err)
		}
		for len(d.Comments)%500 == 0 && len(d.Comments) > 0 {
			var more []json.RawMessage
			q := fmt.Sprintf("order=asc&limit=500&offset=%d", len(d.Comments))
			if err := w.serveJSON(ctx, call, http.MethodGet, base+"/comments", q, nil, &more); err != nil {
				return nil, fmt.Errorf("error reading comments of issue %s: %w", iss.ID, err)
			}
			if len(more) == 0 {
				break
			}
			d.Comments = append(d.Comments, more...)
		}
		var docs []struct {
			Key string `json:"key"`
		}
		if err := w.serveJSON(ctx, call, http.MethodGet, base+"/documents", "", nil, &docs); err != nil {
			return nil, fmt.Errorf("error listing documents of issue %s: %w", iss.ID, err)
		}
		sort.Slice(docs, func(i, j int) bool { return docs[i].Key < docs[j].Key })
		for _, s := range docs {
			doc := &IssueDocument{}
			if err := w.serveJSON(ctx, call, http.MethodGet, base+"/documents/"+url.PathEscape(s.Key), "", nil, doc); err != nil {
				return nil, fmt.Errorf("error reading document %s of issue %s: %w", s.Key, iss.ID, err)
			}
			d.Documents = append(d.Documents, doc)
		}
		if err := w.serveJSON(ctx, call, http.MethodGet, base+"/work-products", "", nil, &d.WorkProducts); err != nil {
			return nil, fmt.Errorf("error reading work products of issue %s: %w", iss.ID, err)
		}
		if err := w.serveJSON(ctx, call, http.MethodGet, base+"/attachments", "", nil, &d.Attachments); err != nil {
			return nil, fmt.Errorf("error reading attachments of issue %s: %w", iss.ID, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func (w *Work) methodPortabilityAttachmentContent(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx, err := requirePortability(ctx, call)
	if err != nil {
		return nil, err
	}
	var in struct {
		AttachmentID string `json:"attachmentId"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if !isUUID(in.AttachmentID) {
		return nil, invalid("attachmentId", "must be a UUID")
	}
	a, err := w.attachmentByID(ctx, w.db, strings.ToLower(in.AttachmentID))
	if err != nil {
		return nil, err
	}
	if a == nil || a.CompanyID != call.CompanyID {
		return nil, notFound("Attachment not found")
	}
	b, err := w.serveInternal(ctx, call, http.MethodGet, "/api/attachments/"+a.ID+"/content", "", nil, "")
	if err != nil {
		return nil, fmt.Errorf("error reading attachment %s: %w", a.ID, err)
	}
	return map[string]any{"contentType": a.ContentType, "sizeBytes": len(b), "data": base64.StdEncoding.EncodeToString(b)}, nil
}

// PortableIssue is one issue an import writes.
type PortableIssue struct {
	Issue json.RawMessage `json:"issue"`
	// Labels are found by name in the company (case-insensitively) or created.
	Labels       []LabelCreateBody `json:"labels"`
	Comments     []json.RawMessage `json:"comments"`
	Documents    []json.RawMessage `json:"documents"`
	WorkProducts []json.RawMessage `json:"workProducts"`
	Attachments  []struct {
		FileName    string `json:"fileName"`
		ContentType string `json:"contentType"`
		Data        string `json:"data"`
	} `json:"attachments"`
}

func (w *Work) methodPortabilityImportIssues(ctx context.Context, call *sdk.MethodCall) (any, error) {
	ctx, err := requirePortability(ctx, call)
	if err != nil {
		return nil, err
	}
	var in struct {
		Issues []*PortableIssue `json:"issues"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if len(in.Issues) > portabilityMaxBatch {
		return nil, invalid("issues", fmt.Sprintf("must hold at most %d issues", portabilityMaxBatch))
	}
	type created struct {
		ID         string `json:"id"`
		Identifier string `json:"identifier"`
	}
	out := make([]created, 0, len(in.Issues))
	labels := map[string]string{}
	if len(in.Issues) > 0 {
		ls, err := newIssueStore(w.db).LabelList(ctx, &LabelListParams{CompanyID: call.CompanyID})
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			labels[strings.ToLower(l.Name)] = l.ID
		}
	}
	for i, p := range in.Issues {
		body := p.Issue
		if len(p.Labels) > 0 {
			var fields map[string]any
			if err := json.Unmarshal(p.Issue, &fields); err != nil || fields == nil {
				return nil, invalid(fmt.Sprintf("issues[%d].issue", i), "must be an object")
			}
			var ids []string
			for _, lb := range p.Labels {
				id, ok := labels[strings.ToLower(strings.TrimSpace(lb.Name))]
				if !ok {
					l, err := w.labelInsert(ctx, call.CompanyID, &lb)
					if err != nil {
						return nil, fmt.Errorf("error creating label %q: %w", lb.Name, err)
					}
					id = l.ID
					labels[strings.ToLower(l.Name)] = id
				}
				ids = append(ids, id)
			}
			fields["labelIds"] = ids
			b, err := json.Marshal(fields)
			if err != nil {
				return nil, fmt.Errorf("error encoding issue %d: %w", i, err)
			}
			body = b
		}
		var c created
		if err := w.serveJSON(ctx, call, http.MethodPost, "/api/companies/"+call.CompanyID+"/issues", "", body, &c); err != nil {
			return nil, fmt.Errorf("error creating issue %d: %w", i, err)
		}
		base := "/api/issues/" + c.ID
		for _, cm := range p.Comments {
			if err := w.serveJSON(ctx, call, http.MethodPost, base+"/comments", "", cm, nil); err != nil {
				return nil, fmt.Errorf("error adding a comment to issue %s: %w", c.Identifier, err)
			}
		}
		for _, d := range p.Documents {
			var doc struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal(d, &doc); err != nil || doc.Key == "" {
				return nil, invalid(fmt.Sprintf("issues[%d].documents", i), "each document needs a key")
			}
			var body map[string]any
			_ = json.Unmarshal(d, &body)
			delete(body, "key")
			if err := w.serveJSON(ctx, call, http.MethodPut, base+"/documents/"+url.PathEscape(doc.Key), "", body, nil); err != nil {
				return nil, fmt.Errorf("error writing document %s of issue %s: %w", doc.Key, c.Identifier, err)
			}
		}
		for _, wp := range p.WorkProducts {
			if err := w.serveJSON(ctx, call, http.MethodPost, base+"/work-products", "", wp, nil); err != nil {
				return nil, fmt.Errorf("error adding a work product to issue %s: %w", c.Identifier, err)
			}
		}
		for _, a := range p.Attachments {
			data, err := base64.StdEncoding.DecodeString(a.Data)
			if err != nil {
				return nil, invalid(fmt.Sprintf("issues[%d].attachments", i), "data must be base64")
			}
			body, ctype, err := multipartFile(a.FileName, a.ContentType, data)
			if err != nil {
				return nil, err
			}
			if _, err := w.serveInternal(ctx, call, http.MethodPost, "/api/companies/"+call.CompanyID+"/issues/"+c.ID+"/attachments",
				"", body, ctype); err != nil {
				return nil, fmt.Errorf("error attaching %s to issue %s: %w", a.FileName, c.Identifier, err)
			}
		}
		out = append(out, c)
	}
	return map[string]any{"issues": out}, nil
}

// multipartFile builds a multipart/form-data body holding one file in the upload field.
func multipartFile(name, contentType string, data []byte) ([]byte, string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, attachmentField, name))
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	h.Set("Content-Type", contentType)
	part, err := mw.CreatePart(h)
	if err != nil {
		return nil, "", fmt.Errorf("error building the upload of %s: %w", name, err)
	}
	if _, err := part.Write(data); err != nil {
		return nil, "", fmt.Errorf("error building the upload of %s: %w", name, err)
	}
	if err := mw.Close(); err != nil {
		return nil, "", fmt.Errorf("error building the upload of %s: %w", name, err)
	}
	return buf.Bytes(), mw.FormDataContentType(), nil
}
