package wasmrt

import (
	"bytes"
	"context"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/keelhq/keel/host/wasmrt/wasmrttest"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// fakeMemory is a guest memory for the host-call tests.
type fakeMemory []byte

func (m fakeMemory) Read(offset, n uint32) ([]byte, bool) {
	if uint64(offset)+uint64(n) > uint64(len(m)) {
		return nil, false
	}
	return m[offset : offset+n], true
}

func TestEnvelope(t *testing.T) {
	t.Parallel()
	env, err := decodeEnvelope([]byte{envOK, 1, 2})
	require.NoError(t, err)
	require.True(t, env.ok)
	require.Equal(t, []byte{1, 2}, env.payload)
	require.NoError(t, env.err())

	env, err = decodeEnvelope(append([]byte{envError}, "plain"...))
	require.NoError(t, err)
	require.Equal(t, codes.Unknown, status.Code(env.err()))
	require.Equal(t, "plain", status.Convert(env.err()).Message())

	env, err = decodeEnvelope(codeEnvelope(codes.NotFound, "gone"))
	require.NoError(t, err)
	require.Equal(t, codes.NotFound, status.Code(env.err()))

	env, err = decodeEnvelope(errorEnvelope(status.Error(codes.PermissionDenied, "no")))
	require.NoError(t, err)
	require.Equal(t, codes.PermissionDenied, status.Code(env.err()))

	for _, bad := range [][]byte{nil, {envCodeError}, {9, 1}} {
		_, err := decodeEnvelope(bad)
		require.Error(t, err, "%v", bad)
	}
}

func TestReadGuest(t *testing.T) {
	t.Parallel()
	mem := fakeMemory(make([]byte, 100))
	b, err := readGuest(mem, 90, 10)
	require.NoError(t, err)
	require.Len(t, b, 10)
	b, err = readGuest(mem, 1<<31, 0)
	require.NoError(t, err)
	require.Nil(t, b)
	_, err = readGuest(mem, 91, 10)
	require.EqualError(t, err, "range [91, 101) is outside guest memory")
	_, err = readGuest(mem, 0xffffffff, 2)
	require.EqualError(t, err, "range [4294967295, 4294967297) is outside guest memory")
	_, err = readGuest(mem, 0, maxMessageBytes+1)
	require.ErrorContains(t, err, "exceeds the limit")
}

func TestHostCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fakes := wasmrttest.NewServices()
	h := newHostCalls("test.x", fakes.HostServices(), []string{sdk.CapStorage, sdk.CapEvents}, nil)

	in, err := proto.Marshal(&hostv1.StorageSetRequest{CompanyId: "c", Key: "k", Value: []byte("v")})
	require.NoError(t, err)
	env, err := decodeEnvelope(h.serve(ctx, 9, in))
	require.NoError(t, err)
	require.True(t, env.ok)
	v, found := fakes.Storage.Value("c", "k")
	require.True(t, found)
	require.Equal(t, "v", string(v))

	in, err = proto.Marshal(&hostv1.StorageKey{CompanyId: "c", Key: "k"})
	require.NoError(t, err)
	env, err = decodeEnvelope(h.serve(ctx, 8, in))
	require.NoError(t, err)
	var got hostv1.StorageGetResponse
	require.NoError(t, proto.Unmarshal(env.payload, &got))
	require.True(t, got.Found)
	require.Equal(t, "v", string(got.Value))

	for _, tc := range []struct {
		id   uint32
		in   []byte
		code codes.Code
		msg  string
	}{
		{0, nil, codes.Unimplemented, "unknown host service 0"},
		{13, nil, codes.Unimplemented, "unknown host service 13"},
		{1, nil, codes.PermissionDenied, "capability activity not declared"},
		{6, nil, codes.PermissionDenied, "capability events not declared (the host opened no events service for test.x)"},
		{8, []byte{0xff}, codes.InvalidArgument, "malformed storage.get request"},
		{8, nil, codes.InvalidArgument, "company_id and key are required"},
	} {
		env, err := decodeEnvelope(h.serve(ctx, tc.id, tc.in))
		require.NoError(t, err)
		require.Equal(t, tc.code, status.Code(env.err()), "service %d", tc.id)
		require.Contains(t, env.message, tc.msg, "service %d", tc.id)
	}
}

// panicStorage panics on every call.
type panicStorage struct {
	hostv1.UnimplementedStorageServer
}

func (panicStorage) Get(context.Context, *hostv1.StorageKey) (*hostv1.StorageGetResponse, error) {
	panic("storage exploded")
}

func TestHostCallRecoversServicePanic(t *testing.T) {
	t.Parallel()
	s := wasmrttest.NewServices().HostServices()
	s.Storage = panicStorage{}
	h := newHostCalls("test.x", s, []string{sdk.CapStorage}, nil)
	env, err := decodeEnvelope(h.serve(context.Background(), 8, nil))
	require.NoError(t, err)
	require.Equal(t, codes.Internal, status.Code(env.err()))
	require.Equal(t, "internal error in storage.get", env.message)
}

// FuzzDecodeEnvelope checks that any bytes decode to an envelope or an error, never a
// panic, and that error envelopes survive a round trip.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte{envOK})
	f.Add([]byte{envError, 'x'})
	f.Add([]byte{envCodeError, 5, 'x'})
	f.Add([]byte{envCodeError})
	f.Add([]byte{envCodeError, 200, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := decodeEnvelope(b)
		if err != nil {
			return
		}
		if env.ok {
			require.Equal(t, b[1:], env.payload)
			return
		}
		require.True(t, utf8.ValidString(env.message))
		back, err := decodeEnvelope(errorEnvelope(env.err()))
		require.NoError(t, err)
		require.Equal(t, env.message, back.message)
		if env.code != codes.Unknown {
			require.Equal(t, env.code, back.code)
		}
	})
}

// FuzzHostCall feeds arbitrary service ids, pointers, lengths and guest memory to the
// host_call path (bounds check, decoding, dispatch): it must always answer with a valid
// envelope and never panic.
func FuzzHostCall(f *testing.F) {
	set, _ := proto.Marshal(&hostv1.StorageSetRequest{CompanyId: "c", Key: "k", Value: []byte("v")})
	get, _ := proto.Marshal(&hostv1.StorageKey{CompanyId: "c", Key: "k"})
	act, _ := proto.Marshal(&hostv1.AppendActivityRequest{CompanyId: "c", Action: "a"})
	f.Add(uint32(9), uint32(0), uint32(len(set)), set)
	f.Add(uint32(8), uint32(0), uint32(len(get)), get)
	f.Add(uint32(1), uint32(0), uint32(len(act)), act)
	f.Add(uint32(8), uint32(0xfffffff0), uint32(0x20), get)
	f.Add(uint32(12), uint32(3), uint32(1), []byte{1, 2, 3, 4})
	all := append([]string(nil), sdk.AllCapabilities...)
	f.Fuzz(func(t *testing.T, id, ptr, n uint32, memory []byte) {
		h := newHostCalls("fuzz", wasmrttest.NewServices().HostServices(), all, nil)
		var out []byte
		if in, err := readGuest(fakeMemory(memory), ptr, n); err != nil {
			out = codeEnvelope(codes.InvalidArgument, "host_call: "+err.Error())
		} else {
			if n > 0 {
				require.True(t, bytes.Equal(in, memory[ptr:ptr+n]))
			}
			out = h.serve(context.Background(), id, in)
		}
		_, err := decodeEnvelope(out)
		require.NoError(t, err)
	})
}

func TestLinearMemory(t *testing.T) {
	t.Parallel()
	for name, mem := range map[string]linearMemory{
		"platform": newLinearMemory(4 << 20),
		"slice":    &sliceMemory{max: 4 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			b := mem.Reallocate(65536)
			require.Len(t, b, 65536)
			b[65535] = 7
			b = mem.Reallocate(3 * 65536)
			require.Len(t, b, 3*65536)
			require.Equal(t, byte(7), b[65535], "growing keeps the contents")
			require.Zero(t, b[3*65536-1], "new pages are zero")
			require.Nil(t, mem.Reallocate(4<<20+1), "never past the limit")
			mem.Free()
			require.Equal(t, byte(7), b[65535], "Free leaves the memory until release")
			mem.release()
		})
	}
}
