package nab

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Row
		wantErr string
	}{
		{
			name: "two rows, fraction and blank line",
			in:   "timestamp,value\n2014-04-01 00:00:00,20.5\n\n2014-04-01 00:05:00.000000, -3e2 \n",
			want: []Row{
				{time.Date(2014, 4, 1, 0, 0, 0, 0, time.UTC), 20.5},
				{time.Date(2014, 4, 1, 0, 5, 0, 0, time.UTC), -300},
			},
		},
		{name: "header only", in: "timestamp,value\n"},
		{name: "CRLF and BOM", in: "\ufefftimestamp,value\r\n2014-04-01 00:00:00,1\r\n", want: []Row{{time.Date(2014, 4, 1, 0, 0, 0, 0, time.UTC), 1}}},
		{name: "empty", in: "", wantErr: "empty file"},
		{name: "bad header", in: "time,val\n", wantErr: "line 1: header"},
		{name: "one field", in: "timestamp,value\n2014-04-01 00:00:00\n", wantErr: "line 2: want 2 fields"},
		{name: "three fields", in: "timestamp,value\n2014-04-01 00:00:00,1,2\n", wantErr: "line 2: want 2 fields"},
		{name: "bad time", in: "timestamp,value\n2014-13-01 00:00:00,1\n", wantErr: "line 2: timestamp"},
		{name: "bad value", in: "timestamp,value\n2014-04-01 00:00:00,abc\n", wantErr: `line 2: value "abc"`},
		{name: "long line", in: "timestamp,value\n" + strings.Repeat("1", 5000) + "\n", wantErr: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in))
			var got []Row
			var err error
			for {
				var row Row
				row, err = r.Next()
				if err != nil {
					break
				}
				got = append(got, row)
			}
			if tt.wantErr != "" {
				if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want ErrFormat containing %q", err, tt.wantErr)
				}
				return
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err %v, want io.EOF", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d rows, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !got[i].Time.Equal(tt.want[i].Time) || got[i].Value != tt.want[i].Value {
					t.Errorf("row %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2014, 4, 1, 0, 0, 0, 0, time.UTC)
	rows := []Row{{t0, 20}, {t0.Add(5 * time.Minute), 0.125}}
	for i, r := range rows {
		if err := w.Write(r, float64(i)/4); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "timestamp,value,anomaly_score\n2014-04-01 00:00:00,20,0\n2014-04-01 00:05:00,0.125,0.25\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// FuzzReader: any input either parses into finite-time rows or fails with
// ErrFormat; it never panics or loops.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"timestamp,value\n2014-04-01 00:00:00,20.0\n",
		"timestamp,value\n2014-04-01 00:00:00.5,-1e300\n2014-04-01 00:05:00,NaN\n",
		"timestamp,value\n,\n",
		"timestamp,value\n2014-04-01 00:00:00,1,2\n",
		"\ufefftimestamp,value\r\n\r\n",
		"",
		"timestamp,value\n" + strings.Repeat("9", 4100),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for i := 0; ; i++ {
			if i > len(data)+2 {
				t.Fatalf("more rows than input lines")
			}
			row, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("error %v does not wrap ErrFormat", err)
				}
				return
			}
			if row.Time.IsZero() {
				t.Fatalf("row %d: zero time accepted", i)
			}
		}
	})
}

// FuzzReadWindows: the label decoder never panics and what it accepts is
// ordered and non-overlapping.
func FuzzReadWindows(f *testing.F) {
	for _, s := range []string{
		`{"a/b.csv": [["2014-04-10 07:15:00.000000", "2014-04-11 16:45:00.000000"]]}`,
		`{"a/b.csv": []}`,
		`{"a/b.csv": [["2014-04-10 07:15:00", "2014-04-09 16:45:00"]]}`,
		`{"a/b.csv": [["2014-04-10 07:15:00"]]}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := ReadWindows(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		for name, list := range ws {
			for i, w := range list {
				if w.End.Before(w.Start) || (i > 0 && !w.Start.After(list[i-1].End)) {
					t.Fatalf("%s[%d]: accepted bad window %v", name, i, w)
				}
			}
		}
	})
}
