// Package e2e drives Governor's web UI in headless Chromium (Debian's
// chromium with playwright-core from npm). TestBrowserWalkThrough (run.mjs)
// runs against the UI alone on a random loopback port with the scripted
// demo fleet of ui/demo; TestBrowserDevStack (devstack.mjs) runs against the
// real dev stack of `make run` started in process by engine/app: embedded
// NATS, SQLite in a temporary directory, the embedded metrics store, the
// demo fleet, the engine, the alerts manager and the UI, on second-scale
// intervals. Outside CI they skip when chromium, node or the npm package is
// missing; with CI=true they fail instead. Screenshots of each page land in
// e2e/screenshots/ and e2e/screenshots/devstack/.
package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	_ "modernc.org/sqlite"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/demo"
	"governor.dev/governor/ui/model"
)

const chromium = "/usr/bin/chromium"

// heldAlert is the ID of the P1 alert that fires for the whole walk-through.
const heldAlert = "payments-held"

func requireTools(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		testenv.Unavailable(t, "e2e: %s missing (apt-get install chromium)", chromium)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "e2e: node missing")
	}
	if _, err := os.Stat("node_modules/playwright-core"); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			testenv.Unavailable(t, "e2e: playwright-core not installed and npm missing")
		}
		out, err := exec.Command(npm, "install", "--no-audit", "--no-fund").CombinedOutput()
		if err != nil {
			testenv.Unavailable(t, "e2e: npm install failed: %v\n%s", err, out)
		}
	}
	return node
}

// TestBrowserWalkThrough walks the UI over the scripted demo fleet (run.mjs):
// a wrong password is refused; alice sees every service's load score update
// live and the incident on checkout, opens the service and the engine's
// proposal with its evidence, proposes a change of her own and is refused
// approving it (four eyes) before withdrawing it; bob approves the engine's
// proposal and rolls back to the version before with a reason (a blank one
// is refused); otto acknowledges a P1 alert, finds the approval and the
// rollback in the audit log and logs out, which ends the stream of an
// overview open in another tab; alice, no admin, is refused the settings.
func TestBrowserWalkThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: -short")
	}
	node := requireTools(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	defer st.Close()
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	defer db.Close()
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: st, BcryptCost: bcrypt.MinCost})
	require.NoError(t, err)
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	password := "e2e-" + hex.EncodeToString(b)
	for name, roles := range map[string][]versioning.Role{
		"alice": {versioning.RoleOperator, versioning.RoleApprover},
		"bob":   {versioning.RoleApprover},
		"otto":  {versioning.RoleOperator},
	} {
		_, err := am.CreateUser(ctx, name, password, roles, false)
		require.NoError(t, err)
	}
	fleet, alerts := &model.StaticFleet{}, model.NewMemoryAlerts(clock.Real{})
	do := demo.Options{Rules: st, Fleet: fleet, Alerts: alerts, Interval: 500 * time.Millisecond, IncidentAt: 4}
	require.NoError(t, demo.Seed(ctx, do))
	// The P1 otto acknowledges. The demo's own P1 fires for 14 s of every
	// 30 s cycle, so a walk-through that met it late in its cycle could see
	// it resolve between the page and the click; this one stays firing.
	alerts.Fire(model.Alert{ID: heldAlert, Tier: model.P1, Service: "payments",
		Summary: "payments: p99 above target for 5 minutes"})
	done := make(chan struct{})
	go func() { defer close(done); _ = demo.Run(ctx, do) }()
	defer func() { cancel(); <-done }()
	h, err := ui.New(ui.Options{Rules: st, Auth: am, Fleet: fleet, Alerts: alerts, LiveInterval: 300 * time.Millisecond})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()

	shots, err := filepath.Abs("screenshots")
	require.NoError(t, err)
	old, err := filepath.Glob(filepath.Join(shots, "*.png"))
	require.NoError(t, err)
	for _, f := range old { // only this run's pictures (screenshots/devstack is the other test's)
		require.NoError(t, os.Remove(f))
	}
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer rcancel()
	cmd := exec.CommandContext(rctx, node, "run.mjs")
	cmd.Env = append(os.Environ(), "BASE_URL="+srv.URL, "USER_PASSWORD="+password, "SCREENSHOTS="+shots, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("run.mjs:\n%s", out)
	require.NoError(t, err, "the browser walk-through failed")

	// Every page was photographed.
	pngs, err := filepath.Glob(filepath.Join(shots, "*.png"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pngs), 17)
	for _, p := range pngs {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Greater(t, fi.Size(), int64(5000), "%s looks empty", p)
	}

	// What the browser did is in the store.
	v3, err := st.Get(ctx, "checkout", 3)
	require.NoError(t, err)
	require.Equal(t, "bob", v3.Approvals[0].Approver)
	active, err := st.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), active.RollbackOf)
	require.Equal(t, "bob", active.Author)
	require.Equal(t, "errors went up after v3", active.Reason, "the rollback keeps the reason typed in the browser")
	v4, err := st.Get(ctx, "checkout", 4)
	require.NoError(t, err)
	require.Equal(t, versioning.StateWithdrawn, v4.State, "alice withdrew her own proposal")
	require.Empty(t, v4.Approvals, "nobody approved alice's own proposal")
	hist, err := alerts.History(ctx, 0)
	require.NoError(t, err)
	i := slices.IndexFunc(hist, func(a model.Alert) bool { return a.ID == heldAlert })
	require.GreaterOrEqual(t, i, 0, "the held P1 is in the history")
	require.Equal(t, "otto", hist[i].AckedBy)
	require.True(t, hist[i].Resolved.IsZero(), "acknowledging does not resolve")
	_, err = st.VerifyAudit(ctx)
	require.NoError(t, err)
}
