package board

// spendPerDayChart draws the billed spend of each of days (YYYY-MM-DD, oldest first) from
// the days of a costs/by-day read; a day the read does not list counts as no spend.
func spendPerDayChart(id string, days []string, byDay []daySpend) *chart {
	cents := make(map[string]int64, len(byDay))
	for _, d := range byDay {
		cents[d.Date] = d.CostCents
	}
	values := make([]float64, len(days))
	for i, d := range days {
		values[i] = float64(cents[d])
	}
	return newChart(id, "Spend per day", days, []chartSeries{{Name: "spend", Class: "bar-spend", Values: values}}, formatCents)
}
