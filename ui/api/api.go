package api

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	alertsapi "governor.dev/governor/alerts/api"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

// ErrInvalid: bad options.
var ErrInvalid = errors.New("api: invalid options")

//go:embed openapi.yaml
var openapi []byte

// OpenAPI returns the API's OpenAPI 3 document.
func OpenAPI() []byte { return openapi }

// Options configure New.
type Options struct {
	// Rules is required.
	Rules versioning.Store
	// Fleet and Alerts may be nil (their routes answer 503).
	Fleet  model.Fleet
	Alerts model.Alerts
	// Rollouts may be nil (the canary routes answer 503).
	Rollouts model.Rollouts
	// AlertRouting may be nil (the alerting configuration routes answer
	// 503); AlertBootstrap is shown while no version is saved.
	AlertRouting   model.AlertRouting
	AlertBootstrap string
	// ConfigBand gives the engine's configured band of a service; may be nil.
	ConfigBand model.ConfigBand
	// AlertService lists, edits and expires silences by matchers, as
	// Alertmanager's API does, and reads an alert's history; may be nil
	// (those routes answer 503; the short silence form goes through Alerts).
	AlertService *alertsapi.Service

	// AuditChecker verifies the audit chain for the audit verify route; nil: one of
	// its own over Rules (ui.New shares one between the pages and the API,
	// so that a whole walk done for one serves the other).
	AuditChecker *versioning.AuditChecker

	Clock  clock.Clock
	Logger *slog.Logger
	// MaxBody bounds request bodies; default 2 MiB.
	MaxBody int64
}

// API serves /api/v1.
type API struct{ o Options }

// New returns the API.
func New(o Options) (*API, error) {
	if o.Rules == nil {
		return nil, fmt.Errorf("%w: Options.Rules is required", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.AuditChecker == nil {
		o.AuditChecker = versioning.NewAuditChecker(o.Rules, versioning.AuditCheckerOptions{Clock: o.Clock})
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 2 << 20
	}
	return &API{o: o}, nil
}

var (
	anyRole     = []versioning.Role{versioning.RoleViewer, versioning.RoleOperator, versioning.RoleApprover, versioning.RoleAdmin}
	changeRoles = []versioning.Role{versioning.RoleOperator, versioning.RoleApprover, versioning.RoleAdmin}
	alertRoles  = []versioning.Role{versioning.RoleOperator, versioning.RoleAdmin}
)

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	httperr.Write(w, r, a.o.Logger, err)
}

// Routes mounts the API on r (mount r at /api/v1). The auth middleware must
// run before.
func (a *API) Routes(r chi.Router) {
	need := func(roles ...versioning.Role) func(http.Handler) http.Handler { return auth.Require(a.fail, roles...) }
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openapi)
	})
	r.Group(func(r chi.Router) {
		r.Use(need(anyRole...))
		r.Get("/overview", a.overview)
		r.Get("/services/{service}/versions", a.versions)
		r.Get("/services/{service}/versions/{n}", a.version)
		r.Get("/services/{service}/diff", a.diff)
		r.Get("/alerts", a.alerts)
		r.Get("/alerts/{id}/history", a.alertHistory)
		r.Get("/silences", a.silences)
		r.Get("/audit", a.audit)
		r.Get("/audit/verify", a.verify)
		r.Get("/services/{service}/canary", a.canary)
	})
	r.Group(func(r chi.Router) {
		r.Use(need(changeRoles...))
		r.Post("/services/{service}/versions", a.propose)
		r.Post("/services/{service}/versions/{n}/approve", a.decide("approve"))
		r.Post("/services/{service}/versions/{n}/reject", a.decide("reject"))
		r.Post("/services/{service}/versions/{n}/withdraw", a.decide("withdraw"))
		r.Post("/services/{service}/versions/{n}/rebase", a.decide("rebase"))
		r.Post("/services/{service}/rollback", a.rollback)
		r.Post("/services/{service}/canary", a.startCanary)
		r.Post("/services/{service}/canary/abort", a.canaryAction("abort"))
	})
	r.With(need(versioning.RoleApprover, versioning.RoleAdmin)).Post("/services/{service}/canary/promote", a.canaryAction("promote"))
	r.Group(func(r chi.Router) {
		r.Use(need(alertRoles...))
		r.Post("/alerts/{id}/ack", a.ack)
		r.Post("/silences", a.silence)
		r.Delete("/silences/{id}", a.expireSilence)
	})
	r.Group(func(r chi.Router) {
		r.Use(need(versioning.RoleAdmin))
		r.Get("/settings/alerting", a.alerting)
		r.Get("/settings/alerting/versions", a.alertingVersions)
		r.Put("/settings/alerting", a.saveAlerting)
		r.Post("/settings/alerting/rollback", a.rollbackAlerting)
		r.Get("/services/{service}/policy", a.policy)
		r.Put("/services/{service}/policy", a.setPolicy)
		r.Post("/services/{service}/emergency", a.emergency)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { a.fail(w, r, httperr.ErrNotFound) })
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) { methodNotAllowed(r, w, req) })
}

// methods are those the UI routes; a 405 lists those of them that the
// path has.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// AllowedMethods are the methods routes serves on path, for an Allow
// header: HEAD follows GET, which answers it without a body.
func AllowedMethods(routes chi.Routes, path string) []string {
	var allowed []string
	for _, m := range methods {
		if routes.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
			if m == http.MethodGet {
				allowed = append(allowed, http.MethodHead)
			}
		}
	}
	return allowed
}

// methodNotAllowed answers 405 with an Allow header and an error document,
// so that a script sending the wrong method learns which ones the path
// takes (not a 400 as for a malformed request).
func methodNotAllowed(routes chi.Routes, w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePath != "" {
		path = rc.RoutePath
	}
	allowed := AllowedMethods(routes, path)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, httperr.Body{
		Error:  fmt.Sprintf("api: method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allowed, ", ")),
		Status: http.StatusMethodNotAllowed,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body strictly (unknown fields refused) into v.
func (a *API) decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeMax(w, r, v, a.o.MaxBody)
}

// decodeMax is decode with a body of at most limit bytes.
func decodeMax(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			// 413 naming the limit (package httperr), not a field problem.
			return fmt.Errorf("api: body: %w", err)
		}
		return &versioning.InputError{Errors: []rules.FieldError{decodeProblem(err)}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &versioning.InputError{Errors: []rules.FieldError{{Field: "body", Problem: "must hold one JSON object"}}}
	}
	return nil
}

// decodeOptional is decode for an optional body: an empty one, whether
// its length was announced (Content-Length: 0) or not (a chunked or
// HTTP/2 request without a length), leaves v as it is.
func (a *API) decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	br := bufio.NewReader(r.Body)
	if _, err := br.Peek(1); errors.Is(err, io.EOF) {
		return nil
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	return a.decode(w, r, v)
}

// decodeProblem names the field a decoding error is about: a value of the
// wrong type or a field the operation does not have; "body" otherwise.
func decodeProblem(err error) rules.FieldError {
	if errors.Is(err, io.EOF) {
		return rules.FieldError{Field: "body", Problem: "is empty; this operation needs a JSON object"}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return rules.FieldError{Field: "body", Problem: httperr.TooLargeMessage(mbe.Limit)}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return rules.FieldError{Field: te.Field, Problem: fmt.Sprintf("must be %s, not a JSON %s", jsonKind(te.Type), te.Value)}
	}
	if q, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if name, uerr := strconv.Unquote(q); uerr == nil {
			return rules.FieldError{Field: name, Problem: fmt.Sprintf("%q is not a field of this operation", name)}
		}
	}
	return rules.FieldError{Field: "body", Problem: "not valid JSON for this operation: " + err.Error()}
}

// jsonKind describes what JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	default:
		return "an object"
	}
}

func service(r *http.Request) (string, error) {
	s := chi.URLParam(r, "service")
	return s, versioning.ValidateService(s)
}

func number(r *http.Request, name, raw string) (int64, error) {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 {
		return 0, &versioning.InputError{Errors: []rules.FieldError{{Field: name, Problem: "must be a positive integer"}}}
	}
	return n, nil
}

func (a *API) overview(w http.ResponseWriter, r *http.Request) {
	ov, err := model.Build(r.Context(), model.Sources{Rules: a.o.Rules, Fleet: a.o.Fleet, Alerts: a.o.Alerts})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ov)
}

func (a *API) versions(w http.ResponseWriter, r *http.Request) {
	svc, err := service(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f := versioning.ListFilter{Service: svc}
	q := r.URL.Query()
	var bad []rules.FieldError
	if s := q.Get("state"); s != "" {
		if st := versioning.State(s); st.Valid() {
			f.States = []versioning.State{st}
		} else {
			bad = append(bad, rules.FieldError{Field: "state",
				Problem: fmt.Sprintf("%q is not a version state (proposed, approved, published, superseded, rejected or withdrawn)", s)})
		}
	}
	f.Before = cursor(q, "before", &bad)
	limit := pageLimit(q, 50, &bad)
	if len(bad) > 0 {
		a.fail(w, r, &versioning.InputError{Errors: bad})
		return
	}
	vs, more, err := fetchPage(limit, func(n int) ([]versioning.Version, error) {
		f.Limit = n
		return a.o.Rules.List(r.Context(), f)
	}, func(last versioning.Version) (bool, error) {
		g := f
		g.Before, g.Limit = last.Number, 1
		past, err := a.o.Rules.List(r.Context(), g)
		return len(past) > 0, err
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if vs == nil {
		vs = []versioning.Version{}
	}
	var next int64
	if len(vs) > 0 {
		next = vs[len(vs)-1].Number
	}
	writeJSON(w, http.StatusOK, paged("versions", vs, more, "before", next))
}

func (a *API) getVersion(r *http.Request) (versioning.Version, error) {
	svc, err := service(r)
	if err != nil {
		return versioning.Version{}, err
	}
	n, err := number(r, "n", chi.URLParam(r, "n"))
	if err != nil {
		return versioning.Version{}, err
	}
	return a.o.Rules.Get(r.Context(), svc, n)
}

func (a *API) version(w http.ResponseWriter, r *http.Request) {
	v, err := a.getVersion(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *API) diff(w http.ResponseWriter, r *http.Request) {
	svc, err := service(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	from, err := number(r, "from", r.URL.Query().Get("from"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	to, err := number(r, "to", r.URL.Query().Get("to"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	va, err := a.o.Rules.Get(r.Context(), svc, from)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	vb, err := a.o.Rules.Get(r.Context(), svc, to)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	changes := versioning.Diff(va.Ruleset, vb.Ruleset)
	if changes == nil {
		changes = []versioning.Change{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"from": from, "to": to, "changes": changes})
}

// ProposeRequest is the body of POST /services/{service}/versions.
type ProposeRequest struct {
	BaseVersion int64           `json:"base_version"`
	Rebase      bool            `json:"rebase"`
	Reason      string          `json:"reason"`
	Ruleset     json.RawMessage `json:"ruleset"`
	Evidence    json.RawMessage `json:"evidence,omitempty"`
	Replaces    int64           `json:"replaces,omitempty"`
}

func (a *API) propose(w http.ResponseWriter, r *http.Request) {
	svc, err := service(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req ProposeRequest
	if err := a.decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	rs, err := versioning.DecodeRuleset(versioning.FormatJSON, req.Ruleset)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := a.o.Rules.Propose(r.Context(), versioning.Proposal{
		Service: svc, BaseVersion: req.BaseVersion, Rebase: req.Rebase, Ruleset: rs,
		Author: auth.FromContext(r.Context()).Actor(), Reason: req.Reason, Evidence: req.Evidence, Replaces: req.Replaces,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

// HeaderAlreadyRecorded, set to "true", marks the answer to an approve,
// reject, withdraw or rebase that repeats one already recorded (a client
// retrying after it lost the first answer): 200 and the version as it is
// now (for a rebase, the version the rebase made), with nothing written
// twice. The OpenAPI document says what counts as a repeat.
const HeaderAlreadyRecorded = "X-Governor-Already-Recorded"

// DecisionRequest is the body of approve, reject and withdraw. Sending one
// again that the store already recorded (the same person, comment and
// checksum) answers 200 with HeaderAlreadyRecorded.
type DecisionRequest struct {
	Comment string `json:"comment"`
	// Checksum, for approve, is the checksum of the ruleset the approver
	// reviewed: the approval then fails with 409, writing nothing, if the
	// proposal was revised since. Optional; reject and withdraw ignore it.
	Checksum string `json:"checksum,omitempty"`
}

func (a *API) decide(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		svc, err := service(r)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		n, err := number(r, "n", chi.URLParam(r, "n"))
		if err != nil {
			a.fail(w, r, err)
			return
		}
		var req DecisionRequest
		if err := a.decodeOptional(w, r, &req); err != nil {
			a.fail(w, r, err)
			return
		}
		by := auth.FromContext(r.Context()).Actor()
		var v versioning.Version
		switch kind {
		case "approve":
			if req.Checksum != "" {
				v, err = a.o.Rules.ApproveChecksum(r.Context(), svc, n, req.Checksum, by, req.Comment)
			} else {
				v, err = a.o.Rules.Approve(r.Context(), svc, n, by, req.Comment)
			}
		case "reject":
			v, err = a.o.Rules.Reject(r.Context(), svc, n, by, req.Comment)
		case "rebase":
			v, err = a.o.Rules.Rebase(r.Context(), svc, n, by)
		default:
			v, err = a.o.Rules.Withdraw(r.Context(), svc, n, by, req.Comment)
		}
		if err != nil {
			if cur, ok := a.alreadyRecorded(r, kind, svc, n, by.Name, req, err); ok {
				w.Header().Set(HeaderAlreadyRecorded, "true")
				writeJSON(w, http.StatusOK, cur)
				return
			}
			a.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// alreadyRecorded reports whether err, the store's refusal (409) of by's
// approve, reject, withdraw or rebase of version n, refuses a repeat of a
// decision by already made, as a client sends it that lost the first
// answer, and then returns the version as it is now (for a rebase, the
// version it made: model.AlreadyRebased says when a rebase is one). Read
// again after the refusal, the version must hold, for an approve, by's
// approval with req's comment in its current round, of req's checksum when
// it names one, while proposed or since gone live; for a reject
// (withdraw), it must have been rejected (withdrawn) by by with req's
// comment. Anything else stays the store's refusal: another comment, a
// revision of the ruleset since (by's approval was of an earlier round), a
// rebase, another person's decision. The store keeps refusing a second
// decision; telling a retry from a conflict is the API's concern.
func (a *API) alreadyRecorded(r *http.Request, kind, svc string, n int64, by string, req DecisionRequest, err error) (versioning.Version, bool) {
	if kind == model.DecisionRebase {
		return model.AlreadyRebased(r.Context(), a.o.Rules, svc, n, by, err)
	}
	if kind != model.DecisionApprove && kind != model.DecisionReject && kind != model.DecisionWithdraw {
		return versioning.Version{}, false
	}
	if !errors.Is(err, versioning.ErrInvalidState) && !errors.Is(err, versioning.ErrConflict) {
		return versioning.Version{}, false
	}
	cur, gerr := a.o.Rules.Get(r.Context(), svc, n)
	if gerr != nil {
		return versioning.Version{}, false
	}
	return cur, model.AlreadyDecided(cur, kind, by, req.Comment, req.Checksum)
}

// RollbackRequest is the body of POST /services/{service}/rollback.
type RollbackRequest struct {
	To     int64  `json:"to"`
	Reason string `json:"reason"`
	// From is the active version the rollback was decided against (the
	// "from" of the diff the caller reviewed): the rollback then fails
	// with 409, writing nothing, if another version is active. Optional;
	// without it the rollback applies over whatever is active.
	From int64 `json:"from,omitempty"`
}

func (a *API) rollback(w http.ResponseWriter, r *http.Request) {
	svc, err := service(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req RollbackRequest
	if err := a.decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	var fields []rules.FieldError
	if req.To < 1 {
		fields = append(fields, rules.FieldError{Field: "to", Problem: "must be a version number"})
	}
	if req.From < 0 {
		fields = append(fields, rules.FieldError{Field: "from", Problem: "must be a version number (or absent)"})
	}
	if len(fields) > 0 {
		a.fail(w, r, &versioning.InputError{Errors: fields})
		return
	}
	by := auth.FromContext(r.Context()).Actor()
	var v versioning.Version
	if req.From > 0 {
		v, err = a.o.Rules.RollbackFrom(r.Context(), svc, req.From, req.To, by, req.Reason)
	} else {
		v, err = a.o.Rules.Rollback(r.Context(), svc, req.To, by, req.Reason)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

func (a *API) alerts(w http.ResponseWriter, r *http.Request) {
	if a.o.Alerts == nil {
		a.fail(w, r, fmt.Errorf("%w: alerting is not configured", httperr.ErrUnavailable))
		return
	}
	firing, err := a.o.Alerts.Firing(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if firing == nil {
		firing = []model.Alert{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"firing": firing})
}

func (a *API) ack(w http.ResponseWriter, r *http.Request) {
	if a.o.Alerts == nil {
		a.fail(w, r, fmt.Errorf("%w: alerting is not configured", httperr.ErrUnavailable))
		return
	}
	al, err := a.o.Alerts.Ack(r.Context(), chi.URLParam(r, "id"), auth.FromContext(r.Context()).User.Name)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, al)
}

func (a *API) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := versioning.AuditFilter{Service: q.Get("service"), Actor: q.Get("actor"), Action: versioning.Action(q.Get("action")), Newest: q.Get("order") != "oldest"}
	var bad []rules.FieldError
	// Other components record actions of their own: any well-formed one may be asked for.
	if act := f.Action; act != "" && !act.WellFormed() {
		bad = append(bad, rules.FieldError{Field: "action", Problem: fmt.Sprintf("%q is not an audit action (lower-case letters, digits, _ or ., starting with a letter)", act)})
	}
	if o := q.Get("order"); o != "" && o != "newest" && o != "oldest" {
		bad = append(bad, rules.FieldError{Field: "order", Problem: fmt.Sprintf("%q: want newest or oldest", o)})
	}
	f.AfterSeq = cursor(q, "after", &bad)
	f.BeforeSeq = cursor(q, "before", &bad)
	limit := pageLimit(q, 100, &bad)
	if len(bad) > 0 {
		a.fail(w, r, &versioning.InputError{Errors: bad})
		return
	}
	entries, more, err := fetchPage(limit, func(n int) ([]versioning.AuditEntry, error) {
		f.Limit = n
		return a.o.Rules.Audit(r.Context(), f)
	}, func(last versioning.AuditEntry) (bool, error) {
		// Newest first pages on by before, oldest first by after.
		g := f
		if g.Newest {
			g.BeforeSeq = last.Seq
		} else {
			g.AfterSeq = last.Seq
		}
		g.Limit = 1
		past, err := a.o.Rules.Audit(r.Context(), g)
		return len(past) > 0, err
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if entries == nil {
		entries = []versioning.AuditEntry{}
	}
	cursorName, nextSeq := "after", int64(0)
	if f.Newest {
		cursorName = "before"
	}
	if len(entries) > 0 {
		nextSeq = entries[len(entries)-1].Seq
	}
	writeJSON(w, http.StatusOK, paged("entries", entries, more, cursorName, nextSeq))
}

// verify checks the audit chain through the AuditChecker: the whole chain,
// as a script checking the log expects, or with ?whole=false the entries
// since the last check (and the whole chain when its last whole walk is
// old enough), as the audit page does.
func (a *API) verify(w http.ResponseWriter, r *http.Request) {
	whole := true
	if s := r.URL.Query().Get("whole"); s != "" {
		var err error
		if whole, err = strconv.ParseBool(s); err != nil {
			a.fail(w, r, &versioning.InputError{Errors: []rules.FieldError{{Field: "whole", Problem: fmt.Sprintf("%q: want true or false", s)}}})
			return
		}
	}
	rep, err := a.o.AuditChecker.Check(r.Context(), whole)
	var ce *versioning.ChainError
	if errors.As(err, &ce) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "seq": ce.Seq, "problem": ce.Problem})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if rep.Pending {
		// Not verified yet: neither true nor false.
		writeJSON(w, http.StatusOK, map[string]any{"ok": nil, "pending": true, "running": rep.Running, "running_since": rep.RunningSince,
			"problem": "the whole chain was not verified yet since start; its first walk runs in the background (ask with whole=true to wait for one)"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "entries": rep.Entries, "head": rep.Head,
		"whole": rep.Whole, "whole_at": rep.WholeAt, "whole_entries": rep.WholeEntries, "new": rep.New, "next_whole": rep.NextWhole,
		"running": rep.Running})
}
