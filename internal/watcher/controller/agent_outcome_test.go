package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// TestRuntimeFailure checks each class of runtime error: a refused
// kubeconfig is terminal (no retry until the Secret changes), an unreachable
// runtime and any other failure back off; no message carries the error's
// text, which goes to events only.
func TestRuntimeFailure(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	tests := []struct {
		name     string
		err      error
		kind     reconciler.Kind
		reason   string
		terminal bool
	}{
		{"refused kubeconfig", fmt.Errorf("%w: Secret kcp-system/k key \"config\" is refused: exec is not allowed", remote.ErrInvalidKubeconfig),
			reconciler.KindStalled, ReasonKubeconfigRefused, true},
		{"unreachable", fmt.Errorf("applying: %w", errors.New("dial tcp 10.1.2.3:443: connect: connection refused")),
			reconciler.KindRetry, ReasonRuntimeUnavailable, false},
		{"credentials refused", apierrors.NewUnauthorized("token expired at 10:00"), reconciler.KindRetry, ReasonRuntimeUnavailable, false},
		{"timed out", fmt.Errorf("applying: %w", context.DeadlineExceeded), reconciler.KindRetry, ReasonRuntimeUnavailable, false},
		{"refused object", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "runtime-watcher", nil),
			reconciler.KindRetry, ReasonApplyFailed, false},
		{"server error", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), reconciler.KindRetry, ReasonApplyFailed, false},
		{"conflict", apierrors.NewConflict(gr, "runtime-watcher", errors.New("the object has been modified")), reconciler.KindRetry, ReasonApplyFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runtimeFailure(tt.err, ReasonApplyFailed, "Applying the runtime watcher failed")
			if o.Kind != tt.kind || o.Reason != tt.reason {
				t.Fatalf("outcome = kind %d reason %s, want kind %d reason %s", o.Kind, o.Reason, tt.kind, tt.reason)
			}
			// The last clause of an error is where addresses and server words are.
			text := tt.err.Error()
			tail := strings.TrimSpace(text[strings.LastIndex(text, ":")+1:])
			if o.Message == "" || strings.Contains(o.Message, tail) {
				t.Fatalf("message %q is empty or carries the error text %q", o.Message, tt.err.Error())
			}
			if !errors.Is(o.Err, tt.err) {
				t.Fatalf("the error %v is not kept for the event", o.Err)
			}
			_, err := o.Result()
			if errors.Is(err, reconcile.TerminalError(nil)) != tt.terminal {
				t.Fatalf("terminal = %v, want %v", !tt.terminal, tt.terminal)
			}
		})
	}
}

// TestUnreachable checks which failures let a deleted Kyma go without the
// watcher's removal from its runtime: only those where the runtime cannot
// be worked on at all.
func TestUnreachable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"no kubeconfig Secret", fmt.Errorf("%w: create one", remote.ErrNoKubeconfigSecret), true},
		{"refused kubeconfig", fmt.Errorf("%w: exec", remote.ErrInvalidKubeconfig), true},
		{"no connection", errors.New("dial tcp: i/o timeout"), true},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("no")), true},
		{"server error", apierrors.NewInternalError(errors.New("boom")), false},
		{"conflict", apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "x", errors.New("modified")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unreachable(tt.err); got != tt.want {
				t.Fatalf("unreachable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
