package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// outputFormat is the value of -o.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

func (f *outputFormat) String() string { return string(*f) }

func (f *outputFormat) Set(s string) error {
	switch outputFormat(s) {
	case outputTable, outputJSON:
		*f = outputFormat(s)
		return nil
	}
	return fmt.Errorf("must be table or json, got %q", s)
}

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("failed to write JSON: %w", err)
	}
	return nil
}

// newTable is a tabwriter for the table output; call Flush.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// cell formats a value for a table cell: "-" for NULL, times in UTC to the second, text on
// one line and cut to width runes (0: uncut).
func cell(v any, width int) string {
	var s string
	switch v := v.(type) {
	case nil:
		return "-"
	case *string:
		if v == nil {
			return "-"
		}
		s = *v
	case string:
		s = v
	case *time.Time:
		if v == nil {
			return "-"
		}
		return v.UTC().Format("2006-01-02 15:04:05")
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05")
	case *int32:
		if v == nil {
			return "-"
		}
		return fmt.Sprint(*v)
	case *int64:
		if v == nil {
			return "-"
		}
		return fmt.Sprint(*v)
	case *float64:
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1fs", *v)
	default:
		s = fmt.Sprint(v)
	}
	s = strings.Join(strings.Fields(printable(s)), " ")
	if r := []rune(s); width > 0 && len(r) > width {
		s = string(r[:width-1]) + "…"
	}
	if s == "" {
		return `""`
	}
	return s
}

// printable escapes the control characters of s but newlines and tabs (ESC becomes the
// four characters \x1b), so that a payload key, queue name or worker's error message cannot
// move the cursor or recolour the operator's terminal.
func printable(s string) string { return controlEscaper.Replace(s) }

// controlEscaper replaces the C0 and C1 control characters but newline and tab.
var controlEscaper = func() *strings.Replacer {
	var pairs []string
	for r := rune(0); r < 0xa0; r++ {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			pairs = append(pairs, string(r), fmt.Sprintf("\\x%02x", r))
		}
	}
	return strings.NewReplacer(pairs...)
}()

// jsonCell is stored JSON for a table cell, compacted: "-" for NULL.
func jsonCell(raw json.RawMessage, width int) string {
	if raw == nil {
		return "-"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		raw = b.Bytes()
	}
	return cell(string(raw), width)
}

// indentJSON is stored JSON indented for printing, escaped as printable; as stored when it
// does not parse.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") == nil {
		raw = b.Bytes()
	}
	return printable(string(raw))
}

// idList is job ids for a table cell, comma-separated: "-" for none.
func idList(ids []int64) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}
