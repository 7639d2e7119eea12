// Package jsonbound decodes JSON from strangers (origin registries, release
// indexes) with bounds on what the document may build in memory, checked
// in one pass over its bytes before encoding/json sees it. A document's
// byte limit alone does not bound its decoded size: "[{},{},...]" spends
// three bytes on each element of a slice of structs, and a 16 MiB versions
// answer made of them decodes to gigabytes. It bounds nesting depth and
// the number of elements (array elements and object members) the document
// holds in all; it decodes nothing itself and says nothing about whether
// the document means anything. A document too large to bound as a whole
// (a version list of thousands of entries) is walked instead (Object,
// Array): its entries are counted, and each is handed over to be decoded
// within bounds of its own.
package jsonbound

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Limits bound a document. Zero fields take the defaults.
type Limits struct {
	// Depth is the deepest nesting of objects and arrays. Default 32.
	Depth int
	// Elements is how many array elements and object members the
	// document may hold, counted over all its objects and arrays.
	// Default 1,048,576.
	Elements int
}

const (
	defaultDepth    = 32
	defaultElements = 1 << 20
)

// ErrLimit is the error (wrapped) of a document over its limits.
var ErrLimit = errors.New("JSON document over its limits")

// Unmarshal is json.Unmarshal(data, v) for a document within l; one over
// it is an error wrapping ErrLimit, and v is left alone.
func Unmarshal(data []byte, v any, l Limits) error {
	if err := Check(data, l); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// A Budget is the elements the entries of one walked document (Object,
// Array) may decode to together: each entry is bounded on its own by its
// Limits, and all of them by the budget, so that a document of many
// entries each just within their bound costs no more to decode than the
// budget allows.
type Budget struct{ left, total int }

// NewBudget returns a budget of n elements.
func NewBudget(n int) *Budget { return &Budget{left: n, total: n} }

// Unmarshal is Unmarshal(data, v, l) with data's elements taken from b:
// data holding more than b has left is over its limits (an error
// wrapping ErrLimit), and v is left alone.
func (b *Budget) Unmarshal(data []byte, v any, l Limits) error {
	n, err := countElements(data, l)
	if err != nil {
		return err
	}
	if n > b.left {
		return fmt.Errorf("%w: its document's entries hold more than %d elements in all", ErrLimit, b.total)
	}
	b.left -= n
	return json.Unmarshal(data, v)
}

// Check returns an error wrapping ErrLimit when data nests deeper than
// l.Depth or holds more than l.Elements elements; nil otherwise,
// malformed documents included (decoding them reports that). It reads
// data once and allocates nothing.
func Check(data []byte, l Limits) error {
	_, err := countElements(data, l)
	return err
}

// countElements is Check, which also returns how many elements data holds.
func countElements(data []byte, l Limits) (int, error) {
	if l.Depth <= 0 {
		l.Depth = defaultDepth
	}
	if l.Elements <= 0 {
		l.Elements = defaultElements
	}
	depth, elements := 0, 0
	empty := false // the innermost container has no element yet
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			if depth > 0 && empty {
				elements++ // the first element of the one around it
			}
			if depth++; depth > l.Depth {
				return elements, fmt.Errorf("%w: nested deeper than %d levels at byte %d", ErrLimit, l.Depth, i)
			}
			empty = true
			if elements > l.Elements {
				return elements, tooMany(l, i)
			}
			continue
		case '}', ']':
			depth--
			empty = false
			continue
		case ',':
			elements++
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		}
		if depth > 0 && empty {
			elements++ // the first element, a string or other scalar
		}
		empty = false
		if elements > l.Elements {
			return elements, tooMany(l, i)
		}
	}
	return elements, nil
}

func tooMany(l Limits, at int) error {
	return fmt.Errorf("%w: more than %d elements (array elements and object members) at byte %d", ErrLimit, l.Elements, at)
}

// Object walks the JSON object data is, calling fn with each member's
// key (decoded) and value (the value's bytes, a subslice of data for fn
// to decode, within limits of its own), in document order. It is for a
// document too large to bound as a whole, whose entries are bounded one
// by one: a list of versions, each with its own builds. data must be
// valid JSON and an object; one with more than max members is an error
// wrapping ErrLimit. fn's error ends the walk and is returned. It
// allocates only the keys that need unescaping.
func Object(data []byte, max int, fn func(key string, value []byte) error) error {
	return walk(data, '{', max, fn)
}

// Array is Object for the elements of a JSON array.
func Array(data []byte, max int, fn func(value []byte) error) error {
	return walk(data, '[', max, func(_ string, value []byte) error { return fn(value) })
}

func walk(data []byte, open byte, max int, fn func(key string, value []byte) error) error {
	kind := "an object"
	if open == '[' {
		kind = "an array"
	}
	if !json.Valid(data) {
		return fmt.Errorf("not %s: malformed JSON", kind)
	}
	i := skipSpace(data, 0)
	if data[i] != open {
		return fmt.Errorf("not %s", kind)
	}
	if i = skipSpace(data, i+1); data[i] == open+2 { // '}' and ']' follow '{' and '[' by two
		return nil
	}
	for n := 1; ; n++ {
		if n > max {
			return fmt.Errorf("%w: more than %d entries at byte %d", ErrLimit, max, i)
		}
		var (
			key string
			err error
		)
		if open == '{' {
			end := stringEnd(data, i)
			if raw := data[i+1 : end-1]; bytes.IndexByte(raw, '\\') < 0 {
				key = string(raw)
			} else if key, err = unescape(data[i:end]); err != nil {
				return err
			}
			i = skipSpace(data, skipSpace(data, end)+1) // past the colon
		}
		end := valueEnd(data, i)
		if err = fn(key, data[i:end]); err != nil {
			return err
		}
		if i = skipSpace(data, end); data[i] != ',' {
			return nil // the closing bracket: data is valid
		}
		i = skipSpace(data, i+1)
	}
}

// unescape decodes a JSON string with escapes.
func unescape(quoted []byte) (string, error) {
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at data[i].
func stringEnd(data []byte, i int) int {
	for i++; data[i] != '"'; i++ {
		if data[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// valueEnd is the index just past the value that starts at data[i].
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch data[i] {
			case '"':
				i = stringEnd(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(data) && strings.IndexByte(",}] \t\r\n", data[i]) < 0 {
		i++
	}
	return i
}
