package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// plotSeries is one named curve.
type plotSeries struct {
	Name   string
	Points []point
}

// chart is one panel of the SVG.
type chart struct {
	Title, XLabel, YLabel string
	XLog, YLog            bool
	Series                []plotSeries
}

var palette = []string{
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
	"#393b79", "#ad494a", "#637939", "#843c39",
}

const (
	chartW, chartH = 900, 380
	marginL        = 80
	marginR        = 190 // legend
	marginT        = 40
	marginB        = 50
)

// writePlot writes the -plot SVG: throughput over time of every scenario, and the
// latency distributions (CDFs) of the scenarios that measure one.
func writePlot(path string, results []*result, title string) error {
	var thr, lat []plotSeries
	for _, r := range results {
		name := r.Scenario
		if r.Round > 0 {
			name = fmt.Sprintf("%s #%d", name, r.Round)
		}
		if pts := rates(r.Series); len(pts) > 0 {
			thr = append(thr, plotSeries{name, pts})
		}
		if len(r.Latencies) > 0 {
			lat = append(lat, plotSeries{name, cdf(r.Latencies, 300)})
		}
	}
	charts := []chart{{
		Title: "Throughput over time (jobs/s per " + sampleInterval.String() + " sample)", XLabel: "seconds since the timed part began",
		YLabel: "jobs/s", YLog: true, Series: thr,
	}}
	if len(lat) > 0 {
		charts = append(charts, chart{
			Title:  "Latency distribution (CDF): enqueue commit -> handler start; insert_single: the insert call",
			XLabel: "milliseconds (log scale)", YLabel: "fraction of jobs",
			XLog: true, Series: lat,
		})
	}
	svg := renderSVG(title, charts)
	if err := os.WriteFile(path, svg, 0o644); err != nil {
		return fmt.Errorf("failed to write the plot: %w", err)
	}
	return nil
}

// cdf returns at most n points (latency ms, fraction at or below it).
func cdf(d []time.Duration, n int) []point {
	s := slices.Clone(d)
	slices.Sort(s)
	step := max(1, len(s)/n)
	var pts []point
	for i := 0; i < len(s); i += step {
		pts = append(pts, point{float64(s[i]) / float64(time.Millisecond), float64(i+1) / float64(len(s))})
	}
	last := s[len(s)-1]
	pts = append(pts, point{float64(last) / float64(time.Millisecond), 1})
	return pts
}

func renderSVG(title string, charts []chart) []byte {
	var b bytes.Buffer
	totalH := 40 + len(charts)*(chartH+20)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", chartW, totalH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, esc(title))
	for i, c := range charts {
		renderChart(&b, c, 40+i*(chartH+20))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// axis maps data values to pixels, linearly or in log10.
type axis struct {
	lo, hi     float64 // data range (already log10 when log)
	log        bool
	pxLo, pxHi float64
}

func newAxis(vals []float64, log bool, pxLo, pxHi float64) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if log {
			if v <= 0 {
				continue
			}
			v = math.Log10(v)
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if log {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	} else {
		lo = math.Min(lo, 0)
	}
	if hi <= lo {
		hi = lo + 1
	}
	return axis{lo: lo, hi: hi, log: log, pxLo: pxLo, pxHi: pxHi}
}

// px maps v to a pixel; ok is false for values a log axis cannot show.
func (a axis) px(v float64) (float64, bool) {
	if a.log {
		if v <= 0 {
			return 0, false
		}
		v = math.Log10(v)
	}
	return a.pxLo + (v-a.lo)/(a.hi-a.lo)*(a.pxHi-a.pxLo), true
}

// ticks returns tick values in data units.
func (a axis) ticks() []float64 {
	var t []float64
	if a.log {
		for e := a.lo; e <= a.hi+1e-9; e++ {
			t = append(t, math.Pow(10, e))
		}
		return t
	}
	step := niceStep((a.hi - a.lo) / 5)
	for v := math.Ceil(a.lo/step) * step; v <= a.hi+step*1e-9; v += step {
		t = append(t, v)
	}
	return t
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case math.Abs(v) >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	default:
		return fmt.Sprintf("%g", math.Round(v*1000)/1000)
	}
}

func renderChart(b *bytes.Buffer, c chart, top int) {
	left, right := float64(marginL), float64(chartW-marginR)
	y0, y1 := float64(top+chartH-marginB), float64(top+marginT)
	var xs, ys []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			xs = append(xs, p.X)
			ys = append(ys, p.Y)
		}
	}
	xa := newAxis(xs, c.XLog, left, right)
	ya := newAxis(ys, c.YLog, y0, y1)

	fmt.Fprintf(b, `<g>`+"\n")
	fmt.Fprintf(b, `<text x="%g" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", left, top+22, esc(c.Title))
	// Grid, ticks and labels.
	for _, t := range xa.ticks() {
		if x, ok := xa.px(t); ok {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, x, y0, x, y1)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+16, fmtTick(t))
		}
	}
	for _, t := range ya.ticks() {
		if y, ok := ya.px(t); ok {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, left, y, right, y)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, fmtTick(t))
		}
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", left, y1, right-left, y0-y1)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (left+right)/2, y0+36, esc(c.XLabel))
	fmt.Fprintf(b, `<text transform="translate(%.1f,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", left-58, (y0+y1)/2, esc(c.YLabel))
	if len(c.Series) == 0 {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#888">no data</text>`+"\n", (left+right)/2, (y0+y1)/2)
	}

	// Curves and legend.
	for i, s := range c.Series {
		color := palette[i%len(palette)]
		var pts []string
		for _, p := range s.Points {
			x, okx := xa.px(p.X)
			y, oky := ya.px(p.Y)
			if okx && oky {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			}
		}
		if len(pts) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		}
		ly := y1 + 8 + float64(i)*18
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`, right+12, ly, right+30, ly, color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", right+36, ly+4, esc(truncate(s.Name, 26)))
	}
	b.WriteString("</g>\n")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
