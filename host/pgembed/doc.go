// Package pgembed runs keel's own embedded PostgreSQL server on top of the
// PostgreSQL server binaries installed on the machine (on Debian, the
// postgresql-15 package, which puts initdb and postgres in
// /usr/lib/postgresql/15/bin).
//
// Start creates the cluster directory if needed, runs initdb exactly once
// (when PG_VERSION is missing), launches postgres as a direct child process
// and waits until it accepts connections. The cluster's superuser is "keel".
// By default the server listens on a Unix socket alone, in a private directory
// /tmp/keel-pg-<first 12 hex digits of sha256(cluster dir)> of mode 0700; when
// Config.Port is set it also listens on 127.0.0.1:Port. Every login needs a
// password (scram-sha-256), on the socket as over TCP: extension roles have
// theirs, and the superuser's is generated at initdb and kept, mode 0600, in
// "<data dir>.password" (Cluster.PasswordFile), so a process that can reach the
// socket, an agent's command for one, cannot log in. A cluster made by an older
// keel that trusted socket logins is moved to passwords at its next start.
//
// # Lifetime
//
// The server is started from a goroutine that is locked to its OS thread for
// as long as the server runs, with the parent-death signal set to SIGKILL, so
// the server dies with keel even when keel is killed with SIGKILL. It runs in
// its own process group, so a Ctrl-C in the terminal reaches keel only; keel
// is expected to call Cluster.Stop, which performs a fast shutdown. A stale
// postmaster.pid left behind by a killed server is removed on the next Start.
//
// The server's output goes to <cluster dir>/log/postgres.log (rotated once
// to postgres.log.1 when it grows beyond 16 MiB), never to keel's stdout.
//
// # Running as root
//
// PostgreSQL refuses to run as root. When keel runs as root (as it does in
// containers), initdb and the server run as the "postgres" system user
// instead, and the cluster directory and socket directory are owned by that
// user. An existing, empty cluster directory owned by someone else is handed
// over to that user; a non-empty one is an error (ErrDataDirOwner).
//
// The postgres user must be able to reach the cluster directory, but a
// directory such as /root is mode 0700. So, when running as root and some
// ancestor of the requested data directory cannot be traversed by the
// postgres user, the cluster is placed in
// /var/lib/keel/pg-<first 12 hex digits of sha256(absolute requested dir)>
// instead. The requested directory is then left untouched, and the choice is
// logged at warn level on Config.Logger. The mapping is deterministic, so the
// same requested directory always finds the same cluster again.
//
// Platform: the package targets Linux. It builds elsewhere, but only on
// Linux does the server die with keel when keel is killed.
package pgembed
