package nab

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Window is one labelled anomaly window; both ends are inclusive.
type Window struct {
	Start, End time.Time
}

// Windows maps a data file's corpus name (`<category>/<file>.csv`) to its
// anomaly windows in time order.
type Windows map[string][]Window

// ReadWindows decodes a NAB combined_windows.json document.
func ReadWindows(r io.Reader) (Windows, error) {
	var raw map[string][][]string
	dec := json.NewDecoder(r)
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: windows: %w", ErrFormat, err)
	}
	out := make(Windows, len(raw))
	for name, ws := range raw {
		list := make([]Window, 0, len(ws))
		for i, pair := range ws {
			if len(pair) != 2 {
				return nil, fmt.Errorf("%w: windows: %s[%d]: want [start, end], got %d values", ErrFormat, name, i, len(pair))
			}
			s, err := ParseTime(pair[0])
			if err != nil {
				return nil, fmt.Errorf("%w: windows: %s[%d] start: %w", ErrFormat, name, i, err)
			}
			e, err := ParseTime(pair[1])
			if err != nil {
				return nil, fmt.Errorf("%w: windows: %s[%d] end: %w", ErrFormat, name, i, err)
			}
			if e.Before(s) {
				return nil, fmt.Errorf("%w: windows: %s[%d]: end %s before start %s", ErrFormat, name, i, pair[1], pair[0])
			}
			if i > 0 && !s.After(list[i-1].End) {
				return nil, fmt.Errorf("%w: windows: %s[%d]: overlaps or precedes the previous window", ErrFormat, name, i)
			}
			list = append(list, Window{Start: s, End: e})
		}
		out[name] = list
	}
	return out, nil
}

// ReadWindowsFile reads a combined_windows.json file.
func ReadWindowsFile(path string) (Windows, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nab: %w", err)
	}
	defer f.Close()
	return ReadWindows(f)
}
