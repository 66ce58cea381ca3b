// Command ui-slots is an example plugin that contributes board UI without JavaScript: each
// UI slot of its manifest names one of its GET routes, which answers an HTML fragment.
// keel's board fetches the fragment with the visitor's credentials, sanitises it (no
// script, no style, no event handlers; htmx requests only to the plugin's own routes) and
// places it. The home fragment carries a <script> and an onclick on purpose: the board
// strips both.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
	"sync"
	"time"

	_ "embed"

	"github.com/keelhq/keel/sdk"
)

//go:embed manifest.json
var manifestJSON []byte

// prefix is where the fragment routes live.
const prefix = "/api/plugins/example.ui_slots/html"

// config is the plugin's config (see configSchema in the manifest).
type config struct {
	Greeting   string `json:"greeting"`
	WidgetRows int    `json:"widgetRows"`
	Mode       string `json:"mode"`
	Shout      bool   `json:"shout"`
}

// UISlots is the extension.
type UISlots struct {
	manifest *sdk.Manifest
	mu       sync.Mutex
	cfg      config
}

// Manifest returns the embedded manifest.
func (u *UISlots) Manifest() *sdk.Manifest { return u.manifest }

// Configure reads the config.
func (u *UISlots) Configure(ctx context.Context, env *sdk.Env) error {
	return u.OnConfigChange(ctx, env.Config)
}

// OnConfigChange takes a new config without a restart.
func (u *UISlots) OnConfigChange(_ context.Context, raw json.RawMessage) error {
	c := config{Greeting: "Hello", WidgetRows: 3}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("error reading the config: %w", err)
		}
	}
	u.mu.Lock()
	u.cfg = c
	u.mu.Unlock()
	return nil
}

func (u *UISlots) config() config {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cfg
}

// HTTPHandler serves the fragments.
func (u *UISlots) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	frag := func(pattern string, fn func(r *http.Request) string) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(fn(r)))
		})
	}
	frag("GET "+prefix+"/home", func(r *http.Request) string {
		c := sdk.CompanyIDFrom(r.Context())
		greeting := u.config().Greeting
		if u.config().Shout {
			greeting = strings.ToUpper(greeting)
		}
		return `<p id="ui-greeting">` + html.EscapeString(greeting) + ` from the UI slots example.</p>
<script>alert("never runs")</script>
<p><button type="button" onclick="alert('stripped')" hx-get="` + prefix + `/clock?companyId=` + c + `" hx-target="#ui-clock">What time is it?</button></p>
<p id="ui-clock" aria-live="polite"></p>
<form hx-post="` + prefix + `/greet" hx-target="#ui-greet">
<label for="ui-name">Your name</label> <input id="ui-name" name="name" type="text" required>
<button type="submit">Greet me</button>
</form>
<p id="ui-greet" aria-live="polite"></p>
<p><a href="` + prefix + `/widget?companyId=` + c + `">The widget as a page</a> · <a href="https://evil.example/x" hx-get="https://evil.example/x">elsewhere</a></p>`
	})
	frag("GET "+prefix+"/clock", func(*http.Request) string {
		return `<time datetime="` + time.Now().UTC().Format(time.RFC3339) + `">` + time.Now().UTC().Format(time.TimeOnly) + ` UTC</time>`
	})
	mux.HandleFunc("POST "+prefix+"/greet", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Name string `json:"name"`
		}
		if err := sdk.DecodeJSON(r, &in); err != nil || strings.TrimSpace(in.Name) == "" {
			sdk.WriteErr(w, sdk.Invalid("name", "required"))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html.EscapeString(u.config().Greeting+", "+in.Name) + "!"))
	})
	frag("GET "+prefix+"/widget", func(*http.Request) string {
		var b strings.Builder
		b.WriteString(`<ul class="ui-widget">`)
		for i := 1; i <= u.config().WidgetRows; i++ {
			fmt.Fprintf(&b, "<li>Row %d</li>", i)
		}
		b.WriteString(`</ul>`)
		return b.String()
	})
	mux.HandleFunc("GET "+prefix+"/broken", func(w http.ResponseWriter, _ *http.Request) {
		sdk.WriteError(w, http.StatusInternalServerError, "The broken widget always fails")
	})
	frag("GET "+prefix+"/issues/{issueId}", func(r *http.Request) string {
		return `<p>Issue ` + html.EscapeString(r.PathValue("issueId")) + ` as the example plugin sees it.</p>`
	})
	frag("GET "+prefix+"/settings", func(*http.Request) string {
		return `<p>The example's settings live in its config form above: greeting ` + html.EscapeString(u.config().Greeting) + `.</p>`
	})
	return mux
}

func main() {
	m, err := sdk.ParseManifest(manifestJSON)
	if err != nil {
		panic(err)
	}
	sdk.Serve(&UISlots{manifest: m})
}
