package config

import (
	"strings"
	"testing"
)

// business_hours with only a location keeps the location, with the default
// hours and days, and a misspelt zone there is refused by name.
func TestBusinessHoursLocationOnly(t *testing.T) {
	doc := func(loc string) []byte {
		return []byte(`{"timing": {"business_hours": {"location": "` + loc + `"}},
		  "receivers": [{"name": "w", "webhook": {"url": "https://hooks.example.com/y"}}]}`)
	}
	if _, err := Parse(doc("Europe/Pariss")); err == nil || !strings.Contains(err.Error(), `location "Europe/Pariss"`) {
		t.Errorf("business_hours.location \"Europe/Pariss\" (no such zone): error %v, want one naming the location", err)
	}
	c, err := Parse(doc("Europe/Paris"))
	if err != nil {
		t.Fatal(err)
	}
	bh := c.DispatchTiming().WithDefaults().BusinessHours
	if bh.Location != "Europe/Paris" || bh.StartHour != 9 || bh.EndHour != 17 {
		t.Errorf("business_hours with location Europe/Paris in force as %+v", bh)
	}
}
