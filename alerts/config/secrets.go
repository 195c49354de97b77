package config

import (
	"errors"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// secretFields names the secret-bearing fields of each receiver kind, by
// their JSON names: a routing key, a password, or a URL that may carry
// credentials (its user info or query) or is itself the token (Slack and
// webhook URLs).
var secretFields = map[string][]string{
	"pagerduty":    {"routing_key", "url"},
	"slack":        {"url"},
	"webhook":      {"url"},
	"alertmanager": {"url"},
	"email":        {"password"},
}

// destinationFields names, for each receiver kind whose secret is sent to
// a place other than the secret itself, the fields that say where: the
// PagerDuty events URL the routing key goes to, the SMTP relay the
// password goes to.
var destinationFields = map[string][]string{
	"pagerduty": {"url"},
	"email":     {"smarthost"},
}

// SecretField reports whether field of a receiver of kind holds a secret,
// matching keys as encoding/json does (ignoring case), and returns their
// canonical spelling.
func SecretField(kind, field string) (k, f string, ok bool) { return lookup(secretFields, kind, field) }

// DestinationField reports whether field of a receiver of kind says where
// its secrets are sent (see SecretField for the matching).
func DestinationField(kind, field string) (k, f string, ok bool) {
	return lookup(destinationFields, kind, field)
}

// DestinationFields lists the destination fields of receivers of kind (as
// SecretField returns it).
func DestinationFields(kind string) []string { return destinationFields[kind] }

func lookup(fields map[string][]string, kind, field string) (string, string, bool) {
	for k, fs := range fields {
		if !strings.EqualFold(kind, k) {
			continue
		}
		for _, f := range fs {
			if strings.EqualFold(field, f) {
				return k, f, true
			}
		}
	}
	return "", "", false
}

// MaskPrefix starts every mask: "<masked>" or, for URLs, "<masked:host>".
const MaskPrefix = "<masked"

// MaskSecret returns the mask of secret v of field: a URL keeps its host
// (and port), which is not secret and tells receivers apart; the rest of
// the URL, its user info, path and query included, is hidden.
func MaskSecret(field, v string) string {
	if field == "url" {
		if u, err := url.Parse(v); err == nil && u.Host != "" && IsMask(MaskPrefix+":"+u.Host+">") {
			return MaskPrefix + ":" + u.Host + ">"
		}
	}
	return MaskPrefix + ">"
}

// IsMask reports whether v has the form of a mask MaskSecret writes:
// "<masked>" or "<masked:host>", the host without user info, path, query,
// quotes or spaces. Any other value, one that merely starts like a mask
// included, is a secret.
func IsMask(v string) bool {
	if v == MaskPrefix+">" {
		return true
	}
	host, ok := strings.CutPrefix(v, MaskPrefix+":")
	if !ok {
		return false
	}
	host, ok = strings.CutSuffix(host, ">")
	return ok && host != "" && !strings.ContainsFunc(host, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`<>@/\?#"'`, r)
	})
}

// secrets returns the receiver's non-empty secret values with their field,
// as secretFields names them.
func (r Receiver) secrets() [][2]string {
	var out [][2]string
	rv := reflect.ValueOf(r)
	for f := range rv.Type().Fields() {
		kind, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fields, ok := secretFields[kind]
		if !ok || rv.FieldByIndex(f.Index).IsNil() {
			continue
		}
		cfg := rv.FieldByIndex(f.Index).Elem()
		for cf := range cfg.Type().Fields() {
			name, _, _ := strings.Cut(cf.Tag.Get("json"), ",")
			if v := cfg.FieldByIndex(cf.Index); slices.Contains(fields, name) && v.String() != "" {
				out = append(out, [2]string{name, v.String()})
			}
		}
	}
	return out
}

// redact returns err with every secret of r its message quotes replaced
// by the secret's mask: a receiver's validation error may echo a URL
// (url.Parse's errors, "has no host"). The result matches what err matches
// (errors.Is), without unwrapping to the original message.
func (r Receiver) redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range r.secrets() {
		mask := MaskSecret(s[0], s[1])
		msg = strings.ReplaceAll(msg, strconv.Quote(s[1]), strconv.Quote(mask))
		// Unquoted echoes too, unless the value is so short that it would
		// match ordinary words of the message.
		if len(s[1]) >= 8 {
			msg = strings.ReplaceAll(msg, s[1], mask)
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

// Is matches what the original error matches; there is no Unwrap, which
// would hand out the original message.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
