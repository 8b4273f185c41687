package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	case f >= 1:
		return fmt.Sprintf("%.2f", f)
	}
	return fmt.Sprintf("%.3f", f)
}

func ratio(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// span prints the smallest and largest of per-round ratios.
func span(rs []float64) string {
	if len(rs) == 0 {
		return "-"
	}
	lo, hi := slices.Min(rs), slices.Max(rs)
	if ratio(lo) == ratio(hi) {
		return ratio(lo) + "x"
	}
	return ratio(lo) + "-" + ratio(hi) + "x"
}

// report prints one size's table: p50/p99 per engine (every round's
// operations together), the number of operations measured, and per-round
// ratios of p50s (of writes/s for the grouped run) against the other
// engines, as "x slower" where the figure is a time.
func (c *config) report(n int, sizes []int, loads map[string]time.Duration, disk map[string]int64, results map[string]map[string][]sample, start string) {
	total := 0
	for _, s := range sizes {
		total += s
	}
	fmt.Printf("### %d documents in the measured collection (%d in all, %d partitions)\n\n", n, total, len(sizes))
	fmt.Printf("Load average %s at the start of the rounds, %s at the end. p50 / p99 in ms over all rounds (operations measured); ratios are per round, lowest-highest.\n\n", start, loadavg())
	head := []string{"operation"}
	sep := []string{"---"}
	for _, e := range c.engines {
		head = append(head, e)
		sep = append(sep, "---")
	}
	type pair struct{ a, b string }
	var pairs []pair
	for i, a := range c.engines {
		for _, b := range c.engines[i+1:] {
			pairs = append(pairs, pair{a, b})
		}
	}
	for _, p := range pairs {
		head = append(head, p.a+" ÷ "+p.b)
		sep = append(sep, "---")
	}
	fmt.Println("| " + strings.Join(head, " | ") + " |")
	fmt.Println("|" + strings.Join(sep, "|") + "|")
	for _, op := range operations {
		row := []string{op.name}
		byEngine := results[op.name]
		for _, e := range c.engines {
			var all []time.Duration
			var writes, commits int
			var elapsed time.Duration
			for _, s := range byEngine[e] {
				all = append(all, s.lat...)
				writes += len(s.lat)
				commits += s.commits
				elapsed += s.elapsed
			}
			cell := fmt.Sprintf("%s / %s (%d)", ms(percentile(all, 0.5)), ms(percentile(all, 0.99)), len(all))
			if op.name == "group32" {
				cell = fmt.Sprintf("%.0f writes/s, %.1f per commit; %s / %s", float64(writes)/elapsed.Seconds(),
					float64(writes)/float64(max(commits, 1)), ms(percentile(all, 0.5)), ms(percentile(all, 0.99)))
			}
			if op.name == "batch100" {
				cell += fmt.Sprintf(", %.0f docs/s", float64(writes*c.batch)/elapsed.Seconds())
			}
			row = append(row, cell)
		}
		for _, p := range pairs {
			var rs []float64
			for i := range min(len(byEngine[p.a]), len(byEngine[p.b])) {
				a, b := byEngine[p.a][i], byEngine[p.b][i]
				if op.name == "group32" {
					// Throughput: how many times more writes/s b did than a.
					rs = append(rs, b.perSecond()/a.perSecond())
				} else {
					rs = append(rs, float64(percentile(a.lat, 0.5))/float64(percentile(b.lat, 0.5)))
				}
			}
			row = append(row, span(rs))
		}
		fmt.Println("| " + strings.Join(row, " | ") + " |")
	}
	fmt.Println()
	fmt.Print("Ratios: p50 time of the left engine ÷ p50 time of the right one (above 1: the right one is faster); for group32, writes/s of the right one ÷ writes/s of the left one (above 1: the right one is faster). Load (one bulk load, not interleaved):")
	for _, e := range c.engines {
		fmt.Printf(" %s %.1f s;", e, loads[e].Seconds())
	}
	fmt.Print(" files on disk after the rounds:")
	for _, e := range c.engines {
		fmt.Printf(" %s %.1f MiB;", e, float64(disk[e])/(1<<20))
	}
	fmt.Println()
	fmt.Println()
}
