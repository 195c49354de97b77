package watch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/rules"
)

// This file drives state with generated sequences of what a watcher meets
// (stable values, canary records, deletions, an applier that refuses,
// reconnects, resyncs and restarts that load the cache files of the
// previous process) and checks after every step what the package
// documentation promises:
//
//	(a) the version running is the last one the applier accepted in this
//	    process (or restored from the cache), content included;
//	(b) once the canary key is known, the instance runs no version above the
//	    stable one that no current canary selecting it holds, unless its
//	    target, the stable version and the last stable version it ran (in
//	    this process or before a restart) were all refused;
//	(c) an envelope (version and checksum) the applier refused is not
//	    offered to it again in the same process;
//	(d) when the instance is not on its target because the applier refused
//	    the target, heartbeats repeat the target's NACK;
//	(e) a version below the running one is applied only when leaving a
//	    version above the stable one that no canary selecting the instance
//	    holds, and every version offered to the applier is the one the
//	    instance should run: its target, else the stable version, else the
//	    last stable version it ran, skipping refused ones;
//	(f) every ACK answers the version just applied, every NACK of a refusal
//	    one the applier refused, and each report carries the version running
//	    when it was sent;
//	(g) after a valid value the instance is not left below the version it
//	    should run; at start it runs the cached version, or when the
//	    applier refuses that, the last stable version it ran (kept beside
//	    the cache), unless both are refused; offers nothing else; and its
//	    heartbeats repeat the NACK of a refused cached version. The cached
//	    versions refused at start count as refused in this process for (c);
//	(h) the content the instance runs is that of the version it reports:
//	    once the values are delivered, when the envelope it should run has
//	    the version it reports (running, in its reports and heartbeats), the
//	    checksum the applier last accepted is that envelope's, also after
//	    the same number was published again with other content;
//	(i) an envelope delivered again (the same version and checksum: a new
//	    revision of the same value, a resync) is neither applied nor ACKed
//	    again; the only report it may bring is the NACK of a refused target
//	    that heartbeats did not already repeat.
//
// A failure prints the seed and the steps, to be kept as a named test.

// seqChooser supplies the generator's choices: a seeded PRNG, or the bytes
// of a fuzz input.
type seqChooser interface {
	intn(n int) int
	done() bool
}

type rngChooser struct {
	r     *rand.Rand
	steps int
}

func (c *rngChooser) intn(n int) int { return c.r.IntN(n) }
func (c *rngChooser) done() bool {
	c.steps--
	return c.steps < 0
}

type byteChooser struct{ b []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}
func (c *byteChooser) done() bool { return len(c.b) == 0 }

type envKey struct {
	version  int64
	checksum string
}

func keyOf(e *rules.Envelope) envKey { return envKey{e.Version, e.Checksum} }

// seqRun is one generated sequence: the bucket (world), the process under
// test and what the harness knows independently of it.
type seqRun struct {
	t      testing.TB
	c      seqChooser
	desc   string // mode of the sequence, for failure messages
	steps  []string
	labels map[string]string
	cache  string // "" when the sequence runs without a cache

	// The applier: fixed refusals per envelope (the same in every process),
	// or flaky ones (a chance on every call).
	flaky   bool
	refuses func(envKey) bool

	// The bucket: each write takes a revision.
	rev          int
	stableRev    int
	stableVal    []byte
	stableEnv    *rules.Envelope // nil when the key holds an invalid value
	maxStable    int64           // highest stable version published
	canaryRev    int             // 0: never written
	canaryVal    []byte          // nil once deleted
	canaryRec    *Canary         // nil when absent or invalid
	lastStableOK *rules.Envelope // last stable version run by any process

	// The process.
	s                *state
	reports          []*Report
	connected        bool
	seenStable       int
	seenCanary       int
	canaryKnownWatch bool
	canaryKnown      bool
	stable           *rules.Envelope // the process's view of the stable key
	canary           *Canary         // its current valid canary record
	refused          map[envKey]bool // refused in this process
	applied          *rules.Envelope // last accepted in this process
	nackedApply      map[int64]bool  // versions NACKed for a refusal
	rejectedInStep   bool            // the last value delivered was refused: its NACK may stand
	attemptsInStep   int
	processes        int
	loadingCache     bool
	startOffers      []*rules.Envelope // what the process may offer at start, in order
	startOffered     int               // how many of them it offered
}

func (r *seqRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s: %s\nsteps:\n  %s", r.desc, fmt.Sprintf(format, args...), strings.Join(r.steps, "\n  "))
}

func (r *seqRun) log(format string, args ...any) {
	r.steps = append(r.steps, fmt.Sprintf(format, args...))
}

// seqApplier refuses per seqRun and checks (c) and (e) on every call.
type seqApplier struct{ r *seqRun }

func (a seqApplier) Apply(rs *rules.Ruleset, version int64) error {
	r := a.r
	r.t.Helper()
	sum, err := rs.Checksum()
	if err != nil {
		r.fail("applier given an invalid ruleset: %v", err)
	}
	k := envKey{version, sum}
	r.attemptsInStep++
	if r.attemptsInStep > 4 {
		r.fail("%d attempts in one step: the applier is retried in a loop", r.attemptsInStep)
	}
	loading := r.loadingCache
	if loading {
		// (g) at start: the cached version, then the cached stable one.
		if r.startOffered >= len(r.startOffers) || keyOf(r.startOffers[r.startOffered]) != k {
			r.fail("(g) at start the applier was offered v%d %s; the cache files hold %v", version, sum[:15], r.startOffers)
		}
		r.startOffered++
	} else {
		// (c)
		if r.refused[k] {
			r.fail("(c) v%d %s offered again after the applier refused it in this process", version, sum[:15])
		}
		// (e)
		d := r.desired()
		if d == nil || keyOf(d) != k {
			r.fail("(e) applier offered v%d %s; the instance should run %s", version, sum[:15], describe(d))
		}
		if cur := r.s.running.Load(); version < cur && !r.leaving(cur) {
			r.fail("(e) applier offered v%d below the running v%d, which the instance is not leaving", version, cur)
		}
	}
	refuse := r.flaky && r.c.intn(3) == 0 || !r.flaky && r.refuses(k)
	r.log("  apply v%d %s: refused=%v", version, sum[7:15], refuse)
	if refuse {
		r.refused[k] = true
		return fmt.Errorf("governor: v%d refused by this configuration", version)
	}
	r.applied = &rules.Envelope{Service: "checkout", Version: version, Checksum: sum}
	if r.stable != nil && keyOf(r.stable) == k {
		r.lastStableOK = r.stable
	}
	return nil
}

// leaving reports whether the running version cur is one the instance must
// leave: above the stable version, held by no current canary selecting it.
func (r *seqRun) leaving(cur int64) bool {
	return r.canaryKnown && r.stable != nil && cur > r.stable.Version && !r.held()
}

// held reports whether a current canary selecting the instance holds the
// envelope running (its version and content).
func (r *seqRun) held() bool {
	c := r.canary
	return c != nil && r.selects(c) && r.applied != nil && keyOf(c.Envelope) == keyOf(r.applied)
}

// runs reports whether the envelope the applier last accepted is e.
func (r *seqRun) runs(e *rules.Envelope) bool {
	return r.applied != nil && keyOf(r.applied) == keyOf(e)
}

func (r *seqRun) selects(c *Canary) bool {
	return c.Selector.Selects("checkout", "i-1", r.labels)
}

func (r *seqRun) target() *rules.Envelope {
	t := r.stable
	if c := r.canary; c != nil && r.selects(c) && (t == nil || c.Envelope.Version > t.Version) {
		t = c.Envelope
	}
	return t
}

// desired is what the documentation says the instance should run: its
// target, else the stable version, else the last stable version it ran,
// skipping those refused in this process.
func (r *seqRun) desired() *rules.Envelope {
	for _, e := range []*rules.Envelope{r.target(), r.stable, r.lastStableOK} {
		if e != nil && !r.refused[keyOf(e)] {
			return e
		}
	}
	return nil
}

func describe(e *rules.Envelope) string {
	if e == nil {
		return "nothing"
	}
	return fmt.Sprintf("v%d %s", e.Version, e.Checksum[:15])
}

// seqEnvelope builds version v with one of a few contents.
func seqEnvelope(t testing.TB, v int64, content int) *rules.Envelope {
	env, err := rules.NewEnvelope(v, ruleset("checkout", float64(v*10)+float64(content)))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func (r *seqRun) newProcess() {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, "checkout")
	if err != nil {
		r.t.Fatal(err)
	}
	r.processes++
	if r.cache == "" {
		// Nothing of the previous process survives.
		r.lastStableOK = nil
	}
	r.reports = nil
	r.refused = map[envKey]bool{}
	r.nackedApply = map[int64]bool{}
	r.applied = nil
	r.stable, r.canary = nil, nil
	r.canaryKnown, r.connected = false, false
	r.seenStable, r.seenCanary = 0, 0
	r.s = &state{service: "checkout", instance: "i-1", labels: r.labels, maxBytes: MaxCanaryBytes,
		applier: seqApplier{r}, cachePath: r.cache, now: func() time.Time { return time.Unix(1, 0) },
		onError: func(error) {}, m: m}
	r.s.send = func(rep *Report) {
		if rep.Running != r.s.running.Load() {
			r.fail("(f) report %+v sent while running v%d", rep, r.s.running.Load())
		}
		r.reports = append(r.reports, rep)
	}
	r.startOffers, r.startOffered = nil, 0
	if r.cache != "" {
		cached, err := LoadCache(r.cache, "checkout")
		if err != nil {
			r.t.Fatal(err)
		}
		good, err := LoadCache(stableCachePath(r.cache), "checkout")
		if err != nil {
			r.t.Fatal(err)
		}
		if cached != nil {
			r.startOffers = append(r.startOffers, cached)
			if good != nil && keyOf(good) != keyOf(cached) {
				r.startOffers = append(r.startOffers, good)
			}
		}
	}
	r.loadingCache = true
	r.s.loadCache()
	r.loadingCache = false
	r.checkStart()
}

// checkStart verifies (g) once the cache is loaded: the instance runs the
// first cached version the applier accepted, and heartbeats repeat the
// NACK of the cached version if the applier refused it.
func (r *seqRun) checkStart() {
	r.t.Helper()
	for _, e := range r.startOffers {
		if !r.refused[keyOf(e)] {
			if r.applied == nil || keyOf(r.applied) != keyOf(e) {
				r.fail("(g) at start running %s, the applier did not refuse the cached %s", describe(r.s.current), describe(e))
			}
			break
		}
	}
	if len(r.startOffers) > 0 && r.refused[keyOf(r.startOffers[0])] {
		want := r.startOffers[0].Version
		if v, reason, _ := r.s.nack(); v != want || reason != ReasonApply {
			r.fail("(g) cached v%d refused at start, heartbeats repeat the NACK (%d, %s)", want, v, reason)
		}
	}
}

// handleStable delivers the stable key's value to the process.
func (r *seqRun) handleStable() {
	r.seenStable = r.stableRev
	r.rejectedInStep = r.stableEnv == nil
	if env := r.stableEnv; env != nil {
		if r.stable == nil || env.Version > r.stable.Version || (env.Version == r.stable.Version && env.Checksum != r.stable.Checksum) {
			r.stable = env
		}
		if r.applied != nil && keyOf(r.applied) == keyOf(r.stable) {
			r.lastStableOK = r.stable
		}
	} else {
		r.rejectedInStep = true
	}
	r.s.onStable(r.stableVal)
}

// handleCanary delivers the canary key's value (or its deletion).
func (r *seqRun) handleCanary() {
	r.seenCanary = r.canaryRev
	r.canaryKnown = true
	r.canary = r.canaryRec
	r.rejectedInStep = r.canaryVal != nil && r.canaryRec == nil
	if r.canaryVal == nil {
		r.s.onCanaryGone()
		return
	}
	if r.canaryRec == nil {
		r.rejectedInStep = true
	}
	r.s.onCanary(r.canaryVal)
}

// connect starts a watch: the latest value of each key not handled yet,
// then the end of the initial values.
func (r *seqRun) connect() {
	r.connected = true
	if r.stableRev > r.seenStable {
		r.handleStable()
	}
	known := r.canaryRev > 0
	if r.canaryRev > r.seenCanary {
		r.handleCanary()
	}
	r.canaryKnown = true
	if known {
		r.s.settle()
	} else {
		r.canary = nil
		r.s.onCanaryGone()
	}
}

func (r *seqRun) writeStable(val []byte, env *rules.Envelope) {
	r.rev++
	r.stableRev, r.stableVal, r.stableEnv = r.rev, val, env
	if env != nil {
		r.maxStable = max(r.maxStable, env.Version)
	}
	if r.connected {
		r.handleStable()
	}
}

func (r *seqRun) writeCanary(val []byte, rec *Canary) {
	r.rev++
	r.canaryRev, r.canaryVal, r.canaryRec = r.rev, val, rec
	if r.connected {
		r.handleCanary()
	}
}

func (r *seqRun) selector() (Selector, string) {
	if r.c.intn(3) == 0 {
		return Selector{Labels: map[string]string{"zone": "b"}}, "zone b"
	}
	return Selector{Labels: map[string]string{"zone": "a"}}, "zone a"
}

// step generates and runs one event.
func (r *seqRun) step() {
	t := r.t
	base := r.maxStable
	switch k := r.c.intn(21); {
	case k < 4: // a newer stable version
		env := seqEnvelope(t, base+1, 0)
		r.log("stable v%d", env.Version)
		r.writeStable(mustJSON(t, env), env)
	case k == 4: // the same number with other content (a store restored
		// from a backup or recreated, published into a recreated bucket):
		// the highest stable version, or the version the instance runs
		v := max(base, 1)
		if cur := r.s.running.Load(); cur > 0 && r.c.intn(2) == 0 {
			v = cur
		}
		n := 1 + r.c.intn(2)
		env := seqEnvelope(t, v, n)
		r.log("stable v%d content %d", v, n)
		r.writeStable(mustJSON(t, env), env)
	case k == 5: // an older version delivered again (the publisher never
		// writes one to the key: a stale delivery, ignored)
		if r.stable == nil || r.stable.Version < 2 || !r.connected {
			return
		}
		v := 1 + int64(r.c.intn(int(r.stable.Version-1)))
		r.log("stable v%d delivered again (older)", v)
		r.s.onStable(mustJSON(t, seqEnvelope(t, v, 0)))
	case k == 6: // an invalid stable value
		b := bytes.Replace(mustJSON(t, seqEnvelope(t, base+1, 0)), []byte(`"sha256:`), []byte(`"sha256:00`), 1)
		if r.c.intn(2) == 0 {
			b = []byte("not json")
		}
		r.log("stable invalid %.20q", b)
		r.writeStable(b, nil)
	case k < 11: // a canary record
		v := base + 1 + int64(r.c.intn(3))
		older := ""
		if r.c.intn(5) == 0 && base > 1 {
			v, older = 1+int64(r.c.intn(int(base))), " (not above the stable)"
		}
		n := r.c.intn(2)
		sel, who := r.selector()
		env := seqEnvelope(t, v, n)
		b, err := EncodeCanary(&Canary{Selector: sel, Envelope: env})
		if err != nil {
			t.Fatal(err)
		}
		r.log("canary v%d content %d for %s%s", v, n, who, older)
		r.writeCanary(b, &Canary{Selector: sel, Envelope: env})
	case k == 11: // an invalid canary record
		r.log("canary invalid")
		r.writeCanary([]byte(fmt.Sprintf(`{"selector":{"percent":100},"envelope":{"service":"checkout","version":%d}}`, base+1)), nil)
	case k < 14: // the canary key deleted (abort)
		if r.canaryVal == nil {
			return
		}
		r.log("canary deleted")
		r.writeCanary(nil, nil)
	case k == 14: // promotion: the canary's envelope becomes the stable one
		c := r.canaryRec
		if c == nil || c.Envelope.Version <= r.maxStable {
			return
		}
		r.log("promote v%d", c.Envelope.Version)
		r.writeStable(mustJSON(t, c.Envelope), c.Envelope)
		r.writeCanary(nil, nil)
	case k == 15: // a resync: a key without a value is read as deleted
		if !r.connected {
			return
		}
		r.log("resync")
		if r.canaryVal == nil {
			r.canary = nil
			r.canaryKnown = true
			r.s.onCanaryGone()
		}
	case k == 16: // the connection drops
		if !r.connected {
			return
		}
		r.log("disconnect")
		r.connected = false
	case k == 17: // the connection comes back
		if r.connected {
			return
		}
		r.log("reconnect")
		r.connect()
	case k == 20: // a value delivered again: the same envelope
		r.redeliver()
	default: // a restart, connected or not at first
		r.log("restart")
		r.newProcess()
		if r.c.intn(3) > 0 {
			r.log("connect")
			r.connect()
		}
	}
}

// redeliver delivers the stable value or the canary record again, as a new
// revision of the same envelope would, and checks (i).
func (r *seqRun) redeliver() {
	if !r.connected {
		return
	}
	stable := r.c.intn(2) == 0
	if stable && r.stableEnv == nil || !stable && r.canaryRec == nil {
		return
	}
	before := len(r.reports)
	nackV, nackReason, _ := r.s.nack()
	if stable {
		r.log("stable v%d delivered again", r.stableEnv.Version)
		r.handleStable()
	} else {
		r.log("canary v%d delivered again", r.canaryRec.Envelope.Version)
		r.handleCanary()
	}
	if r.attemptsInStep > 0 {
		r.fail("(i) the same envelope delivered again offered the applier %d times", r.attemptsInStep)
	}
	for _, rep := range r.reports[before:] {
		t := r.target()
		if rep.Status != StatusNACK || rep.Reason != ReasonApply || t == nil || rep.Version != t.Version ||
			!r.refused[keyOf(t)] || (nackV == t.Version && nackReason == ReasonApply) {
			r.fail("(i) the same envelope delivered again was answered with %+v (heartbeat NACK was v%d %s)", rep, nackV, nackReason)
		}
	}
}

// check verifies the invariants after a step.
func (r *seqRun) check() {
	r.t.Helper()
	s := r.s
	cur := s.running.Load()
	// (a)
	switch {
	case r.applied == nil && cur != 0:
		r.fail("(a) running v%d, but the applier accepted nothing in this process", cur)
	case r.applied != nil && (cur != r.applied.Version || s.current == nil || keyOf(s.current) != keyOf(r.applied)):
		r.fail("(a) running v%d (%s), the applier last accepted %s", cur, describe(s.current), describe(r.applied))
	}
	// (b)
	if r.leaving(cur) {
		for _, e := range []*rules.Envelope{r.target(), r.stable, r.lastStableOK} {
			if e != nil && !r.refused[keyOf(e)] {
				r.fail("(b) running v%d above the stable v%d, held by no canary for this instance, while %s was not refused",
					cur, r.stable.Version, describe(e))
			}
		}
	}
	// (d)
	if t := r.target(); t != nil && !r.rejectedInStep && !r.runs(t) && r.refused[keyOf(t)] {
		if v, reason, _ := s.nack(); v != t.Version || reason != ReasonApply {
			r.fail("(d) on v%d, target v%d refused, heartbeats repeat the NACK (%d, %s)", cur, t.Version, v, reason)
		}
	}
	// (h)
	if d := r.desired(); d != nil && r.target() != nil && !r.rejectedInStep && d.Version == cur && r.connected && !r.runs(d) {
		r.fail("(h) reports v%d running %s, the instance should run v%d as %s", cur, describe(r.applied), cur, describe(d))
	}
	// (f)
	if n := len(r.reports); n > 0 && r.reports[n-1].Running != cur {
		r.fail("(f) last report %+v, running v%d", r.reports[n-1], cur)
	}
	// (g)
	if d := r.desired(); d != nil && r.target() != nil && !r.rejectedInStep && d.Version > cur && r.connected {
		r.fail("(g) running v%d, below %s the instance should run", cur, describe(d))
	}
}

// checkReports verifies (f) for the reports of one step: an ACK per
// accepted envelope, a NACK of a refusal only for a refused version.
func (r *seqRun) checkReports(from int) {
	r.t.Helper()
	for _, rep := range r.reports[from:] {
		switch {
		case rep.Status == StatusACK && rep.Version != rep.Running:
			r.fail("(f) ACK %+v of a version not running", rep)
		case rep.Status == StatusNACK && rep.Reason == ReasonApply:
			found := false
			for k := range r.refused {
				found = found || k.version == rep.Version
			}
			if !found {
				r.fail("(f) NACK %+v of a version the applier did not refuse", rep)
			}
		}
	}
}

func runSequence(t testing.TB, c seqChooser, dir string) *seqRun {
	t.Helper()
	r := &seqRun{t: t, c: c}
	r.labels = map[string]string{"zone": "a"}
	if c.intn(4) > 0 {
		r.cache = filepath.Join(dir, "rules.json")
	}
	r.flaky = c.intn(4) == 0
	rate := 1 + c.intn(3) // refuse about 1 in 3..9 envelopes
	r.desc = fmt.Sprintf("cache=%v flaky=%v", r.cache != "", r.flaky)
	if !r.flaky {
		// Decide each envelope's fate at first sight, the same in every
		// process: a configuration that refuses it keeps refusing it.
		fixed := map[envKey]bool{}
		r.refuses = func(k envKey) bool {
			if v, ok := fixed[k]; ok {
				return v
			}
			fixed[k] = c.intn(3*rate) == 0
			return fixed[k]
		}
	}
	r.newProcess()
	r.log("start")
	if c.intn(2) == 0 {
		r.log("connect")
		r.connect()
	}
	r.check()
	for !c.done() {
		n := len(r.reports)
		proc := r.processes
		r.attemptsInStep = 0
		r.step()
		if r.processes == proc {
			r.checkReports(n)
		}
		r.check()
	}
	return r
}

// TestStateSequencesKeepTheDocumentedInvariants runs seeded sequences of
// events and checks the invariants above after every step.
func TestStateSequencesKeepTheDocumentedInvariants(t *testing.T) {
	sequences, steps := 400, 60
	if testing.Short() {
		sequences = 100
	}
	for seed := range uint64(sequences) {
		c := &rngChooser{r: rand.New(rand.NewPCG(seed, 0x5eed)), steps: steps}
		r := runSequenceSeed(t, c, seed)
		_ = r
	}
}

func runSequenceSeed(t *testing.T, c seqChooser, seed uint64) *seqRun {
	t.Helper()
	var r *seqRun
	t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
		r = runSequence(t, c, t.TempDir())
	})
	return r
}

// FuzzStateSequences draws the same sequences from the fuzzer's bytes.
func FuzzStateSequences(f *testing.F) {
	f.Add([]byte{1, 0, 0, 1, 0, 7, 0, 0, 12, 0, 4, 0})
	f.Add([]byte{2, 1, 2, 0, 1, 0, 9, 1, 0, 0, 0, 1, 12, 18, 1, 2, 0, 5})
	f.Add([]byte{0, 0, 1, 1, 3, 8, 2, 1, 0, 15, 19, 2, 12, 17})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			return
		}
		runSequence(t, &byteChooser{b: data}, t.TempDir())
	})
}
