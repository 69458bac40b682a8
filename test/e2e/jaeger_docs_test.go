//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// Documented commands are run as written, so that they cannot rot: the
// shell blocks of a markdown section are extracted and executed one after
// another, in the repository root, inside a network namespace of their own.
// The namespace gives them a loopback of their own, so the documents can use
// the ports a user has (8080, 4317, 16686, ...) without colliding with
// anything else on the machine, and nothing they start can reach past it.
//
// A block is run once and must exit 0, unless an HTML comment (invisible
// when the markdown is rendered) on the line before its fence says
// otherwise:
//
//	<!-- e2e: background until URL -->  started and left running (a server
//	                                     the user starts in a terminal of its
//	                                     own); the next block waits until
//	                                     `curl -sf URL` succeeds
//	<!-- e2e: background until printed TEXT -->
//	                                     the same, but the next block waits
//	                                     until the output holds TEXT (a
//	                                     script that says when it is ready,
//	                                     as the reader is told to wait for)
//	<!-- e2e: retry -->                  run again until it exits 0, for up
//	                                     to jaegerTraceTimeout (a query for spans
//	                                     still on their way)
//
// and a block preceded by <!-- e2e: output, abridged --> is an excerpt of
// the previous block's output. In a ```json block, every member and array
// element it shows must be in the real output, with the same value, except
// "doubleValue"s (measured times and rates), which need only be numbers; in
// a ```text block, every line it shows must be a line of the real output.
//
// Blocks in other languages (output shown as text) are not run. A block
// cannot be skipped: every command in a document that the tests read is run.

const (
	// docBackgroundTimeout bounds how long a background block may take to
	// answer: `go run` and `go tool` may compile first (seconds with a
	// warm build cache, as CI has after building the binaries).
	docBackgroundTimeout = 5 * time.Minute
	// docCommandTimeout bounds one foreground block.
	docCommandTimeout = 5 * time.Minute
)

// docBlock is one fenced code block of a document, with its directive.
type docBlock struct {
	line      int    // of the opening fence, 1-based, for messages
	lang      string // the fence's info string: sh, json, ...
	text      string
	directive string // the e2e: comment before the fence, without "e2e:"
}

// background reports, for a background block, the URL it is ready at or,
// when printed is true, the text it prints once ready.
func (b docBlock) background() (until string, printed, ok bool) {
	until, ok = strings.CutPrefix(b.directive, "background until ")
	if !ok {
		return "", false, false
	}
	if text, found := strings.CutPrefix(until, "printed "); found {
		return text, true, true
	}
	return until, false, true
}

// docReadSection returns the code blocks of the markdown file between the
// heading that reads heading (any level) and the next heading of the same
// or a higher level; heading "" means the whole file. found is false when
// the file has no such heading.
func docReadSection(t *testing.T, path, heading string) (blocks []docBlock, found bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := heading == ""
	level := 0
	var cur *docBlock
	var directive string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur != nil {
			if strings.TrimSpace(line) == "```" {
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			cur.text += line + "\n"
			continue
		}
		if h, ok := docHeadingOf(line); ok && heading != "" {
			if in && h.level <= level {
				break
			}
			if h.text == heading {
				in, found, level = true, true, h.level
			}
			continue
		}
		if !in {
			continue
		}
		trimmed := strings.TrimSpace(line)
		if d, ok := strings.CutPrefix(trimmed, "<!-- e2e:"); ok {
			directive = strings.TrimSpace(strings.TrimSuffix(d, "-->"))
			continue
		}
		if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
			cur = &docBlock{line: n, lang: strings.TrimSpace(lang), directive: directive}
			directive = ""
			continue
		}
		if trimmed != "" {
			// A directive applies to the fence right after it only.
			directive = ""
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: code block never closed", path, cur.line)
	}
	return blocks, found || heading == ""
}

type docHeading struct {
	level int
	text  string
}

func docHeadingOf(line string) (docHeading, bool) {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || !strings.HasPrefix(line[n:], " ") {
		return docHeading{}, false
	}
	return docHeading{level: n, text: strings.TrimSpace(line[n:])}, true
}

// docRun runs a document's shell blocks in a network namespace of its own.
type docRun struct {
	t      *testing.T
	path   string
	root   string
	holder *exec.Cmd // keeps the namespace alive; its pid names it
	// mountNS: the holder has a mount namespace too (its own /etc/hosts).
	mountNS bool
	env     []string
	bg      []*backgroundBlock
}

type backgroundBlock struct {
	block  docBlock
	cmd    *exec.Cmd
	out    *testbin.Buffer
	exited chan struct{}
}

// newDocRun creates the namespace, with its loopback up, and registers the
// teardown of everything started in it. hosts, if not nil, maps host names
// to addresses for the commands (a mount namespace of their own, with its
// own /etc/hosts): a document that names a real service can then be run
// against a stand-in for it.
func newDocRun(t *testing.T, path string, hosts map[string]string, env ...string) *docRun {
	t.Helper()
	root := testbin.RepoRoot(t)
	for _, tool := range []string{"unshare", "nsenter", "ip", "curl", "bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("running the documented commands needs %s (util-linux, iproute2, curl, bash, Go): %v", tool, err)
		}
	}
	holder := exec.Command("unshare", "--net", "sh", "-c", "ip link set lo up && echo up && exec sleep 86400")
	if hosts != nil {
		file := filepath.Join(t.TempDir(), "hosts")
		text := "127.0.0.1 localhost\n::1 localhost\n"
		for name, addr := range hosts {
			text += addr + " " + name + "\n"
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		holder = exec.Command("unshare", "--net", "--mount", "sh", "-c",
			`ip link set lo up && mount --bind "$1" /etc/hosts && echo up && exec sleep 86400`, "sh", file)
	}
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatalf("creating a network namespace with unshare: %v", err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "up\n" {
		_ = holder.Process.Kill()
		_ = holder.Wait()
		t.Fatalf("creating a network namespace (unshare --net, as root) and bringing its loopback up failed; "+
			"the documented commands are run in one so that their ports (8080, 4317, 16686, ...) collide with nothing: %q", line)
	}
	home := t.TempDir()
	d := &docRun{
		t: t, path: path, root: root, holder: holder, mountNS: hosts != nil,
		env: append(docEnvWithoutBinaries(testbin.Environ("OTEL_")),
			// Caddy saves its config and certificates under these; the
			// run leaves the user's own alone. Go's caches stay where
			// they are, so `go run` and `go tool` reuse CI's builds.
			"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
			"XDG_DATA_HOME="+filepath.Join(home, "data"),
			// There is no network in the namespace: a toolchain
			// download must fail at once, not time out.
			"GOTOOLCHAIN=local",
		),
	}
	d.env = append(d.env, env...)
	t.Cleanup(d.stop)
	return d
}

// docEnvWithoutBinaries drops the variables that point the examples' scripts at
// prebuilt binaries: a reader runs them without, so the documents are run
// without too (CI's builds are still reused through Go's build cache).
func docEnvWithoutBinaries(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "JAEGER_BINARY", "TOKENTAP_BINARY", "OTELCOL_BINARY", "TOKENTAP_REQUIRE_E2E":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// command is bash running text in the namespace, in the repository root,
// in a process group of its own.
func (d *docRun) command(ctx context.Context, text string) *exec.Cmd {
	args := []string{"--target", fmt.Sprint(d.holder.Process.Pid), "--net"}
	if d.mountNS {
		// Entering a mount namespace moves to its root directory; --wd
		// comes back to the repository.
		args = append(args, "--mount", "--wd="+d.root)
	}
	args = append(args, "--", "bash", "-euo", "pipefail", "-c", text)
	var cmd *exec.Cmd
	if ctx != nil {
		cmd = exec.CommandContext(ctx, "nsenter", args...)
		// The context kills nsenter's process group, not just bash.
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	} else {
		cmd = exec.Command("nsenter", args...)
	}
	cmd.Dir = d.root
	cmd.Env = d.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = jaegerStopTimeout
	return cmd
}

// run executes the blocks in order and returns each block's output (nil
// for background and non-shell blocks).
func (d *docRun) run(blocks []docBlock) [][]byte {
	t := d.t
	t.Helper()
	outputs := make([][]byte, len(blocks))
	ran := 0
	for i, b := range blocks {
		where := fmt.Sprintf("%s:%d", filepath.Base(d.path), b.line)
		switch {
		case b.directive == "output, abridged":
			if i == 0 || outputs[i-1] == nil {
				t.Fatalf("%s: an abridged output must follow a command that was run", where)
			}
			docCheckAbridged(t, where, b, outputs[i-1])
			continue
		case b.lang != "sh":
			if b.directive != "" {
				t.Fatalf("%s: directive %q on a %q block, which is not run", where, b.directive, b.lang)
			}
			continue
		}
		ran++
		if until, printed, ok := b.background(); ok {
			d.startBackground(where, b, until, printed)
			continue
		}
		switch b.directive {
		case "":
			outputs[i] = d.once(where, b)
		case "retry":
			// Spans arrive one by one: a query is retried until its
			// answer holds all that the document shows of it.
			var want *docBlock
			if i+1 < len(blocks) && blocks[i+1].directive == "output, abridged" {
				want = &blocks[i+1]
			}
			outputs[i] = d.retry(where, b, want)
		default:
			t.Fatalf("%s: unknown directive %q", where, b.directive)
		}
	}
	if ran == 0 {
		t.Fatalf("%s: no shell block to run", d.path)
	}
	return outputs
}

func (d *docRun) once(where string, b docBlock) []byte {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), docCommandTimeout)
	defer cancel()
	out, err := d.command(ctx, b.text).CombinedOutput()
	if err != nil {
		d.t.Fatalf("%s: %v\ncommand:\n%s\noutput:\n%s", where, err, b.text, out)
	}
	d.t.Logf("%s: ran\n%s", where, b.text)
	return out
}

// retry runs b until it exits 0 and, if want is not nil, its output
// contains the excerpt want; the caller checks the excerpt again, so that a
// mismatch at the deadline is reported with its difference.
func (d *docRun) retry(where string, b docBlock, want *docBlock) []byte {
	d.t.Helper()
	deadline := time.Now().Add(jaegerTraceTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), docCommandTimeout)
		out, err := d.command(ctx, b.text).CombinedOutput()
		cancel()
		if err == nil && (want == nil || docAbridgedIn(*want, out) == nil || time.Now().After(deadline)) {
			d.t.Logf("%s: ran\n%s", where, b.text)
			return out
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: still failing after %v: %v\ncommand:\n%s\noutput:\n%s", where, jaegerTraceTimeout, err, b.text, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (d *docRun) startBackground(where string, b docBlock, until string, printed bool) {
	d.t.Helper()
	bg := &backgroundBlock{block: b, cmd: d.command(nil, b.text), out: &testbin.Buffer{}, exited: make(chan struct{})}
	bg.cmd.Stdout, bg.cmd.Stderr = bg.out, bg.out
	if err := bg.cmd.Start(); err != nil {
		d.t.Fatalf("%s: %v", where, err)
	}
	go func() {
		_ = bg.cmd.Wait()
		close(bg.exited)
	}()
	d.bg = append(d.bg, bg)
	deadline := time.Now().Add(docBackgroundTimeout)
	// ready says whether the block is ready, and what it waited for.
	ready := func() (bool, string) {
		if printed {
			return strings.Contains(bg.out.String(), until), fmt.Sprintf("printed %q", until)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := d.command(ctx, "curl -sf -o /dev/null --max-time 2 "+docShellQuote(until)).Run()
		return err == nil, until + " answered"
	}
	for {
		ok, what := ready()
		if ok {
			d.t.Logf("%s: started; %s\n%s", where, what, b.text)
			return
		}
		select {
		case <-bg.exited:
			d.t.Fatalf("%s: exited before it %s\ncommand:\n%s\noutput:\n%s", where, what, b.text, bg.out.String())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: not %s within %v\ncommand:\n%s\noutput:\n%s", where, what, docBackgroundTimeout, b.text, bg.out.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stop ends the background blocks, latest first (as a reader would close
// the terminals: the proxy before the backend it reports to), then the
// namespace.
func (d *docRun) stop() {
	for i := len(d.bg) - 1; i >= 0; i-- {
		bg := d.bg[i]
		_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-bg.exited:
		case <-time.After(jaegerStopTimeout):
			d.t.Errorf("%s:%d did not stop within %v of SIGTERM; killed", filepath.Base(d.path), bg.block.line, jaegerStopTimeout)
		}
		// Whatever is left of its group (a child that outlived bash).
		_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGKILL)
		<-bg.exited
		if d.t.Failed() {
			d.t.Logf("output of %s:%d:\n%s", filepath.Base(d.path), bg.block.line, bg.out.String())
		}
	}
	_ = syscall.Kill(-d.holder.Process.Pid, syscall.SIGKILL)
	_ = d.holder.Wait()
}

// listen listens on addr inside the namespace, for a stand-in server run by
// the test itself: the socket is made on a thread moved into the namespace,
// and stays there whichever thread then serves it.
func (d *docRun) listen(addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: this thread leaves the test's namespace, so it
		// must end with this goroutine instead of serving others.
		runtime.LockOSThread()
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", d.holder.Process.Pid))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

func docShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// docCheckAbridged checks that the JSON excerpt want is contained in the JSON
// output got (see the package comment above).
func docCheckAbridged(t *testing.T, where string, want docBlock, got []byte) {
	t.Helper()
	if err := docAbridgedIn(want, got); err != nil {
		t.Errorf("%s: %v\nreal output:\n%s", where, err, got)
	}
}

// docAbridgedIn says how the excerpt want is not in the output got, or nil if
// it is.
func docAbridgedIn(want docBlock, got []byte) error {
	switch want.lang {
	case "json":
		return docJSONAbridgedIn(want.text, got)
	case "text":
		lines := map[string]bool{}
		for _, l := range strings.Split(string(got), "\n") {
			lines[strings.TrimRight(l, "\r")] = true
		}
		for _, l := range strings.Split(want.text, "\n") {
			if l != "" && !lines[l] {
				return fmt.Errorf("the documented line %q is not a line of the real output", l)
			}
		}
		return nil
	}
	return fmt.Errorf("an abridged output must be a json or text block, not %q", want.lang)
}

// docJSONAbridgedIn says how the JSON excerpt want is not in the JSON output
// got, or nil if it is.
func docJSONAbridgedIn(want string, got []byte) error {
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return fmt.Errorf("the abridged output is not JSON: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("the command's output is not JSON: %v", err)
	}
	if path, ok := docJSONContains(g, w, "$", false); !ok {
		return fmt.Errorf("the documented output is not in the real one; first difference at %s", path)
	}
	return nil
}

// docJSONContains reports whether got contains want: objects member by member,
// arrays element by element (each element of want in some element of got,
// in any order), scalars equal, except under a "doubleValue" key, where any
// number matches. path says where the first mismatch is.
func docJSONContains(got, want any, path string, measured bool) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return path + "." + k + " (missing)", false
			}
			if p, ok := docJSONContains(gv, wv, path+"."+k, k == "doubleValue"); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return path, false
		}
		for i, wv := range w {
			found := false
			deepest := ""
			for _, gv := range g {
				p, ok := docJSONContains(gv, wv, fmt.Sprintf("%s[%d]", path, i), measured)
				if ok {
					found = true
					break
				}
				if len(p) > len(deepest) {
					deepest = p
				}
			}
			if !found {
				return deepest, false
			}
		}
		return "", true
	case float64:
		if _, isNum := got.(float64); measured && isNum {
			return "", true
		}
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("%s (documented %v, got %v)", path, want, got), false
	}
	return "", true
}

// walkthroughPaths are where the walk-through is: the getting-started
// tutorial, which the README's quick start links to.
var walkthroughPaths = []string{"docs/getting-started.md"}

const walkthroughHeading = "From zero to a trace in Jaeger"

// TestJaegerWalkthrough runs the tutorial's "From zero to a trace in Jaeger"
// commands exactly as written: Jaeger from test/tools/jaeger, tokentap with the
// repository's Caddyfile, one curl through the simulator route, the trace
// read back with curl, and the abridged answer the walk-through shows
// checked against the real one.
func TestJaegerWalkthrough(t *testing.T) {
	// The same build as the other tests, through Go's build cache: without
	// it the first `go tool jaeger` would compile Jaeger for ten minutes.
	jaegerBinary(t)
	root := testbin.RepoRoot(t)
	var path string
	var blocks []docBlock
	for _, p := range walkthroughPaths {
		b, found := docReadSection(t, filepath.Join(root, p), walkthroughHeading)
		if found {
			path, blocks = filepath.Join(root, p), b
			break
		}
	}
	if path == "" {
		t.Fatalf("no section %q in %v", walkthroughHeading, walkthroughPaths)
	}
	checkWalkthroughShape(t, blocks)
	newDocRun(t, path, nil).run(blocks)
}

// checkWalkthroughShape holds the walk-through to its promise: it starts
// Jaeger from test/tools/jaeger and tokentap on the repository's Caddyfile, and
// reads a trace by id, with an answer shown (so a reader sees what to
// expect, and the test checks it).
func checkWalkthroughShape(t *testing.T, blocks []docBlock) {
	t.Helper()
	want := []struct{ what, text string }{
		{"Jaeger from the tools module", "go -C test/tools/jaeger tool jaeger"},
		{"tokentap on the repository's Caddyfile", "go run ./cmd/tokentap run"},
		{"a request through the simulator route", "localhost:8080/sim/"},
		{"the trace read by id", "/api/v3/traces/"},
	}
	all := ""
	abridged := false
	for _, b := range blocks {
		all += b.text
		abridged = abridged || b.directive == "output, abridged"
	}
	for _, w := range want {
		if !strings.Contains(all, w.text) {
			t.Errorf("the walk-through has no command for %s (%q)", w.what, w.text)
		}
	}
	if !abridged {
		t.Error("the walk-through shows no answer of Jaeger's (a json block after <!-- e2e: output, abridged -->)")
	}
}
