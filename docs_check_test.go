package skiplock_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// userDocs are the documents written for users and contributors.
func userDocs(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md"}
	for _, pattern := range []string{"docs/*.md", "clients/*/README.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// issueReference matches a reference to the project's issue tracker: "issue 13", "issues 9
// and 10", "#12".
var issueReference = regexp.MustCompile(`(?i)\bissues? #?\d+|(^|[\s(])#\d+\b`)

// TestDocsHaveNoIssueNumbers: the documents are reference for users; the history of how a
// thing came to be lives in git, not in the text.
func TestDocsHaveNoIssueNumbers(t *testing.T) {
	t.Parallel()
	for _, f := range userDocs(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inCode = !inCode
				continue
			}
			if !inCode && issueReference.MatchString(line) {
				t.Errorf("%s:%d: an issue reference: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// changeKinds are Keep a Changelog's headings, in its order.
var changeKinds = []string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}

// TestChangelogKeepsItsForm: CHANGELOG.md is in Keep a Changelog form: [Unreleased], then one
// section per release, newest first, each with at most one heading per kind of change, in
// the form's order, and entries under each.
func TestChangelogKeepsItsForm(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	release := regexp.MustCompile(`^## \[(Unreleased|\d+\.\d+\.\d+)\]( - \d{4}-\d{2}-\d{2})?$`)
	var section string
	var kinds []string
	var sections []string
	entries := 0
	endKind := func() {
		if len(kinds) > 0 && entries == 0 {
			t.Errorf("CHANGELOG.md [%s] ### %s has no entry", section, kinds[len(kinds)-1])
		}
		entries = 0
	}
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			endKind()
			m := release.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("CHANGELOG.md:%d: %q is not '## [Unreleased]' or '## [X.Y.Z] - YYYY-MM-DD'", i+1, line)
				continue
			}
			if m[1] != "Unreleased" && m[2] == "" {
				t.Errorf("CHANGELOG.md:%d: release %s has no date", i+1, m[1])
			}
			section, kinds = m[1], nil
			sections = append(sections, section)
		case strings.HasPrefix(line, "### "):
			endKind()
			kind := strings.TrimPrefix(line, "### ")
			at := slices.Index(changeKinds, kind)
			switch {
			case section == "":
				t.Errorf("CHANGELOG.md:%d: ### %s before any release section", i+1, kind)
			case at < 0:
				t.Errorf("CHANGELOG.md:%d: ### %s is not one of %v", i+1, kind, changeKinds)
			case slices.Contains(kinds, kind):
				t.Errorf("CHANGELOG.md:%d: [%s] has ### %s twice", i+1, section, kind)
			case len(kinds) > 0 && slices.Index(changeKinds, kinds[len(kinds)-1]) > at:
				t.Errorf("CHANGELOG.md:%d: [%s] ### %s after ### %s: keep the order %v", i+1, section, kind, kinds[len(kinds)-1], changeKinds)
			}
			kinds = append(kinds, kind)
		case strings.HasPrefix(line, "- "):
			entries++
		}
	}
	endKind()
	if len(sections) == 0 || sections[0] != "Unreleased" {
		t.Errorf("CHANGELOG.md's first section is %v, want [Unreleased]", sections)
	}
}
