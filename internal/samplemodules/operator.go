package samplemodules

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// SampleResource is the resource of the sample module's custom resource.
var SampleResource = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1alpha1", Resource: "samples"}

// RunSampleOperator stands in for the sample module's operator in a runtime:
// it sets status.state Ready on every Sample that is not being deleted, until
// ctx is done. A Sample labelled sample.operator.kyma-project.io/state gets
// that state instead, so tests can make a module report Error or Warning.
// It polls, which keeps it free of informers; a real operator would watch.
func RunSampleOperator(ctx context.Context, cfg *rest.Config, interval time.Duration) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		reconcileSamples(ctx, client)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// StateLabel lets a test choose the state the sample operator reports.
const StateLabel = "sample.operator.kyma-project.io/state"

func reconcileSamples(ctx context.Context, client dynamic.Interface) {
	list, err := client.Resource(SampleResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return // CRD not installed yet, or runtime unreachable: try again later
	}
	for i := range list.Items {
		sample := &list.Items[i]
		want := "Ready"
		if s := sample.GetLabels()[StateLabel]; s != "" {
			want = s
		}
		if sample.GetDeletionTimestamp() != nil {
			want = "Deleting"
		}
		if state, _, _ := unstructured.NestedString(sample.Object, "status", "state"); state == want {
			continue
		}
		if err := unstructured.SetNestedField(sample.Object, want, "status", "state"); err != nil {
			continue
		}
		// Conflicts and deletions are settled on the next tick.
		_, _ = client.Resource(SampleResource).Namespace(sample.GetNamespace()).UpdateStatus(ctx, sample, metav1.UpdateOptions{})
	}
}
