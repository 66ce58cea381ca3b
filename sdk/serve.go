package sdk

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// Serve runs ext as a process extension: it speaks the go-plugin handshake on stdout and
// serves the extension service over gRPC until the host stops it. Call it from main.
func Serve(ext Extension) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &GRPCPlugin{Impl: ext}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, GRPCServerOptions()...)...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: ext.Manifest().Key, Output: os.Stderr, JSONFormat: true, Level: hclog.Info,
		}),
	})
}

// Fixed HTTP/2 flow-control windows for the extension connection: a Unix socket between
// two local processes has no bandwidth-delay product to discover, and fixing the windows
// turns off gRPC's BDP pings, which otherwise cost every small call a little.
const (
	grpcStreamWindow = 4 << 20
	grpcConnWindow   = 16 << 20
)

// GRPCMaxMessage is the message size limit of every gRPC connection between the host and
// an extension, both ways and on the host-services broker too. It sits above the largest
// request body the host accepts (a 1 GiB attachment upload with its multipart framing), so
// a body the host let through never fails inside gRPC; it is a limit, not an allocation.
const GRPCMaxMessage = 1<<30 + 64<<20

const grpcMaxMessage = GRPCMaxMessage

// grpcBufferPool holds the buffers gRPC reads and encodes messages into, in every power of
// two from 256 bytes to 4 MiB. gRPC's default pool jumps from 32 KiB to 1 MiB and zeroes a
// reused buffer whole, so every response between the two (an issue page of 50 rows is
// one) cost clearing a megabyte on both sides of the hop. It is every gRPC connection's
// pool in a process that imports the SDK (the host and its extensions), and the proto
// codec's, which only the default can set.
var grpcBufferPool = func() mem.BufferPool {
	exps := make([]uint8, 0, 15)
	for e := uint8(8); e <= 22; e++ {
		exps = append(exps, e)
	}
	p, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		panic("sdk: gRPC buffer pool: " + err.Error())
	}
	return p
}()

func init() { experimental.SetDefaultBufferPool(grpcBufferPool) }

// GRPCDialOptions are the host's dial options for an extension's gRPC connection.
func GRPCDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcMaxMessage), grpc.MaxCallSendMsgSize(grpcMaxMessage)),
		grpc.WithInitialWindowSize(grpcStreamWindow),
		grpc.WithInitialConnWindowSize(grpcConnWindow),
	}
}

// GRPCServerOptions are an extension's gRPC server options, and the host's for the
// host-services server it offers each extension over the broker (see GRPCDialOptions).
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(grpcMaxMessage),
		grpc.MaxSendMsgSize(grpcMaxMessage),
		grpc.InitialWindowSize(grpcStreamWindow),
		grpc.InitialConnWindowSize(grpcConnWindow),
	}
}
