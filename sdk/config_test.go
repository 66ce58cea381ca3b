package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

type configExt struct {
	got json.RawMessage
}

func (e *configExt) Manifest() *sdk.Manifest {
	return &sdk.Manifest{Key: "test.config", Version: "1.0.0", Kind: sdk.KindPlugin, Runtime: sdk.Runtime{Kind: sdk.RuntimeProcess, Executable: "x"}}
}

func (e *configExt) OnConfigChange(_ context.Context, cfg json.RawMessage) error {
	e.got = cfg
	return nil
}

func (e *configExt) ValidateConfig(_ context.Context, cfg json.RawMessage) ([]string, error) {
	if string(cfg) == `{"bad":true}` {
		return nil, errors.New("bad is not allowed")
	}
	return []string{"looks fine"}, nil
}

type plainExt struct{}

func (plainExt) Manifest() *sdk.Manifest { return (&configExt{}).Manifest() }

func TestReservedConfigCalls(t *testing.T) {
	t.Parallel()
	call := func(srv extensionv1.ExtensionServer, method, caller, input string) *extensionv1.CallResponse {
		t.Helper()
		res, err := srv.Call(t.Context(), &extensionv1.CallRequest{Method: method, Caller: caller, InputJson: []byte(input)})
		require.NoError(t, err)
		return res
	}

	t.Run("ChangeReachesTheHandler", func(t *testing.T) {
		t.Parallel()
		ext := &configExt{}
		srv := sdk.NewServer(ext, &sdk.Env{})
		res := call(srv, sdk.ConfigChangedMethod, "host", `{"a":1}`)
		require.Nil(t, res.Error)
		require.JSONEq(t, `{"a":1}`, string(ext.got))
	})

	t.Run("ChangeWithoutHandlerIsAccepted", func(t *testing.T) {
		t.Parallel()
		res := call(sdk.NewServer(plainExt{}, &sdk.Env{}), sdk.ConfigChangedMethod, "host", `{}`)
		require.Nil(t, res.Error)
	})

	t.Run("Validate", func(t *testing.T) {
		t.Parallel()
		srv := sdk.NewServer(&configExt{}, &sdk.Env{})
		res := call(srv, sdk.ConfigValidateMethod, "host", `{"bad":true}`)
		require.NotNil(t, res.Error)
		require.Equal(t, "bad is not allowed", res.Error.Message)
		res = call(srv, sdk.ConfigValidateMethod, "host", `{}`)
		require.Nil(t, res.Error)
		require.JSONEq(t, `{"warnings":["looks fine"]}`, string(res.OutputJson))
	})

	t.Run("ValidateNotSupported", func(t *testing.T) {
		t.Parallel()
		res := call(sdk.NewServer(plainExt{}, &sdk.Env{}), sdk.ConfigValidateMethod, "host", `{}`)
		require.NotNil(t, res.Error)
		require.Equal(t, sdk.CodeNotSupported, res.Error.Code)
	})

	t.Run("OnlyTheHostMayCall", func(t *testing.T) {
		t.Parallel()
		ext := &configExt{}
		_, err := sdk.NewServer(ext, &sdk.Env{}).Call(t.Context(), &extensionv1.CallRequest{Method: sdk.ConfigChangedMethod, Caller: "other.ext", InputJson: []byte(`{}`)})
		require.Error(t, err, "not a method the extension provides")
		require.Nil(t, ext.got)
	})
}

func TestConfigFieldErrors(t *testing.T) {
	t.Parallel()
	m := &sdk.Manifest{Key: "test.config", ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,
		"properties":{"max":{"type":"integer","minimum":1}}}`)}
	got, err := m.ConfigFieldErrors([]byte(`{"max":0,"extra":1}`))
	require.NoError(t, err)
	fields := map[string]bool{}
	for _, f := range got {
		fields[f.Field] = true
		require.NotEmpty(t, f.Message)
	}
	require.True(t, fields["/max"], "%v", got)
	require.True(t, fields["/"], "the unknown property is reported on the object: %v", got)
	got, err = m.ConfigFieldErrors([]byte(`{"max":3}`))
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = (&sdk.Manifest{Key: "none"}).ConfigFieldErrors([]byte(`{"x":1}`))
	require.NoError(t, err)
	require.Empty(t, got)
}
