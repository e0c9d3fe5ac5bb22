package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events string
		want   report
	}{
		{
			name: "packages slowest first, no test files left out of the count",
			events: `{"Action":"start","Package":"m/fast"}
{"Action":"run","Package":"m/fast","Test":"TestA"}
{"Action":"pass","Package":"m/fast","Test":"TestA","Elapsed":0.1}
{"Action":"pass","Package":"m/fast","Elapsed":1.5}
{"Action":"skip","Package":"m/empty","Elapsed":0}
{"Action":"run","Package":"m/slow","Test":"TestB"}
{"Action":"skip","Package":"m/slow","Test":"TestB","Elapsed":0}
{"Action":"pass","Package":"m/slow","Elapsed":90}`,
			want: report{
				Packages: []packageTime{{"m/slow", "pass", 90 * time.Second}, {"m/fast", "pass", 1500 * time.Millisecond}, {"m/empty", "skip", 0}},
				Passed:   1, Skipped: 1,
			},
		},
		{
			name: "every failed run of a test with its own lines, framing dropped",
			events: `{"Action":"run","Package":"m/p","Test":"TestX"}
{"Action":"output","Package":"m/p","Test":"TestX","Output":"=== RUN   TestX\n"}
{"Action":"output","Package":"m/p","Test":"TestX","Output":"    x_test.go:9: timed out waiting for Ready\n"}
{"Action":"output","Package":"m/p","Test":"TestX","Output":"--- FAIL: TestX (3.00s)\n"}
{"Action":"fail","Package":"m/p","Test":"TestX","Elapsed":3}
{"Action":"run","Package":"m/p","Test":"TestX"}
{"Action":"output","Package":"m/p","Test":"TestX","Output":"    x_test.go:9: other run\n"}
{"Action":"fail","Package":"m/p","Test":"TestX","Elapsed":3}
{"Action":"output","Package":"m/p","Output":"FAIL\n"}
{"Action":"fail","Package":"m/p","Elapsed":7}`,
			want: report{
				Packages: []packageTime{{"m/p", "fail", 7 * time.Second}},
				Failures: []failure{
					{Package: "m/p", Test: "TestX", Lines: []string{"    x_test.go:9: timed out waiting for Ready"}},
					{Package: "m/p", Test: "TestX", Lines: []string{"    x_test.go:9: other run"}},
				},
				Failed: 2,
			},
		},
		{
			name: "a package that fails outside its tests (TestMain) is listed with its output",
			events: `{"Action":"run","Package":"m/p","Test":"TestA"}
{"Action":"pass","Package":"m/p","Test":"TestA","Elapsed":1}
{"Action":"output","Package":"m/p","Output":"PASS\n"}
{"Action":"output","Package":"m/p","Output":"e2e: the operator was refused 2 requests\n"}
{"Action":"output","Package":"m/p","Output":"FAIL\tm/p\t4.2s\n"}
{"Action":"fail","Package":"m/p","Elapsed":4.2}`,
			want: report{
				Packages: []packageTime{{"m/p", "fail", 4200 * time.Millisecond}},
				Failures: []failure{{Package: "m/p", Lines: []string{"e2e: the operator was refused 2 requests"}}},
				Passed:   1,
			},
		},
		{
			name:   "a build error printed as plain text",
			events: "# m/p\np.go:3:1: syntax error\n" + `{"Action":"fail","Package":"m/p","Elapsed":0,"FailedBuild":"m/p"}`,
			want: report{
				Packages: []packageTime{{"m/p", "fail", 0}},
				Failures: []failure{{Package: "m/p"}, {Lines: []string{"# m/p", "p.go:3:1: syntax error"}}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, err := read(strings.NewReader(tc.events))
			if err != nil {
				t.Fatal(err)
			}
			if got := summarize(events); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("summarize:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestShorten(t *testing.T) {
	lines := []string{"1", "2", "3", "4", "5", "6"}
	for _, tc := range []struct {
		name string
		max  int
		want []string
	}{
		{"short enough", 6, lines},
		{"head and tail", 4, []string{"1", "2", "    ... 2 lines left out here (all of them are in the output above) ...", "5", "6"}},
		{"odd max keeps more of the tail", 3, []string{"1", "    ... 3 lines left out here (all of them are in the output above) ...", "5", "6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shorten(lines, tc.max); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("shorten(%d) = %q, want %q", tc.max, got, tc.want)
			}
		})
	}
}
