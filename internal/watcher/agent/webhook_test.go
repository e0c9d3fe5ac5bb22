package agent

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func TestDetectChange(t *testing.T) {
	const (
		kyma          = `{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"Kyma","metadata":{"name":"default","uid":"u1","resourceVersion":"7","labels":{"a":"b"}},"spec":{"channel":"regular"},"status":{"state":"Ready"}}`
		otherSpec     = `{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"Kyma","metadata":{"name":"default","uid":"u1","resourceVersion":"7","labels":{"a":"b"}},"spec":{"channel":"fast"},"status":{"state":"Ready"}}`
		otherStatus   = `{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"Kyma","metadata":{"name":"default","uid":"u1","resourceVersion":"7","labels":{"a":"b"}},"spec":{"channel":"regular"},"status":{"state":"Error"}}`
		otherLabels   = `{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"Kyma","metadata":{"name":"default","uid":"u1","resourceVersion":"7","labels":{"a":"c"}},"spec":{"channel":"regular"},"status":{"state":"Ready"}}`
		deleting      = `{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"Kyma","metadata":{"name":"default","uid":"u1","resourceVersion":"7","deletionTimestamp":"2026-01-01T00:00:00Z"},"spec":{"channel":"regular"},"status":{"state":"Ready"}}`
		configMap     = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u2"},"data":{"k":"1"}}`
		configMapData = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u2"},"data":{"k":"2"}}`
	)
	tests := []struct {
		name     string
		op       admissionv1.Operation
		field    v1beta2.FieldName
		old, new string
		want     bool
		wantErr  bool
	}{
		{name: "create", op: admissionv1.Create, field: v1beta2.SpecField, new: kyma, want: true},
		{name: "delete", op: admissionv1.Delete, field: v1beta2.SpecField, old: kyma, want: true},
		{name: "spec changed", op: admissionv1.Update, field: v1beta2.SpecField, old: kyma, new: otherSpec, want: true},
		{name: "spec same", op: admissionv1.Update, field: v1beta2.SpecField, old: kyma, new: kyma, want: false},
		{name: "only status changed, spec watched", op: admissionv1.Update, field: v1beta2.SpecField, old: kyma, new: otherStatus, want: false},
		{name: "only labels changed", op: admissionv1.Update, field: v1beta2.SpecField, old: kyma, new: otherLabels, want: false},
		{name: "status changed, status watched", op: admissionv1.Update, field: v1beta2.StatusField, old: kyma, new: otherStatus, want: true},
		{name: "spec changed, status watched", op: admissionv1.Update, field: v1beta2.StatusField, old: kyma, new: otherSpec, want: false},
		{name: "deletion starts", op: admissionv1.Update, field: v1beta2.StatusField, old: kyma, new: deleting, want: true},
		{name: "data of an object without spec", op: admissionv1.Update, field: v1beta2.SpecField, old: configMap, new: configMapData, want: true},
		{name: "update without old object", op: admissionv1.Update, field: v1beta2.SpecField, new: kyma, wantErr: true},
		{name: "not JSON", op: admissionv1.Update, field: v1beta2.SpecField, old: "{", new: kyma, wantErr: true},
		{name: "connect", op: admissionv1.Connect, field: v1beta2.SpecField, old: kyma, new: kyma, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, meta, err := detectChange(tt.op, tt.field, []byte(tt.old), []byte(tt.new))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("changed = %v, want %v", got, tt.want)
			}
			if tt.want && meta.UID == "" {
				t.Fatal("a reported change carries no uid")
			}
		})
	}
}

func TestParseValidatePath(t *testing.T) {
	tests := []struct {
		path    string
		watcher string
		field   v1beta2.FieldName
		ok      bool
	}{
		{path: ValidatePathFor("kyma-watcher", v1beta2.SpecField), watcher: "kyma-watcher", field: v1beta2.SpecField, ok: true},
		{path: "/validate/w/status", watcher: "w", field: v1beta2.StatusField, ok: true},
		{path: "/validate/w/metadata"},
		{path: "/validate//spec"},
		{path: "/validate/w"},
		{path: "/other/w/spec"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			watcher, field, ok := parseValidatePath(tt.path)
			if ok != tt.ok || watcher != tt.watcher || field != tt.field {
				t.Fatalf("parseValidatePath(%q) = %q, %q, %v; want %q, %q, %v", tt.path, watcher, field, ok, tt.watcher, tt.field, tt.ok)
			}
		})
	}
}
