// Package jsonbound decodes JSON from strangers (origin registries, release
// indexes) with bounds on what the document may build in memory, checked
// in one pass over its bytes before encoding/json sees it. A document's
// byte limit alone does not bound its decoded size: "[{},{},...]" spends
// three bytes on each element of a slice of structs, and a 16 MiB versions
// answer made of them decodes to gigabytes. It bounds nesting depth and
// the number of elements (array elements and object members) the document
// holds in all; it decodes nothing itself and says nothing about whether
// the document means anything.
package jsonbound

import (
	"encoding/json"
	"errors"
	"fmt"
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

// Check returns an error wrapping ErrLimit when data nests deeper than
// l.Depth or holds more than l.Elements elements; nil otherwise,
// malformed documents included (decoding them reports that). It reads
// data once and allocates nothing.
func Check(data []byte, l Limits) error {
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
				return fmt.Errorf("%w: nested deeper than %d levels at byte %d", ErrLimit, l.Depth, i)
			}
			empty = true
			if elements > l.Elements {
				return tooMany(l, i)
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
			return tooMany(l, i)
		}
	}
	return nil
}

func tooMany(l Limits, at int) error {
	return fmt.Errorf("%w: more than %d elements (array elements and object members) at byte %d", ErrLimit, l.Elements, at)
}
