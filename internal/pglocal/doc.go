// Package pglocal runs a throwaway PostgreSQL cluster on the loopback
// interface: initdb into a fresh directory under os.TempDir(), pg_ctl start,
// and on Close stop it and remove every file it made.
//
// Tests reach it through tests/pgtest; cmd/bench uses it directly so that a
// benchmark needs nothing but the PostgreSQL server binaries.
//
// # Binaries
//
// [FindBinaries] looks at PGBIN, then /usr/lib/postgresql/<major>/bin, then
// PATH. Running as root with apt-get available, it installs the Debian
// packages when nothing is found; otherwise it returns [ErrBinariesNotFound],
// whose message says what to install. [Tool] finds a client program (psql,
// pg_dump, pg_config) in the same order, and scripts/lib/pgbin.sh is the same
// search for the shell scripts.
//
// # Running as root
//
// initdb and postgres refuse to run as root. When the process is root, the
// cluster is created and run as the "postgres" system user (or "nobody" if
// that does not exist), and its directory is handed to that user.
//
// # Leaks
//
// Close must be called, and stopping a server is otherwise the caller's job.
// Because a test binary can be killed (go test -timeout, Ctrl-C, kill -9)
// before it runs its cleanups, each server also has a watchdog: a small shell
// loop that checks once a second whether the process that started the server
// is still alive and, once it is gone, stops the server in immediate mode and
// removes its directory. This is best effort only: if the watchdog itself is
// killed, or the dead process's id is reused at once, the server lives on
// until someone stops it.
package pglocal
