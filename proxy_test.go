package skiplock_test

import (
	"bytes"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skiplock/skiplock"
)

// TestProxySQLFilesAreFrozen: the proxy migrations install frozen copies of sql/proxy, like
// the shards' migrations (TestSQLFilesAreFrozen): each sql/proxy file equals its newest
// frozen copy in migrations/proxy/snapshots, and every frozen function file is installed.
func TestProxySQLFilesAreFrozen(t *testing.T) {
	t.Parallel()
	migrations := skiplock.ProxyMigrations()
	names, err := fs.Glob(migrations, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no proxy migrations: %v", err)
	}
	slices.Sort(names)
	var frozenDirs []string
	entries, err := fs.ReadDir(migrations, "snapshots")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		frozenDirs = append(frozenDirs, "snapshots/"+e.Name())
	}
	slices.Sort(frozenDirs)
	err = fs.WalkDir(skiplock.ProxyCodePackage(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || name == "install.sql" {
			return err
		}
		body, err := fs.ReadFile(skiplock.ProxyCodePackage(), name)
		if err != nil {
			return err
		}
		for i := len(frozenDirs) - 1; i >= 0; i-- {
			frozen, err := fs.ReadFile(migrations, frozenDirs[i]+"/"+name)
			if err != nil {
				continue
			}
			if !bytes.Equal(frozen, body) {
				t.Errorf("sql/proxy/%s differs from its newest frozen copy, migrations/proxy/%s/%s", name, frozenDirs[i], name)
			}
			return nil
		}
		t.Errorf("sql/proxy/%s has no frozen copy in migrations/proxy/snapshots", name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var installed strings.Builder
	for _, n := range names {
		b, err := fs.ReadFile(migrations, n)
		if err != nil {
			t.Fatal(err)
		}
		installed.Write(b)
	}
	install, err := fs.ReadFile(skiplock.ProxyCodePackage(), "install.sql")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := regexp.MustCompile(`\{\{ template "(?:snapshots/\d+/)?([^"]+)" \. \}\}`)
	fns, err := fs.Glob(skiplock.ProxyCodePackage(), "functions/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range fns {
		inMigrations, inInstall := false, false
		for _, m := range tmpl.FindAllStringSubmatch(installed.String(), -1) {
			inMigrations = inMigrations || m[1] == fn
		}
		for _, m := range tmpl.FindAllStringSubmatch(string(install), -1) {
			inInstall = inInstall || m[1] == fn
		}
		if !inMigrations || !inInstall {
			t.Errorf("sql/proxy/%s: installed by a proxy migration %v, by sql/proxy/install.sql %v; want both", fn, inMigrations, inInstall)
		}
	}
}

func TestProxyConnString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://app@db1.example:6432/jobs?sslmode=require&application_name=a'b%5Cc", `application_name='a\'b\\c' dbname='jobs' host='db1.example' port='6432' sslmode='require' user='app'`},
		{"postgresql://db2/jobs", `dbname='jobs' host='db2'`},
		{"host=db3 dbname=jobs", "host=db3 dbname=jobs"},
	} {
		got, err := skiplock.ProxyConnString(c.in)
		if err != nil || got != c.want {
			t.Errorf("ProxyConnString(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := skiplock.ProxyConnString(" "); err == nil {
		t.Error("an empty shard connection string was accepted")
	}
	// Every login of the proxy can read the connection strings (pg_foreign_server), so a
	// password in one is refused, and the error does not repeat it.
	for _, in := range []string{
		"postgres://app:s3cret-pw@db1/jobs",
		"postgresql://app@db1/jobs?password=s3cret-pw",
		"postgres://app:s3cret-pw@db1:bad-port/jobs",
	} {
		got, err := skiplock.ProxyConnString(in)
		if err == nil {
			t.Errorf("ProxyConnString(%q) = %q, want an error (a password in the proxy's catalog)", in, got)
		} else if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("ProxyConnString(%q): the error repeats the password: %v", in, err)
		}
	}
}
