package badinput

import (
	"context"
	"testing"
)

// TestValidBaselines: the valid arguments the NULL cases start from are accepted, so each
// NULL case fails because of its NULL and nothing else. Each call runs in a transaction that
// is rolled back; the documented NULLs (defaults) are accepted too.
func TestValidBaselines(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := func(t *testing.T, sql string) {
		tx, err := f.Conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
		rows, err := tx.Query(t.Context(), sql)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, fn := range publicFuncs {
		t.Run(fn.title(), func(t *testing.T) { run(t, fn.callSQL(-1, "")) })
		for i, p := range fn.params {
			if p.nullable {
				t.Run(fn.title()+"/"+p.name+"NullIsDefault", func(t *testing.T) { run(t, fn.callSQL(i, "NULL")) })
			}
			if p.nullElem != "" && p.nullElemParam == "" {
				t.Run(fn.title()+"/"+p.name+"NullElementAllowed", func(t *testing.T) { run(t, fn.callSQL(i, p.nullElem)) })
			}
		}
	}
	f.unchanged(t, f.Conn, "the rolled-back calls")
}

// TestNullArguments: each parameter in turn is NULL (or, for arrays, holds a NULL) while
// the others are valid: 22023 naming that parameter, and no change to any table.
func TestNullArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type nullCase struct{ name, sql, fn, param string }
	var cases []nullCase
	for _, fn := range publicFuncs {
		for i, p := range fn.params {
			if !p.nullable {
				cases = append(cases, nullCase{fn.title() + "/" + p.name + "Null", fn.callSQL(i, "NULL"), fn.name, p.name})
			}
			if p.nullElemParam != "" {
				cases = append(cases, nullCase{fn.title() + "/" + p.name + "NullElement", fn.callSQL(i, p.nullElem), fn.name, p.nullElemParam})
			}
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := f.Connect(t)
			_, err := call(t.Context(), conn, tc.sql)
			requireInvalid(t, err, tc.fn, tc.param)
			f.unchanged(t, conn, tc.sql)
		})
	}
}
