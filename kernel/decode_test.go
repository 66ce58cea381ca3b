package kernel_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
)

type echoBody struct {
	Name string `json:"name"`
}

// echoEndpoint answers its decoded body; strict sets EndpointMeta.StrictBody.
type echoEndpoint struct {
	pattern string
	strict  bool
}

func (e *echoEndpoint) Meta() *kernel.EndpointMeta {
	return &kernel.EndpointMeta{Pattern: e.pattern, Access: kernel.AccessEither, StrictBody: e.strict}
}

func (e *echoEndpoint) Execute(_ context.Context, req *echoBody) (*echoBody, error) { return req, nil }

// TestEndpointBodyDecoding checks that kernel endpoints ignore unknown body fields, like the
// reference product, unless the endpoint asks for StrictBody ("unknown fields rejected").
func TestEndpointBodyDecoding(t *testing.T) {
	t.Parallel()
	k, err := kernel.New(context.Background(), pgtest.NewDatabase(t), kernel.Config{DeploymentMode: kernel.ModeLocalTrusted})
	require.NoError(t, err)
	require.NoError(t, k.Routes.Add(
		kernel.Mount[echoBody, echoBody](&echoEndpoint{pattern: "POST /api/decode-test/lenient"}),
		kernel.Mount[echoBody, echoBody](&echoEndpoint{pattern: "POST /api/decode-test/strict", strict: true}),
	))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	app := k.NewApp(0)
	go app.Listener(ln) //nolint:errcheck
	t.Cleanup(func() {
		_ = app.ShutdownWithTimeout(5 * time.Second)
		k.Close()
	})
	base := "http://" + ln.Addr().String()

	r := authCall(t, base, "POST", "/api/decode-test/lenient", map[string]any{"name": "a", "bogus": 1})
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.Equal(t, map[string]any{"name": "a"}, r.JSON(t))
	r = authCall(t, base, "POST", "/api/decode-test/lenient", map[string]any{"name": 5})
	r.requireError(t, http.StatusBadRequest, "Validation error", "")

	r = authCall(t, base, "POST", "/api/decode-test/strict", map[string]any{"name": "a", "bogus": 1})
	r.requireError(t, http.StatusBadRequest, "Validation error", "")
	require.Contains(t, string(r.Body), `"path":"bogus"`)
	require.Contains(t, string(r.Body), `"message":"unknown field"`)
	require.Equal(t, http.StatusOK, authCall(t, base, "POST", "/api/decode-test/strict", map[string]any{"name": "a"}).Status)
}
