package board

import (
	"fmt"
	"strconv"
	"time"
)

// chart is a server-rendered SVG bar chart: geometry computed here, drawn by chartSVG.
// Title and Desc label it for assistive technology (role="img", aria-labelledby), and
// each bar carries a <title> with its exact numbers.
type chart struct {
	ID     string
	Title  string
	Desc   string
	Width  int
	Height int
	Bars   []chartBar
	Max    string
	Base   int
}

// chartBar is one day's bar of stacked segments.
type chartBar struct {
	X, W     int
	Label    string
	Tip      string
	Segments []chartSegment
	ShowDay  bool
}

// chartSegment is one coloured part of a bar.
type chartSegment struct {
	Y, H  int
	Class string
}

// chartSeries is one stacked value of every day.
type chartSeries struct {
	Name   string
	Class  string
	Values []float64
}

const (
	chartW    = 560
	chartH    = 180
	chartTop  = 12
	chartBase = 150
	chartLeft = 36
)

// newChart lays out days bars of stacked series, tallest bar at the chart's full height.
func newChart(id, title string, days []string, series []chartSeries, format func(float64) string) *chart {
	c := &chart{ID: id, Title: title, Width: chartW, Height: chartH, Base: chartBase}
	var max float64
	for i := range days {
		var sum float64
		for _, s := range series {
			sum += s.Values[i]
		}
		if sum > max {
			max = sum
		}
	}
	c.Max = format(max)
	slot := (chartW - chartLeft) / max1(len(days))
	var total float64
	for i, d := range days {
		b := chartBar{X: chartLeft + i*slot + 2, W: slot - 4, Label: shortDay(d), ShowDay: i%2 == 0 || i == len(days)-1}
		y := chartBase
		tip := d + ":"
		for _, s := range series {
			v := s.Values[i]
			total += v
			tip += " " + s.Name + " " + format(v)
			if v <= 0 || max <= 0 {
				continue
			}
			h := int(v / max * float64(chartBase-chartTop))
			if h < 1 {
				h = 1
			}
			y -= h
			b.Segments = append(b.Segments, chartSegment{Y: y, H: h, Class: s.Class})
		}
		b.Tip = tip
		c.Bars = append(c.Bars, b)
	}
	c.Desc = fmt.Sprintf("%d days from %s to %s; total %s; highest day %s.", len(days), first(days), last(days), format(total), c.Max)
	return c
}

// lastDays returns the n UTC dates ending today, oldest first, as YYYY-MM-DD.
func lastDays(now time.Time, n int) []string {
	out := make([]string, n)
	d := now.UTC().Truncate(24 * time.Hour)
	for i := 0; i < n; i++ {
		out[n-1-i] = d.AddDate(0, 0, -i).Format(time.DateOnly)
	}
	return out
}

func shortDay(d string) string {
	t, err := time.Parse(time.DateOnly, d)
	if err != nil {
		return d
	}
	return t.Format("Jan 2")
}

func formatCount(v float64) string { return strconv.FormatInt(int64(v), 10) }

func formatCents(v float64) string { return fmt.Sprintf("$%.2f", v/100) }

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}
