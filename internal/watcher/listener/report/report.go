// Package report is the wire contract between the runtime-watcher agent and
// the control plane's listener. It has no dependencies beyond the standard
// library so that the agent stays small.
package report

import "time"

// Paths of the listener. Both take POST over mutual TLS; the caller's
// identity is the subject common name of its client certificate.
const (
	// ReportPath receives one Report per request.
	ReportPath = "/v1/reports"
	// HeartbeatPath receives an empty body; it tells the listener the agent is
	// alive, so that the control plane keeps its periodic reconcile slow.
	HeartbeatPath = "/v1/heartbeat"
)

// MaxBytes bounds an encoded report (SPEC R9). The agent drops bigger ones
// and the listener refuses them.
const MaxBytes = 1 << 20

// Report says that a watched object in a runtime changed. It identifies the
// object as the runtime knows it and never carries the object's content:
// the control plane reads what it needs from the runtime itself, so a report
// cannot smuggle data from one runtime into another's reconcile.
type Report struct {
	// ID is unique per report, for tracing it through agent and listener logs.
	ID string `json:"id"`
	// Kyma is the control-plane Kyma the change is for: the object's
	// operator.kyma-project.io/kyma-name label, or the agent's own Kyma. The
	// listener accepts it only if that Kyma carries the runtime id of the
	// reporting certificate.
	Kyma string `json:"kyma,omitempty"`
	// Module is the object's operator.kyma-project.io/module-name label, when
	// the object is a module resource.
	Module string `json:"module,omitempty"`
	// Watcher is the Watcher whose rule matched.
	Watcher string `json:"watcher,omitempty"`
	// Operation is CREATE, UPDATE or DELETE.
	Operation string `json:"operation"`
	// Object identifies the changed object.
	Object ObjectRef `json:"object"`
	// ChangedAt is when the runtime's API server asked the agent about the
	// change.
	ChangedAt time.Time `json:"changedAt"`
}

// ObjectRef identifies an object in a runtime.
type ObjectRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	// ResourceVersion is the object's version before the change (empty for a
	// create): admission runs before the change is stored.
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Key identifies the object across reports, for coalescing.
func (o ObjectRef) Key() string {
	return o.Group + "/" + o.Kind + "/" + o.Namespace + "/" + o.Name
}
