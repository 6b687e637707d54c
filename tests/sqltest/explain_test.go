package sqltest

import (
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// planLog collects the plans that auto_explain logs, as notices, on one connection.
type planLog struct {
	mu    sync.Mutex
	plans []string
}

// take returns the plans logged since the last take, and forgets them.
func (l *planLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	plans := l.plans
	l.plans = nil
	return plans
}

// connectWithPlanLog opens a connection to url whose notices are collected in the returned
// planLog; startAutoExplain makes the plans of its statements arrive there.
func connectWithPlanLog(t *testing.T, url string) (*pgx.Conn, *planLog) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	log := &planLog{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		log.mu.Lock()
		defer log.mu.Unlock()
		log.plans = append(log.plans, n.Message)
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	return conn, log
}

// startAutoExplain loads auto_explain on conn so that the plan of every statement, those
// inside functions included, is sent as a notice. It skips the test when the module cannot
// be loaded.
func startAutoExplain(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), "LOAD 'auto_explain'"); err != nil {
		t.Skipf("auto_explain is not available to this user: %v", err)
	}
	for _, set := range []string{
		"SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_level = notice",
	} {
		mustExec(t, conn, set)
	}
}
