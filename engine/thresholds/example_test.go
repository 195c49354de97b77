package thresholds_test

import (
	"fmt"
	"math"
	"time"

	"governor.dev/governor/engine/thresholds"
)

// A detector follows one series; each sample carries its own timestamp.
func ExampleDetector() {
	d, err := thresholds.New(thresholds.DefaultOptions())
	if err != nil {
		panic(err)
	}
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	var res thresholds.Result
	for i := range 1000 {
		v := 200 + 10*math.Sin(float64(i)) // a request rate wobbling around 200/s
		res = d.Observe(t0.Add(time.Duration(i)*time.Minute), v)
	}
	fmt.Printf("normal: score %.2f inconclusive %v\n", res.Score, res.Inconclusive)
	res = d.Observe(t0.Add(1000*time.Minute), 900) // a surge
	fmt.Printf("surge: score %.2f feature %s, expected %.0f\n", res.Score, res.Feature, res.Expected)
	// Output:
	// normal: score 0.40 inconclusive false
	// surge: score 0.92 feature envelope-up, expected 200
}

// A recommender turns a service's healthy history into thresholds; with too
// little history it says so instead of guessing.
func ExampleRecommender() {
	opt := thresholds.DefaultRecommenderOptions()
	opt.MinSamples = 100
	r, err := thresholds.NewRecommender(opt)
	if err != nil {
		panic(err)
	}
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	observe := func(from, to int) {
		for i := from; i < to; i++ {
			r.Observe(thresholds.Interval{
				Time:       t0.Add(time.Duration(i) * 30 * time.Second),
				Throughput: 400 + float64(i%50),        // peaks near 450/s
				ErrorRatio: 0.001,                      // healthy
				LatencyP50: 0.020,                      // 20 ms
				LatencyP99: 0.080 + 0.001*float64(i%5), // about 80 ms
			})
		}
	}
	observe(0, 50)
	fmt.Println(r.Recommend().Reason)
	observe(50, 400)
	rec := r.Recommend()
	fmt.Printf("slow-call threshold %.0f ms, rate ceiling %.0f/s\n", rec.SlowCallThreshold*1000, rec.RateCeiling)
	// Output:
	// 50 healthy intervals of 100 needed
	// slow-call threshold 163 ms, rate ceiling 540/s
}
