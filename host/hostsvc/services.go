// Package hostsvc implements the host services one extension reaches: over the go-plugin
// broker for process extensions and as host functions for wasm modules. Each Services value
// is opened once per extension with that extension's identity, capabilities and uses baked
// in, so every call is checked against its manifest and scoped for it.
package hostsvc

import (
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Services are the host services opened for one extension.
type Services struct {
	Activity   hostv1.ActivityServer
	Authz      hostv1.AuthzServer
	Principals hostv1.PrincipalsServer
	Companies  hostv1.CompaniesServer
	Calls      hostv1.CallsServer
	Jobs       hostv1.JobsServer
	Events     hostv1.EventsServer
	Settings   hostv1.SettingsServer
	Secrets    hostv1.SecretsServer
	Storage    hostv1.StorageServer
}
