package tokentap

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoTopDirs and repoTopFiles are what an inline code span must start
// with, or be, to be read as a path into this repository. Anything else in
// backticks (identifiers, options, placeholders, other projects' paths) is
// left alone, so the test fails only on paths a reader would try to open.
var (
	repoTopDirs  = []string{"caddymodule/", "cmd/", "sse/", "examples/", "docs/", "internal/", "test/", ".ci/"}
	repoTopFiles = []string{"README.md", "Caddyfile", "go.mod", "plugin.go", "edges_test.go"}
)

// docPathsElsewhere lists code spans that look like paths here but name a
// file in another repository the docs cite, with that repository, so they
// are not checked against this one.
var docPathsElsewhere = map[string]string{
	"examples/ai-functions/src/lib/record-fixture.ts": "vercel/ai",
}

// TestDocPaths keeps the docs' references to the repository's own files
// true after files move: every relative markdown link must reach a file or
// directory from the linking file's directory, as GitHub resolves it, and
// every code span naming a repository path must name one that exists from
// the repository root, where the docs' commands are run.
func TestDocPaths(t *testing.T) {
	t.Run("rules", testDocPathRules)
	docs := docFiles(t)
	if len(docs) == 0 {
		t.Fatal("found no markdown files to check")
	}
	elsewhereSeen := map[string]bool{}
	links, paths := 0, 0
	for _, doc := range docs {
		t.Run(doc, func(t *testing.T) {
			src, err := os.ReadFile(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, ref := range docRefs(string(src)) {
				if ref.link {
					links++
				} else if _, ok := repoPath(ref.target); ok {
					paths++
				}
				if _, ok := docPathsElsewhere[ref.target]; ok && !ref.link {
					elsewhereSeen[ref.target] = true
					continue
				}
				if problem := checkDocRef(doc, ref); problem != "" {
					t.Errorf("%s:%d: %s", doc, ref.line, problem)
				}
			}
		})
	}
	// A scan that finds nothing passes whatever the docs say.
	if links == 0 || paths == 0 {
		t.Errorf("found %d links and %d code-span paths in %d files: the scan is broken", links, paths, len(docs))
	}
	for path, repo := range docPathsElsewhere {
		if !elsewhereSeen[path] {
			t.Errorf("docPathsElsewhere lists %s (in %s), which no doc names any more: take it off", path, repo)
		}
	}
}

// testDocPathRules pins which code spans count as repository paths, since
// a rule too wide fails on prose and one too narrow checks nothing.
func testDocPathRules(t *testing.T) {
	tests := []struct {
		span string
		path string // "" if the span is not read as a path
	}{
		{"internal/meter/openai.go", "internal/meter/openai.go"},
		{"internal/meter/openai.go:40", "internal/meter/openai.go"},
		{"internal/meter/openai.go:40-52", "internal/meter/openai.go"},
		{"./internal/meter/...", "internal/meter"},
		{"internal/stats/", "internal/stats"},
		{"docs/telemetry.md#cost", "docs/telemetry.md"},
		{".ci/run", ".ci/run"},
		{"Caddyfile", "Caddyfile"},
		{"README.md:12", "README.md"},
		// Not paths here: bare words, commands, globs, templates and
		// paths of other repositories.
		{"docs", ""},
		{"./...", ""},
		{"go test ./internal/meter", ""},
		{"test/e2e/reliability_*_test.go", ""},
		{"internal/meter/testdata/<dialect>/", ""},
		{"examples/{a,b}", ""},
		{"$PWD/internal", ""},
		{"packages/openai/src/chat/__fixtures__/", ""},
		{"meter.Measurement", ""},
	}
	for _, tt := range tests {
		got, ok := repoPath(tt.span)
		if !ok {
			got = ""
		}
		if got != tt.path {
			t.Errorf("repoPath(%q) = %q, want %q", tt.span, got, tt.path)
		}
	}
	src := "[a](x.md) `internal/a`\n\n```sh\n`internal/fenced` [f](fenced.md)\n```\n\n`` `[l](spanned.md)` ``\ntext\n[r]: y.md\n\n[d]: z.md\n"
	var got []string
	for _, ref := range docRefs(src) {
		got = append(got, fmt.Sprintf("%d %s %v", ref.line, ref.target, ref.link))
	}
	want := []string{"1 internal/a false", "1 x.md true", "7 `[l](spanned.md)` false", "11 z.md true"}
	if !slices.Equal(got, want) {
		t.Errorf("docRefs found %q, want %q", got, want)
	}
}

// docFiles returns the markdown files a reader of the repository meets:
// the README, the docs, the examples' and test tools' READMEs, and the
// notes kept beside the recorded test data (the recordings' SOURCES).
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "test/tools/*/README.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	walk := func(root string, keep func(path string) bool) {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && keep(filepath.ToSlash(path)) {
				files = append(files, filepath.ToSlash(path))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	walk("examples", func(path string) bool {
		return filepath.Base(path) == "README.md"
	})
	walk("internal", func(path string) bool {
		return strings.HasSuffix(path, ".md") && strings.Contains(path, "/testdata/")
	})
	slices.Sort(files)
	return slices.Compact(files)
}

// docRef is one reference found in a markdown file: a link target, to be
// resolved from the file's directory, or a code span, from the root.
type docRef struct {
	line   int
	target string
	link   bool
}

var (
	// inlineLink matches [text](target) and ![alt](target), with an
	// optional title after the target.
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^()\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// linkDef matches a reference definition, [label]: target.
	linkDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// urlScheme marks a target that is not a path in this repository.
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// lineSuffix is the :12 or :12-30 that points into a file.
	lineSuffix = regexp.MustCompile(`:\d+(-\d+)?$`)
)

// docRefs returns the link targets and code spans of a markdown document,
// each with its line. Fenced code blocks are skipped: they hold commands
// and output, not links or code spans. Code spans are matched within a
// paragraph, as CommonMark does, so one stray backtick cannot pair with
// another far away; links inside code spans are not links.
func docRefs(src string) []docRef {
	var refs []docRef
	lines := strings.Split(src, "\n")
	var para []string // the current paragraph's lines
	paraStart := 0    // its first line's index
	flush := func() {
		refs = append(refs, paragraphRefs(para, paraStart)...)
		para = nil
	}
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if f := fenceOpening(trimmed); f != "" {
			flush()
			fence = f
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if para == nil {
			paraStart = i
		}
		para = append(para, line)
	}
	flush()
	return refs
}

// fenceOpening returns the run of backticks or tildes that opens a fenced
// code block on this (left-trimmed) line, or "".
func fenceOpening(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n >= 3 {
			// A backtick fence's info string has no backticks.
			if c == "`" && strings.Contains(trimmed[n:], "`") {
				return ""
			}
			return trimmed[:n]
		}
	}
	return ""
}

// paragraphRefs finds the code spans and links in one paragraph, whose
// first line is line index start.
func paragraphRefs(para []string, start int) []docRef {
	text := strings.Join(para, "\n")
	lineAt := func(off int) int { return start + 1 + strings.Count(text[:off], "\n") }
	var refs []docRef
	// prose is the paragraph with code spans blanked out, so that the
	// link patterns see no backticked text; offsets stay the same.
	prose := []byte(text)
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		n := 1
		for i+n < len(text) && text[i+n] == '`' {
			n++
		}
		closing := spanClose(text, i+n, n)
		if closing < 0 {
			// An unmatched run is literal text.
			i += n
			continue
		}
		content := strings.ReplaceAll(text[i+n:closing], "\n", " ")
		if len(content) > 2 && content[0] == ' ' && content[len(content)-1] == ' ' {
			content = content[1 : len(content)-1]
		}
		refs = append(refs, docRef{line: lineAt(i), target: content})
		for j := i; j < closing+n; j++ {
			if prose[j] != '\n' {
				prose[j] = ' '
			}
		}
		i = closing + n
	}
	for _, m := range inlineLink.FindAllSubmatchIndex(prose, -1) {
		refs = append(refs, docRef{line: lineAt(m[2]), target: strings.Trim(text[m[2]:m[3]], "<>"), link: true})
	}
	// Reference definitions open a paragraph; one cannot interrupt prose.
	for i, line := range strings.Split(string(prose), "\n") {
		m := linkDef.FindStringSubmatch(line)
		if m == nil {
			break
		}
		refs = append(refs, docRef{line: start + 1 + i, target: strings.Trim(m[1], "<>"), link: true})
	}
	slices.SortStableFunc(refs, func(a, b docRef) int { return a.line - b.line })
	return refs
}

// spanClose returns the offset of the backtick run of exactly n that
// closes a code span begun before from, or -1.
func spanClose(text string, from, n int) int {
	for i := from; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		m := 1
		for i+m < len(text) && text[i+m] == '`' {
			m++
		}
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

// checkDocRef returns what is wrong with ref in doc, or "" if nothing is
// (or ref is not a reference to this repository's files).
func checkDocRef(doc string, ref docRef) string {
	if ref.link {
		return checkLink(doc, ref.target)
	}
	path, ok := repoPath(ref.target)
	if !ok {
		return ""
	}
	if _, err := os.Stat(filepath.FromSlash(path)); err != nil {
		return "`" + ref.target + "` names " + path + ", which does not exist"
	}
	return ""
}

// checkLink checks a markdown link target the way GitHub resolves it:
// relative to the linking file's directory, or to the repository root if
// it starts with a slash.
func checkLink(doc, target string) string {
	if target == "" || strings.HasPrefix(target, "#") || urlScheme.MatchString(target) {
		return ""
	}
	p, _, _ := strings.Cut(target, "#")
	p, _, _ = strings.Cut(p, "?")
	if unescaped, err := url.PathUnescape(p); err == nil {
		p = unescaped
	}
	var resolved string
	if strings.HasPrefix(p, "/") {
		resolved = filepath.Clean(strings.TrimLeft(p, "/"))
	} else {
		resolved = filepath.Join(filepath.Dir(doc), p)
	}
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return "link target " + target + " leads outside the repository"
	}
	if _, err := os.Stat(resolved); err != nil {
		return "link target " + target + " (" + filepath.ToSlash(resolved) + ") does not exist"
	}
	return ""
}

// repoPath reports whether a code span names a path in this repository,
// and which: one starting with a top-level directory, or a top-level file,
// optionally written as a Go package pattern (./internal/meter/...) or
// pointing at lines (internal/meter/openai.go:40-52). Spans with spaces,
// globs or templates are commands or patterns, not paths, and are skipped.
func repoPath(span string) (string, bool) {
	if strings.ContainsAny(span, " \t*<{$") {
		return "", false
	}
	span = strings.TrimPrefix(span, "./")
	p, _, _ := strings.Cut(span, "#")
	for {
		q := strings.TrimSuffix(p, "...")
		q = lineSuffix.ReplaceAllString(q, "")
		q = strings.TrimSuffix(q, "/")
		if q == p {
			break
		}
		p = q
	}
	// The directory is matched with its slash, before the slash is
	// trimmed, so that a bare word such as `test` or `docs` is not a path.
	inTopDir := slices.ContainsFunc(repoTopDirs, func(dir string) bool {
		return strings.HasPrefix(span, dir)
	})
	return p, p != "" && (inTopDir || slices.Contains(repoTopFiles, p))
}
