package pglocal

import (
	"errors"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestPgBouncer(t *testing.T) {
	t.Parallel()
	if _, err := FindPgBouncer(); errors.Is(err, ErrPgBouncerNotFound) {
		t.Skip(err)
	}
	s := startServer(t, nil)
	b, err := StartPgBouncer(t.Context(), &PgBouncerOptions{Port: s.Port(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	t.Run("ForwardsToTheServer", func(t *testing.T) {
		conn := connect(t, b.URL("postgres", "default_query_exec_mode=exec"))
		var port int
		if err := conn.QueryRow(t.Context(), "SELECT current_setting('port')::int").Scan(&port); err != nil {
			t.Fatal(err)
		}
		if port != s.Port() {
			t.Fatalf("server port %d, want %d", port, s.Port())
		}
	})

	t.Run("TransactionMode", func(t *testing.T) {
		conn := connect(t, b.URL("pgbouncer", "default_query_exec_mode=simple_protocol"))
		rows, err := conn.Query(t.Context(), "SHOW CONFIG")
		if err != nil {
			t.Fatal(err)
		}
		config := make(map[string]string)
		for rows.Next() {
			raw := rows.RawValues() // text: simple protocol
			config[string(raw[0])] = string(raw[1])
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"pool_mode":         "transaction",
			"default_pool_size": strconv.Itoa(PgBouncerPoolSizeDefault),
			"listen_port":       strconv.Itoa(b.Port()),
		}
		for k, v := range want {
			if config[k] != v {
				t.Errorf("%s = %q, want %q", k, config[k], v)
			}
		}
	})

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(b.tmpDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s not removed: %v", b.tmpDir, err)
	}
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port()))); err == nil {
		_ = c.Close()
		t.Error("pgbouncer still accepts connections after Close")
	}
	if _, err := pgx.Connect(t.Context(), b.URL("postgres")); err == nil {
		t.Error("connected through a closed pgbouncer")
	}
}

func TestPgBouncerOptions(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]*PgBouncerOptions{
		"NoPort":      {},
		"BadPoolMode": {Port: 5432, PoolMode: "sometimes"},
		"BadSetting":  {Port: 5432, Settings: map[string]string{"x = 1\n[databases]": ""}},
		"BadValue":    {Port: 5432, Settings: map[string]string{"pool_mode": "session\n[databases]"}},
		"BadPassword": {Port: 5432, Password: "a\nb"},
	} {
		if _, err := StartPgBouncer(t.Context(), opts); err == nil || errors.Is(err, ErrPgBouncerNotFound) {
			t.Errorf("%s: StartPgBouncer = %v, want an options error", name, err)
		}
	}
}
