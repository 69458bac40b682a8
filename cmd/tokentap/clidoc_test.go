package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokentap/tokentap/internal/loadgen"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// modulePrefix is the package path prefix of tokentap's own code: a
// command whose function lives under it, or in this main package, is
// tokentap's, and any other is Caddy's.
const modulePrefix = "github.com/tokentap/tokentap/"

// TestCLIReference keeps docs/cli.md true to the commands the binary
// registers, so that the reference cannot drift from the code: the page
// documents exactly tokentap's commands, each with exactly its flags,
// their types and defaults, its usage line as its synopsis, which binary
// has it, and examples that parse with its flags.
func TestCLIReference(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testbin.RepoRoot(t), "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := parseCLIPage(t, string(src))
	cmds := tokentapCommands(t)

	t.Run("commands", func(t *testing.T) {
		for name := range cmds {
			if _, ok := page.sections[name]; !ok {
				t.Errorf("tokentap %s is registered but docs/cli.md has no section `tokentap %s`", name, name)
			}
		}
		for name := range page.sections {
			if _, ok := cmds[name]; !ok {
				t.Errorf("docs/cli.md documents tokentap %s, which is not one of tokentap's registered commands", name)
			}
		}
	})

	for name, c := range cmds {
		s, ok := page.sections[name]
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			checkSynopsis(t, c, s)
			checkFlags(t, c.cmd, s)
			checkExamples(t, cmds, s)
		})
	}

	t.Run("which binary", func(t *testing.T) {
		seen := map[string]bool{}
		for _, row := range page.binaries {
			for _, name := range row.commands {
				c, ok := cmds[name]
				if !ok {
					t.Errorf("the binaries table names %q, not a tokentap command", name)
					continue
				}
				seen[name] = true
				if row.tokentap != "yes" {
					t.Errorf("%s: the tokentap binary has every tokentap command, the table says %q", name, row.tokentap)
				}
				// A command registered outside package main comes with the
				// module, so an xcaddy build has it.
				want := "no"
				if c.withModule {
					want = "yes"
				}
				if row.xcaddy != want {
					t.Errorf("%s: registered in %s, so an xcaddy build's column should say %q, not %q", name, c.pkg, want, row.xcaddy)
				}
			}
		}
		for name := range cmds {
			if !seen[name] {
				t.Errorf("the binaries table does not say which binary has %s", name)
			}
		}
	})

	t.Run("commands named in prose", func(t *testing.T) {
		// Every `tokentap <command>` the page names is a command the
		// binary has, Caddy's or tokentap's.
		registered := caddycmd.Commands()
		for _, span := range page.spans {
			rest, ok := strings.CutPrefix(span, "tokentap ")
			if !ok {
				continue
			}
			name, _, _ := strings.Cut(rest, " ")
			if _, ok := registered[name]; !ok {
				t.Errorf("docs/cli.md names `%s`, but the binary has no command %q", span, name)
			}
		}
	})

	t.Run("figures", func(t *testing.T) {
		// The page's meanings state these values of the code: the code is
		// where they are decided, so a change there must reach the page.
		for _, f := range []struct{ command, flag, want string }{
			{"load", "concurrency", "0 means " + strconv.Itoa(loadgen.DefaultRateInFlight)},
			{"load", "max-tokens", strconv.Itoa(loadgen.DefaultAnthropicMaxTokens) + " for Anthropic"},
			{"load", "repeat", "(1 to " + strconv.Itoa(loadgen.MaxRepeat) + ")"},
			{"load", "requests", "neither `--requests` nor `--duration`, " + strconv.Itoa(defaultLoadRequests)},
		} {
			s, ok := page.sections[f.command]
			if !ok {
				continue
			}
			row, ok := s.flags[f.flag]
			if !ok {
				continue // checkFlags reports it
			}
			if !strings.Contains(row.meaning, f.want) {
				t.Errorf("tokentap %s --%s: the meaning should say %q, as the code has it:\n%s", f.command, f.flag, f.want, row.meaning)
			}
		}
		// Exit status: every command reports failure as 1.
		if caddy.ExitCodeFailedStartup != 1 {
			t.Errorf("caddy.ExitCodeFailedStartup = %d; the page says commands fail with status 1", caddy.ExitCodeFailedStartup)
		}
		if code, _ := failed(errors.New("x")); code != 1 {
			t.Errorf("failed() = %d; the page says commands fail with status 1", code)
		}
	})
}

// cliCommand is one of tokentap's commands, built as Caddy builds it.
type cliCommand struct {
	cmd        *cobra.Command
	synopsis   string // "tokentap " and its usage line
	pkg        string // the package its function is in
	withModule bool   // registered outside package main
	build      func() *cobra.Command
}

// tokentapCommands builds every registered command whose function is
// tokentap's, and their subcommands, by their path ("load compare").
func tokentapCommands(t *testing.T) map[string]cliCommand {
	t.Helper()
	out := map[string]cliCommand{}
	for name, c := range caddycmd.Commands() {
		var fn any = c.Func
		if c.CobraFunc != nil {
			fn = c.CobraFunc
		}
		pkg := funcPackage(fn)
		if pkg != "main" && !strings.HasPrefix(pkg, modulePrefix) {
			continue
		}
		// This package is main in the binary and its import path in a
		// test binary.
		inMain := pkg == "main" || pkg == modulePrefix+"cmd/tokentap"
		build := func() *cobra.Command {
			// As caddycmd builds a command from its registration.
			cmd := &cobra.Command{Use: c.Name + " " + c.Usage, Short: c.Short, Long: c.Long}
			if c.CobraFunc != nil {
				c.CobraFunc(cmd)
			} else {
				cmd.RunE = caddycmd.WrapCommandFuncForCobra(c.Func)
				if c.Flags != nil {
					cmd.Flags().AddGoFlagSet(c.Flags)
				}
			}
			return cmd
		}
		cmd := build()
		out[name] = cliCommand{
			cmd: cmd, synopsis: "tokentap " + cmd.Use,
			pkg: pkg, withModule: !inMain, build: build,
		}
		for _, sub := range cmd.Commands() {
			subName := name + " " + sub.Name()
			out[subName] = cliCommand{
				cmd: sub, synopsis: "tokentap " + name + " " + sub.Use,
				pkg: pkg, withModule: !inMain,
				build: func() *cobra.Command {
					for _, s := range build().Commands() {
						if s.Name() == sub.Name() {
							return s
						}
					}
					return nil
				},
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("found none of tokentap's commands among the registered ones")
	}
	return out
}

// funcPackage is the import path of the package fn is defined in: "main"
// for this package in the binary, its import path in a test binary.
func funcPackage(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	// github.com/tokentap/tokentap/caddymodule.init.func1: the package
	// ends at the first dot after the last slash.
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// checkSynopsis: the section's synopsis is the command's usage line, as
// `--help` prints it (wrapped as the page likes), and names every flag.
func checkSynopsis(t *testing.T, c cliCommand, s *cliSection) {
	t.Helper()
	if s.synopsis == "" {
		t.Errorf("no synopsis: the section's first code block should be %q", c.synopsis)
		return
	}
	if got, want := strings.Join(strings.Fields(s.synopsis), " "), strings.Join(strings.Fields(c.synopsis), " "); got != want {
		t.Errorf("synopsis differs from the usage line:\n page: %s\n code: %s", got, want)
	}
	named := map[string]bool{}
	for _, m := range flagInText.FindAllStringSubmatch(c.synopsis, -1) {
		named[m[1]] = true
	}
	c.cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !named[f.Name] {
			t.Errorf("the usage line does not name --%s", f.Name)
		}
		delete(named, f.Name)
	})
	for name := range named {
		t.Errorf("the usage line names --%s, which the command does not define", name)
	}
}

var flagInText = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)

// checkFlags: the section's table has exactly the command's flags, with
// their types and defaults.
func checkFlags(t *testing.T, cmd *cobra.Command, s *cliSection) {
	t.Helper()
	defined := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		defined[f.Name] = true
		row, ok := s.flags[f.Name]
		if !ok {
			t.Errorf("--%s (%s, default %q) is not in the page's table", f.Name, f.Value.Type(), f.DefValue)
			return
		}
		if row.typ != f.Value.Type() {
			t.Errorf("--%s: the page says type %q, the code %q", f.Name, row.typ, f.Value.Type())
		}
		want := f.DefValue
		if f.Name == "address" && strings.HasPrefix(s.command, "stats") {
			// Caddy's default admin address, which CADDY_ADMIN in the
			// test's environment would change as the page says.
			if _, set := os.LookupEnv("CADDY_ADMIN"); set {
				want = "localhost:2019"
			}
		}
		if row.def != want {
			t.Errorf("--%s: the page says default %q, the code %q", f.Name, row.def, want)
		}
	})
	for name := range s.flags {
		if !defined[name] {
			t.Errorf("the page documents --%s, which the command does not define", name)
		}
	}
}

// checkExamples: every example command of the section parses with the
// flags of the command it runs, each value of its flag's type.
func checkExamples(t *testing.T, cmds map[string]cliCommand, s *cliSection) {
	t.Helper()
	for _, line := range s.examples {
		args := shellWords(line)
		if len(args) < 2 || args[0] != "tokentap" {
			t.Errorf("example %q: not a tokentap command", line)
			continue
		}
		// The longest command path the words start with: load compare
		// before load.
		name := args[1]
		if len(args) > 2 {
			if _, ok := cmds[args[1]+" "+args[2]]; ok {
				name = args[1] + " " + args[2]
			}
		}
		c, ok := cmds[name]
		if !ok {
			t.Errorf("example %q: tokentap has no command %q", line, name)
			continue
		}
		cmd := c.build()
		if err := cmd.ParseFlags(args[1+len(strings.Fields(name)):]); err != nil {
			t.Errorf("example %q: %v", line, err)
		}
	}
}

// shellWords splits an example's arguments as a shell would, for the
// quoting the examples use, and drops a redirection and what follows.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	if i := slices.Index(words, ">"); i >= 0 {
		words = words[:i]
	}
	return words
}

// The page's machine-read shape: a section per command headed
// "## `tokentap <command>`", its first fenced block the synopsis, a table
// "| Flag | Type | Default | Meaning |" with a row per flag, its first
// cell the flag in a code span and its default a code span or "none",
// and its examples in ```sh blocks.
type cliPage struct {
	sections map[string]*cliSection
	binaries []binaryRow
	spans    []string // every inline code span, for the commands named
}

type cliSection struct {
	command  string
	synopsis string
	flags    map[string]flagRow
	examples []string // each command line, continuations joined
}

type flagRow struct{ typ, def, meaning string }

// binaryRow is a row of the "Which binary has which command" table.
type binaryRow struct {
	commands         []string
	tokentap, xcaddy string
}

var (
	sectionHeading = regexp.MustCompile("^## `tokentap ([a-z][a-z -]*)`$")
	codeSpan       = regexp.MustCompile("`([^`]+)`")
)

func parseCLIPage(t *testing.T, src string) cliPage {
	t.Helper()
	page := cliPage{sections: map[string]*cliSection{}}
	var (
		cur      *cliSection
		heading  string
		fenceTag string
		block    []string
		inFence  bool
	)
	for _, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(line, "```") {
			if !inFence {
				inFence, fenceTag, block = true, strings.TrimPrefix(line, "```"), nil
				continue
			}
			inFence = false
			if cur != nil {
				switch {
				case cur.synopsis == "" && fenceTag == "text":
					cur.synopsis = strings.Join(block, "\n")
				case fenceTag == "sh":
					cur.examples = append(cur.examples, commandLines(block)...)
				}
			}
			continue
		}
		if inFence {
			block = append(block, line)
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			page.spans = append(page.spans, m[1])
		}
		if strings.HasPrefix(line, "## ") {
			heading, cur = line, nil
			if m := sectionHeading.FindStringSubmatch(line); m != nil {
				if _, dup := page.sections[m[1]]; dup {
					t.Errorf("docs/cli.md has two sections for tokentap %s", m[1])
				}
				cur = &cliSection{command: m[1], flags: map[string]flagRow{}}
				page.sections[m[1]] = cur
			}
			continue
		}
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := tableCells(line)
		switch {
		case cur != nil && len(cells) == 4 && strings.HasPrefix(cells[0], "`--"):
			name := strings.TrimPrefix(strings.Trim(cells[0], "`"), "--")
			def := cells[2]
			if def == "none" {
				def = ""
			} else {
				def = strings.Trim(def, "`")
			}
			if _, dup := cur.flags[name]; dup {
				t.Errorf("tokentap %s: --%s documented twice", cur.command, name)
			}
			cur.flags[name] = flagRow{typ: cells[1], def: def, meaning: cells[3]}
		case heading == "## Which binary has which command" && len(cells) == 3 && strings.Contains(cells[0], "(#tokentap-"):
			row := binaryRow{tokentap: cells[1], xcaddy: cells[2]}
			for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
				row.commands = append(row.commands, m[1])
			}
			page.binaries = append(page.binaries, row)
		}
	}
	// An empty list flag's default prints as [].
	for _, s := range page.sections {
		for name, row := range s.flags {
			if row.def == "" && row.typ == "stringArray" {
				row.def = "[]"
				s.flags[name] = row
			}
		}
	}
	if len(page.sections) == 0 {
		t.Fatal("docs/cli.md has no section headed ## `tokentap <command>`")
	}
	if len(page.binaries) == 0 {
		t.Error(`docs/cli.md has no "Which binary has which command" table`)
	}
	return page
}

// tableCells splits a markdown table row into its trimmed cells; \| is a
// pipe within a cell.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	line = strings.ReplaceAll(line, `\|`, "\x00")
	cells := strings.Split(line, "|")
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(strings.TrimSpace(c), "\x00", "|")
	}
	return cells
}

// commandLines joins a shell block's continued lines and drops comments.
func commandLines(block []string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range block {
		line = strings.TrimSpace(line)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(strings.TrimSpace(cont) + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}
