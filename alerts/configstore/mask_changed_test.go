package configstore

import (
	"strings"
	"testing"
)

// A secret that changed behind the same mask is marked; one unchanged, or
// one whose mask differs anyway, is only masked.
func TestMaskChangedMarksASecretChangedBehindTheSameMask(t *testing.T) {
	base := `{"receivers":[{"name":"p","pagerduty":{"routing_key":"old"}},{"name":"q","pagerduty":{"routing_key":"same"}}]}`
	doc := `{"receivers":[{"name":"p","pagerduty":{"routing_key":"new"}},{"name":"q","pagerduty":{"routing_key":"same"}}]}`
	got, err := MaskChanged(doc, base, "(another secret)")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "old") || strings.Contains(got, "new") || strings.Contains(got, "same") {
		t.Fatalf("a secret shows: %s", got)
	}
	if strings.Count(got, "(another secret)") != 1 || !strings.Contains(got, `"<masked> (another secret)"`) {
		t.Fatalf("MaskChanged = %s, want only p's key marked", got)
	}
	plain, err := Mask(doc)
	if err != nil {
		t.Fatal(err)
	}
	if same, _ := MaskChanged(doc, doc, "(another secret)"); same != plain {
		t.Fatalf("against itself MaskChanged = %s, want Mask's %s", same, plain)
	}
}
