package nab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is the timestamp layout of NAB data and label files. Fractional
// seconds are optional when parsing.
const TimeLayout = "2006-01-02 15:04:05"

const parseLayout = "2006-01-02 15:04:05.999999999"

// maxLineBytes bounds one CSV line; longer lines are refused, not buffered.
const maxLineBytes = 4096

// Row is one sample of a NAB data file.
type Row struct {
	Time  time.Time
	Value float64
}

// Reader streams rows from a `timestamp,value` CSV file. It holds one line at
// a time, so a file of any length is read in constant memory.
type Reader struct {
	sc     *bufio.Scanner
	line   int
	header bool
}

// NewReader returns a Reader over r. The first line must be the header
// `timestamp,value`.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxLineBytes)
	return &Reader{sc: sc}
}

// Line is the number of the line last read (1-based; the header is line 1).
func (r *Reader) Line() int { return r.line }

// Next returns the next row, or io.EOF after the last one. Errors wrap
// ErrFormat and name the line and the problem.
func (r *Reader) Next() (Row, error) {
	if !r.header {
		if err := r.readHeader(); err != nil {
			return Row{}, err
		}
	}
	for r.sc.Scan() {
		r.line++
		text := strings.TrimSpace(r.sc.Text())
		if text == "" {
			continue
		}
		return parseRow(text, r.line)
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Row{}, fmt.Errorf("%w: line %d: longer than %d bytes", ErrFormat, r.line+1, maxLineBytes)
		}
		return Row{}, fmt.Errorf("nab: read line %d: %w", r.line+1, err)
	}
	return Row{}, io.EOF
}

func (r *Reader) readHeader() error {
	r.header = true
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			return fmt.Errorf("%w: header: %w", ErrFormat, err)
		}
		return fmt.Errorf("%w: empty file, want header %q", ErrFormat, "timestamp,value")
	}
	r.line++
	h := strings.TrimSpace(strings.TrimPrefix(r.sc.Text(), "\ufeff"))
	if h != "timestamp,value" {
		return fmt.Errorf("%w: line 1: header %q, want %q", ErrFormat, truncate(h), "timestamp,value")
	}
	return nil
}

func parseRow(text string, line int) (Row, error) {
	ts, val, ok := strings.Cut(text, ",")
	if !ok {
		return Row{}, fmt.Errorf("%w: line %d: want 2 fields timestamp,value, got %q", ErrFormat, line, truncate(text))
	}
	if strings.Contains(val, ",") {
		return Row{}, fmt.Errorf("%w: line %d: want 2 fields timestamp,value, got more", ErrFormat, line)
	}
	t, err := ParseTime(strings.TrimSpace(ts))
	if err != nil {
		return Row{}, fmt.Errorf("%w: line %d: timestamp: %w", ErrFormat, line, err)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
	if err != nil {
		return Row{}, fmt.Errorf("%w: line %d: value %q is not a number", ErrFormat, line, truncate(val))
	}
	return Row{Time: t, Value: v}, nil
}

// ParseTime parses a NAB timestamp (`2014-04-01 00:05:00`, optionally with
// fractional seconds), in UTC.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(parseLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not %q", truncate(s), TimeLayout)
	}
	return t, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Writer writes `timestamp,value,anomaly_score` rows.
type Writer struct {
	w   *bufio.Writer
	buf []byte
}

// NewWriter writes the header and returns a Writer. Call Flush at the end.
func NewWriter(w io.Writer) (*Writer, error) {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString("timestamp,value,anomaly_score\n"); err != nil {
		return nil, err
	}
	return &Writer{w: bw, buf: make([]byte, 0, 64)}, nil
}

// Write writes one row.
func (w *Writer) Write(r Row, score float64) error {
	b := r.Time.AppendFormat(w.buf[:0], TimeLayout)
	b = append(b, ',')
	b = strconv.AppendFloat(b, r.Value, 'g', -1, 64)
	b = append(b, ',')
	b = strconv.AppendFloat(b, score, 'g', -1, 64)
	b = append(b, '\n')
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// Flush writes buffered rows to the underlying writer.
func (w *Writer) Flush() error { return w.w.Flush() }
