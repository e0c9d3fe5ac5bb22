package remote

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCreateHeldUntilTheNewKindsHoldEnds: a create of a kind whose CRD was
// just seen Established is held for the rest of NewKindHold, measured from
// that moment; a kind not recorded, one recorded long enough ago, and the
// kinds of another runtime are not held; an older record is dropped when a
// later one is made.
func TestCreateHeldUntilTheNewKindsHoldEnds(t *testing.T) {
	gadget := schema.GroupKind{Group: "example.io", Kind: "Gadget"}
	widget := schema.GroupKind{Group: "example.io", Kind: "Widget"}
	otherGroup := schema.GroupKind{Group: "other.io", Kind: "Gadget"}
	c := &Cluster{known: newKnown(Identity{})}
	other := &Cluster{known: newKnown(Identity{})}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

	if held := c.CreateHeld(gadget, at); held != 0 {
		t.Errorf("before any record: held %s, want 0", held)
	}
	c.KindsEstablished([]schema.GroupKind{gadget}, at)
	for _, tt := range []struct {
		name string
		kind schema.GroupKind
		now  time.Time
		want time.Duration
	}{
		{"at once", gadget, at, NewKindHold},
		{"half-way", gadget, at.Add(NewKindHold / 2), NewKindHold / 2},
		{"when the hold ends", gadget, at.Add(NewKindHold), 0},
		{"later", gadget, at.Add(time.Hour), 0},
		{"another kind of the group", widget, at, 0},
		{"the kind's name in another group", otherGroup, at, 0},
	} {
		if held := c.CreateHeld(tt.kind, tt.now); held != tt.want {
			t.Errorf("%s: CreateHeld(%s) = %s, want %s", tt.name, tt.kind, held, tt.want)
		}
	}
	if held := other.CreateHeld(gadget, at); held != 0 {
		t.Errorf("another runtime: held %s, want 0 (the kind is new only where its CRD was created)", held)
	}

	later := at.Add(NewKindHold)
	c.KindsEstablished([]schema.GroupKind{widget}, later)
	if _, kept := c.known.established[gadget]; kept {
		t.Errorf("the record of %s outlived its hold", gadget)
	}
	if held := c.CreateHeld(widget, later.Add(time.Second)); held != NewKindHold-time.Second {
		t.Errorf("CreateHeld(%s) a second after its record = %s, want %s", widget, held, NewKindHold-time.Second)
	}
	c.KindsEstablished(nil, later.Add(time.Hour))
	if held := c.CreateHeld(widget, later); held != NewKindHold {
		t.Errorf("recording no kinds changed what is held: %s, want %s", held, NewKindHold)
	}
}
