// Package pause decides whether work on a runtime is paused (SPEC G3): by
// the skip-reconciliation label on its Kyma, because the Kyma belongs to a
// label group the operator was told to pause, or because its hibernation
// schedule says it sleeps (internal/hibernation).
package pause

import (
	"strings"
	"time"

	"k8s.io/utils/clock"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/hibernation"
)

// Policy tells paused Kymas.
type Policy struct {
	// Group, when set, pauses every Kyma whose labels it matches.
	Group labels.Selector
	// Hibernation, when set, pauses every Kyma while its schedule says it
	// sleeps.
	Hibernation *hibernation.Schedules
	// Clock tells the time for Hibernation; the real one when nil.
	Clock clock.PassiveClock
}

// Paused reports whether no work may be done for the Kyma's runtime.
func (p Policy) Paused(kyma *v1beta2.Kyma) bool {
	if strings.EqualFold(kyma.Labels[v1beta2.SkipReconciliationLabel], "true") {
		return true
	}
	if p.Group != nil && !p.Group.Empty() && p.Group.Matches(labels.Set(kyma.Labels)) {
		return true
	}
	_, asleep := p.Asleep(kyma)
	return asleep
}

// Asleep tells whether the Kyma's hibernation schedule says it sleeps now,
// and until when.
func (p Policy) Asleep(kyma *v1beta2.Kyma) (hibernation.Sleep, bool) {
	if p.Hibernation == nil {
		return hibernation.Sleep{}, false
	}
	now := time.Now()
	if p.Clock != nil {
		now = p.Clock.Now()
	}
	return p.Hibernation.Asleep(kyma.Labels, now)
}

// Wake is how long until a Kyma that its schedule paused wakes; zero when
// it is not asleep (a label's or a group's pause ends by a change, which
// requeues it).
func (p Policy) Wake(kyma *v1beta2.Kyma) time.Duration {
	sleep, asleep := p.Asleep(kyma)
	if !asleep || p.pausedOtherwise(kyma) {
		return 0
	}
	now := time.Now()
	if p.Clock != nil {
		now = p.Clock.Now()
	}
	return max(sleep.Until.Sub(now), time.Second)
}

func (p Policy) pausedOtherwise(kyma *v1beta2.Kyma) bool {
	return strings.EqualFold(kyma.Labels[v1beta2.SkipReconciliationLabel], "true") ||
		(p.Group != nil && !p.Group.Empty() && p.Group.Matches(labels.Set(kyma.Labels)))
}
