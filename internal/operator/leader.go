package operator

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// reportLeadership exports whether this process leads its shard
// (metrics.ShardLeader), so that a shard without a leader, or without any
// process, can alert: a process cannot report its own absence, and a
// standby alone reconciles nothing.
func reportLeadership(mgr ctrl.Manager, shardID int) error {
	return mgr.Add(leadershipReporter{elected: mgr.Elected, shard: shardID})
}

type leadershipReporter struct {
	elected func() <-chan struct{}
	shard   int
}

// NeedLeaderElection is false: a standby reports too, that it stands by.
func (leadershipReporter) NeedLeaderElection() bool { return false }

func (r leadershipReporter) Start(ctx context.Context) error {
	metrics.SetShardLeader(r.shard, false)
	select {
	case <-r.elected():
		metrics.SetShardLeader(r.shard, true)
	case <-ctx.Done():
	}
	return nil
}

var _ manager.LeaderElectionRunnable = leadershipReporter{}
