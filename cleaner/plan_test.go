package cleaner

import (
	"math"
	"reflect"
	"testing"
)

// seg is a planning stat with size 100 and the given timestamps.
func seg(base, largest, first int64) SegmentStat {
	return SegmentStat{Base: base, Size: 100, LargestTimestamp: largest, FirstTimestamp: first}
}

// TestPlanClean: the sections of a log (Kafka's cleanableOffsets and
// LogToClean) and when it is due.
func TestPlanClean(t *testing.T) {
	// Segments at 0, 10, 20, 30 (active); largest timestamps 100, 200,
	// 300; first batch timestamps 50, 150, 250.
	segs := []SegmentStat{seg(0, 100, 50), seg(10, 200, 150), seg(20, 300, 250), seg(30, -1, -1)}
	base := func() LogStat {
		return LogStat{Segments: segs, LogStart: 0, LogEnd: 35, LastStable: 35, Checkpoint: -1}
	}
	cfg := func(f func(*Config)) Config {
		c := testCfg
		if f != nil {
			f(&c)
		}
		return c
	}
	cases := []struct {
		name  string
		st    func(*LogStat)
		cfg   Config
		now   int64
		want  Plan
		due   bool
		ratio float64
	}{
		{name: "no checkpoint: everything below the active segment is dirty",
			want: Plan{FirstDirty: 0, FirstUncleanable: 30, CleanableBytes: 300}, due: true, ratio: 1},
		{name: "checkpoint at a segment base",
			st:   func(s *LogStat) { s.Checkpoint = 20 },
			want: Plan{FirstDirty: 20, FirstUncleanable: 30, CleanBytes: 200, CleanableBytes: 100}, ratio: 1.0 / 3},
		{name: "checkpoint inside a segment counts it both ways",
			st:   func(s *LogStat) { s.Checkpoint = 15 },
			want: Plan{FirstDirty: 15, FirstUncleanable: 30, CleanBytes: 200, CleanableBytes: 200}, due: false, ratio: 0.5},
		{name: "checkpoint below the log start is reset",
			st:   func(s *LogStat) { s.Checkpoint = 3; s.LogStart = 10 },
			want: Plan{FirstDirty: 10, ResetCheckpoint: true, FirstUncleanable: 30, CleanBytes: 100, CleanableBytes: 200}, due: true, ratio: 2.0 / 3},
		{name: "checkpoint above the log end is reset",
			st:   func(s *LogStat) { s.Checkpoint = 99 },
			want: Plan{FirstDirty: 0, ResetCheckpoint: true, FirstUncleanable: 30, CleanableBytes: 300}, due: true, ratio: 1},
		{name: "the last stable offset stops cleaning at its segment",
			st:   func(s *LogStat) { s.LastStable = 25 },
			want: Plan{FirstDirty: 0, FirstUncleanable: 20, CleanableBytes: 200}, due: true, ratio: 1},
		{name: "the last stable offset at the log start: nothing cleanable",
			st:   func(s *LogStat) { s.LastStable = 0 },
			want: Plan{FirstDirty: 0, FirstUncleanable: 0}},
		{name: "min.compaction.lag.ms keeps newer segments",
			cfg:  cfg(func(c *Config) { c.MinCompactionLagMs = 150 }),
			now:  290,
			want: Plan{FirstDirty: 0, FirstUncleanable: 10, CleanableBytes: 100}, due: true, ratio: 1},
		{name: "min.compaction.lag.ms: every segment old enough",
			cfg:  cfg(func(c *Config) { c.MinCompactionLagMs = 150 }),
			now:  1000,
			want: Plan{FirstDirty: 0, FirstUncleanable: 30, CleanableBytes: 300}, due: true, ratio: 1},
		{name: "max.compaction.lag.ms makes a log due below the ratio",
			st:   func(s *LogStat) { s.Checkpoint = 20 },
			cfg:  cfg(func(c *Config) { c.MaxCompactionLagMs = 100 }),
			now:  400,
			want: Plan{FirstDirty: 20, FirstUncleanable: 30, CleanBytes: 200, CleanableBytes: 100, CompactionDelayMs: 50}, due: true, ratio: 1.0 / 3},
		{name: "max.compaction.lag.ms not reached",
			st:   func(s *LogStat) { s.Checkpoint = 20 },
			cfg:  cfg(func(c *Config) { c.MaxCompactionLagMs = 200 }),
			now:  400,
			want: Plan{FirstDirty: 20, FirstUncleanable: 30, CleanBytes: 200, CleanableBytes: 100}, ratio: 1.0 / 3},
		{name: "min.cleanable.dirty.ratio 0 cleans any dirt",
			st:   func(s *LogStat) { s.Checkpoint = 20 },
			cfg:  cfg(func(c *Config) { c.MinCleanableRatio = 0 }),
			want: Plan{FirstDirty: 20, FirstUncleanable: 30, CleanBytes: 200, CleanableBytes: 100}, due: true, ratio: 1.0 / 3},
		{name: "all clean",
			st:   func(s *LogStat) { s.Checkpoint = 30 },
			cfg:  cfg(func(c *Config) { c.MinCleanableRatio = 0 }),
			want: Plan{FirstDirty: 30, FirstUncleanable: 30, CleanBytes: 300}, due: false, ratio: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := base()
			if c.st != nil {
				c.st(&st)
			}
			conf := c.cfg
			if conf.SegmentBytes == 0 {
				conf = testCfg
			}
			got := PlanClean(&st, &conf, c.now)
			if got != c.want {
				t.Fatalf("plan %+v\nwant %+v", got, c.want)
			}
			if d := got.Due(&conf); d != c.due {
				t.Fatalf("due %v, want %v", d, c.due)
			}
			if r := got.Ratio(); math.Abs(r-c.ratio) > 1e-9 {
				t.Fatalf("ratio %v, want %v", r, c.ratio)
			}
		})
	}
}

// TestGroup: Kafka's groupSegmentsBySize bounds.
func TestGroup(t *testing.T) {
	s := func(base, size, idx int64) SegmentStat {
		return SegmentStat{Base: base, Size: size, IndexBytes: idx, TimeIndexBytes: idx}
	}
	cfg := Config{SegmentBytes: 1000, MaxIndexBytes: 100}
	cases := []struct {
		name        string
		segs        []SegmentStat
		end, uncl   int64
		want        [][2]int
		maxIndexOff int64
	}{
		{name: "all fit", segs: []SegmentStat{s(0, 300, 10), s(10, 300, 10), s(20, 300, 10)}, end: 30, uncl: 30,
			want: [][2]int{{0, 3}}},
		{name: "log size bound", segs: []SegmentStat{s(0, 600, 10), s(10, 300, 10), s(20, 300, 10)}, end: 30, uncl: 30,
			want: [][2]int{{0, 2}, {2, 3}}},
		{name: "index size bound", segs: []SegmentStat{s(0, 10, 60), s(10, 10, 60), s(20, 10, 30)}, end: 30, uncl: 30,
			want: [][2]int{{0, 1}, {1, 3}}},
		{name: "only segments below the end", segs: []SegmentStat{s(0, 10, 1), s(10, 10, 1), s(20, 10, 1)}, end: 15, uncl: 30,
			want: [][2]int{{0, 2}}},
		{name: "offset range bound", segs: []SegmentStat{s(0, 10, 1), s(1<<31, 10, 1), s(1<<31+10, 10, 1)}, end: 1<<31 + 20, uncl: 1<<31 + 20,
			want: [][2]int{{0, 1}, {1, 3}}},
		{name: "an empty segment is not offset-bounded", segs: []SegmentStat{s(0, 10, 1), s(5, 0, 0), s(1<<32, 10, 1)}, end: 1<<32 + 1, uncl: 1<<32 + 1,
			want: [][2]int{{0, 2}, {2, 3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Group(c.segs, c.end, c.uncl, &cfg); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("groups %v, want %v", got, c.want)
			}
		})
	}
}

// TestPolicy: cleanup.policy in Kafka's list form.
func TestPolicy(t *testing.T) {
	for in, want := range map[string]Policy{"delete": Delete, "compact": Compact, "compact,delete": CompactDelete,
		"delete, compact": CompactDelete, "compact,compact": Compact} {
		got, err := ParsePolicy(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "delete,", "Compact", "compact;delete"} {
		if _, err := ParsePolicy(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	if CompactDelete.String() != "compact,delete" || Delete.String() != "delete" || Compact.String() != "compact" {
		t.Error("String")
	}
}

// TestConfigValidate: the values Kafka refuses.
func TestConfigValidate(t *testing.T) {
	for name, f := range map[string]func(*Config){
		"ratio above 1":    func(c *Config) { c.MinCleanableRatio = 1.5 },
		"negative ratio":   func(c *Config) { c.MinCleanableRatio = -0.1 },
		"NaN ratio":        func(c *Config) { c.MinCleanableRatio = math.NaN() },
		"negative min lag": func(c *Config) { c.MinCompactionLagMs = -1 },
		"max lag 0":        func(c *Config) { c.MaxCompactionLagMs = 0 },
		"max below min":    func(c *Config) { c.MinCompactionLagMs = 10; c.MaxCompactionLagMs = 5 },
		"negative delete":  func(c *Config) { c.DeleteRetentionMs = -1 },
	} {
		c := testCfg
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := testCfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
