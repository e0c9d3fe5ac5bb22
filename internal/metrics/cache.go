package metrics

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// cachedObjectsDesc describes CachedObjects' one family.
var cachedObjectsDesc = prometheus.NewDesc("lifecycle_manager_cached_objects",
	"Objects the operator's informers hold in memory, by kind (Kyma, Manifest, Secret) and shard: a shard's share of the fleet, and objects not filed under a shard bucket yet, which every shard holds until its own shard files them.",
	[]string{"shard", "kind"}, nil)

// CachedObjects reports lifecycle_manager_cached_objects: the counts of
// the operators of this process (one in production, one per shard in the
// benchmark), so that an SRE sees a shard's memory follow its share.
var CachedObjects prometheus.Collector = cachedObjects

var cachedObjects = &cachedCollector{}

type cachedSource struct {
	shard  string
	counts func() map[string]int
}

type cachedCollector struct {
	sources sources[cachedSource]
}

// ReportCachedObjects makes this process report what shard's informers
// hold, as counts says, until ctx ends.
func ReportCachedObjects(ctx context.Context, shard int, counts func() map[string]int) {
	cachedObjects.sources.add(ctx, &cachedSource{shard: strconv.Itoa(shard), counts: counts})
}

// Describe implements prometheus.Collector.
func (c *cachedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- cachedObjectsDesc }

// Collect implements prometheus.Collector.
func (c *cachedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.sources.list() {
		for kind, n := range s.counts() {
			ch <- prometheus.MustNewConstMetric(cachedObjectsDesc, prometheus.GaugeValue, float64(n), s.shard, kind)
		}
	}
}
