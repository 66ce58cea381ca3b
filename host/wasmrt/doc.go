// Package wasmrt runs wasm extensions inside the host with wazero. One Runtime holds the
// compilation cache shared by every module; Load verifies, compiles and checks one module
// and returns a *Module, which implements extensionv1.ExtensionClient so the supervisor
// treats process and wasm extensions alike.
//
// # Instances, limits and failures
//
// A Module keeps a pool of up to Limits.Instances (default 4) warm instances, created on
// demand; each serves one call at a time, since a module instance is not reentrant. Every
// new instance is configured (operation Configure with the last ConfigureRequest) before
// its first call. Memory is capped per instance at Limits.MemoryMB (default 128) and each
// call's wall time at Limits.TimeoutMS (default 5000); starting an instance (_initialize)
// gets the same limit but at least 10 s. A call that runs out of memory, out of time, or
// traps fails with a *CallError wrapping ErrMemoryLimit, ErrTimeLimit or ErrTrap; its
// instance is closed and discarded, never reused, and the next call gets a fresh one.
// Errors the extension itself reports come back as gRPC status errors, as they would from a
// process extension.
//
// Go guests (GOOS=wasip1, -buildmode=c-shared) declare about 4 MB of initial memory (the
// counter example, with net/http, 61 pages) and the Go runtime grows its heap in 4 MB
// steps: at 5-8 MB such a guest runs out of memory now and then under load, at 12 MB and
// more it does not. 16 MB is the practical floor; 32 MB leaves room for request bodies. A
// limit below the module's declared minimum fails at Load.
//
// Linear memory is one anonymous mapping of the whole limit per instance (on Linux and
// macOS): growing never copies, untouched pages cost nothing, and the pages go back to the
// system when the instance is discarded.
//
// Time limits rely on wazero's termination checks (WithCloseOnContextDone), which it
// inserts at every function entry and loop header; they make Go guest code about four
// times slower, but nothing else can stop a runaway module.
//
// # ABI, version 1
//
// A module is a WASI (wasi_snapshot_preview1) reactor: it exports _initialize (run once
// per instance) rather than _start, a memory, and:
//
//	keel_api_version() i32                  returns 1
//	malloc(size i32) i32                    returns a block of size bytes, kept until free
//	free(ptr i32)                           releases a block from malloc
//	keel_call(op i32, ptr i32, len i32) i64 serves one operation
//
// Operations: 1 Describe, 2 Configure, 3 Handle, 4 Call, 5 RunJob, 6 OnEvent, 7 Health,
// 8 Shutdown. The input of keel_call is the protobuf encoding of the operation's request
// message of keel.extension.v1 (DescribeRequest, ConfigureRequest, HTTPRequest,
// CallRequest, RunJobRequest, Event, HealthRequest, ShutdownRequest), written by the host
// into a block it got from malloc and frees after the call (len 0 passes no block). The
// result packs (ptr<<32 | len) of an envelope in a block the guest got from its malloc;
// the host frees it after reading.
//
// An envelope is one status byte and a payload:
//
//	0  ok: the protobuf encoding of the response message
//	1  error: a UTF-8 message (reported as codes.Unknown)
//	2  error with a status code: one byte, a google.rpc.Code, then a UTF-8 message
//
// The host provides import module "keel":
//
//	host_call(service i32, ptr i32, len i32) i64
//	log(level i32, ptr i32, len i32)
//
// host_call reads a keel.host.v1 request message at [ptr, ptr+len) of guest memory and
// answers with an envelope holding the response message, allocated in guest memory through
// the guest's malloc and packed as (ptr<<32 | len); the guest frees it. Services:
//
//	 1 activity.append        Activity.Append        capability activity
//	 2 authz.check            Authz.Check            capability authz
//	 3 principals.get_agent   Principals.GetAgent    capability principals
//	 4 companies.get          Companies.Get          capability companies
//	 5 calls.invoke           Calls.Invoke           capability calls
//	 6 events.publish         Events.Publish         capability events
//	 7 settings.get           Settings.Get           capability settings
//	 8 storage.get            Storage.Get            capability storage
//	 9 storage.set            Storage.Set            capability storage
//	10 storage.delete         Storage.Delete         capability storage
//	11 jobs.enqueue           Jobs.Enqueue           capability jobs
//	12 secrets.resolve        Secrets.Resolve        capability secrets
//
// A service whose capability the manifest does not declare, or that the host did not open
// for the extension, answers with an error envelope "capability X not declared" (code
// PermissionDenied). host_call bounds-checks every pointer and length, answers a bad
// request with an error envelope and never panics; a host service's status error keeps
// its code (envelope 2). log writes a line to the extension's logger at level 1 trace,
// 2 debug, 3 info, 4 warn or 5 error (anything else is info); lines over 16 KiB are cut.
//
// Guests have no filesystem, no sockets, no environment and no arguments; clocks and
// random numbers are the host's, and a sleep ends when the call's time is up.
package wasmrt
