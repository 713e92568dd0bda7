package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages/stagestest"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		i, n int
		ok   bool
	}{
		{"0/1", 0, 1, true},
		{"3/4", 3, 4, true},
		{"4/4", 0, 0, false},
		{"-1/4", 0, 0, false},
		{"0/0", 0, 0, false},
		{"1", 0, 0, false},
		{"a/b", 0, 0, false},
		{fmt.Sprintf("0/%d", MaxShards+1), 0, 0, false},
	} {
		i, n, err := ParseShard(tc.in)
		if (err == nil) != tc.ok || i != tc.i || n != tc.n {
			t.Errorf("ParseShard(%q) = %d, %d, %v; want %d, %d, ok=%v", tc.in, i, n, err, tc.i, tc.n, tc.ok)
		}
	}
	var e Execution
	if err := e.SetText("shard", "5/2"); err == nil {
		t.Error("execution.shard accepted 5/2")
	}
	if err := e.SetText("shard", "1/2"); err != nil || e.Shard != "1/2" {
		t.Errorf("execution.shard 1/2: %v, %q", err, e.Shard)
	}
}

// TestShardOfIsStable pins the documented hash (FNV-1a 64 mod N), which machines of one
// job must agree on: changing it would split a running job differently.
func TestShardOfIsStable(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want int
	}{
		{"", 7, int(uint64(14695981039346656037) % 7)}, // the FNV-1a 64 offset basis
		{"a", 1000, int(uint64(0xaf63dc4c8601ec8c) % 1000)},
		{"a/b.jpg", 1, 0},
	} {
		if got := ShardOf(tc.name, tc.n); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.name, tc.n, got, tc.want)
		}
	}
}

func TestShardsPartitionAndMerge(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var in []Input
	for i := range 40 {
		m := stagestest.ReadImage(rng, 3+i%5, 2+i%3, 3)
		in = append(in, Input{Name: fmt.Sprintf("d%d/f%02d.png", i%3, i), Data: stagestest.Encode(t, m, "png")})
	}
	slices.SortFunc(in, func(a, b Input) int {
		if walkLess(a.Name, b.Name) {
			return -1
		}
		return 1
	})
	plan := compileWith(t, Builtin, "decode | grayscale | histogram")
	var whole bytes.Buffer
	if _, err := Run(context.Background(), plan, Inputs(in...), Discard(), Options{Workers: 2, Report: &whole}); err != nil {
		t.Fatal(err)
	}
	const n = 3
	var reports []io.Reader
	var names []string
	total := 0
	for i := range n {
		var b bytes.Buffer
		sum, err := Run(context.Background(), plan, Shard(Inputs(in...), i, n), Discard(), Options{Workers: 2, Report: &b})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Total() == 0 || sum.Total() == len(in) {
			t.Errorf("shard %d has %d of %d inputs: not a split", i, sum.Total(), len(in))
		}
		total += sum.Total()
		reports, names = append(reports, &b), append(names, fmt.Sprintf("shard%d", i))
	}
	if total != len(in) {
		t.Errorf("the shards hold %d inputs, want %d", total, len(in))
	}
	var merged bytes.Buffer
	sum, err := MergeReports(&merged, names, reports...)
	if err != nil {
		t.Fatal(err)
	}
	wantLines, _, err := ReadReport(&whole)
	if err != nil {
		t.Fatal(err)
	}
	gotLines, gotSum, err := ReadReport(&merged)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(gotLines, wantLines, func(a, b ReportLine) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
		t.Error("merged lines are not one run's lines in walk order")
	}
	if sum.OK != len(in) || gotSum.OK != len(in) || gotSum.Workers != 2*n || gotSum.Pipeline != plan.String() || gotSum.Device != "cpu" {
		t.Errorf("merged summary %+v", gotSum)
	}
}

func TestMergeReportsRefuses(t *testing.T) {
	sum := `{"summary":{"ok":1,"pipeline":"decode | histogram","device":"cpu"}}`
	line := func(name string) string { return `{"input":"` + name + `","status":"ok"}` }
	for _, tc := range []struct {
		name    string
		reports []string
		want    string
	}{
		{"no summary", []string{line("a")}, "no summary line"},
		{"garbage", []string{"{oops\n" + sum}, "line 1"},
		{"after summary", []string{sum + "\n" + line("a")}, "after the summary"},
		{"not a line", []string{`{"x":1}` + "\n" + sum}, "neither"},
		{"twice", []string{line("a") + "\n" + sum, line("a") + "\n" + sum}, "also in"},
		{"other chain", []string{line("a") + "\n" + sum, line("b") + "\n" + strings.Replace(sum, "histogram", "grayscale", 1)}, "chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs []io.Reader
			var names []string
			for i, r := range tc.reports {
				rs, names = append(rs, strings.NewReader(r)), append(names, fmt.Sprint("r", i))
			}
			var out bytes.Buffer
			if _, err := MergeReports(&out, names, rs...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
