package sdk

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
)

// Handshake is the go-plugin handshake between keel and a process extension. These values
// never change; a new protocol version sits beside them.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "KEEL_EXTENSION_COOKIE",
	MagicCookieValue: "7b3e6f0c2d1a4e58b9f0keel-extension-v1",
}

// PluginName is the name under which the extension service is dispensed.
const PluginName = "extension"

// GRPCPlugin is the go-plugin glue for the extension service, used on both sides: the
// extension serves Impl, the host dispenses a *Client.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the extension, set on the extension side only.
	Impl Extension
}

// GRPCServer registers the extension's server on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	extensionv1.RegisterExtensionServer(s, newServer(p.Impl, broker))
	return nil
}

// GRPCClient returns the host's client for one extension process.
func (p *GRPCPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{ExtensionClient: extensionv1.NewExtensionClient(c), Broker: broker}, nil
}

// Client is the host side of one extension process: the generated client plus the broker on
// which the host serves the host services.
type Client struct {
	extensionv1.ExtensionClient
	Broker *plugin.GRPCBroker
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)
