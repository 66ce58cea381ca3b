package wasmrt

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// APIVersion is the ABI version the host speaks; keel_api_version must return it.
const APIVersion = 1

// Operations of keel_call. These never change.
const (
	opDescribe  uint32 = 1
	opConfigure uint32 = 2
	opHandle    uint32 = 3
	opCall      uint32 = 4
	opRunJob    uint32 = 5
	opOnEvent   uint32 = 6
	opHealth    uint32 = 7
	opShutdown  uint32 = 8
)

var opNames = [...]string{
	opDescribe: "Describe", opConfigure: "Configure", opHandle: "Handle", opCall: "Call",
	opRunJob: "RunJob", opOnEvent: "OnEvent", opHealth: "Health", opShutdown: "Shutdown",
}

func opName(op uint32) string {
	if op < uint32(len(opNames)) && opNames[op] != "" {
		return opNames[op]
	}
	return fmt.Sprintf("operation %d", op)
}

// Envelope status bytes.
const (
	envOK        = 0
	envError     = 1
	envCodeError = 2
)

// Limits of the host functions.
const (
	// maxMessageBytes caps one message read from guest memory.
	maxMessageBytes = 64 << 20
	// maxLogBytes caps one log line.
	maxLogBytes = 16 << 10
)

func pack(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

func unpack(r uint64) (ptr, n uint32) { return uint32(r >> 32), uint32(r) }

// guestMemory is the part of api.Memory the host reads guest messages through.
type guestMemory interface {
	Read(offset, byteCount uint32) ([]byte, bool)
}

// readGuest returns a view of [ptr, ptr+n) of guest memory after checking the range.
// The view aliases guest memory: decode it before the guest runs again.
func readGuest(mem guestMemory, ptr, n uint32) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if n > maxMessageBytes {
		return nil, fmt.Errorf("message of %d bytes exceeds the limit of %d bytes", n, maxMessageBytes)
	}
	if mem == nil {
		return nil, fmt.Errorf("module has no memory")
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("range [%d, %d) is outside guest memory", ptr, uint64(ptr)+uint64(n))
	}
	return b, nil
}

// envelope is a decoded envelope: the payload of an ok result, or the error.
type envelope struct {
	ok      bool
	payload []byte
	code    codes.Code
	message string
}

// err returns the envelope's error as a gRPC status error, nil for an ok envelope.
func (e envelope) err() error {
	if e.ok {
		return nil
	}
	return status.Error(e.code, e.message)
}

// decodeEnvelope decodes an envelope; an error means the envelope itself is malformed. The
// payload aliases b.
func decodeEnvelope(b []byte) (envelope, error) {
	if len(b) == 0 {
		return envelope{}, fmt.Errorf("empty result envelope")
	}
	switch b[0] {
	case envOK:
		return envelope{ok: true, payload: b[1:]}, nil
	case envError:
		return envelope{code: codes.Unknown, message: validUTF8(b[1:])}, nil
	case envCodeError:
		if len(b) < 2 {
			return envelope{}, fmt.Errorf("error envelope without a status code")
		}
		code := codes.Code(b[1])
		if code == codes.OK || code > codes.Unauthenticated {
			code = codes.Unknown
		}
		return envelope{code: code, message: validUTF8(b[2:])}, nil
	default:
		return envelope{}, fmt.Errorf("unknown envelope status %d", b[0])
	}
}

func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b))) // replaces invalid bytes with U+FFFD
}

// errorEnvelope encodes an error: a status error keeps its code (envelope 2), anything
// else is envelope 1.
func errorEnvelope(err error) []byte {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		if st.Code() != codes.OK && st.Code() != codes.Unknown {
			return codeEnvelope(st.Code(), st.Message())
		}
		msg = st.Message()
	}
	b := make([]byte, 1, 1+len(msg))
	b[0] = envError
	return append(b, msg...)
}

// codeEnvelope encodes an error with a status code (envelope 2).
func codeEnvelope(code codes.Code, msg string) []byte {
	b := make([]byte, 2, 2+len(msg))
	b[0], b[1] = envCodeError, byte(code)
	return append(b, msg...)
}
