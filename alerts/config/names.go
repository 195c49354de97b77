package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxNameLen bounds the name of a receiver or a rule, in characters: a name
// is shown whole in the UI, the logs and metric labels.
const MaxNameLen = 128

// checkName says what is wrong with the name of a receiver or a rule, nil
// if nothing. A name must show as written wherever it is shown or quoted: it
// is not empty, every character is printable (a letter, mark, number,
// punctuation, symbol or the ASCII space, as strconv.IsPrint; no NUL,
// newline, tab, zero-width or no-break space), it neither starts nor ends
// with a space, and it has at most MaxNameLen characters. Names that differ
// only in such characters, which look alike, cannot then both exist.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("name must not be empty")
	}
	i := 0
	for _, r := range name {
		i++
		if !strconv.IsPrint(r) {
			return fmt.Errorf("name %q: character %d is %U, a control or invisible character; a name is printable text", name, i, r)
		}
	}
	if strings.TrimSpace(name) != name {
		return fmt.Errorf("name %q: leading or trailing space", name)
	}
	if n := utf8.RuneCountInString(name); n > MaxNameLen {
		cut, k := name, 0
		for j := range name {
			if k == 32 {
				cut = name[:j]
				break
			}
			k++
		}
		return fmt.Errorf("name %q… is %d characters, at most %d", cut, n, MaxNameLen)
	}
	return nil
}
