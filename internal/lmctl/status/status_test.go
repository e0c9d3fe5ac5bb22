package status_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/status"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func kyma(name string, state v1beta2.State, spec []string, modules ...v1beta2.ModuleStatus) v1beta2.Kyma {
	k := v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "kcp-system", CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{v1beta2.RuntimeIDLabel: "id-" + name},
		},
		Status: v1beta2.KymaStatus{State: state, Modules: modules},
	}
	for _, m := range spec {
		k.Spec.Modules = append(k.Spec.Modules, v1beta2.Module{Name: m, Managed: true})
	}
	return k
}

func module(name string, state v1beta2.State, message string) v1beta2.ModuleStatus {
	return v1beta2.ModuleStatus{Name: name, Version: "1.0.0", Channel: "regular", State: state, Message: message}
}

func readyCondition(status metav1.ConditionStatus, message string) metav1.Condition {
	return metav1.Condition{Type: "Ready", Status: status, Reason: "Test", Message: message}
}

func TestFromKymas(t *testing.T) {
	unreachable := kyma("b", v1beta2.StateError, nil)
	unreachable.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionFalse, "The runtime cannot be reached")}
	readyWithStaleMessage := kyma("a", v1beta2.StateReady, []string{"x"}, module("x", v1beta2.StateReady, ""))
	readyWithStaleMessage.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionTrue, "All modules are ready")}

	tests := []struct {
		name  string
		kymas []v1beta2.Kyma
		want  status.Fleet
	}{
		{
			name:  "no Kymas is an empty fleet, not nil, so JSON shows []",
			kymas: nil,
			want:  status.Fleet{Runtimes: []status.Runtime{}},
		},
		{
			name: "runtimes and modules are sorted by name and counted",
			kymas: []v1beta2.Kyma{
				kyma("z", v1beta2.StateProcessing, []string{"b", "a"},
					module("b", v1beta2.StateProcessing, "Installing version 1.0.0"),
					module("a", v1beta2.StateReady, "")),
				kyma("m", v1beta2.StateReady, []string{"a"}, module("a", v1beta2.StateReady, "")),
			},
			want: status.Fleet{Runtimes: []status.Runtime{
				{
					Name: "m", RuntimeID: "id-m", State: v1beta2.StateReady, Channel: "regular",
					ModulesReady: 1, ModulesTotal: 1, Created: created,
					Modules: []status.Module{{Name: "a", Version: "1.0.0", Channel: "regular", State: v1beta2.StateReady}},
				},
				{
					Name: "z", RuntimeID: "id-z", State: v1beta2.StateProcessing, Channel: "regular",
					ModulesReady: 1, ModulesTotal: 2, Created: created,
					Modules: []status.Module{
						{Name: "a", Version: "1.0.0", Channel: "regular", State: v1beta2.StateReady},
						{Name: "b", Version: "1.0.0", Channel: "regular", State: v1beta2.StateProcessing, Message: "Installing version 1.0.0"},
					},
				},
			}},
		},
		{
			name: "a module in spec but not yet in status counts, without a state",
			kymas: []v1beta2.Kyma{
				kyma("a", v1beta2.StateReady, []string{"done", "new"}, module("done", v1beta2.StateReady, "")),
			},
			want: status.Fleet{Runtimes: []status.Runtime{{
				Name: "a", RuntimeID: "id-a", State: v1beta2.StateReady, Channel: "regular",
				ModulesReady: 1, ModulesTotal: 2, Created: created,
				Modules: []status.Module{
					{Name: "done", Version: "1.0.0", Channel: "regular", State: v1beta2.StateReady},
					{Name: "new", Channel: "regular"},
				},
			}}},
		},
		{
			name:  "a runtime that is not Ready carries the Ready condition's message",
			kymas: []v1beta2.Kyma{unreachable},
			want: status.Fleet{Runtimes: []status.Runtime{{
				Name: "b", RuntimeID: "id-b", State: v1beta2.StateError, Channel: "regular",
				Message: "The runtime cannot be reached", Created: created, Modules: []status.Module{},
			}}},
		},
		{
			name:  "a Ready runtime carries no message",
			kymas: []v1beta2.Kyma{readyWithStaleMessage},
			want: status.Fleet{Runtimes: []status.Runtime{{
				Name: "a", RuntimeID: "id-a", State: v1beta2.StateReady, Channel: "regular",
				ModulesReady: 1, ModulesTotal: 1, Created: created,
				Modules: []status.Module{{Name: "x", Version: "1.0.0", Channel: "regular", State: v1beta2.StateReady}},
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := status.FromKymas(tt.kymas)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("FromKymas:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestRuntimeReady(t *testing.T) {
	tests := []struct {
		name string
		rt   status.Runtime
		want bool
	}{
		{"Ready with all modules Ready", status.Runtime{State: v1beta2.StateReady, Modules: []status.Module{{State: v1beta2.StateReady}}}, true},
		{"an unmanaged module does not hold it back", status.Runtime{State: v1beta2.StateReady, Modules: []status.Module{{State: v1beta2.StateUnmanaged}}}, true},
		{"a module not reported yet holds it back", status.Runtime{State: v1beta2.StateReady, Modules: []status.Module{{State: ""}}}, false},
		{"a module in Warning holds it back", status.Runtime{State: v1beta2.StateReady, Modules: []status.Module{{State: v1beta2.StateWarning}}}, false},
		{"the Kyma's own state counts", status.Runtime{State: v1beta2.StateProcessing, Modules: []status.Module{{State: v1beta2.StateReady}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rt.Ready(); got != tt.want {
				t.Fatalf("Ready() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	fleet := status.FromKymas([]v1beta2.Kyma{
		kyma("runtime-0", v1beta2.StateReady, []string{"a"}, module("a", v1beta2.StateReady, "")),
		kyma("runtime-1", "", []string{"a", "b"}),
	})
	var buf bytes.Buffer
	if err := status.WriteTable(&buf, fleet, created.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"NAME        RUNTIME-ID     STATE   MODULES   AGE   PAUSED",
		"runtime-0   id-runtime-0   Ready   1/1       90s   -",
		"runtime-1   id-runtime-1   -       0/2       90s   -",
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Fatalf("WriteTable:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteModulesKeepsMessagesOnOneLine(t *testing.T) {
	fleet := status.FromKymas([]v1beta2.Kyma{
		kyma("runtime-0", v1beta2.StateError, []string{"a", "b"},
			module("a", v1beta2.StateError, "rendering rawManifest:\n  yaml: line 3"),
			module("b", v1beta2.StateReady, "")),
	})
	var buf bytes.Buffer
	if err := status.WriteModules(&buf, fleet.Runtimes[0]); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"NAME   VERSION   CHANNEL   STATE   MESSAGE",
		"a      1.0.0     regular   Error   rendering rawManifest: yaml: line 3",
		"b      1.0.0     regular   Ready   ",
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Fatalf("WriteModules:\n%q\nwant:\n%q", got, want)
	}
}

// A module's manual upgrade that waits shows in the JSON of lmctl status,
// with its deadline; the modules table says it in the module's message.
func TestManualUpgradeShows(t *testing.T) {
	waiting := module("shop", v1beta2.StateReady, "Version 2.0.0 waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until 2026-12-31T10:00:00Z, when it is installed without it; 1.0.0 stays installed")
	waiting.ManualUpgrade = &v1beta2.ManualUpgradeStatus{Version: "2.0.0", ForceAt: metav1.NewTime(time.Date(2026, 12, 31, 10, 0, 0, 0, time.UTC))}
	fleet := status.FromKymas([]v1beta2.Kyma{kyma("runtime-0", v1beta2.StateReady, []string{"shop"}, waiting)})
	if got := fleet.Runtimes[0].Modules[0].ManualUpgrade; !reflect.DeepEqual(got, waiting.ManualUpgrade) {
		t.Fatalf("manualUpgrade %+v, want %+v", got, waiting.ManualUpgrade)
	}
	var buf bytes.Buffer
	if err := status.WriteModules(&buf, fleet.Runtimes[0]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Version 2.0.0 waits for the runtime owner's approval") {
		t.Fatalf("WriteModules:\n%s", buf.String())
	}
}
