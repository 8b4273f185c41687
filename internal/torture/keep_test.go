package torture

import (
	"errors"
	"testing"
	"time"
)

// TestARunKeepsItsLogsWhenItFailedOrRecoveredSlowly: a passing run's logs
// go unless asked for, or unless a write outage lasted KeepOutage or more.
func TestARunKeepsItsLogsWhenItFailedOrRecoveredSlowly(t *testing.T) {
	outages := func(lengths ...time.Duration) *Report {
		r := &Report{Availability: map[string]Outage{}}
		for i, l := range lengths {
			r.Availability[string(rune('a'+i))] = Outage{Client: "list-0", From: time.Second, Until: time.Second + l, Recovered: true}
		}
		return r
	}
	failed := outages(time.Second)
	failed.Problems = []string{"the cluster did not heal"}
	for _, tc := range []struct {
		name string
		cfg  Config
		rep  *Report
		err  error
		want bool
	}{
		{"passing, short outages", Config{KeepOutage: 30 * time.Second}, outages(2*time.Second, 29*time.Second), nil, false},
		{"passing, one outage as long as the bound", Config{KeepOutage: 30 * time.Second}, outages(2*time.Second, 30*time.Second), nil, true},
		{"passing, a long outage, the bound off", Config{}, outages(45 * time.Second), nil, false},
		{"passing, no outage at all", Config{KeepOutage: 30 * time.Second}, outages(), nil, false},
		{"passing, asked to keep", Config{Keep: true}, outages(), nil, true},
		{"failed", Config{}, failed, nil, true},
		{"could not finish", Config{}, outages(), errors.New("the cluster did not come up"), true},
	} {
		if got := keepRun(tc.cfg, tc.rep, tc.err); got != tc.want {
			t.Errorf("%s: kept %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := outages(3*time.Second, 45*time.Second, time.Second).LongestOutage().Length(); got != 45*time.Second {
		t.Errorf("the longest outage lasted %s, want 45s", got)
	}
}
