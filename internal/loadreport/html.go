package loadreport

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tokentap/tokentap/internal/loadgen"
)

//go:embed report.html.tmpl report.css
var assets embed.FS

var (
	page = template.Must(template.ParseFS(assets, "report.html.tmpl"))
	css  = mustRead("report.css")
	// csp allows the page's own inline style and nothing else: no script,
	// no request of any kind, so the file shows the same offline, from a
	// mail attachment or a CI artefact store.
	csp = "default-src 'none'; style-src '" + hash(css) + "'; base-uri 'none'; form-action 'none'"
)

func mustRead(name string) string {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic(err) // embedded above
	}
	return string(b)
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// Write writes one self-contained HTML page of charts and tables of runs,
// titled title: per model (or, for one run, all its models together), time
// to first token and output tokens/s against the load level of sweeps,
// their distributions, and both over the time of each run; two runs or
// more are set side by side on the same axes, one colour per run.
func Write(w io.Writer, title string, runs []Run) error {
	if err := check(runs); err != nil {
		return err
	}
	if strings.TrimSpace(title) == "" {
		title = "tokentap load report"
	}
	v := view{Title: title, CSS: template.CSS(css), CSP: csp}
	for i, r := range runs {
		v.Runs = append(v.Runs, summarize(r, colour(i), len(runs) > 1))
		v.Data = append(v.Data, runData{Name: r.Name, Report: r.Report, Sweep: r.Sweep})
	}
	v.Panels = panels(runs)
	if err := page.Execute(w, v); err != nil {
		return fmt.Errorf("writing the HTML report: %w", err)
	}
	return nil
}

// view is what the template shows.
type view struct {
	Title  string
	CSS    template.CSS
	CSP    string
	Runs   []runSummary
	Panels []panel
	Data   []runData // embedded as JSON, the page's data for other tools
}

type runData struct {
	Name   string               `json:"name"`
	Report *loadgen.Report      `json:"report,omitempty"`
	Sweep  *loadgen.SweepReport `json:"sweep,omitempty"`
}

type runSummary struct {
	Name, Colour                 string
	Kind, Endpoint, Started, Ran string
}

type panel struct {
	ID, Title, Note string
	Figures         []figure
}

type figure struct {
	Chart   svgChart
	Legend  []legendEntry
	Note    string
	Table   table
	Details *table
}

type legendEntry struct {
	Name, Colour string
	Dashed       bool
}

type table struct {
	Caption string
	Head    []string
	Rows    [][]string
}

func summarize(r Run, c string, coloured bool) runSummary {
	s := runSummary{Name: r.Name}
	if coloured {
		s.Colour = c
	}
	ls := r.levels()
	first := ls[0].rep
	s.Endpoint = string(first.API) + " " + first.URL
	s.Started = first.Started.UTC().Format(time.RFC3339)
	requests, failed, elapsed := 0, 0, 0.0
	for _, l := range ls {
		requests += l.rep.Total.Requests
		failed += l.rep.Total.Failed
		elapsed += l.rep.Elapsed
	}
	s.Ran = fmt.Sprintf("%d requests (%d failed) in %.1f s", requests, failed, elapsed)
	if r.Sweep != nil {
		var vs []string
		for _, l := range ls {
			vs = append(vs, formatFloat(l.value))
		}
		s.Kind = "sweep over " + r.Sweep.Sweep + ": " + strings.Join(vs, ", ")
	} else if first.Rate > 0 {
		s.Kind = fmt.Sprintf("%s requests/s, at most %d in flight", formatFloat(first.Rate), first.Concurrency)
	} else {
		s.Kind = fmt.Sprintf("concurrency %d", first.Concurrency)
	}
	return s
}

// track is one line's worth of reports: a model of the run (one run), or
// a run's reports of one model (several runs), level by level.
type track struct {
	name   string
	colour string
	levels []trackLevel
}

type trackLevel struct {
	level
	offset float64 // seconds from the run's start to the level's
	m      *loadgen.ModelReport
}

// label names the track at l: its name, and the level in a sweep.
func (t track) label(l trackLevel) string {
	if l.param == "" {
		return t.name
	}
	return t.name + ", " + levelText(l.param, l.value)
}

// panels groups the runs: one panel of all models for one run, else one
// per model with a track per run, each run in its own colour throughout.
func panels(runs []Run) []panel {
	var models []string
	for _, r := range runs {
		for _, l := range r.levels() {
			for _, m := range l.rep.Models {
				if !slices.Contains(models, m.Model) {
					models = append(models, m.Model)
				}
			}
		}
	}
	if len(runs) == 1 {
		var tracks []track
		for i, m := range models {
			tracks = append(tracks, trackOf(runs[0], m, m, colour(i)))
		}
		title := "All models"
		if len(models) == 1 {
			title = models[0]
		}
		return []panel{{ID: "all", Title: title, Figures: figures(tracks)}}
	}
	var out []panel
	for _, m := range models {
		var tracks []track
		var missing []string
		for i, r := range runs {
			t := trackOf(r, m, r.Name, colour(i))
			if len(t.levels) == 0 {
				missing = append(missing, r.Name)
				continue
			}
			tracks = append(tracks, t)
		}
		p := panel{ID: "model-" + m, Title: m, Figures: figures(tracks)}
		if len(missing) > 0 {
			p.Note = "Not in " + strings.Join(missing, ", ") + "."
		}
		out = append(out, p)
	}
	return out
}

func trackOf(r Run, m, name, c string) track {
	t := track{name: name, colour: c}
	start := r.started()
	for _, l := range r.levels() {
		if mr := model(l.rep, m); mr != nil {
			t.levels = append(t.levels, trackLevel{level: l, offset: l.rep.Started.Sub(start).Seconds(), m: mr})
		}
	}
	return t
}

// metric is what a chart shows and how.
type metric struct {
	id, what, unit string
	axis           string  // the value axis's title, with the unit
	k              float64 // from the report's unit to the shown one
	q              func(*loadgen.ModelReport) loadgen.Quantiles
	cdf            func(*loadgen.Distribution) []loadgen.CDFPoint
	iq             func(*loadgen.Interval) loadgen.Quantiles
}

var metrics = []metric{
	{
		id: "ttft", what: "Time to first token", unit: "ms", k: 1e3, axis: "time to first token (ms)",
		q:   func(m *loadgen.ModelReport) loadgen.Quantiles { return m.TimeToFirstToken },
		cdf: func(d *loadgen.Distribution) []loadgen.CDFPoint { return d.TimeToFirstToken },
		iq:  func(iv *loadgen.Interval) loadgen.Quantiles { return iv.TimeToFirstToken },
	},
	{
		id: "tps", what: "Output tokens/s", unit: "tokens/s", k: 1, axis: "output rate per request (tokens/s)",
		q:   func(m *loadgen.ModelReport) loadgen.Quantiles { return m.OutputTokensPerSecond },
		cdf: func(d *loadgen.Distribution) []loadgen.CDFPoint { return d.OutputTokensPerSecond },
		iq:  func(iv *loadgen.Interval) loadgen.Quantiles { return iv.OutputTokensPerSecond },
	},
}

// figures are a panel's charts: against load level when a track sweeps,
// then the distributions, then over time.
func figures(tracks []track) []figure {
	var out []figure
	if param := sweepParam(tracks); param != "" {
		for _, m := range metrics {
			out = append(out, loadFigure(tracks, param, m))
		}
	}
	for _, m := range metrics {
		out = append(out, cdfFigure(tracks, m))
	}
	for _, m := range metrics {
		out = append(out, timeFigure(tracks, m))
	}
	return out
}

// sweepParam is the first sweeping track's parameter, or "".
func sweepParam(tracks []track) string {
	for _, t := range tracks {
		for _, l := range t.levels {
			if l.param != "" {
				return l.param
			}
		}
	}
	return ""
}

// value is q's p50 or p95 in the shown unit, NaN without samples.
func value(q loadgen.Quantiles, p95 bool, k float64) float64 {
	if q.Count == 0 {
		return math.NaN()
	}
	if p95 {
		return q.P95 * k
	}
	return q.P50 * k
}

func cell(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

func quantileLegend() []legendEntry {
	return []legendEntry{{Name: "p50", Colour: "#5d6673"}, {Name: "p95", Colour: "#5d6673", Dashed: true}}
}

// loadFigure is a metric's p50 and p95 against the sweep's levels, evenly
// spaced since sweeps usually double their levels.
func loadFigure(tracks []track, param string, m metric) figure {
	f := figure{Chart: svgChart{
		ID: "load-" + m.id, Title: m.what + " against " + param,
		XLabel: levelAxis(param), YLabel: m.axis,
	}}
	f.Table = table{Caption: m.what + " by " + param, Head: []string{"", param, "p50 " + m.unit, "p95 " + m.unit, "ok", "failed"}}
	var values []float64
	var skipped []string
	for _, t := range tracks {
		for _, l := range t.levels {
			if l.param == param && !slices.Contains(values, l.value) {
				values = append(values, l.value)
			}
		}
	}
	slices.Sort(values)
	var lines []series
	hi := 0.0
	for _, t := range tracks {
		var p50, p95 []xy
		for _, l := range t.levels {
			if l.param != param {
				continue
			}
			x := float64(slices.Index(values, l.value))
			q := m.q(l.m)
			a, b := value(q, false, m.k), value(q, true, m.k)
			p50 = append(p50, xy{x, a, fmt.Sprintf("%s at %s: p50 %s %s", t.name, levelText(param, l.value), cell(a), m.unit)})
			p95 = append(p95, xy{x, b, fmt.Sprintf("%s at %s: p95 %s %s", t.name, levelText(param, l.value), cell(b), m.unit)})
			if !math.IsNaN(b) {
				hi = math.Max(hi, b)
			}
			f.Table.Rows = append(f.Table.Rows, []string{t.name, formatFloat(l.value), cell(a), cell(b), fmt.Sprint(l.m.Succeeded), fmt.Sprint(l.m.Failed)})
		}
		if len(p50) == 0 {
			skipped = append(skipped, t.name)
			continue
		}
		lines = append(lines, series{name: t.name + " p50", colour: t.colour, pts: p50}, series{name: t.name + " p95", colour: t.colour, dashed: true, pts: p95})
		f.Legend = append(f.Legend, legendEntry{Name: t.name, Colour: t.colour})
	}
	f.Legend = append(f.Legend, quantileLegend()...)
	if len(skipped) > 0 {
		f.Note = "Not a sweep over " + param + ": " + strings.Join(skipped, ", ") + "."
	}
	top, yt := linearTicks(hi, 4, number)
	s := scale{x0: -0.5, x1: float64(len(values)) - 0.5, y0: 0, y1: top}
	var xt []tick
	for i, v := range values {
		xt = append(xt, tick{Pos: float64(i), Label: formatFloat(v)})
	}
	f.Chart.XTicks, f.Chart.YTicks = placeTicks(xt, s.px), placeTicks(yt, s.py)
	f.Chart.draw(s, lines)
	if len(f.Chart.Lines) == 0 {
		f.Chart.Empty = "No " + strings.ToLower(m.what) + " measured at any level."
	}
	return f
}

func levelAxis(param string) string {
	if param == "rate" {
		return "load (requests/s)"
	}
	return "load (concurrent clients)"
}

// cdfProbabilities are the table's columns: the body, the tail and the
// slowest (or fastest) request.
var cdfProbabilities = []float64{0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1}

// cdfAxisP is the highest probability whose value the CDF's axis must
// reach: one slow request in a thousand would otherwise squeeze every
// curve into the axis's first tenth. The lines run on to the axis's end.
const cdfAxisP = 0.99

// cdfFigure is a metric's distribution: the share of requests at or under
// each value, a line per track and level.
func cdfFigure(tracks []track, m metric) figure {
	f := figure{Chart: svgChart{
		ID: "cdf-" + m.id, Title: m.what + ", cumulative distribution",
		XLabel: m.axis, YLabel: "requests at or under (%)",
	}}
	f.Table = table{Caption: m.what + " (" + m.unit + ") under which each share of requests was", Head: []string{"", "requests"}}
	for _, p := range cdfProbabilities {
		if p == 1 {
			f.Table.Head = append(f.Table.Head, "max")
			continue
		}
		f.Table.Head = append(f.Table.Head, "p"+formatFloat(p*100))
	}
	many := false
	for _, t := range tracks {
		many = many || len(t.levels) > 1
	}
	var lines []series
	hi, tail := 0.0, 0.0
	for _, t := range tracks {
		for _, l := range t.levels {
			var pts []loadgen.CDFPoint
			if l.m.Distribution != nil {
				pts = m.cdf(l.m.Distribution)
			}
			name := t.label(l)
			if len(pts) == 0 {
				continue
			}
			c := t.colour
			if many {
				c = colour(len(lines))
			}
			s := series{name: name, colour: c}
			row := []string{name, fmt.Sprint(m.q(l.m).Count)}
			for _, p := range pts {
				v := p.Value * m.k
				if p.P <= cdfAxisP {
					hi = math.Max(hi, v)
				}
				tail = math.Max(tail, v)
				s.pts = append(s.pts, xy{v, p.P, fmt.Sprintf("%s: %s%% at or under %s %s", name, formatFloat(p.P*100), cell(v), m.unit)})
			}
			for _, want := range cdfProbabilities {
				v := math.NaN()
				for _, p := range pts {
					if p.P == want {
						v = p.Value * m.k
					}
				}
				row = append(row, cell(v))
			}
			lines = append(lines, s)
			f.Table.Rows = append(f.Table.Rows, row)
			f.Legend = append(f.Legend, legendEntry{Name: name, Colour: c})
		}
	}
	top, xt := linearTicks(hi*1.05, 5, number)
	s := scale{x0: 0, x1: top, y0: 0, y1: 1}
	if tail > top {
		f.Note = "The axis ends past the largest p99: values beyond it are drawn at its end, and given in the tooltips and the table."
	}
	yt := []tick{{0, "0"}, {0.25, "25"}, {0.5, "50"}, {0.75, "75"}, {1, "100"}}
	f.Chart.XTicks, f.Chart.YTicks = placeTicks(xt, s.px), placeTicks(yt, s.py)
	f.Chart.draw(s, lines)
	if len(f.Chart.Lines) == 0 {
		f.Chart.Empty = "No distribution of " + strings.ToLower(m.what) + ": no request completed, or the report is older than its distribution field."
	}
	return f
}

// timeFigure is a metric's p50 and p95 per interval over each run's time,
// a sweep's levels one after the other as they ran.
func timeFigure(tracks []track, m metric) figure {
	f := figure{Chart: svgChart{
		ID: "time-" + m.id, Title: m.what + " over the run's time",
		XLabel: "time since the run's start (s)", YLabel: m.axis,
	}}
	f.Table = table{Caption: m.what + " (" + m.unit + ") over time: the lowest and highest of the intervals' p50", Head: []string{"", "intervals", "requests", "failed", "lowest p50", "highest p50"}}
	details := &table{Caption: "Each interval", Head: []string{"", "from s", "to s", "requests", "failed", "p50 " + m.unit, "p95 " + m.unit}}
	// The first sweeping track's levels are marked where they began.
	var markers []tick
	for _, t := range tracks {
		if t.levels[0].param == "" {
			continue
		}
		for _, l := range t.levels {
			markers = append(markers, tick{Pos: l.offset, Label: levelText(l.param, l.value)})
		}
		if len(tracks) > 1 {
			f.Note = "The vertical lines mark where " + t.name + "'s levels began."
		}
		break
	}
	var lines []series
	hi, end := 0.0, 0.0
	for _, t := range tracks {
		var p50, p95 []xy
		for _, l := range t.levels {
			tl := l.m.Timeline
			if tl == nil || len(tl.Intervals) == 0 {
				continue
			}
			lo, top := math.Inf(1), math.Inf(-1)
			requests, failed := 0, 0
			for i := range tl.Intervals {
				iv := &tl.Intervals[i]
				q := m.iq(iv)
				a, b := value(q, false, m.k), value(q, true, m.k)
				x := l.offset + (iv.StartSeconds+iv.EndSeconds)/2
				p50 = append(p50, xy{x, a, fmt.Sprintf("%s, %.1f–%.1f s: p50 %s %s, %d requests", t.label(l), l.offset+iv.StartSeconds, l.offset+iv.EndSeconds, cell(a), m.unit, iv.Requests)})
				p95 = append(p95, xy{x, b, fmt.Sprintf("%s, %.1f–%.1f s: p95 %s %s", t.label(l), l.offset+iv.StartSeconds, l.offset+iv.EndSeconds, cell(b), m.unit)})
				end = math.Max(end, l.offset+iv.EndSeconds)
				if !math.IsNaN(b) {
					hi = math.Max(hi, b)
				}
				if !math.IsNaN(a) {
					lo, top = math.Min(lo, a), math.Max(top, a)
				}
				requests += iv.Requests
				failed += iv.Failed
				details.Rows = append(details.Rows, []string{t.label(l), fmt.Sprintf("%.1f", l.offset+iv.StartSeconds), fmt.Sprintf("%.1f", l.offset+iv.EndSeconds), fmt.Sprint(iv.Requests), fmt.Sprint(iv.Failed), cell(a), cell(b)})
			}
			if math.IsInf(lo, 0) {
				lo, top = math.NaN(), math.NaN()
			}
			f.Table.Rows = append(f.Table.Rows, []string{t.label(l), fmt.Sprintf("%d × %s s", len(tl.Intervals), formatFloat(tl.IntervalSeconds)), fmt.Sprint(requests), fmt.Sprint(failed), cell(lo), cell(top)})
			// A level's line ends where the next begins.
			p50 = append(p50, xy{math.NaN(), math.NaN(), ""})
			p95 = append(p95, xy{math.NaN(), math.NaN(), ""})
		}
		if len(p50) == 0 {
			continue
		}
		lines = append(lines, series{name: t.name + " p50", colour: t.colour, pts: p50}, series{name: t.name + " p95", colour: t.colour, dashed: true, pts: p95})
		f.Legend = append(f.Legend, legendEntry{Name: t.name, Colour: t.colour})
	}
	f.Legend = append(f.Legend, quantileLegend()...)
	xTop, xt := linearTicks(end, 5, number)
	yTop, yt := linearTicks(hi, 4, number)
	s := scale{x0: 0, x1: xTop, y0: 0, y1: yTop}
	f.Chart.XTicks, f.Chart.YTicks = placeTicks(xt, s.px), placeTicks(yt, s.py)
	f.Chart.Markers = placeTicks(markers, s.px)
	f.Chart.draw(s, lines)
	if len(f.Chart.Lines) == 0 {
		f.Chart.Empty = "No timeline of " + strings.ToLower(m.what) + ": no request finished, or the report is older than its timeline field."
		return f
	}
	f.Details = details
	return f
}
