package loadreport

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tokentap/tokentap/internal/testutil/headless"
)

// The HTML report is opened in a real headless Chromium, as the live
// page is (internal/headless). It is self-contained, so a warning counts as
// a problem and so does any request it makes.

// step is how long one browser step may take.
const step = 30 * time.Second

// drawnChart is a chart as Chromium laid it out.
type drawnChart struct {
	Panel  string   `json:"panel"`
	Chart  string   `json:"chart"`
	Lines  []line   `json:"lines"`
	Points int      `json:"points"`
	XTitle string   `json:"xTitle"`
	YTitle string   `json:"yTitle"`
	Ticks  int      `json:"ticks"`
	Legend []string `json:"legend"`
	Width  float64  `json:"width"`
	Empty  bool     `json:"empty"`
}

type line struct {
	Stroke   string  `json:"stroke"`
	Vertices int     `json:"vertices"`
	Length   float64 `json:"length"`
}

const readCharts = `[...document.querySelectorAll('figure[data-chart]')].map(f => {
	const svg = f.querySelector('svg.chart');
	return {
		panel: f.closest('section.panel').dataset.panel,
		chart: f.dataset.chart,
		lines: [...svg.querySelectorAll('path.series')].map(p => ({
			stroke: p.getAttribute('stroke'),
			vertices: (p.getAttribute('d').match(/[ML]/g) || []).length,
			length: p.getTotalLength(),
		})),
		points: svg.querySelectorAll('circle').length,
		xTitle: svg.querySelector('text.x-title').textContent,
		yTitle: svg.querySelector('text.y-title').textContent,
		ticks: svg.querySelectorAll('text.tick').length,
		legend: [...f.querySelectorAll('.legend li')].map(li => li.textContent),
		width: svg.getBoundingClientRect().width,
		empty: !!svg.querySelector('text.empty'),
	};
})`

// units are what the axes may be in.
var units = []string{"ms", "s", "%", "tokens/s", "concurrent clients", "requests/s"}

func TestBrowserReport(t *testing.T) {
	tb := headless.Open(t, headless.Options{Warnings: true, NetworkErrors: true})
	for _, tc := range []struct {
		name   string
		file   string
		runs   []Run
		panels map[string][]string // panel -> the names every legend of its charts has
		charts int
	}{
		{
			name:   "a sweep of two models",
			file:   "sweep",
			runs:   []Run{{Name: "sweep", Sweep: fakeSweep([]int{1, 2, 4, 8}, fast, slow)}},
			panels: map[string][]string{"All models": {"fast", "slow"}},
			charts: 6,
		},
		{
			name: "recorded and candidate side by side",
			file: "compare",
			runs: []Run{
				{Name: "recorded", Report: fakeReport(t0, 4, fast, slow)},
				{Name: "candidate", Report: fakeReport(t0.Add(time.Hour), 4, speed{model: "fast", ttft: 0.15, tps: 90}, speed{model: "slow", ttft: 0.5, tps: 50})},
			},
			panels: map[string][]string{"fast": {"recorded", "candidate"}, "slow": {"recorded", "candidate"}},
			charts: 8,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file+".html")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := Write(f, "tokentap load: "+tc.name, tc.runs); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			tb.Reset()
			url := "file://" + path
			headless.Run(t, tb, "opening "+url, step, chromedp.Navigate(url))
			headless.Run(t, tb, "the page to load", step, chromedp.Poll[bool](`document.readyState === 'complete'`, chromedp.WithPollingTimeout(20*time.Second)))

			charts := headless.Run(t, tb, "reading the charts", step, chromedp.Evaluate[[]drawnChart](readCharts))
			if len(charts) != tc.charts {
				t.Errorf("%d charts, want %d", len(charts), tc.charts)
			}
			for _, c := range charts {
				name := c.Panel + "/" + c.Chart
				if c.Empty || len(c.Lines) == 0 || c.Points == 0 {
					t.Errorf("%s: not drawn (%d lines, %d points)", name, len(c.Lines), c.Points)
				}
				for _, l := range c.Lines {
					if l.Vertices < 2 || !(l.Length > 0) {
						t.Errorf("%s: a line of %d points, %g px long", name, l.Vertices, l.Length)
					}
				}
				for _, title := range []string{c.XTitle, c.YTitle} {
					if !slices.ContainsFunc(units, func(u string) bool { return strings.HasSuffix(title, " ("+u+")") }) {
						t.Errorf("%s: the axis %q does not give its unit", name, title)
					}
				}
				if c.Ticks < 6 {
					t.Errorf("%s: %d tick labels", name, c.Ticks)
				}
				if c.Width < 400 {
					t.Errorf("%s: %g px wide on a 1366 px screen", name, c.Width)
				}
				want, ok := tc.panels[c.Panel]
				if !ok {
					t.Errorf("%s: an unexpected panel", name)
				}
				for _, w := range want {
					if !slices.ContainsFunc(c.Legend, func(l string) bool { return l == w || strings.HasPrefix(l, w+", ") }) {
						t.Errorf("%s: the legend %q does not name %q", name, c.Legend, w)
					}
				}
			}

			// What the window shows, kept, and each chart of the first
			// panel: its lines must be on screen in their colours.
			tb.Screenshot(t, "loadreport-"+tc.file+".png")
			for i, c := range charts {
				if c.Panel != charts[0].Panel {
					break
				}
				sel := chromedp.CSSAll(`figure[data-chart] svg.chart`)
				nodes := headless.Run(t, tb, "finding the charts", step, chromedp.Nodes(sel))
				img := headless.Run(t, tb, "screenshot of "+c.Chart, step, chromedp.ScreenshotNodes(nodes[i:i+1], 1))
				colours, err := pngColours(img)
				if err != nil {
					t.Fatalf("%s: %v", c.Chart, err)
				}
				if len(colours) < 8 {
					t.Errorf("%s: %d colours on screen: blank", c.Chart, len(colours))
				}
				for _, l := range c.Lines {
					if !nearColour(colours, l.Stroke) {
						t.Errorf("%s: no pixel of its line colour %s on screen", c.Chart, l.Stroke)
					}
				}
			}

			// Nothing went to the network, nothing was logged.
			time.Sleep(200 * time.Millisecond) // events still on their way
			for _, r := range tb.Requests() {
				if r != url {
					t.Errorf("the page requested %s", r)
				}
			}
			tb.CheckClean(t)
		})
	}
}

// pngColours are the distinct colours of a PNG, as #rrggbb.
func pngColours(b []byte) (map[string]int, error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return colours(img), nil
}

func colours(img image.Image) map[string]int {
	out := map[string]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			out[hex(r>>8, g>>8, b>>8)]++
		}
	}
	return out
}

func hex(r, g, b uint32) string {
	return "#" + strconv.FormatUint(uint64(r<<16|g<<8|b)|1<<24, 16)[1:]
}

// nearColour reports whether some pixel is within a small distance of
// want (#rrggbb): antialiasing blends a 2 px line's edges, not its core.
func nearColour(have map[string]int, want string) bool {
	w, err := strconv.ParseUint(strings.TrimPrefix(want, "#"), 16, 32)
	if err != nil {
		return false
	}
	wr, wg, wb := int(w>>16), int(w>>8&0xff), int(w&0xff)
	for c := range have {
		v, _ := strconv.ParseUint(c[1:], 16, 32)
		r, g, b := int(v>>16), int(v>>8&0xff), int(v&0xff)
		if abs(r-wr)+abs(g-wg)+abs(b-wb) <= 24 {
			return true
		}
	}
	return false
}

func abs(v int) int { return max(v, -v) }
