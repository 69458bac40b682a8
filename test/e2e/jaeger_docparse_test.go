package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestAbridgedIn: the documented excerpt of an answer must be in the real
// answer, member by member and element by element, with measured numbers
// (doubleValue) free; anything else that differs is a failure, so that a
// document showing what the program no longer does fails its test.
func TestAbridgedIn(t *testing.T) {
	const real = `{"result":{"spans":[
		{"name":"handler","kind":2,"attributes":[{"key":"a","value":{"intValue":"1"}}]},
		{"name":"chat m","kind":3,"attributes":[
			{"key":"tokentap.outcome","value":{"stringValue":"completed"}},
			{"key":"tokentap.time_to_first_token","value":{"doubleValue":0.1027}}]}]}}`
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"the whole answer", real, true},
		{"one member of one element", `{"result":{"spans":[{"name":"chat m"}]}}`, true},
		{"elements in another order", `{"result":{"spans":[{"kind":3},{"kind":2}]}}`, true},
		{"a measured time shown with another value", `{"result":{"spans":[{"attributes":[{"key":"tokentap.time_to_first_token","value":{"doubleValue":0.2}}]}]}}`, true},
		{"an empty object", `{}`, true},
		{"a different string", `{"result":{"spans":[{"name":"chat other"}]}}`, false},
		{"a different integer", `{"result":{"spans":[{"name":"chat m","kind":2}]}}`, false},
		{"a member the answer lacks", `{"result":{"spans":[{"parentSpanId":"00f067aa0ba902b7"}]}}`, false},
		{"a different count", `{"result":{"spans":[{"attributes":[{"key":"a","value":{"intValue":"2"}}]}]}}`, false},
		{"members of two elements claimed for one", `{"result":{"spans":[{"name":"handler","kind":3}]}}`, false},
		{"an object where the answer has an array", `{"result":{"spans":{"name":"chat m"}}}`, false},
		{"a documented excerpt that is not JSON", `{"result":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := docAbridgedIn(docBlock{lang: "json", text: tt.want}, []byte(real))
			if (err == nil) != tt.ok {
				t.Errorf("docAbridgedIn = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	if err := docAbridgedIn(docBlock{lang: "json", text: `{}`}, []byte("No traces found")); err == nil {
		t.Error("an answer that is not JSON must not contain any excerpt")
	}
}

// TestAbridgedLines: a text excerpt's lines must each be a whole line of
// the real output.
func TestAbridgedLines(t *testing.T) {
	const real = "calls{instance=\"a\"} 2\ncalls{instance=\"b\"} 2\n"
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"every line", "calls{instance=\"a\"} 2\ncalls{instance=\"b\"} 2\n", true},
		{"one line", "calls{instance=\"b\"} 2\n", true},
		{"a different count", "calls{instance=\"a\"} 3\n", false},
		{"part of a line", "calls{instance=\"a\"}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := docAbridgedIn(docBlock{lang: "text", text: tt.want}, []byte(real))
			if (err == nil) != tt.ok {
				t.Errorf("docAbridgedIn = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	if err := docAbridgedIn(docBlock{lang: "yaml", text: "a: 1\n"}, []byte("a: 1\n")); err == nil {
		t.Error("an excerpt in a language that is not compared must be rejected")
	}
}

// TestReadSection: the blocks of a section are those between its heading
// and the next heading of its level or higher, each with the directive
// written on the line right before its fence, and only that one.
func TestReadSection(t *testing.T) {
	doc := "# Title\n" +
		"```sh\necho outside\n```\n" +
		"## Walk\n" +
		"Text.\n" +
		"<!-- e2e: background until http://localhost:1/ -->\n" +
		"```sh\nserver run\n```\n" +
		"<!-- e2e: retry -->\n" +
		"A paragraph between the directive and the fence cancels it.\n" +
		"```sh\nplain\n```\n" +
		"### A subsection stays in the section\n" +
		"<!-- e2e: output, abridged -->\n" +
		"```json\n{\"a\": 1}\n```\n" +
		"## Next\n" +
		"```sh\necho after\n```\n"
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, heading string
		found         bool
		want          []docBlock
	}{
		{"a section", "Walk", true, []docBlock{
			{line: 8, lang: "sh", text: "server run\n", directive: "background until http://localhost:1/"},
			{line: 13, lang: "sh", text: "plain\n"},
			{line: 18, lang: "json", text: "{\"a\": 1}\n", directive: "output, abridged"},
		}},
		{"the whole file", "", true, []docBlock{
			{line: 2, lang: "sh", text: "echo outside\n"},
			{line: 8, lang: "sh", text: "server run\n", directive: "background until http://localhost:1/"},
			{line: 13, lang: "sh", text: "plain\n"},
			{line: 18, lang: "json", text: "{\"a\": 1}\n", directive: "output, abridged"},
			{line: 22, lang: "sh", text: "echo after\n"},
		}},
		{"a heading that is not there", "Missing", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := docReadSection(t, path, tt.heading)
			if found != tt.found || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("docReadSection(%q) = %+v, %v\nwant %+v, %v", tt.heading, got, found, tt.want, tt.found)
			}
		})
	}
	backgrounds := []struct {
		name, directive, until string
		printed, ok            bool
	}{
		{"a URL", "background until http://localhost:1/", "http://localhost:1/", false, true},
		{"printed text", "background until printed run.sh: ready", "run.sh: ready", true, true},
		{"not a background block", "retry", "", false, false},
	}
	for _, tt := range backgrounds {
		t.Run("background/"+tt.name, func(t *testing.T) {
			until, printed, ok := (docBlock{directive: tt.directive}).background()
			if until != tt.until || printed != tt.printed || ok != tt.ok {
				t.Errorf("background() of %q = %q, %v, %v; want %q, %v, %v", tt.directive, until, printed, ok, tt.until, tt.printed, tt.ok)
			}
		})
	}
}
