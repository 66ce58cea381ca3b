package sdk

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Serve runs ext as a process extension: it speaks the go-plugin handshake on stdout and
// serves the extension service over gRPC until the host stops it. Call it from main.
func Serve(ext Extension) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &GRPCPlugin{Impl: ext}},
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: ext.Manifest().Key, Output: os.Stderr, JSONFormat: true, Level: hclog.Info,
		}),
	})
}
