package versioning

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"gopkg.in/yaml.v3"

	"governor.dev/governor/sdk/rules"
)

// Format is an encoding of a ruleset.
type Format string

// Formats.
const (
	FormatJSON Format = "json"
	FormatYAML Format = "yaml"
)

// maxYAMLDepth bounds nesting in imported YAML; the schema needs five levels.
const maxYAMLDepth = 32

// DecodeRuleset parses untrusted JSON or YAML into a validated ruleset.
// Unknown fields, invalid values and payloads over rules.MaxBytes are refused
// with an *InputError whose fields start with "ruleset".
func DecodeRuleset(format Format, data []byte) (*rules.Ruleset, error) {
	if len(data) > rules.MaxBytes {
		return nil, invalid("ruleset", "payload is %d bytes, at most %d allowed", len(data), rules.MaxBytes)
	}
	switch format {
	case FormatJSON:
	case FormatYAML:
		j, err := yamlToJSON(data)
		if err != nil {
			return nil, err
		}
		data = j
	default:
		return nil, invalid("format", "must be %q or %q, got %q", FormatJSON, FormatYAML, format)
	}
	r, err := rules.Decode(data)
	if err != nil {
		return nil, rulesetError("ruleset.", err)
	}
	return r, nil
}

// yamlToJSON converts one YAML document into JSON, refusing what JSON cannot
// express (non-string keys, several documents) and alias expansion.
func yamlToJSON(data []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, invalid("ruleset", "payload is empty")
		}
		return nil, invalid("ruleset", "invalid YAML: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, invalid("ruleset", "holds more than one YAML document")
	}
	v, err := nodeValue(&doc, "", 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func nodeValue(n *yaml.Node, path string, depth int) (any, error) {
	field := "ruleset"
	if path != "" {
		field += "." + path
	}
	if depth > maxYAMLDepth {
		return nil, invalid(field, "is nested deeper than %d levels", maxYAMLDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, invalid("ruleset", "payload is empty")
		}
		return nodeValue(n.Content[0], path, depth+1)
	case yaml.AliasNode:
		return nil, invalid(field, "uses a YAML alias (*%s); write the value out", n.Value)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!int") {
				return nil, invalid(field, "has a key that is not a string (line %d)", k.Line)
			}
			if k.Value == "<<" {
				return nil, invalid(field, "uses a YAML merge key; write the fields out")
			}
			if _, dup := m[k.Value]; dup {
				return nil, invalid("ruleset."+join(path, k.Value), "is set twice (line %d)", k.Line)
			}
			v, err := nodeValue(n.Content[i+1], join(path, k.Value), depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, err := nodeValue(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, invalid(field, "is not a boolean: %q", n.Value)
			}
			return b, nil
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil {
				var v float64
				if n.Decode(&v) != nil {
					return nil, invalid(field, "is not a number: %q", n.Value)
				}
				f = v
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, invalid(field, "must be a finite number, got %q", n.Value)
			}
			if n.Tag == "!!int" {
				if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
					return json.Number(strconv.FormatInt(i, 10)), nil
				}
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
		default:
			return n.Value, nil
		}
	}
	return nil, invalid(field, "has an unsupported YAML node")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// EncodeYAML renders a ruleset as YAML with the schema's field names, in the
// canonical order of its JSON encoding. DecodeRuleset(FormatYAML, ...) of the
// result gives back an equal ruleset.
func EncodeYAML(r *rules.Ruleset) ([]byte, error) {
	b, err := r.Canonical()
	if err != nil {
		return nil, fmt.Errorf("versioning: encode yaml: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	node, err := jsonNode(dec)
	if err != nil {
		return nil, fmt.Errorf("versioning: encode yaml: %w", err)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(node); err != nil {
		return nil, fmt.Errorf("versioning: encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("versioning: encode yaml: %w", err)
	}
	return out.Bytes(), nil
}

// jsonNode builds a yaml.Node from a JSON token stream, keeping key order.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := jsonNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kt.(string)}, v)
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				v, err := jsonNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			_, err := dec.Token()
			return n, err
		}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!float"
		if _, err := strconv.ParseInt(t.String(), 10, 64); err == nil {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// ExportYAML renders the active ruleset of a service as YAML, headed by a
// comment naming the version and checksum (comments are ignored on import).
func ExportYAML(ctx context.Context, r Reader, service string) ([]byte, error) {
	v, err := r.Active(ctx, service)
	if err != nil {
		return nil, err
	}
	body, err := EncodeYAML(v.Ruleset)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# service %s, version %d, %s\n", v.Service, v.Number, v.Checksum)
	return append([]byte(head), body...), nil
}

// ImportOptions describe the proposal an import becomes.
type ImportOptions struct {
	// Service, if set, must match the imported ruleset's service.
	Service     string
	BaseVersion int64
	Rebase      bool
	Author      Actor
	Reason      string
}

// Import decodes and validates a ruleset and proposes it (SourceImport), like
// any other proposal: it still needs approval. Nothing is written when the
// input is invalid.
func Import(ctx context.Context, s Store, format Format, data []byte, o ImportOptions) (Version, error) {
	r, err := DecodeRuleset(format, data)
	if err != nil {
		return Version{}, err
	}
	return s.Propose(ctx, Proposal{
		Service: o.Service, BaseVersion: o.BaseVersion, Rebase: o.Rebase, Ruleset: r,
		Author: o.Author, Reason: o.Reason, Source: SourceImport,
	})
}
