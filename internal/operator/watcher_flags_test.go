package operator

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
)

// TestListenerReportLimitFlags parses the listener's rate-limit flags as the
// binary does and follows the values to what the listener is given
// (withDefaults): a negative rate stays negative (no limit), and values that
// mean nothing are refused with a message that says what to give instead,
// instead of turning silently into the default.
func TestListenerReportLimitFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantRate  float64
		wantBurst int
		wantErr   string // a substring of the parse error; "" parses
	}{
		{name: "defaults", wantRate: 50, wantBurst: 200},
		{name: "a positive rate", args: []string{"--listener-report-rate=12.5"}, wantRate: 12.5, wantBurst: 200},
		{name: "a negative rate disables the limit", args: []string{"--listener-report-rate=-1"}, wantRate: -1, wantBurst: 200},
		{name: "rate 0 is refused", args: []string{"--listener-report-rate=0"}, wantErr: "a negative one to disable the limit"},
		{name: "rate -0 is refused", args: []string{"--listener-report-rate=-0"}, wantErr: "0 is refused"},
		{name: "rate NaN is refused", args: []string{"--listener-report-rate=NaN"}, wantErr: "not a number"},
		{name: "rate Inf is refused", args: []string{"--listener-report-rate=+Inf"}, wantErr: "not a number"},
		{name: "a burst", args: []string{"--listener-report-burst=7"}, wantRate: 50, wantBurst: 7},
		{name: "burst 0 is refused", args: []string{"--listener-report-burst=0"}, wantErr: "at least 1"},
		{name: "a negative burst is refused", args: []string{"--listener-report-burst=-3"}, wantErr: "at least 1"},
		{name: "a fractional burst is refused", args: []string{"--listener-report-burst=1.5"}, wantErr: "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("lifecycle-manager", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var o WatcherOptions
			o.BindFlags(fs)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse error %v, want one that says %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got := o.withDefaults("kcp-system", shard.Shard{})
			if got.ReportRate != tt.wantRate || got.ReportBurst != tt.wantBurst {
				t.Fatalf("the listener gets rate %g and burst %d, want %g and %d", got.ReportRate, got.ReportBurst, tt.wantRate, tt.wantBurst)
			}
		})
	}
}

// TestListenerReportLimitHelp keeps the help in step with the parsing: the
// defaults are shown, and the help says what 0 and a negative rate do.
func TestListenerReportLimitHelp(t *testing.T) {
	fs := flag.NewFlagSet("lifecycle-manager", flag.ContinueOnError)
	var help strings.Builder
	fs.SetOutput(&help)
	var o WatcherOptions
	o.BindFlags(fs)
	fs.PrintDefaults()
	for _, want := range []string{"Negative disables the limit; 0 is refused. (default 50)", "at least 1. (default 200)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("the help does not say %q:\n%s", want, help.String())
		}
	}
}
