package agents

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewDevicePrivateKeyPEM(t *testing.T) {
	t.Parallel()
	s, err := newDevicePrivateKeyPEM()
	require.NoError(t, err)
	block, rest := pem.Decode([]byte(s))
	require.NotNil(t, block)
	require.Empty(t, rest)
	require.Equal(t, "PRIVATE KEY", block.Type)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	_, ok := key.(ed25519.PrivateKey)
	require.True(t, ok, "an Ed25519 key")
	other, err := newDevicePrivateKeyPEM()
	require.NoError(t, err)
	require.NotEqual(t, s, other, "a fresh key each time")
}
