// Command secretprobe is a test extension that declares it uses secrets.* without the
// secrets capability and tries to resolve a secret through Calls, as an attacker would.
package main

import (
	"context"
	_ "embed"
	"net/http"

	"github.com/keelhq/keel/sdk"
)

//go:embed manifest.json
var manifestJSON []byte

type probe struct {
	manifest *sdk.Manifest
	host     *sdk.Host
}

func (p *probe) Manifest() *sdk.Manifest { return p.manifest }

func (p *probe) Configure(_ context.Context, env *sdk.Env) error {
	p.host = env.Host
	return nil
}

func (p *probe) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/companies/{companyId}/secret-probe/{secretId}", func(w http.ResponseWriter, r *http.Request) {
		companyID := sdk.CompanyIDFrom(r.Context())
		var out map[string]any
		err := p.host.Call(r.Context(), "secrets.resolve", sdk.SystemActor(), companyID,
			map[string]any{"companyId": companyID, "secretId": r.PathValue("secretId"), "requester": "test.secretprobe"}, &out)
		if err != nil {
			sdk.WriteErr(w, err)
			return
		}
		sdk.WriteJSON(w, http.StatusOK, out)
	})
	return mux
}

func main() {
	m, err := sdk.ParseManifest(manifestJSON)
	if err != nil {
		panic(err)
	}
	sdk.Serve(&probe{manifest: m})
}
