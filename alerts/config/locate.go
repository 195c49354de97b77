package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// badValue is a value of the document that its field's own decoder (a
// duration, a list of matchers) refuses: where it is and why.
type badValue struct {
	path string // e.g. routes[1].matchers
	off  int    // of its first byte
	err  error
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// locate finds the first value of doc, in document order, that the decoder
// of its field's type refuses: encoding/json returns such an error without
// saying which field it came from. It walks doc along the fields of Config,
// matching keys to fields as encoding/json does, and reports nothing if it
// finds no such value.
func locate(doc []byte) (badValue, bool) {
	l := &locator{doc: doc, dec: json.NewDecoder(bytes.NewReader(doc))}
	bad, err := l.value(reflect.TypeFor[Config](), "")
	if err != nil || bad == nil {
		return badValue{}, false
	}
	return *bad, true
}

type locator struct {
	doc []byte
	dec *json.Decoder
}

// value walks the next value of the stream, of Go type t (nil: no field).
func (l *locator) value(t reflect.Type, path string) (*badValue, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && decodesItself(t) {
		start := l.start()
		var raw json.RawMessage
		if err := l.dec.Decode(&raw); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return &badValue{path: path, off: start, err: err}, nil
		}
		return nil, nil
	}
	tok, err := l.dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil, nil
	}
	for i := 0; l.dec.More(); i++ {
		var et reflect.Type
		var p string
		if d == '{' {
			kt, err := l.dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			et, p = member(t, key), join(path, key)
		} else {
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				et = t.Elem()
			}
			p = path + "[" + strconv.Itoa(i) + "]"
		}
		if bad, err := l.value(et, p); bad != nil || err != nil {
			return bad, err
		}
	}
	_, err = l.dec.Token() // the closing delimiter
	return nil, err
}

// start returns the offset of the next value: past the white space, comma
// or colon before it.
func (l *locator) start() int {
	off := int(l.dec.InputOffset())
	for off < len(l.doc) && strings.IndexByte(" \t\r\n,:", l.doc[off]) >= 0 {
		off++
	}
	return off
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decodesItself reports whether values of t have their own decoder.
func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

// member returns the type of the value of key in an object of type t: a map
// element, or the struct field encoding/json fills (its JSON name, exactly,
// else ignoring case); nil for none.
func member(t reflect.Type, key string) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		return t.Elem()
	case reflect.Struct:
	default:
		return nil
	}
	var fold reflect.Type
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f.Type
		}
		if fold == nil && strings.EqualFold(name, key) {
			fold = f.Type
		}
	}
	return fold
}
