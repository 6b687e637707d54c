package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/cli.md")

const (
	docPath       = "../../docs/cli.md"
	docBeginMark  = "<!-- BEGIN generated from `skiplock help` (go test ./cmd/skiplock -run TestCLIDoc -update) -->\n"
	docEndMark    = "<!-- END generated -->\n"
	docFenceStart = "```text\n"
	docFenceEnd   = "```\n"
)

// cliDocReference is the generated part of docs/cli.md: `skiplock help`, then `skiplock help
// NAME` for every command, each in a text block under a heading.
func cliDocReference() string {
	var b strings.Builder
	b.WriteString("## skiplock help\n\n" + docFenceStart + overview() + docFenceEnd)
	for _, c := range commands {
		b.WriteString("\n## skiplock " + c.name + "\n\n" + docFenceStart + c.helpText() + docFenceEnd)
	}
	return b.String()
}

// TestCLIDoc: docs/cli.md holds exactly what `skiplock help` prints for every command, so
// the page cannot drift from the binary. Run with -update after changing a command.
func TestCLIDoc(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	before, rest, ok := strings.Cut(doc, docBeginMark)
	if !ok {
		t.Fatalf("docs/cli.md lacks the line %q", docBeginMark)
	}
	generated, after, ok := strings.Cut(rest, docEndMark)
	if !ok {
		t.Fatalf("docs/cli.md lacks the line %q", docEndMark)
	}
	want := cliDocReference()
	if generated == want {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(before+docBeginMark+want+docEndMark+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gotLines, wantLines := strings.Split(generated, "\n"), strings.Split(want, "\n")
	for i := range min(len(gotLines), len(wantLines)) {
		if gotLines[i] != wantLines[i] {
			t.Fatalf("docs/cli.md differs from `skiplock help` at line %d of the reference:\n doc:  %q\n help: %q\n"+
				"run go test ./cmd/skiplock -run TestCLIDoc -update", i+1, gotLines[i], wantLines[i])
		}
	}
	t.Fatalf("docs/cli.md has %d lines of reference, `skiplock help` %d; run go test ./cmd/skiplock -run TestCLIDoc -update",
		len(gotLines), len(wantLines))
}
