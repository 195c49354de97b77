package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/engine/thresholds/nab"
)

// runDetect is `engine detect -data DIR -out OUT`: one streaming pass per
// file, one parameter set (thresholds.DefaultOptions) for every file.
func runDetect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("detect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "input directory holding <category>/<file>.csv files (timestamp,value)")
	out := fs.String("out", "", "output directory for <category>/<file>.csv files (timestamp,value,anomaly_score)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *data == "" || *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "engine detect: -data and -out are required and no arguments are taken")
		fs.Usage()
		return 2
	}
	if sameDir(*data, *out) {
		fmt.Fprintf(stderr, "engine detect: -out %s is the -data directory: its files would be overwritten while they are read\n", *out)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opt := thresholds.DefaultOptions()
	if _, err := thresholds.New(opt); err != nil {
		log.Error("detect", "err", err)
		return 1
	}
	start := time.Now()
	n, err := nab.Run(ctx, *data, *out, func() nab.Detector {
		d, _ := thresholds.New(opt) // validated above
		return d
	})
	if err != nil {
		log.Error("detect", "err", err, "rows", n)
		return 1
	}
	log.Info("detect done", "rows", n, "out", *out, "elapsed", time.Since(start).Round(time.Millisecond))
	return 0
}

// sameDir reports whether a and b name the same existing directory.
func sameDir(a, b string) bool {
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}
