package agent

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
)

// ValidatePath is where the runtime's API server sends admission reviews:
// ValidatePath + "<watcher>/<field>", field being spec or status.
const ValidatePath = "/validate/"

// maxReviewBytes bounds an admission review: an object may be up to etcd's
// 1.5 MiB, and an update carries it twice.
const maxReviewBytes = 8 << 20

// ValidatePathFor is the webhook path of a Watcher.
func ValidatePathFor(watcher string, field v1beta2.FieldName) string {
	return ValidatePath + watcher + "/" + string(field)
}

// serveValidate answers every admission review with "allowed" at once and
// queues a report when the watched field really changed. It never waits for
// the listener: the runtime's API must not slow down because the control
// plane is slow or away.
func (a *Agent) serveValidate(w http.ResponseWriter, r *http.Request) {
	watcher, field, ok := parseValidatePath(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxReviewBytes)).Decode(review); err != nil || review.Request == nil {
		a.metrics.AdmissionRequests.WithLabelValues("", ResultMalformed).Inc()
		http.Error(w, "expected an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	result, rep := a.evaluate(req, watcher, field)
	a.metrics.AdmissionRequests.WithLabelValues(string(req.Operation), result).Inc()

	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true},
	})
	if rep != nil {
		a.sender.enqueue(rep)
	}
}

// evaluate decides whether an admission request is a change to report.
func (a *Agent) evaluate(req *admissionv1.AdmissionRequest, watcher string, field v1beta2.FieldName) (string, *report.Report) {
	if req.DryRun != nil && *req.DryRun {
		return ResultDryRun, nil
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete:
	default:
		return ResultIgnored, nil
	}
	changed, meta, err := detectChange(req.Operation, field, req.OldObject.Raw, req.Object.Raw)
	if err != nil {
		a.log.Error(err, "Reading an admission request", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name)
		return ResultMalformed, nil
	}
	if !changed {
		return ResultUnchanged, nil
	}
	rep := &report.Report{
		ID:        rand.Text(),
		Kyma:      a.opts.KymaName,
		Watcher:   watcher,
		Operation: string(req.Operation),
		Object: report.ObjectRef{
			Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind,
			Namespace: req.Namespace, Name: req.Name,
			UID: meta.UID, ResourceVersion: meta.ResourceVersion,
		},
		ChangedAt: time.Now(),
	}
	if rep.Object.Name == "" {
		rep.Object.Name = meta.Name
	}
	if kyma := meta.Labels[v1beta2.KymaNameLabel]; kyma != "" {
		rep.Kyma = kyma
	}
	rep.Module = meta.Labels[v1beta2.ModuleNameLabel]
	return ResultReported, rep
}

// objectMeta is the part of metadata a report needs.
type objectMeta struct {
	Name              string            `json:"name"`
	UID               string            `json:"uid"`
	ResourceVersion   string            `json:"resourceVersion"`
	Labels            map[string]string `json:"labels"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
}

// detectChange reports whether an admission request changes the watched field,
// and returns the metadata of the object as it was (updates, deletes) or
// will be (creates). Creates and deletes always count. For an update, field
// status compares status; field spec compares everything that is neither
// metadata nor status — spec where the object has one, data for a ConfigMap —
// and also counts the start of a deletion.
func detectChange(op admissionv1.Operation, field v1beta2.FieldName, oldRaw, newRaw []byte) (bool, objectMeta, error) {
	decode := func(raw []byte) (map[string]any, objectMeta, error) {
		if len(raw) == 0 {
			return nil, objectMeta{}, nil
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, objectMeta{}, fmt.Errorf("decoding the object: %w", err)
		}
		var head struct {
			Metadata objectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, objectMeta{}, fmt.Errorf("decoding the object's metadata: %w", err)
		}
		return obj, head.Metadata, nil
	}
	oldObj, oldMeta, err := decode(oldRaw)
	if err != nil {
		return false, objectMeta{}, err
	}
	newObj, newMeta, err := decode(newRaw)
	if err != nil {
		return false, objectMeta{}, err
	}
	switch op {
	case admissionv1.Create:
		if newObj == nil {
			return false, objectMeta{}, errors.New("a create without an object")
		}
		return true, newMeta, nil
	case admissionv1.Delete:
		return true, oldMeta, nil
	case admissionv1.Update:
		if oldObj == nil || newObj == nil {
			return false, objectMeta{}, errors.New("an update without both objects")
		}
		if oldMeta.DeletionTimestamp == nil && newMeta.DeletionTimestamp != nil {
			return true, oldMeta, nil
		}
		return !reflect.DeepEqual(watched(oldObj, field), watched(newObj, field)), oldMeta, nil
	default:
		return false, objectMeta{}, fmt.Errorf("operation %s is not watched", op)
	}
}

func watched(obj map[string]any, field v1beta2.FieldName) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		switch {
		case field == v1beta2.StatusField && k == "status":
			out[k] = v
		case field != v1beta2.StatusField && k != "status" && k != "metadata" && k != "apiVersion" && k != "kind":
			out[k] = v
		}
	}
	return out
}

func parseValidatePath(path string) (watcher string, field v1beta2.FieldName, ok bool) {
	rest, found := strings.CutPrefix(path, ValidatePath)
	if !found {
		return "", "", false
	}
	watcher, f, found := strings.Cut(rest, "/")
	if !found || watcher == "" {
		return "", "", false
	}
	switch v1beta2.FieldName(f) {
	case v1beta2.SpecField, v1beta2.StatusField:
		return watcher, v1beta2.FieldName(f), true
	}
	return "", "", false
}
