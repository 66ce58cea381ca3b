package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Test_main checks the package's contract: an adapter keyed adapter.process.<name> (so it
// overrides the built-in process type), describing itself as the process type, whose
// instance config is validated by its manifest and taken without a restart.
func Test_main(t *testing.T) {
	t.Parallel()
	c := newCustom()
	mf := c.Manifest()
	require.Equal(t, sdk.KindAdapter, mf.Kind)
	require.Equal(t, "process", adapter.TypeOf(mf.Key))
	require.NotEqual(t, adapter.ExtensionKey("process"), mf.Key)
	require.Equal(t, "process", c.Info().Type)
	require.NotEmpty(t, c.Info().Models)

	require.NoError(t, mf.ValidateConfig([]byte(`{"tag":"blue"}`)))
	require.Error(t, mf.ValidateConfig([]byte(`{"tag":5}`)))
	require.Error(t, mf.ValidateConfig([]byte(`{"colour":"blue"}`)))
	require.NoError(t, c.OnConfigChange(context.Background(), json.RawMessage(`{"tag":"blue"}`)))
	require.Equal(t, "blue", c.tag)

	out, err := c.CallMethod(context.Background(), &sdk.MethodCall{Method: adapter.MethodInfo})
	require.NoError(t, err)
	require.Equal(t, "Process (custom)", out.(*adapter.Info).Label)
}
