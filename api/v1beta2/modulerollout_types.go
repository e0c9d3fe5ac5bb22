package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ModuleRollout says how the fleet moves when one channel of one module
// points to a new version (SPEC G1): a canary set first, then waves of at
// most maxInFlight runtimes, each wave Ready and soaked before the next,
// halting by itself when too many runtimes fail. Without a ModuleRollout a
// channel's new version reaches every runtime at once, as in the Kyma API;
// a ModuleRollout changes nothing of the Kyma API's objects.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mro
// +kubebuilder:printcolumn:name="Module",type=string,JSONPath=".spec.moduleName"
// +kubebuilder:printcolumn:name="Channel",type=string,JSONPath=".spec.channel"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=".status.fromVersion"
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=".status.toVersion"
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=".status.wave"
// +kubebuilder:printcolumn:name="Done",type=integer,JSONPath=".status.done"
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=".status.total"
// +kubebuilder:storageversion
type ModuleRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ModuleRolloutSpec   `json:"spec,omitempty"`
	Status ModuleRolloutStatus `json:"status,omitempty"`
}

// ModuleRolloutSpec is the rollout policy of one module's channel.
//
// +kubebuilder:validation:XValidation:rule="self.moduleName == oldSelf.moduleName && has(self.channel) == has(oldSelf.channel) && (!has(self.channel) || self.channel == oldSelf.channel)",message="moduleName and channel cannot change: create another ModuleRollout"
type ModuleRolloutSpec struct {
	// ModuleName is the module whose channel is rolled out.
	// +kubebuilder:validation:Pattern:=`^[a-z]{3,}(-[a-z]{3,})*$`
	// +kubebuilder:validation:MaxLength:=64
	ModuleName string `json:"moduleName"`

	// Channel is the channel whose new versions this policy rolls out.
	// Absent: the module is mandatory, and the policy rolls out its
	// ModuleReleaseMeta's mandatory.version to every runtime.
	// +optional
	// +kubebuilder:validation:Pattern:=`^[a-z]+$`
	// +kubebuilder:validation:MinLength:=3
	// +kubebuilder:validation:MaxLength:=32
	Channel string `json:"channel,omitempty"`

	// Canary is the first wave. Absent: the first wave is an ordinary one.
	// +optional
	Canary *RolloutCanary `json:"canary,omitempty"`

	// MaxInFlight is how many runtimes upgrade at once after the canary:
	// a count, or a percentage of the runtimes in the rollout (rounded up,
	// at least one).
	// +optional
	// +kubebuilder:default:=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]?%$|^100%$')",message="maxInFlight is a count of at least 1 or a percentage from 1% to 100%"
	MaxInFlight intstr.IntOrString `json:"maxInFlight,omitempty"`

	// SoakTime is how long a wave stays Ready before the next starts.
	// +optional
	// +kubebuilder:default:="0s"
	SoakTime metav1.Duration `json:"soakTime,omitempty"`

	// MaxFailures is how many runtimes may fail before the rollout halts by
	// itself: a count, or a percentage of the runtimes in the rollout
	// (rounded down). 0 halts on the first failure.
	// +optional
	// +kubebuilder:default:=0
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9][0-9]?%$|^100%$')",message="maxFailures is a count of at least 0 or a percentage from 0% to 100%"
	MaxFailures intstr.IntOrString `json:"maxFailures,omitempty"`

	// AutoResume lets a halted rollout go on by itself once its failed
	// runtimes recover. Without it (the default) a halt holds until
	// someone resumes it (resume).
	// +optional
	AutoResume bool `json:"autoResume,omitempty"`

	// Resume resumes a halted rollout when set to a value it did not have
	// before: say who resumes and why ("alice: canary fixed by hand").
	// The status records it (resumedBy, resumedAt). `lmctl rollout resume`
	// sets it.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Resume string `json:"resume,omitempty"`

	// ProgressDeadline is how long the runtimes of a wave have, from the
	// wave's start, to be Ready at the new version. One that is not (it
	// stays Processing, Warning or Error) counts as failed from then on,
	// which halts the rollout when more than maxFailures have. Zero (the
	// default) waits without end.
	// +optional
	ProgressDeadline metav1.Duration `json:"progressDeadline,omitempty"`

	// Rollback rolls the rollout back when set to a value it did not have
	// before: say who and why ("alice: 1.3.0 loses events"). The runtimes
	// that moved go back to fromVersion in waves, with the same canary,
	// maxInFlight, soak, deadline and analyses. Only a version whose
	// ModuleTemplate lists fromVersion in spec.rollbackTo can go back;
	// otherwise the rollback is refused and status.rollback says why.
	// Once rolled back, the runtimes stay at fromVersion until the
	// channel points to another version. `lmctl rollout rollback` sets it.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Rollback string `json:"rollback,omitempty"`

	// Analysis are checks of the fleet's health that a wave must pass
	// during its soak, besides being Ready: a runtime that fails one counts
	// as failed, like a runtime in Error.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Analysis []RolloutAnalysis `json:"analysis,omitempty"`

	// Paused stops the rollout between waves: the wave in flight finishes,
	// no new one starts until paused is false again.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// RolloutCanary chooses the first runtimes to get a new version.
type RolloutCanary struct {
	// Selector picks the Kymas that may be canaries, by label. Absent: any.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Count is how many of them form the canary wave: a count, or a
	// percentage of the runtimes in the rollout (rounded up, at least one).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]?%$|^100%$')",message="canary.count is a count of at least 1 or a percentage from 1% to 100%"
	Count intstr.IntOrString `json:"count"`
}

// RolloutAnalysis is one check of a wave's health: exactly one of
// prometheus or condition.
//
// +kubebuilder:validation:XValidation:rule="has(self.prometheus) != has(self.condition)",message="an analysis has exactly one of prometheus or condition"
type RolloutAnalysis struct {
	// Name names the analysis in status and messages.
	// +kubebuilder:validation:Pattern:=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength:=63
	Name string `json:"name"`

	// Prometheus runs a PromQL query against the Prometheus the operator
	// was given (--analysis-prometheus-url) and compares each runtime's
	// value with a threshold.
	// +optional
	Prometheus *PrometheusAnalysis `json:"prometheus,omitempty"`

	// Condition requires a condition of the module's custom resource in
	// each runtime of the wave.
	// +optional
	Condition *ConditionAnalysis `json:"condition,omitempty"`
}

// PrometheusAnalysis is a PromQL query with a threshold, evaluated for each
// runtime of a wave.
//
// +kubebuilder:validation:XValidation:rule="has(self.max) || has(self.min)",message="a prometheus analysis needs max, min or both"
type PrometheusAnalysis struct {
	// Query is the PromQL expression. When it contains {runtime}, that is
	// replaced by each runtime's Kyma name and the query runs once per
	// runtime; otherwise it runs once, and each sample belongs to the
	// runtime its runtimeLabel names. A runtime without a sample fails.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=4096
	Query string `json:"query"`

	// RuntimeLabel is the label of a sample that names its runtime's Kyma,
	// for a query without {runtime}.
	// +optional
	// +kubebuilder:default:=runtime
	// +kubebuilder:validation:Pattern:=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	RuntimeLabel string `json:"runtimeLabel,omitempty"`

	// Max and Min bound the value a runtime's sample may have, as decimal
	// numbers ("0.05", "100").
	// +optional
	// +kubebuilder:validation:Pattern:=`^-?[0-9]+(\.[0-9]+)?$`
	Max string `json:"max,omitempty"`
	// +optional
	// +kubebuilder:validation:Pattern:=`^-?[0-9]+(\.[0-9]+)?$`
	Min string `json:"min,omitempty"`
}

// ConditionAnalysis requires one condition of the module's custom resource
// (its Manifest's spec.resource) in each runtime of a wave.
type ConditionAnalysis struct {
	// Type is the condition's type in the resource's status.conditions.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=316
	Type string `json:"type"`

	// Status the condition must have.
	// +optional
	// +kubebuilder:default:="True"
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status metav1.ConditionStatus `json:"status,omitempty"`
}

// RolloutPhase is where a rollout stands.
// +kubebuilder:validation:Enum=Completed;Progressing;Paused;Halted
type RolloutPhase string

// Phases of a rollout.
const (
	// RolloutCompleted: every runtime in the rollout has its channel's
	// version, or may get it (also the phase before any version moved).
	RolloutCompleted RolloutPhase = "Completed"
	// RolloutProgressing: waves are moving runtimes to the new version.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutPaused: spec.paused holds the next wave.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutHalted: more runtimes failed than maxFailures allows, or the
	// version's template changed during the rollout; no wave starts.
	RolloutHalted RolloutPhase = "Halted"
)

// ModuleRolloutStatus is how far the rollout has come.
type ModuleRolloutStatus struct {
	// Phase is where the rollout stands.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`

	// FromVersion is the version the fleet moves from; ToVersion the one
	// the channel points to.
	// +optional
	FromVersion string `json:"fromVersion,omitempty"`
	// +optional
	ToVersion string `json:"toVersion,omitempty"`

	// Template is the ModuleTemplate of ToVersion, namespace/name@revision,
	// pinned for the whole rollout so that every wave gets the same
	// content: a change of it halts the rollout.
	// +optional
	Template string `json:"template,omitempty"`

	// Wave is the wave in flight or last finished: 0 is the canary, -1
	// none yet.
	// +optional
	Wave int32 `json:"wave"`

	// InFlight are the Kymas of the current wave that have not reached the
	// new version Ready yet.
	// +optional
	// +listType=atomic
	InFlight []string `json:"inFlight,omitempty"`

	// Failed are Kymas whose module is in Error at the new version, was
	// not Ready within progressDeadline, or failed an analysis (at most 20
	// named; FailedCount has them all). Runtimes.Failed says why.
	// +optional
	// +listType=atomic
	Failed []string `json:"failed,omitempty"`

	// Runtimes names the rollout's runtimes by state, at most 20 of each;
	// Total, Done, FailedCount, Pending and len(InFlight) count them all.
	// +optional
	Runtimes RolloutRuntimes `json:"runtimes,omitempty"`

	// WaveMembers are the Kymas the current wave admitted, those in flight
	// and those done; its analyses run over them.
	// +optional
	// +listType=atomic
	WaveMembers []string `json:"waveMembers,omitempty"`

	// Content are the template's content links of toVersion, pinned by
	// digest when the rollout started: every wave installs these bytes. A
	// tag that resolves to another digest later halts the rollout.
	// +optional
	// +listType=atomic
	Content []ContentResource `json:"content,omitempty"`

	// Rollback is the last spec.rollback acted on: while it is not refused
	// and the channel still points to Of, the rollout moves its runtimes
	// back to toVersion.
	// +optional
	Rollback *RolloutRollback `json:"rollback,omitempty"`

	// PlannedAt is when the planner last looked at the rollout. Kyma
	// controllers (every shard's) hold the module while it is older than
	// they allow: no planner runs, so no wave may start or end.
	// +optional
	PlannedAt *metav1.Time `json:"plannedAt,omitempty"`

	// Total, Done, FailedCount and Pending count the runtimes in the
	// rollout: those whose Kyma resolves the module through the channel
	// and has it installed.
	// +optional
	Total int32 `json:"total"`
	// +optional
	Done int32 `json:"done"`
	// +optional
	FailedCount int32 `json:"failedCount"`
	// +optional
	Pending int32 `json:"pending"`

	// HaltReason says why the rollout halted.
	// +optional
	HaltReason string `json:"haltReason,omitempty"`

	// ResumedBy is the last spec.resume acted on, and ResumedAt when: who
	// or what resumed the rollout last ("auto" when spec.autoResume did).
	// +optional
	ResumedBy string `json:"resumedBy,omitempty"`
	// +optional
	ResumedAt *metav1.Time `json:"resumedAt,omitempty"`

	// StartedAt is when the channel moved; WaveStartedAt when the current
	// wave started; WaveReadyAt when all of it was Ready (its soak began);
	// CompletedAt when the last runtime got the version.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	WaveStartedAt *metav1.Time `json:"waveStartedAt,omitempty"`
	// WaveReadyAt keeps microseconds (a MicroTime), unlike the other
	// timestamps: the soak counts from it, and a time rounded down to the
	// second would end a soak up to a second early once read back.
	// +optional
	WaveReadyAt *metav1.MicroTime `json:"waveReadyAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// ObservedGeneration is the generation of the spec last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (True when Completed), Reconciling (a wave is in
	// flight or waits for its soak) and Stalled (Halted), as kstatus reads
	// them.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RolloutRuntimes names a rollout's runtimes by state.
type RolloutRuntimes struct {
	// Done have the new version Ready.
	// +optional
	// +listType=atomic
	Done []string `json:"done,omitempty"`
	// Failed say why they count as failed.
	// +optional
	// +listType=atomic
	Failed []RolloutRuntime `json:"failed,omitempty"`
	// Pending wait for a wave; those that cannot move now say why
	// (paused, hibernated, outside their maintenance window).
	// +optional
	// +listType=atomic
	Pending []RolloutRuntime `json:"pending,omitempty"`
}

// RolloutRuntime is a runtime of a rollout and why it stands where it does.
type RolloutRuntime struct {
	// Kyma is the runtime's Kyma.
	Kyma string `json:"kyma"`
	// Reason says why; empty for a pending runtime that may move.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RolloutRollback records a rollback asked for by spec.rollback.
type RolloutRollback struct {
	// By is the spec.rollback value acted on.
	By string `json:"by"`
	// At is when.
	At metav1.Time `json:"at"`
	// Of is the version rolled back from: the channel's version then.
	// +optional
	Of string `json:"of,omitempty"`
	// Refused says why the rollback was not started; empty when it was.
	// +optional
	Refused string `json:"refused,omitempty"`
}

// +kubebuilder:object:root=true

// ModuleRolloutList is a list of ModuleRollouts.
type ModuleRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ModuleRollout `json:"items"`
}
