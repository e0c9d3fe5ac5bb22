package labelgroup

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGroup(t *testing.T) {
	everyone := Group{Name: "all"}
	if err := everyone.Compile(); err != nil {
		t.Fatal(err)
	}
	if !everyone.Matches(nil) || everyone.Location() != time.UTC {
		t.Errorf("no selector and no time zone: every Kyma, in UTC; got matches %v, %v", everyone.Matches(nil), everyone.Location())
	}
	dev := Group{Name: "dev", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}, TimeZone: "Europe/Berlin"}
	if err := dev.Compile(); err != nil {
		t.Fatal(err)
	}
	if !dev.Matches(map[string]string{"env": "dev"}) || dev.Matches(map[string]string{"env": "prod"}) || dev.Location().String() != "Europe/Berlin" {
		t.Errorf("dev group: matches dev %v, prod %v, location %v", dev.Matches(map[string]string{"env": "dev"}), dev.Matches(map[string]string{"env": "prod"}), dev.Location())
	}
	if (&Group{}).Matches(nil) {
		t.Error("a group that was not compiled matches nothing")
	}
	for _, tt := range []struct {
		group Group
		want  string
	}{
		{Group{}, "name is empty"},
		{Group{Name: "x", Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}}, "selector:"},
		{Group{Name: "x", TimeZone: "Mars/Base"}, `timeZone "Mars/Base"`},
	} {
		if err := tt.group.Compile(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want an error with %q", tt.group, err, tt.want)
		}
	}
	if _, err := Cron.Parse("@hourly"); err != nil {
		t.Errorf("descriptors are allowed: %v", err)
	}
}
