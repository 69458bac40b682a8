package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/dustin/go-humanize"

	"github.com/tokentap/tokentap/internal/capture"
	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/tokencount"
	"github.com/tokentap/tokentap/internal/probe"
	"github.com/tokentap/tokentap/internal/simulator"
	"github.com/tokentap/tokentap/sse"
)

// caddyfileDoc is the Caddyfile reference, from this package's directory.
const caddyfileDoc = "../docs/caddyfile.md"

// codeNames says where the code decides which names a Caddyfile block
// or line accepts: the string literals the named function compares expr
// with (== or != against it, or the cases of a switch on it).
type codeNames struct {
	file, fn, expr string
}

// docDirective is what TestCaddyfileReference knows of one section of the
// reference: where its parsing is, its defaults, and its JSON module.
type docDirective struct {
	name string
	// blocks: the subdirectives a block accepts, by the path of the
	// block ("" is the directive's own, "target" a target's block).
	blocks map[string][]codeNames
	// keywords: the keywords a subdirective's line takes, by its path.
	keywords map[string][]codeNames
	// defaults: the code's default of each option whose default the page
	// states in code, by the option cell's first code span.
	defaults map[string]any
	// module is a pointer to the JSON module's struct; app says the JSON
	// block is {"apps": {name: ...}} instead of a handler.
	module any
	app    bool
	// wrap turns a block of the directive into a whole Caddyfile.
	wrap func(block string) string
}

func siteWrap(block string) string { return ":8080 {\n" + block + "\n}\n" }

// TestCaddyfileReference keeps docs/caddyfile.md true to the code: each
// section's syntax lists exactly the subdirectives and keywords the
// parsing code compares with, adapts with every listed value in every
// place, its options table covers every subdirective and states the
// code's defaults, its JSON decodes strictly into the module's struct and
// sets every field the struct has, and its examples adapt; the order table
// is the order Caddy puts the directives in. It adapts Caddyfiles in
// process and starts no server.
func TestCaddyfileReference(t *testing.T) {
	src, err := os.ReadFile(caddyfileDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	sim := new(simulator.Handler)
	if err := sim.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	var sloLine Handler
	if err := sloLine.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tokentap {\n slo ttft 1s\n}")); err != nil {
		t.Fatal(err)
	}
	directives := []docDirective{
		{
			name: "tokentap",
			blocks: map[string][]codeNames{
				"": {{"caddyfile.go", "UnmarshalCaddyfile", "opt"}},
			},
			keywords: map[string][]codeNames{
				"price":  {{"caddyfile.go", "unmarshalPrice", "name"}},
				"slo":    {{"slo.go", "unmarshalSLO", "name"}},
				"drift":  {{"drift.go", "unmarshalDrift", "name"}},
				"record": {{"recording.go", "unmarshalRecord", "key"}},
			},
			defaults: map[string]any{
				"max_request_body":           bytesize(DefaultMaxRequestBody),
				"max_response_body":          bytesize(DefaultMaxResponseBody),
				"max_event_size":             bytesize(sse.DefaultMaxEventSize),
				"stall_threshold":            meter.DefaultStallThreshold,
				"tokenizer":                  DefaultTokenizer,
				"capture_content <max_size>": bytesize(capture.DefaultMaxSize),
				"max_label_values":           DefaultMaxLabelValues,
				"slo <model>":                sloLine.SLOs[0].Model,
				"drift rate_drop":            drift.DefaultConfig.RateDrop,
				"drift ttft_rise":            drift.DefaultConfig.TTFTRise,
				"drift evidence":             drift.DefaultConfig.Evidence,
				"drift min_baseline":         drift.DefaultConfig.MinBaseline,
				"record roll_size":           bytesize(DefaultRecordRollSize),
				"record roll_keep":           DefaultRecordRollKeep,
			},
			module: new(Handler),
			wrap:   siteWrap,
		},
		{
			name:   "tokentap_stats",
			blocks: map[string][]codeNames{"": nil},
			module: new(StatsPage),
			wrap:   siteWrap,
		},
		{
			name: "tokentap_simulator",
			blocks: map[string][]codeNames{
				"": {
					{"../internal/simulator/caddyfile.go", "UnmarshalCaddyfile", "sub"},
					{"../internal/simulator/caddyfile.go", "unmarshalProfileField", "d.Val()"},
				},
				"model": {{"../internal/simulator/caddyfile.go", "unmarshalProfileField", "d.Val()"}},
			},
			defaults: map[string]any{
				"time_to_first_token":       time.Duration(sim.TimeToFirstToken),
				"tokens_per_second":         sim.TokensPerSecond,
				"jitter":                    sim.Jitter,
				"output_tokens":             sim.OutputTokens,
				"batch_slowdown":            sim.BatchSlowdown,
				"prefill_tokens_per_second": sim.PrefillTokensPerSecond,
				"usage":                     sim.Usage,
				"seed":                      int(sim.Seed),
				"fail_status_body":          sim.FailStatusBody,
			},
			module: new(simulator.Handler),
			wrap:   siteWrap,
		},
		{
			name: "tokentap_probe",
			blocks: map[string][]codeNames{
				"": {
					{"probe.go", "UnmarshalCaddyfile", "opt"},
					{"probe.go", "unmarshalProbeSetting", "opt"},
				},
				"target": {
					{"probe.go", "unmarshalProbeTarget", "opt"},
					{"probe.go", "unmarshalProbeSetting", "opt"},
				},
			},
			keywords: map[string][]codeNames{
				"target": {{"probe.go", "unmarshalProbeTarget", "args[3]"}},
			},
			defaults: map[string]any{
				"interval":   probe.DefaultInterval,
				"timeout":    probe.DefaultTimeout,
				"max_tokens": probe.DefaultMaxTokens,
				"prompt":     probe.DefaultPrompt,
				"target api": probe.OpenAI,
			},
			module: new(ProbeApp),
			app:    true,
			// The syntax block is a whole Caddyfile already.
			wrap: func(block string) string { return block },
		},
		{
			name: "tokentap_history",
			blocks: map[string][]codeNames{
				"": {{"history.go", "UnmarshalCaddyfile", "opt"}},
			},
			defaults: map[string]any{
				"interval": DefaultHistoryInterval,
			},
			module: new(HistoryApp),
			app:    true,
			wrap:   func(block string) string { return block },
		},
	}

	sections := docSections(doc, "## ")
	known := map[string]bool{"Directive order": true}
	for _, d := range directives {
		known[d.name] = true
	}
	for name := range sections {
		if !known[name] {
			t.Errorf("the page has a section %q the test does not know: add it to the test's table", name)
		}
	}

	for _, d := range directives {
		t.Run(d.name, func(t *testing.T) {
			section, ok := sections[d.name]
			if !ok {
				t.Fatalf("no section \"## %s\"", d.name)
			}
			parts := docSections(section, "### ")
			syntaxBlocks := fencedBlocks(parts["Syntax"])
			if len(syntaxBlocks) == 0 {
				t.Fatal("no syntax block under ### Syntax")
			}
			syn := parseSyntax(t, syntaxBlocks[0].text)
			if syn.directive != d.name {
				t.Fatalf("the syntax block is for %q", syn.directive)
			}
			rows := optionRows(parts["Options"])

			t.Run("subdirectives", func(t *testing.T) {
				for block, sources := range d.blocks {
					compareNames(t, fmt.Sprintf("block %q", block), syn.children(block), codeNameSet(t, sources))
				}
				for block := range syn.blocks() {
					if _, ok := d.blocks[block]; !ok {
						t.Errorf("the page documents a block %q the test does not know the code of", block)
					}
				}
				for _, sub := range slices.Sorted(maps.Keys(syn.keywords)) {
					compareNames(t, fmt.Sprintf("keywords of %q", sub), syn.keywords[sub], codeNameSet(t, d.keywords[sub]))
				}
				for sub := range d.keywords {
					if _, ok := syn.keywords[sub]; !ok {
						t.Errorf("the page does not document %q, whose keywords the code knows", sub)
					}
				}
			})

			t.Run("syntax adapts", func(t *testing.T) {
				for i, variant := range syntaxVariants(t, syntaxBlocks[0].text) {
					cfg := d.wrap(variant)
					if _, err := adaptCaddyfile(cfg); err != nil {
						t.Errorf("variant %d of the syntax block does not adapt: %v\n%s", i, err, cfg)
					}
				}
				// The check can fail: a name the code does not know is refused.
				bogus := withUnknownOption(syntaxBlocks[0].text, d.name)
				if _, err := adaptCaddyfile(d.wrap(fillPlaceholders(t, bogus, 0))); err == nil || !strings.Contains(err.Error(), "no_such_option") {
					t.Error("a Caddyfile with an unknown subdirective adapts: the check proves nothing")
				}
			})

			t.Run("options", func(t *testing.T) {
				if len(syn.children("")) == 0 {
					if len(rows) != 0 {
						t.Errorf("options listed for a directive without any: %v", rows)
					}
					return
				}
				keys := map[string]bool{}
				for _, r := range rows {
					keys[r.key] = true
					words := strings.Fields(r.key)
					if !syn.subs[words[0]] {
						t.Errorf("option row %q: %s is not in the syntax block", r.key, words[0])
						continue
					}
					if len(words) > 2 {
						t.Errorf("option row %q: want <subdirective> [<keyword>|<child>|<argument>]", r.key)
					} else if len(words) == 2 && !syn.keywords[words[0]][words[1]] && !syn.subs[words[0]+"/"+words[1]] &&
						!strings.Contains(syn.lines[words[0]], words[1]) {
						t.Errorf("option row %q: %s is no keyword, child or argument of %s", r.key, words[1], words[0])
					}
				}
				for sub := range syn.subs {
					path := strings.Split(sub, "/")
					if len(path) == 1 && !keys[sub] {
						t.Errorf("the options table has no row for %s", sub)
					}
					if len(path) == 2 && !syn.subs[path[1]] && !keys[path[0]+" "+path[1]] {
						t.Errorf("the options table has no row %q", path[0]+" "+path[1])
					}
				}
			})

			t.Run("defaults", func(t *testing.T) {
				stated := map[string]bool{}
				for _, r := range rows {
					if r.def == "" {
						if _, ok := d.defaults[r.key]; ok {
							t.Errorf("%s: the code has a default, %v; state it in code in the default column", r.key, d.defaults[r.key])
						}
						continue
					}
					stated[r.key] = true
					want, ok := d.defaults[r.key]
					if !ok {
						t.Errorf("%s: the page states the default %q, which the test does not check: add the code's to its table", r.key, r.def)
						continue
					}
					if err := sameDefault(r.def, want); err != nil {
						t.Errorf("%s: the page says %q, the code %v: %v", r.key, r.def, want, err)
					}
				}
				for key := range d.defaults {
					if !stated[key] {
						t.Errorf("%s: the code's default is not on the page", key)
					}
				}
			})

			t.Run("json", func(t *testing.T) {
				blocks := fencedBlocks(parts["JSON"])
				if len(blocks) != 1 || blocks[0].lang != "json" {
					t.Fatalf("want one json block under ### JSON, got %d", len(blocks))
				}
				var top map[string]any
				if err := json.Unmarshal([]byte(blocks[0].text), &top); err != nil {
					t.Fatalf("the JSON does not parse: %v", err)
				}
				obj := top
				if d.app {
					apps, _ := top["apps"].(map[string]any)
					obj, _ = apps[d.name].(map[string]any)
					if obj == nil {
						t.Fatalf(`the JSON is not {"apps": {%q: {...}}}`, d.name)
					}
				} else {
					if top["handler"] != d.name {
						t.Errorf(`"handler" is %v, want %q`, top["handler"], d.name)
					}
					delete(obj, "handler")
				}
				b, _ := json.Marshal(obj)
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.DisallowUnknownFields()
				if err := dec.Decode(d.module); err != nil {
					t.Errorf("the JSON does not decode into %T: %v", d.module, err)
				}
				seen := map[string]bool{}
				jsonFieldsSeen(reflect.TypeOf(d.module).Elem(), obj, seen)
				for _, f := range jsonFields(reflect.TypeOf(d.module).Elem(), nil) {
					if !seen[f] {
						t.Errorf("the JSON leaves out %s", f)
					}
				}
			})

			t.Run("examples adapt", func(t *testing.T) {
				examples := fencedBlocks(parts["Examples"])
				if len(examples) == 0 {
					t.Fatal("no examples")
				}
				for i, ex := range examples {
					if ex.lang != "caddy" {
						t.Errorf("example %d is %q, want a whole Caddyfile (caddy)", i, ex.lang)
						continue
					}
					if !strings.Contains(ex.text, d.name) {
						t.Errorf("example %d does not use %s", i, d.name)
					}
					if _, err := adaptCaddyfile(ex.text); err != nil {
						t.Errorf("example %d does not adapt: %v\n%s", i, err, ex.text)
					}
				}
			})
		})
	}

	t.Run("values", func(t *testing.T) {
		tt := docSections(sections["tokentap"], "### ")
		syn := parseSyntax(t, fencedBlocks(tt["Syntax"])[0].text)
		want := append(tokencount.Encodings(), "none")
		if got := alternatives(syn.lines["tokenizer"]); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("tokenizer lists %v, the code offers %v", got, want)
		}
		var dialectRow string
		for _, r := range optionRows(tt["Options"]) {
			if r.key == "dialect" {
				dialectRow = r.text
			}
		}
		for _, name := range meter.DialectNames() {
			if !strings.Contains(dialectRow, "`"+name+"`") {
				t.Errorf("the dialect row leaves out %s", name)
			}
		}
	})

	t.Run("order", func(t *testing.T) {
		rows := tableRows(sections["Directive order"])
		if len(rows) == 0 {
			t.Fatal("no order table")
		}
		handlerOf := map[string]string{"reverse_proxy": "reverse_proxy", "respond": "static_response", "file_server": "file_server"}
		argsOf := map[string]string{"reverse_proxy": "localhost:9", "respond": `"done"`}
		for _, row := range rows {
			spans := codeSpans(strings.Join(row, " "))
			if len(spans) != 2 || !strings.Contains(row[1], "before") {
				t.Errorf("order row %v: want `directive` | before `other`", row)
				continue
			}
			name, other := spans[0], spans[1]
			// Written after the directive it must precede, the directive
			// still comes first in the adapted route.
			out, err := adaptCaddyfile(siteWrap(other + " " + argsOf[other] + "\n" + name))
			if err != nil {
				t.Errorf("%s after %s: %v", name, other, err)
				continue
			}
			i, j := bytes.Index(out, []byte(`"handler":"`+name+`"`)), bytes.Index(out, []byte(`"handler":"`+handlerOf[other]+`"`))
			if i < 0 || j < 0 || i > j {
				t.Errorf("%s is not ordered before %s: %s", name, other, out)
			}
		}
	})
}

// withUnknownOption adds an option no code knows to the directive's block
// of a syntax block, giving it a block if it has none.
func withUnknownOption(block, name string) string {
	lines := strings.Split(block, "\n")
	for i, line := range lines {
		words := strings.Fields(line)
		if len(words) == 0 || words[0] != name {
			continue
		}
		if words[len(words)-1] == "{" {
			lines[i] += "\n\tno_such_option 1"
		} else {
			lines[i] += " {\n\tno_such_option 1\n}"
		}
		break
	}
	return strings.Join(lines, "\n")
}

// bytesize is a default in bytes, which the page writes with a unit.
type bytesize int64

// sameDefault reports whether the page's default, as written in its code
// span, is the code's.
func sameDefault(doc string, want any) error {
	switch w := want.(type) {
	case bytesize:
		n, err := humanize.ParseBytes(doc)
		if err != nil || int64(n) != int64(w) {
			return fmt.Errorf("%q is %d bytes (%v), want %d", doc, n, err, w)
		}
	case time.Duration:
		d, err := caddy.ParseDuration(doc)
		if err != nil || d != w {
			return fmt.Errorf("%q is %v (%v), want %v", doc, d, err, w)
		}
	case int:
		n, err := strconv.Atoi(doc)
		if err != nil || n != w {
			return fmt.Errorf("%q is not %d", doc, w)
		}
	case float64:
		f, err := strconv.ParseFloat(doc, 64)
		if err != nil || f != w {
			return fmt.Errorf("%q is not %v", doc, w)
		}
	case string:
		if doc != w {
			return fmt.Errorf("%q is not %q", doc, w)
		}
	default:
		return fmt.Errorf("no comparison for %T", want)
	}
	return nil
}

func adaptCaddyfile(cfg string) ([]byte, error) {
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	return out, err
}

// docSections splits markdown at headings of one level (prefix "## " or
// "### "), by heading text; a heading's section ends at the next heading of
// that level or higher. Fenced blocks are not read for headings.
func docSections(md, prefix string) map[string]string {
	out := map[string]string{}
	level := strings.Count(prefix, "#")
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			out[name] = body.String()
		}
		body.Reset()
	}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			hashes := len(line) - len(strings.TrimLeft(line, "#"))
			if hashes <= level && strings.HasPrefix(line[hashes:], " ") {
				flush()
				name = ""
				if hashes == level {
					name = strings.Trim(strings.TrimSpace(line[hashes:]), "`")
				}
				continue
			}
		}
		body.WriteString(line + "\n")
	}
	flush()
	return out
}

type fenced struct{ lang, text string }

func fencedBlocks(md string) []fenced {
	var out []fenced
	var cur *fenced
	for _, line := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &fenced{lang: strings.TrimPrefix(line, "```")}
		case cur != nil && strings.HasPrefix(line, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

// tableRows returns a markdown table's rows below its header, cell by cell.
func tableRows(md string) [][]string {
	var rows [][]string
	header := true
	for _, line := range strings.Split(md, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 || !header {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") {
			header = false
			continue
		}
		if header {
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

var codeSpanRE = regexp.MustCompile("`([^`]+)`")

func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpanRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// optionRow is a row of an options table: option | default | meaning.
// key is the option cell's code span; def the default cell's first code
// span, "" when the default is said in words.
type optionRow struct{ key, def, text string }

func optionRows(md string) []optionRow {
	var out []optionRow
	for _, cells := range tableRows(md) {
		r := optionRow{text: strings.Join(cells, " | ")}
		if spans := codeSpans(cells[0]); len(spans) > 0 {
			r.key = spans[0]
		}
		if len(cells) > 1 {
			if spans := codeSpans(cells[1]); len(spans) > 0 {
				r.def = spans[0]
			}
		}
		out = append(out, r)
	}
	return out
}

// syntax is what a syntax block documents.
type syntax struct {
	directive string
	// subs holds every subdirective by path ("target/header").
	subs map[string]bool
	// keywords holds each subdirective's keywords: the plain words of its
	// line after its name, which are neither placeholders nor choices.
	keywords map[string]map[string]bool
	// lines holds each subdirective's line.
	lines map[string]string
}

func (s syntax) children(block string) map[string]bool {
	out := map[string]bool{}
	for p := range s.subs {
		parent, name := "", p
		if i := strings.LastIndex(p, "/"); i >= 0 {
			parent, name = p[:i], p[i+1:]
		}
		if parent == block {
			out[name] = true
		}
	}
	return out
}

// blocks returns the paths of the blocks the syntax shows: the
// directive's own ("") and each subdirective's that opens one.
func (s syntax) blocks() map[string]bool {
	out := map[string]bool{"": true}
	for p, line := range s.lines {
		if strings.HasSuffix(line, "{") {
			out[p] = true
		}
	}
	return out
}

func parseSyntax(t *testing.T, block string) syntax {
	t.Helper()
	s := syntax{subs: map[string]bool{}, keywords: map[string]map[string]bool{}, lines: map[string]string{}}
	var stack []string
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "}":
			if len(stack) == 0 {
				t.Fatalf("unbalanced } in the syntax block")
			}
			stack = stack[:len(stack)-1]
			continue
		case "{":
			stack = append(stack, "")
			continue
		}
		words := strings.Fields(line)
		var path []string
		for _, p := range stack {
			if p != "" {
				path = append(path, p)
			}
		}
		path = append(path, words[0])
		if len(path) == 1 {
			s.directive = words[0]
		} else {
			key := strings.Join(path[1:], "/")
			if s.subs[key] {
				t.Errorf("the syntax block lists %s twice", key)
			}
			s.subs[key] = true
			s.lines[key] = line
			s.keywords[key] = map[string]bool{}
			for _, w := range words[1:] {
				w = strings.Trim(w, "[]")
				if w != "{" && w != "" && !strings.ContainsAny(w, "<>|") {
					s.keywords[key][w] = true
				}
			}
		}
		if words[len(words)-1] == "{" {
			stack = append(stack, words[0])
		}
	}
	if len(stack) != 0 {
		t.Fatalf("unclosed { in the syntax block")
	}
	return s
}

// alternatives returns the choices of a line's a|b|c word.
func alternatives(line string) []string {
	for _, w := range strings.Fields(line) {
		if strings.Contains(w, "|") {
			return strings.Split(strings.Trim(w, "[]"), "|")
		}
	}
	return nil
}

// placeholderValues are a value each placeholder of the syntax blocks is
// replaced with to adapt them: valid wherever the placeholder appears.
var placeholderValues = map[string]string{
	"<matcher>":  "/api/*",
	"<name>":     "team",
	"<value>":    "{http.request.header.X-Team}",
	"<size>":     "2MiB",
	"<max_size>": "32KiB",
	"<duration>": "2s",
	"<n>":        "5",
	"<model>":    "gpt-4o-mini*",
	"<usd>":      "1.5",
	"<path>":     "prices.json",
	"<file>":     "traffic.jsonl",
	"<tokens/s>": "20",
	"<share>":    "0.25",
	"<nats>":     "10",
	"<requests>": "32",
	"<text>":     `"Say hello."`,
	"<url>":      "http://localhost:8080/openai/v1",
	"<field>":    "X-Api-Key",
	"<rate>":     "80",
	"<fraction>": "0.1",
	"<count>":    "10",
	"<int>":      "7",
	"<400-599>":  "503",
}

var placeholderRE = regexp.MustCompile(`<[^<>\s]+>`)

// fillPlaceholders makes a syntax block a Caddyfile: optional parts kept,
// each choice a|b|c replaced with its choice'th alternative (the last when
// it has fewer), each placeholder with its value.
func fillPlaceholders(t *testing.T, block string, choice int) string {
	t.Helper()
	var out strings.Builder
	for _, line := range strings.Split(block, "\n") {
		words := strings.Fields(line)
		for i, w := range words {
			w = strings.Trim(w, "[]")
			if alts := strings.Split(w, "|"); len(alts) > 1 {
				w = alts[min(choice, len(alts)-1)]
			}
			words[i] = placeholderRE.ReplaceAllStringFunc(w, func(p string) string {
				v, ok := placeholderValues[p]
				if !ok {
					t.Errorf("no value for the placeholder %s: add one to placeholderValues", p)
				}
				return v
			})
		}
		out.WriteString(strings.Join(words, " ") + "\n")
	}
	return out.String()
}

// syntaxVariants are the syntax block's Caddyfiles, one per choice, so
// that every alternative it lists is adapted.
func syntaxVariants(t *testing.T, block string) []string {
	n := 1
	for _, line := range strings.Split(block, "\n") {
		n = max(n, len(alternatives(line)))
	}
	var out []string
	for i := range n {
		out = append(out, fillPlaceholders(t, block, i))
	}
	return out
}

// codeNameSet reads the names the code compares with, from its source.
func codeNameSet(t *testing.T, sources []codeNames) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, src := range sources {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, src.file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var fn *ast.FuncDecl
		for _, decl := range f.Decls {
			if d, ok := decl.(*ast.FuncDecl); ok && d.Name.Name == src.fn {
				if fn != nil {
					t.Fatalf("%s has two functions %s", src.file, src.fn)
				}
				fn = d
			}
		}
		if fn == nil {
			t.Fatalf("%s has no function %s", src.file, src.fn)
		}
		found := 0
		lit := func(e ast.Expr) {
			if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
				s, _ := strconv.Unquote(b.Value)
				out[s] = true
				found++
			}
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					break
				}
				if types.ExprString(n.X) == src.expr {
					lit(n.Y)
				} else if types.ExprString(n.Y) == src.expr {
					lit(n.X)
				}
			case *ast.SwitchStmt:
				if n.Tag == nil || types.ExprString(n.Tag) != src.expr {
					break
				}
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						lit(e)
					}
				}
			}
			return true
		})
		if found == 0 {
			t.Errorf("%s %s compares %s with no name: the test reads the wrong code", src.file, src.fn, src.expr)
		}
	}
	return out
}

func compareNames(t *testing.T, what string, doc, code map[string]bool) {
	t.Helper()
	for _, n := range slices.Sorted(maps.Keys(code)) {
		if !doc[n] {
			t.Errorf("%s: the code accepts %s, the page's syntax block does not list it", what, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(doc)) {
		if !code[n] {
			t.Errorf("%s: the page lists %s, the code does not accept it", what, n)
		}
	}
}

// jsonFields lists the JSON fields of struct type typ and of the structs
// it holds, as Type.field; embedded structs without a tag are inline.
func jsonFields(typ reflect.Type, visited map[reflect.Type]bool) []string {
	if visited == nil {
		visited = map[reflect.Type]bool{}
	}
	typ = elemType(typ)
	if typ.Kind() == reflect.Map {
		return jsonFields(typ.Elem(), visited)
	}
	if typ.Kind() != reflect.Struct || visited[typ] {
		return nil
	}
	visited[typ] = true
	var out []string
	for _, f := range reflect.VisibleFields(typ) {
		if !f.IsExported() {
			continue
		}
		name, ok := jsonName(f)
		if !ok {
			continue
		}
		out = append(out, typ.Name()+"."+name)
		out = append(out, jsonFields(f.Type, visited)...)
	}
	return out
}

// jsonFieldsSeen marks the fields of typ that v, decoded JSON, sets.
func jsonFieldsSeen(typ reflect.Type, v any, seen map[string]bool) {
	typ = elemType(typ)
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			jsonFieldsSeen(typ, e, seen)
		}
		return
	case map[string]any:
		if typ.Kind() == reflect.Map {
			for _, e := range v {
				jsonFieldsSeen(typ.Elem(), e, seen)
			}
			return
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for _, f := range reflect.VisibleFields(typ) {
			name, ok := jsonName(f)
			if !ok || !f.IsExported() {
				continue
			}
			if val, ok := v[name]; ok {
				seen[typ.Name()+"."+name] = true
				jsonFieldsSeen(f.Type, val, seen)
			}
		}
	}
}

func elemType(typ reflect.Type) reflect.Type {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	return typ
}

// jsonName is the field's JSON name, and false for a field JSON leaves
// out or inlines.
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	if tag == "-" || (f.Anonymous && tag == "") {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}
