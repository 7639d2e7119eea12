package jsonbound

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// count is the reference: the elements (array elements and object
// members) and the depth of a valid document, read from its tokens, so
// that a member whose key repeats an earlier one counts, as it does in
// the bytes a stranger sends (decoded, it would replace the earlier one).
func count(doc []byte) (elements, maxDepth int) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct{ object, wantKey bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return elements, maxDepth
		}
		if d, ok := tok.(json.Delim); ok && (d == ']' || d == '}') {
			stack = stack[:len(stack)-1]
			continue
		}
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			switch {
			case top.object && top.wantKey: // a member's key: the member
				elements++
				top.wantKey = false
				continue
			case top.object: // the member's value
				top.wantKey = true
			default: // an array's element
				elements++
			}
		}
		if d, ok := tok.(json.Delim); ok { // '[' or '{'
			stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
			maxDepth = max(maxDepth, len(stack))
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		elements int
		depth    int
	}{
		{"scalar", `"a"`, 0, 0},
		{"empty object", `{}`, 0, 1},
		{"empty array", ` [ ] `, 0, 1},
		{"members", `{"a":1,"b":"x","c":null}`, 3, 1},
		{"nested", `{"versions":[{"version":"1.0.0","platforms":[{"os":"linux","arch":"amd64"}]}]}`, 7, 5},
		{"empty objects", `[{},{},{}]`, 3, 2},
		{"brackets in strings", `["[{,}]", "\"[,", "\\"]`, 3, 1},
		{"arrays of arrays", `[[],[[]],[1,[2,3]]]`, 8, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.doc)) {
				t.Fatalf("%q is not JSON", tt.doc)
			}
			if e, d := count([]byte(tt.doc)); e != tt.elements || d != tt.depth {
				t.Fatalf("reference count %d elements, depth %d; the table says %d, %d", e, d, tt.elements, tt.depth)
			}
			exact := Limits{Depth: max(tt.depth, 1), Elements: max(tt.elements, 1)}
			if err := Check([]byte(tt.doc), exact); err != nil {
				t.Fatalf("Check at its exact limits: %v", err)
			}
			if tt.elements > 0 {
				if err := Check([]byte(tt.doc), Limits{Depth: 64, Elements: tt.elements - 1}); !errors.Is(err, ErrLimit) {
					t.Fatalf("Check with one element fewer allowed: %v, want ErrLimit", err)
				}
			}
			if tt.depth > 1 {
				if err := Check([]byte(tt.doc), Limits{Depth: tt.depth - 1, Elements: 1 << 20}); !errors.Is(err, ErrLimit) {
					t.Fatalf("Check with one level fewer allowed: %v, want ErrLimit", err)
				}
			}
		})
	}
}

// TestUnmarshalBoundedMemory: a 16 MiB document of empty objects, which
// json.Unmarshal turns into gigabytes of structs, is refused by the
// default limits having allocated nothing, and v is not touched.
func TestUnmarshalBoundedMemory(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"versions":[`)
	for b.Len() < 16<<20 {
		b.WriteString(`{},`)
	}
	b.WriteString(`{}]}`)
	var v struct {
		Versions []struct {
			Version   string
			Protocols []string
			Platforms []struct{ OS, Arch string }
		}
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	err := Unmarshal(b.Bytes(), &v, Limits{})
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "more than 1048576 elements") {
		t.Fatalf("err = %v, want ErrLimit naming the element limit", err)
	}
	if v.Versions != nil {
		t.Fatal("v was decoded into")
	}
	if a := m1.TotalAlloc - m0.TotalAlloc; a > 4<<20 {
		t.Fatalf("refusing took %d bytes", a)
	}
	deep := strings.Repeat("[", 33) + strings.Repeat("]", 33)
	if err := Unmarshal([]byte(deep), new(any), Limits{}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "deeper than 32") {
		t.Fatalf("33 levels: %v, want ErrLimit", err)
	}
}

// FuzzCheck holds Check to the reference count on every valid document:
// it passes at the document's own element count and depth and refuses
// one fewer.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{}`, `[1,[2,{"a":[3]}]]`, `{"a":"[,{","b":["\"",{}]}`, `[[],[[]]]`, `"x"`, `{"a":{"b":{"c":[]}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			Check(data, Limits{}) // must not panic on anything
			return
		}
		e, d := count(data)
		if err := Check(data, Limits{Depth: max(d, 1), Elements: max(e, 1)}); err != nil {
			t.Fatalf("%q: %d elements, depth %d: %v", data, e, d, err)
		}
		if e > 1 && Check(data, Limits{Depth: 1 << 20, Elements: e - 1}) == nil {
			t.Fatalf("%q: %d elements accepted with a limit of %d", data, e, e-1)
		}
		if d > 1 && Check(data, Limits{Depth: d - 1, Elements: 1 << 30}) == nil {
			t.Fatalf("%q: depth %d accepted with a limit of %d", data, d, d-1)
		}
	})
}
