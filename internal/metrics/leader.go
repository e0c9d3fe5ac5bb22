package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// ShardLeader is every operator process's one series: 1 while it leads its
// shard, 0 while it stands by. A shard whose series are all 0 has no
// leader (processes run, none reconciles); a shard without a series has no
// process at all (docs/runbooks.md). Unsharded, the shard is "0".
var ShardLeader = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "lifecycle_manager_shard_leader",
	Help: "1 while this process leads its shard (--shard-id; 0 unsharded), 0 while it stands by.",
}, []string{"shard"})

// SetShardLeader reports whether this process leads shard id.
func SetShardLeader(id int, leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	ShardLeader.WithLabelValues(strconv.Itoa(id)).Set(v)
}
