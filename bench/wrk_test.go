package main

import (
	"testing"
	"time"
)

func TestParseWrk(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    rpsResult
		wantErr bool
	}{
		{
			name: "milliseconds and microseconds",
			out: `Running 10s test @ https://127.0.0.1:1234/x/index.json
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.10ms    1.20ms  40.00ms   90.00%
  Latency Distribution
     50%  850.00us
     75%    2.00ms
     90%    3.50ms
     99%    7.64ms
  329710 requests in 10.00s, 150.00MB read
Requests/sec:  32971.00
Transfer/sec:     15.00MB
`,
			want: rpsResult{rps: 32971, p50: 850 * time.Microsecond, p99: 7640 * time.Microsecond},
		},
		{
			name: "seconds",
			out: `     50%    1.50s
     99%    2.00s
Requests/sec:     10.50
`,
			want: rpsResult{rps: 10.5, p50: 1500 * time.Millisecond, p99: 2 * time.Second},
		},
		{
			name:    "error responses",
			out:     "     99%    2.00ms\n  Non-2xx or 3xx responses: 12\nRequests/sec:  100.00\n",
			wantErr: true,
		},
		{
			name:    "no numbers",
			out:     "unable to connect to 127.0.0.1:1 Connection refused\n",
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWrk([]byte(tc.out))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Figure 2's row reports the median of the rounds' ratios and its range,
// and each server's median rate, so that one lucky or unlucky round does
// not decide the result.
func TestJSONRowMedianOfRounds(t *testing.T) {
	r := func(rps float64, p99 time.Duration) rpsResult { return rpsResult{rps: rps, p99: p99} }
	rounds := [][2]rpsResult{
		{r(20000, 4*time.Millisecond), r(20000, 3*time.Millisecond)}, // 1.00
		{r(18000, 4*time.Millisecond), r(30000, 3*time.Millisecond)}, // 0.60: nginx caught a quiet moment
		{r(19000, 6*time.Millisecond), r(20000, 3*time.Millisecond)}, // 0.95
	}
	got := jsonRow("2", "x", rounds)
	if got.ratio != "0.95x (0.60x–1.00x)" {
		t.Errorf("ratio = %q", got.ratio)
	}
	if got.mirror != "19000 req/s, p99 4.00 ms" || got.ref != "nginx 20000 req/s, p99 3.00 ms" {
		t.Errorf("mirror %q, ref %q", got.mirror, got.ref)
	}
	if !got.met {
		t.Error("a median ratio of 0.95x with a median p99 of 4 ms is not reported as met")
	}
	rounds[2][0].rps = 17000 // 0.85: now the median
	if got := jsonRow("2", "x", rounds); got.met || got.ratio != "0.85x (0.60x–1.00x)" {
		t.Errorf("ratio %q met %v, want 0.85x and not met", got.ratio, got.met)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", m)
	}
}

// Over rounds, each server is measured first as often as the other.
func TestRoundOrderAlternates(t *testing.T) {
	first := [2]int{}
	for round := range 6 {
		o := roundOrder(round)
		if o[0] == o[1] {
			t.Fatalf("round %d measures server %d twice", round, o[0])
		}
		first[o[0]]++
	}
	if first[0] != 3 || first[1] != 3 {
		t.Errorf("over 6 rounds tfmirror went first %d times and nginx %d, want 3 each", first[0], first[1])
	}
}
