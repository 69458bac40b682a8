package loadreport

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// palette is Okabe-Ito without its yellow, as on the live page: colours
// that stay distinct for the common kinds of colour blindness. Lines are
// also told apart by their legend and, for p95, by a dash, never by colour
// alone.
var palette = []string{"#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#7f6a00", "#6e6e6e"}

func colour(i int) string { return palette[i%len(palette)] }

// The chart's frame, in the SVG's own units; CSS scales it to the width.
const (
	chartW      = 560
	chartH      = 260
	plotLeft    = 62
	plotRight   = chartW - 14
	plotTop     = 12
	plotBottom  = chartH - 46
	pointRadius = 2.5
)

// svgChart is a line chart ready for the template: everything in pixels.
type svgChart struct {
	ID             string // the figure's data-chart name, for tests and links
	Title          string // the SVG's title, read by screen readers
	XLabel, YLabel string // what the axes measure, with units
	XTicks, YTicks []tick
	Lines          []svgLine
	Markers        []tick // vertical lines at x, labelled: where a sweep's levels begin
	Empty          string // shown instead of lines when there is no data
}

type tick struct {
	Pos   float64
	Label string
}

type svgLine struct {
	Name   string
	Colour string
	Dashed bool
	D      string // the path
	Points []svgPoint
}

type svgPoint struct {
	X, Y  float64
	Title string // the tooltip: the line's name and the value
}

// series is a line in data units before scaling; a NaN y breaks it.
type series struct {
	name   string
	colour string
	dashed bool
	pts    []xy
}

type xy struct {
	x, y  float64
	title string
}

// Plot edges as numbers, for the template's axis lines.
func (svgChart) Left() float64   { return plotLeft }
func (svgChart) Right() float64  { return plotRight }
func (svgChart) Top() float64    { return plotTop }
func (svgChart) Bottom() float64 { return plotBottom }
func (svgChart) Width() int      { return chartW }
func (svgChart) Height() int     { return chartH }

// XLabelX and friends place the axis titles.
func (svgChart) XLabelX() float64 { return (plotLeft + plotRight) / 2 }
func (svgChart) XLabelY() float64 { return chartH - 8 }
func (svgChart) YLabelY() float64 { return (plotTop + plotBottom) / 2 }

// scale maps data to pixels on both axes.
type scale struct {
	x0, x1, y0, y1 float64
}

func (s scale) px(v float64) float64 {
	return plotLeft + (plotRight-plotLeft)*(v-s.x0)/(s.x1-s.x0)
}

func (s scale) py(v float64) float64 {
	return plotBottom - (plotBottom-plotTop)*(v-s.y0)/(s.y1-s.y0)
}

// draw scales lines into c.
func (c *svgChart) draw(s scale, lines []series) {
	for _, l := range lines {
		out := svgLine{Name: l.name, Colour: l.colour, Dashed: l.dashed}
		var d strings.Builder
		pen := false
		for _, p := range l.pts {
			if math.IsNaN(p.y) || math.IsNaN(p.x) {
				pen = false
				continue
			}
			// A value past the axis is drawn at its end; its tooltip
			// and the table give it.
			x, y := s.px(math.Min(p.x, s.x1)), s.py(math.Min(p.y, s.y1))
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", cmd, x, y)
			pen = true
			out.Points = append(out.Points, svgPoint{X: round1(x), Y: round1(y), Title: p.title})
		}
		out.D = d.String()
		if len(out.Points) > 0 {
			c.Lines = append(c.Lines, out)
		}
	}
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// niceStep is an axis step of 1, 2 or 5 times a power of ten, so that
// about count steps span span.
func niceStep(span float64, count int) float64 {
	raw := span / float64(max(1, count))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f <= 1:
		return mag
	case f <= 2:
		return 2 * mag
	case f <= 5:
		return 5 * mag
	}
	return 10 * mag
}

// linearTicks is an axis from 0 to a round number at or over hi, with its
// ticks labelled by format.
func linearTicks(hi float64, count int, format func(float64) string) (float64, []tick) {
	if !(hi > 0) || math.IsInf(hi, 0) {
		hi = 1
	}
	step := niceStep(hi, count)
	top := math.Ceil(hi/step-1e-9) * step
	var ts []tick
	for i := 0; float64(i)*step <= top+step/2; i++ {
		v := float64(i) * step // not a running sum, whose rounding errors add up
		ts = append(ts, tick{Pos: v, Label: format(v)})
	}
	return top, ts
}

// number writes a tick's value without the zeros it does not need.
func number(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// placeTicks turns tick values into pixels on the x (or y) axis.
func placeTicks(ts []tick, at func(float64) float64) []tick {
	out := make([]tick, len(ts))
	for i, t := range ts {
		out[i] = tick{Pos: round1(at(t.Pos)), Label: t.Label}
	}
	return out
}
