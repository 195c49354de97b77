package embedded

import (
	"encoding/json"
	"net/http"
)

// StatusHandler serves the target statuses as JSON, in the shape of
// Scraper.Targets: {"targets": [...]}.
func (s *Scraper) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Targets []TargetStatus `json:"targets"`
		}{s.Targets()})
	})
}
