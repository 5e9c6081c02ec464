package otelthrottle_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// point is one series of one metric as read back: a counter's sum, a
// gauge's value, or a histogram's count and sum.
type point struct {
	metric, unit, attrs string
	kind                string // "counter", "gauge" or "histogram"
	value               float64
	count               uint64
	min, max            float64 // histograms
}

// collect reads every point of reader, sorted by metric then attributes.
func collect(t *testing.T, reader *sdkmetric.ManualReader) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	var ps []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, point{metric: m.Name, unit: m.Unit, attrs: attrString(dp.Attributes), kind: "counter", value: float64(dp.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, point{metric: m.Name, unit: m.Unit, attrs: attrString(dp.Attributes), kind: "gauge", value: dp.Value})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					ps = append(ps, point{metric: m.Name, unit: m.Unit, attrs: attrString(dp.Attributes), kind: "gauge", value: float64(dp.Value)})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					p := point{metric: m.Name, unit: m.Unit, attrs: attrString(dp.Attributes), kind: "histogram", value: dp.Sum, count: dp.Count}
					p.min, _ = dp.Min.Value()
					p.max, _ = dp.Max.Value()
					ps = append(ps, p)
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	slices.SortFunc(ps, func(a, b point) int {
		return strings.Compare(a.metric+" "+a.attrs, b.metric+" "+b.attrs)
	})
	return ps
}

// attrString writes a set as "k=v k=v", sorted by key.
func attrString(s attribute.Set) string {
	var b strings.Builder
	for i, kv := range s.ToSlice() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", kv.Key, kv.Value.Emit())
	}
	return b.String()
}

// String is the point as the readout shows it.
func (p point) String() string {
	switch p.kind {
	case "histogram":
		return fmt.Sprintf("%-24s %-3s {%s} count=%d sum=%.3f min=%.3f max=%.3f", p.metric, p.unit, p.attrs, p.count, p.value, p.min, p.max)
	default:
		return fmt.Sprintf("%-24s %-9s {%s} %s=%g", p.metric, p.unit, p.attrs, p.kind, p.value)
	}
}

// find returns the point of metric with exactly attrs.
func find(ps []point, metric, attrs string) (point, bool) {
	for _, p := range ps {
		if p.metric == metric && p.attrs == attrs {
			return p, true
		}
	}
	return point{}, false
}
