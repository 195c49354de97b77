package recommend

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/pid"
	"governor.dev/governor/internal/statecodec"
)

// TestRestoredControllersRecommendExactly: a recommender given another's
// controllers and baselines in the middle of an overload recommends exactly
// what the original does from then on, cycle after cycle; one given the
// baselines alone restarts its controller from the ceiling in force and
// waits for MinScores known scores again.
func TestRestoredControllersRecommendExactly(t *testing.T) {
	in := func(i int) Input {
		v := 0.85 + 0.1*math.Sin(float64(i)/4)
		return Input{At: t0.Add(time.Duration(i) * 10 * time.Second), Service: "checkout", Score: score(v), Entry: entry(990),
			Active: active(500, nil), Instances: 2}
	}
	a := newRec(t)
	for i := range 10 {
		a.Evaluate(in(i))
	}
	ctl, err := a.SaveControllers(nil)
	if err != nil {
		t.Fatal(err)
	}
	var base []byte
	if err := a.SaveBaselines(nil, func(_ string, b []byte) { base = b }); err != nil {
		t.Fatal(err)
	}
	b, c := newRec(t), newRec(t)
	for _, r := range []*Recommender{b, c} {
		if err := r.RestoreBaseline("checkout", base); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.RestoreControllers(ctl); err != nil {
		t.Fatal(err)
	}
	if again, _ := b.SaveControllers(nil); string(again) != string(ctl) {
		t.Fatal("the restored controllers encode to other bytes")
	}
	for i := 10; i < 30; i++ {
		ra, rb, rc := a.Evaluate(in(i)), b.Evaluate(in(i)), c.Evaluate(in(i))
		ja, _ := json.Marshal(ra)
		jb, _ := json.Marshal(rb)
		if string(ja) != string(jb) {
			t.Fatalf("cycle %d: restored %s\noriginal %s", i, jb, ja)
		}
		if i == 10 {
			if ra.Ruleset == nil || !rc.Inconclusive || !strings.Contains(rc.Reason, "1 of 2") {
				t.Fatalf("cycle 10: original %q, without the controllers %q: the contrast is gone", ra.Reason, rc.Reason)
			}
		}
		if ia, ic := a.state("checkout").ctl.State().I, c.state("checkout").ctl.State().I; i == 12 && ia == ic {
			t.Fatalf("cycle 12: the integral %v is the same without the controllers", ia)
		}
	}
}

// TestRestoreControllersReplaces: services absent from the state start
// afresh; a refused state changes nothing.
func TestRestoreControllersReplaces(t *testing.T) {
	r := newRec(t)
	in := Input{Service: "checkout", Score: score(0.9), Entry: entry(990), Active: active(500, nil), Instances: 2}
	run(r, in, 3)
	empty, err := newRec(t).SaveControllers(nil)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := r.SaveControllers(nil)
	for _, tt := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"other version", append([]byte{ControllersVersion + 1}, full[1:]...), "format version 2, want 1"},
		{"truncated", full[:len(full)-3], "truncated"},
		{"bad controller", corruptController(full), "pid: cannot restore state"},
	} {
		err := r.RestoreControllers(tt.b)
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("%s: err %v, want ErrState and %q", tt.name, err, tt.want)
		}
		if again, _ := r.SaveControllers(nil); string(again) != string(full) {
			t.Fatalf("%s: a refused state changed the recommender", tt.name)
		}
	}
	if err := r.RestoreControllers(empty); err != nil {
		t.Fatal(err)
	}
	st := r.state("checkout")
	if st.known != 0 || st.ctl != nil || st.thr == nil {
		t.Fatalf("after restoring a state without checkout: known %d, controller %v", st.known, st.ctl)
	}
	if rec := r.Evaluate(in); !rec.Inconclusive || !strings.Contains(rec.Reason, "1 of 2") {
		t.Fatalf("after a reset: %q", rec.Reason)
	}
}

// corruptController sets the format byte of the (only) controller in b.
func corruptController(b []byte) []byte {
	out := append([]byte{}, b...)
	i := strings.Index(string(out), "checkout") + len("checkout")
	// known, has, version, base (8), length: the controller follows.
	j := i + 1 + 1 + 1 + 8 + 2
	out[j] = pid.StateVersion + 1
	return out
}

// FuzzRestoreControllers: arbitrary bytes never panic; what is accepted
// survives an encode-decode round trip.
//
// The seeds are valid states: no controller, one tracking an active
// version, and two services, one without an active version.
func FuzzRestoreControllers(f *testing.F) {
	r, _ := New(DefaultOptions())
	b, _ := r.SaveControllers(nil)
	f.Add(b)
	in := Input{Service: "checkout", Score: score(0.9), Entry: entry(990), Active: active(500, nil), Instances: 2}
	for i := range 4 {
		in.At = t0.Add(time.Duration(i) * 10 * time.Second)
		r.Evaluate(in)
	}
	b, _ = r.SaveControllers(nil)
	f.Add(b)
	other := Input{Service: "search", Score: score(0.4), Entry: entry(100), Instances: 1}
	other.Entry.Key.Service = "search"
	for i := range 3 {
		other.At = t0.Add(time.Duration(i) * 10 * time.Second)
		r.Evaluate(other)
	}
	b, _ = r.SaveControllers(nil)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, _ := New(DefaultOptions())
		if err := r.RestoreControllers(b); err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v does not wrap ErrState", err)
			}
			return
		}
		enc, err := r.SaveControllers(nil)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := New(DefaultOptions())
		if err := again.RestoreControllers(enc); err != nil {
			t.Fatalf("accepted state does not survive a round trip: %v", err)
		}
		if enc2, _ := again.SaveControllers(nil); string(enc2) != string(enc) {
			t.Fatal("accepted state encodes to other bytes after a round trip")
		}
	})
}

// encodeController is SaveControllers' encoding of one service "checkout"
// with the given base ceiling and controller bytes.
func encodeController(known int, version int64, base float64, ctl []byte) []byte {
	e := statecodec.Enc{B: []byte{ControllersVersion}}
	e.U(1)
	e.S("checkout")
	e.U(uint64(known))
	e.Bool(true)
	e.I(version)
	e.F(base)
	e.U(uint64(len(ctl)))
	e.B = append(e.B, ctl...)
	return e.B
}

// TestRestoreControllersRefusesCeilingsAtOrBelowZero: a controller state
// whose base ceiling is 0 or negative, or whose controller may output a
// ceiling of 0 or below, is refused (ErrState); accepted, the first made
// the next overload recommend a ceiling of 0 (0.1 req/s per instance) and
// the second one of -100.
func TestRestoreControllersRefusesCeilingsAtOrBelowZero(t *testing.T) {
	a := newRec(t)
	run(a, Input{Service: "checkout", Score: score(0.95), Entry: entry(400), Active: active(500, nil), Instances: 2}, 3)
	st := a.state("checkout")
	good, _ := st.ctl.AppendBinary(nil)
	o := DefaultOptions()
	neg, err := pid.New(o.pidConfig(1000, -100, 10000))
	if err != nil {
		t.Fatal(err)
	}
	below, _ := neg.AppendBinary(nil)
	for _, tt := range []struct {
		name string
		base float64
		ctl  []byte
		want string
	}{
		{"base ceiling 0", 0, good, "base ceiling"},
		{"negative base ceiling", -500, good, "base ceiling"},
		{"controller output down to -100", 1000, below, "output bounds"},
	} {
		err := newRec(t).RestoreControllers(encodeController(st.known, st.version, tt.base, tt.ctl))
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("%s: err %v, want ErrState and %q", tt.name, err, tt.want)
		}
	}
	if err := newRec(t).RestoreControllers(encodeController(st.known, st.version, st.base, good)); err != nil {
		t.Fatalf("the valid state: %v", err)
	}
}
