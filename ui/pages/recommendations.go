package pages

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sync"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

// recommendationWorkers bounds the recommendations built at once.
const recommendationWorkers = 4

// recommendation is one proposal as the recommendations pages show it.
type recommendation struct {
	versioning.Version
	Changes []changeRow
	// Engine is the engine's evidence, rendered; nil for other evidence,
	// which EvidenceHTML shows as it is.
	Engine       *evidenceView
	EvidenceHTML template.HTML
	RawEvidence  string
	// Open: the version awaits a decision.
	Open                  bool
	ApproveWhy, RejectWhy string
	// CSRF is the viewer's token for the decision form.
	CSRF string
}

// recommendation builds the view of v: the diff against its parent, the
// evidence (with the metrics source's window before an engine proposal)
// and why the decision buttons are disabled for the viewer.
func (p *Pages) recommendation(ctx context.Context, v versioning.Version, pol versioning.Policy) recommendation {
	rec := recommendation{Version: v, Open: v.State == versioning.StateProposed}
	pr := auth.FromContext(ctx)
	rec.ApproveWhy, rec.RejectWhy = DecisionWhy(v, pol, pr)
	if pr != nil && pr.Session != nil {
		rec.CSRF = pr.Session.CSRF
	}
	var parent *versioning.Version
	if v.Parent > 0 {
		if pv, err := p.o.Rules.Get(ctx, v.Service, v.Parent); err == nil {
			parent = &pv
		}
	}
	if parent != nil {
		rec.Changes = changeRows(versioning.Diff(parent.Ruleset, v.Ruleset))
	} else if v.Parent == 0 {
		rec.Changes = changeRows(versioning.Diff(nil, v.Ruleset))
	}
	if len(v.Evidence) == 0 {
		return rec
	}
	rec.RawEvidence = prettyJSON(v.Evidence)
	ev, ok := parseEngineEvidence(v.Evidence)
	if !ok {
		rec.EvidenceHTML = p.evidenceHTML(v.Evidence)
		return rec
	}
	var charts []model.Chart
	var err error
	if w, ok := p.o.Charts.(model.Window); ok {
		charts, err = w.Window(ctx, v.Service, ev.At.Add(-evidenceWindow), ev.At, evidenceSignals...)
		if err != nil {
			p.o.Logger.Warn("pages: evidence charts", "service", v.Service, "version", v.Number, "err", err)
		}
	}
	view := p.buildEvidence(ev, charts, err)
	rec.Engine = &view
	return rec
}

func (p *Pages) recommendations(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	infos, err := p.o.Rules.Services(ctx)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	type open struct {
		v   versioning.Version
		pol versioning.Policy
	}
	var opens []open
	for _, in := range infos {
		if in.Pending == 0 {
			continue
		}
		vs, err := p.o.Rules.List(ctx, versioning.ListFilter{Service: in.Name, States: []versioning.State{versioning.StateProposed}})
		if err != nil {
			p.fail(w, r, err)
			return
		}
		pol, err := p.o.Rules.Policy(ctx, in.Name)
		if err != nil {
			p.fail(w, r, err)
			return
		}
		for _, v := range vs {
			opens = append(opens, open{v, pol})
		}
	}
	// Each engine recommendation queries the metrics source for its
	// window: a few at a time rather than one after another.
	items := make([]recommendation, len(opens))
	sem := make(chan struct{}, recommendationWorkers)
	var wg sync.WaitGroup
	for i, o := range opens {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			items[i] = p.recommendation(ctx, o.v, o.pol)
		}()
	}
	wg.Wait()
	// Most recent first, a revision counting as new: an approver sees a
	// proposal the engine just revised at the top again.
	slices.SortFunc(items, func(a, b recommendation) int { return latest(b.Version).Compare(latest(a.Version)) })
	p.render(w, r, http.StatusOK, "recommendations", "Recommendations", "recommendations", struct{ Items []recommendation }{items})
}

// recommendationPage shows one version's recommendation and evidence,
// whatever its state; the decision form only while it is proposed.
func (p *Pages) recommendationPage(w http.ResponseWriter, r *http.Request) {
	v, err := p.loadVersion(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	var banners []Banner
	pol, err := p.o.Rules.Policy(r.Context(), v.Service)
	if err != nil {
		if !errors.Is(err, versioning.ErrNotFound) {
			banners = append(banners, Banner{"warn", "The approval policy could not be read; the default is assumed."})
		}
		pol = versioning.DefaultPolicy(v.Service)
	}
	rec := p.recommendation(r.Context(), v, pol)
	p.render(w, r, http.StatusOK, "recommendation", fmt.Sprintf("Recommendation %s v%d", v.Service, v.Number), "recommendations", rec, banners...)
}

// latest is when v was last proposed or revised.
func latest(v versioning.Version) time.Time {
	if v.RevisedAt.After(v.CreatedAt) {
		return v.RevisedAt
	}
	return v.CreatedAt
}
