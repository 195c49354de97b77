// Package api serves the alerts manager as JSON over HTTP: the alerts with
// what keeps them quiet, their history, acknowledgements and silences.
// Authentication is the embedding server's job; Options.Author names the
// person behind a request so that acknowledgements and silences record who
// made them.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

// Options of the handler. Zero fields take defaults.
type Options struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// Author returns the authenticated person of a request; when nil the
	// "by" / "created_by" field of the body is used.
	Author func(*http.Request) string
	// MaxBody bounds request bodies; default 64 KiB.
	MaxBody int64
}

type handler struct {
	m *manager.Manager
	o Options
	// editMu makes each edit of a silence (read, then write) one step
	// with respect to other edits and expiries: an in-place edit that read
	// the silence active does not bring it back after an expiry.
	editMu sync.Mutex
}

// New returns the handler with routes
//
//	GET    /alerts                      alerts of the last step
//	GET    /alerts/{fingerprint}/history state changes, ?limit=
//	POST   /alerts/{fingerprint}/ack    {"by", "comment"}
//	GET    /silences                    each with "status": {"state": "pending" | "active" | "expired"}; ?state= filters (repeatable)
//	POST   /silences                    {"matchers", "starts_at", "ends_at", "created_by", "comment"}; 400 if ends_at is past;
//	                                    with "id", edits that silence as Alertmanager does (see addSilence)
//	DELETE /silences/{id}               expire now
func New(m *manager.Manager, o Options) http.Handler {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 64 << 10
	}
	h := &handler{m: m, o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /alerts", h.alerts)
	mux.HandleFunc("GET /alerts/{fp}/history", h.history)
	mux.HandleFunc("POST /alerts/{fp}/ack", h.ack)
	mux.HandleFunc("GET /silences", h.silences)
	mux.HandleFunc("POST /silences", h.addSilence)
	mux.HandleFunc("DELETE /silences/{id}", h.expireSilence)
	return mux
}

func (h *handler) alerts(w http.ResponseWriter, r *http.Request) {
	h.reply(w, http.StatusOK, h.m.Alerts(h.o.Clock.Now()))
}

func (h *handler) history(w http.ResponseWriter, r *http.Request) {
	fp, err := alerts.ParseFingerprint(r.PathValue("fp"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > 1000 {
			h.fail(w, r, fmt.Errorf("%w: limit: want 1 to 1000", alerts.ErrInvalid))
			return
		}
	}
	hist, err := h.m.History(r.Context(), fp, limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if hist == nil {
		hist = []store.HistoryEntry{} // a list, as GET /alerts and /silences: [] and not null
	}
	h.reply(w, http.StatusOK, hist)
}

type ackRequest struct {
	By      string `json:"by"`
	Comment string `json:"comment"`
}

func (h *handler) ack(w http.ResponseWriter, r *http.Request) {
	fp, err := alerts.ParseFingerprint(r.PathValue("fp"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req ackRequest
	if err := h.decode(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if h.o.Author != nil {
		req.By = h.o.Author(r)
	}
	ack, err := h.m.Acknowledge(r.Context(), fp, req.By, req.Comment, h.o.Clock.Now())
	if err != nil && ack.By == "" {
		h.fail(w, r, err)
		return
	}
	if err != nil {
		// Recorded; telling a receiver failed and is retried or logged.
		h.o.Logger.Warn("acknowledgement recorded, notification not queued", "fingerprint", fp, "err", err)
	}
	h.reply(w, http.StatusOK, ack)
}

// SilenceStatus is the status of a listed silence, as Alertmanager's.
type SilenceStatus struct {
	State silence.State `json:"state"`
}

// Silence is a silence as the API shows it: with its state at the time of
// the request.
type Silence struct {
	silence.Silence
	Status SilenceStatus `json:"status"`
}

func (h *handler) view(s silence.Silence, now time.Time) Silence {
	return Silence{Silence: s, Status: SilenceStatus{State: s.State(now)}}
}

// silences lists the silences, oldest start first; each ?state= given
// (pending, active, expired) keeps those in that state.
func (h *handler) silences(w http.ResponseWriter, r *http.Request) {
	var want []silence.State
	for _, v := range r.URL.Query()["state"] {
		st, err := silence.ParseState(v)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		want = append(want, st)
	}
	now := h.o.Clock.Now()
	out := []Silence{} // [] and not null when there are none
	for _, s := range h.m.Silences() {
		v := h.view(s, now)
		if len(want) == 0 || slices.Contains(want, v.Status.State) {
			out = append(out, v)
		}
	}
	h.reply(w, http.StatusOK, out)
}

// silenceRequest is the body of POST /silences. The times are RFC 3339
// strings, parsed here so that an error names the field.
type silenceRequest struct {
	// ID, when set, names the silence the request edits.
	ID        string          `json:"id"`
	Matchers  alerts.Matchers `json:"matchers"`
	StartsAt  string          `json:"starts_at"`
	EndsAt    string          `json:"ends_at"`
	CreatedBy string          `json:"created_by"`
	Comment   string          `json:"comment"`
}

// parseTime reads an RFC 3339 time of the field; "" is the zero time.
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %q is not an RFC 3339 time like \"2006-01-02T15:04:05Z\"", alerts.ErrInvalid, field, s)
	}
	return t, nil
}

// addSilence creates a silence, 201, or with "id" edits one, as
// Alertmanager does: an edit that keeps the matchers of an active silence
// and its start (an omitted starts_at keeps it), or of a pending silence
// without starting in the past, changes it in place, 200. Any other edit
// expires the silence (if it has not ended) and creates a new one, 201,
// so that the list keeps what was in force and until when. An unknown id
// is 404.
func (h *handler) addSilence(w http.ResponseWriter, r *http.Request) {
	var req silenceRequest
	if err := h.decode(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	starts, err := parseTime("starts_at", req.StartsAt)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ends, err := parseTime("ends_at", req.EndsAt)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.o.Author != nil {
		req.CreatedBy = h.o.Author(r)
	}
	now := h.o.Clock.Now()
	next := silence.Silence{Matchers: req.Matchers, StartsAt: starts, EndsAt: ends,
		CreatedBy: req.CreatedBy, Comment: req.Comment, CreatedAt: now}
	if req.ID == "" {
		if next.StartsAt.IsZero() {
			next.StartsAt = now
		}
		s, err := h.m.AddSilence(r.Context(), next)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.reply(w, http.StatusCreated, h.view(s, now))
		return
	}
	s, created, err := h.editSilence(r, req.ID, next, now)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	h.reply(w, status, h.view(s, now))
}

// editSilence replaces the silence id with next; created reports a new
// silence. The new silence is stored before the old one is expired: should
// the expiry fail, both mute for a while, and the alert stays quiet.
func (h *handler) editSilence(r *http.Request, id string, next silence.Silence, now time.Time) (s silence.Silence, created bool, err error) {
	h.editMu.Lock()
	defer h.editMu.Unlock()
	list := h.m.Silences()
	i := slices.IndexFunc(list, func(s silence.Silence) bool { return s.ID == id })
	if i < 0 {
		return silence.Silence{}, false, fmt.Errorf("%w: silence %q", alerts.ErrNotFound, id)
	}
	old := list[i]
	inPlace := next
	if inPlace.StartsAt.IsZero() {
		inPlace.StartsAt = old.StartsAt
	}
	if old.UpdatableInPlace(inPlace, now) {
		inPlace.ID, inPlace.CreatedAt = old.ID, old.CreatedAt
		s, err = h.m.AddSilence(r.Context(), inPlace)
		return s, false, err
	}
	if next.StartsAt.IsZero() {
		next.StartsAt = now
	}
	if s, err = h.m.AddSilence(r.Context(), next); err != nil {
		return silence.Silence{}, false, err
	}
	if old.State(now) != silence.StateExpired {
		if err := h.m.ExpireSilence(r.Context(), old.ID, now); err != nil {
			return silence.Silence{}, false, fmt.Errorf("silence %s created, %s not expired: %w", s.ID, old.ID, err)
		}
	}
	return s, true, nil
}

func (h *handler) expireSilence(w http.ResponseWriter, r *http.Request) {
	// Not while an edit that read the silence active writes it back.
	h.editMu.Lock()
	defer h.editMu.Unlock()
	if err := h.m.ExpireSilence(r.Context(), r.PathValue("id"), h.o.Clock.Now()); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decode reads a strict JSON body: one JSON value, with no unknown field
// and nothing but white space after it, within MaxBody bytes.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		off := dec.InputOffset()
		if _, err = dec.Token(); errors.Is(err, io.EOF) {
			return nil
		}
		if !isTooLarge(err) {
			return fmt.Errorf("%w: body: trailing data after the JSON value at offset %d", alerts.ErrInvalid, off)
		}
	}
	if isTooLarge(err) {
		return fmt.Errorf("%w: body: larger than %d bytes", alerts.ErrInvalid, h.o.MaxBody)
	}
	return fmt.Errorf("%w: body: %v", alerts.ErrInvalid, err)
}

func isTooLarge(err error) bool {
	var tl *http.MaxBytesError
	return errors.As(err, &tl)
}

// fail maps domain errors to HTTP statuses, in one place.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, alerts.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, alerts.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, alerts.ErrClosed):
		status = http.StatusServiceUnavailable
	}
	if status == http.StatusInternalServerError {
		h.o.Logger.Error("alerts api", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	h.reply(w, status, map[string]string{"error": err.Error()})
}

func (h *handler) reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
