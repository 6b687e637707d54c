package badinput

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/tests/pgtest"
)

// TestPayloads: any JSON value is a payload (the API asks only for non-NULL jsonb), and the
// claim returns it as the server normalised it; JSON null is not SQL NULL.
func TestPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ name, in, want string }{
		{"JSONNull", "null", "null"},
		{"EmptyArray", "[]", "[]"},
		{"String", `"s"`, `"s"`},
		{"Number", "1", "1"},
		{"False", "false", "false"},
		{"HugeNumber", "1e400", "1" + strings.Repeat("0", 400)},
		{"StringWithEscapes", `"\u0000 is not allowed but \n, \" and \\ are"`, ``},
		{"NestedWithUnicode", `{"🚀": ["שלום", {"e\u0301": null}]}`, ``},
		{"InjectionLooking", `{"kind": "'); DROP TABLE jobs; --"}`, `{"kind": "'); DROP TABLE jobs; --"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := b.Connect(t)
			queue := "payload-" + tc.name
			_, err := call(t.Context(), conn, "SELECT jobs_enqueue('k', $1::jsonb, $2)", tc.in, queue)
			if tc.name == "StringWithEscapes" {
				// \u0000 cannot be stored in jsonb: PostgreSQL refuses the value itself
				// (22P05) before jobs_enqueue runs.
				if err == nil {
					t.Fatal("a jsonb string with \\u0000 was accepted")
				}
				pgtest.RequirePgError(t, err, "22P05")
				return
			}
			if err != nil {
				t.Fatalf("jobs_enqueue with payload %s: %v", tc.in, err)
			}
			many := mustCall(t, conn, "SELECT * FROM jobs_enqueue_many(ARRAY['k'], ARRAY[$1::jsonb], ARRAY[$2])", tc.in, queue)
			got := claimAll(t, conn, "w", 10, []string{queue}, "1 hour")
			if len(got) != 2 || got[1].ID != many[0][0].(int64) {
				t.Fatalf("claimed %+v, want 2 jobs", got)
			}
			for _, j := range got {
				if tc.want != "" && j.Payload != tc.want {
					t.Errorf("claimed payload %s, want %s", j.Payload, tc.want)
				}
				if !jsonEqual(t, j.Payload, tc.in) {
					t.Errorf("claimed payload %s is not the JSON value %s", j.Payload, tc.in)
				}
			}
		})
	}

	t.Run("TenMegabytes", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: a 10 MB payload")
		}
		t.Parallel()
		conn := b.Connect(t)
		// 10 MB of JSON: a long string with escapes and non-ASCII, and a big array.
		var sb strings.Builder
		for sb.Len() < 10<<20 {
			sb.WriteString(`quote " backslash \ newline` + "\n" + `emoji 🚀 rtl שלום `)
		}
		blob := sb.String()
		payload, err := json.Marshal(map[string]any{"blob": blob, "n": 42})
		if err != nil {
			t.Fatal(err)
		}
		if len(payload) < 10<<20 {
			t.Fatalf("payload is only %d bytes", len(payload))
		}
		id := queryOne[int64](t, conn, "SELECT jobs_enqueue('big', $1::jsonb, 'big')", string(payload))
		got := claimAll(t, conn, "w", 1, []string{"big"}, "1 hour")
		if len(got) != 1 || got[0].ID != id {
			t.Fatalf("claimed %d jobs, want job %d", len(got), id)
		}
		var back struct {
			Blob string `json:"blob"`
			N    int    `json:"n"`
		}
		if err := json.Unmarshal([]byte(got[0].Payload), &back); err != nil {
			t.Fatalf("claimed payload is not JSON: %v", err)
		}
		if back.Blob != blob || back.N != 42 {
			t.Errorf("the 10 MB payload changed on the way (blob %d bytes, want %d; n = %d)", len(back.Blob), len(blob), back.N)
		}
	})
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	da, db := json.NewDecoder(strings.NewReader(a)), json.NewDecoder(strings.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if err := da.Decode(&va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := db.Decode(&vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(normalizeNumbers(va), normalizeNumbers(vb))
}

// normalizeNumbers makes 1e400 and 1000…0 compare equal, as they do in jsonb.
func normalizeNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		s := v.String()
		if mant, exp, ok := strings.Cut(s, "e"); ok {
			if n, err := strconv.Atoi(exp); err == nil && n >= 0 && !strings.Contains(mant, ".") {
				return mant + strings.Repeat("0", n)
			}
		}
		return s
	case []any:
		for i := range v {
			v[i] = normalizeNumbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = normalizeNumbers(v[k])
		}
	}
	return v
}
