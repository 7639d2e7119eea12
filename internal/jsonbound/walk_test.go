package jsonbound

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// entries is the reference walk: the keys and values of an object, or
// the elements of an array, read by encoding/json's decoder, each value
// compacted.
func entries(t *testing.T, doc []byte) (keys []string, values []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, false
	}
	d, isDelim := tok.(json.Delim)
	if !isDelim || (d != '{' && d != '[') {
		return nil, nil, false
	}
	for dec.More() {
		if d == '{' {
			k, err := dec.Token()
			if err != nil {
				t.Fatalf("reference walk: %v", err)
			}
			keys = append(keys, k.(string))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("reference walk: %v", err)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			t.Fatalf("reference walk: %v", err)
		}
		values = append(values, b.String())
	}
	return keys, values, true
}

func walked(t *testing.T, doc []byte, object bool, max int) (keys, values []string, err error) {
	add := func(v []byte) error {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			t.Fatalf("value %q handed over is not a JSON value: %v", v, err)
		}
		values = append(values, b.String())
		return nil
	}
	if object {
		err = Object(doc, max, func(k string, v []byte) error { keys = append(keys, k); return add(v) })
	} else {
		err = Array(doc, max, add)
	}
	return keys, values, err
}

// TestWalkHandsOverEachEntry: each member of an object (its key
// unescaped) and each element of an array is handed over whole, in
// document order, whatever its strings hold (brackets, quotes,
// escapes) and however the document is spaced.
func TestWalkHandsOverEachEntry(t *testing.T) {
	docs := []string{
		`{}`, ` [ ] `, `[1]`,
		`{"a":1,"b":"x","c":null,"d":true,"e":-1.5e3}`,
		" {\n\t\"1.6.0\" : { \"builds\" : [ {\"os\":\"linux\"} , {} ] } ,\r\n \"v\" : [ ] }\n",
		`{"k\"ey":"}]","\u0041\\":"\"[{","":{"x":["]","}"]}}`,
		`[{"a":[[],[{}]]},"\\",[],0,"\"",{"":""}]`,
		`{"dup":1,"dup":2}`,
	}
	for _, doc := range docs {
		wantKeys, wantValues, _ := entries(t, []byte(doc))
		object := bytes.TrimSpace([]byte(doc))[0] == '{'
		keys, values, err := walked(t, []byte(doc), object, 100)
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if fmt.Sprint(keys) != fmt.Sprint(wantKeys) || fmt.Sprint(values) != fmt.Sprint(wantValues) {
			t.Errorf("%s: walked %q %q, want %q %q", doc, keys, values, wantKeys, wantValues)
		}
	}
}

// TestWalkRefuses: a document that is not JSON, or not the container
// asked for (null included), is an error; one with more entries than
// allowed is an ErrLimit error, raised before the entry over the limit
// is handed over.
func TestWalkRefuses(t *testing.T) {
	for _, tt := range []struct {
		doc    string
		object bool
	}{
		{`null`, true}, {`null`, false}, {`[]`, true}, {`{}`, false}, {`"x"`, true},
		{`{"a":1`, true}, {`[1,]`, false}, {``, true}, {`{"a":1} x`, true},
	} {
		if _, _, err := walked(t, []byte(tt.doc), tt.object, 10); err == nil {
			t.Errorf("%q (object %v) walked without error", tt.doc, tt.object)
		}
	}
	keys, _, err := walked(t, []byte(`{"a":1,"b":2,"c":3}`), true, 2)
	if !errors.Is(err, ErrLimit) || len(keys) != 2 {
		t.Errorf("three members, at most two: walked %q, err %v; want two and ErrLimit", keys, err)
	}
	_, values, err := walked(t, []byte(`[1,2,3]`), false, 3)
	if err != nil || len(values) != 3 {
		t.Errorf("three elements, at most three: walked %q, err %v", values, err)
	}
	stop := errors.New("stop")
	n := 0
	if err := Array([]byte(`[1,2,3]`), 10, func([]byte) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("fn's error: err %v after %d entries, want it after one", err, n)
	}
}

// TestWalkAllocatesNothingPerEntry: walking a large array of small
// entries costs no allocation for each (the per-entry decoding is the
// caller's, within its own bounds).
func TestWalkAllocatesNothingPerEntry(t *testing.T) {
	doc := []byte("[" + string(bytes.Repeat([]byte(`{"a":"b"},`), 100000)) + "{}]")
	allocs := testing.AllocsPerRun(3, func() {
		if err := Array(doc, 1<<20, func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 10 {
		t.Errorf("walking 100,001 entries allocated %.0f times", allocs)
	}
}

// FuzzWalk: whatever the document, the walk hands over what
// encoding/json reads as the container's entries, or refuses it, never
// panicking or reading past it.
func FuzzWalk(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"]"}],"c\"":"x"}`), true)
	f.Add([]byte(`[1,"2",[3],{"4":5},null]`), false)
	f.Fuzz(func(t *testing.T, doc []byte, object bool) {
		keys, values, err := walked(t, doc, object, 1000)
		if !json.Valid(doc) {
			if err == nil {
				t.Fatalf("%q walked, not valid JSON", doc)
			}
			return
		}
		wantKeys, wantValues, ok := entries(t, doc)
		isObject := bytes.TrimSpace(doc)[0] == '{'
		if !ok || isObject != object || len(wantValues) > 1000 {
			if err == nil {
				t.Fatalf("%q walked (object %v): not that container, or over its limit", doc, object)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q refused: %v", doc, err)
		}
		if fmt.Sprint(keys) != fmt.Sprint(wantKeys) || fmt.Sprint(values) != fmt.Sprint(wantValues) {
			t.Fatalf("%q: walked %q %q, want %q %q", doc, keys, values, wantKeys, wantValues)
		}
	})
}

// TestBudgetBoundsTheEntriesTogether: entries each within their own
// bound are decoded while the budget lasts; the one that would take the
// document past it is refused and left alone, and so is every later one,
// however small.
func TestBudgetBoundsTheEntriesTogether(t *testing.T) {
	b := NewBudget(10)
	var got []int
	for i, doc := range []string{`[1,2,3,4]`, `[5,6,7,8]`, `[9,10,11]`, `[12]`, `[13,14]`} {
		var v []int
		err := b.Unmarshal([]byte(doc), &v, Limits{Elements: 4})
		switch {
		case i < 2 && err != nil:
			t.Fatalf("entry %d (%s), within the budget: %v", i, doc, err)
		case i == 2 && (!errors.Is(err, ErrLimit) || v != nil):
			t.Fatalf("entry %d (%s) would take the entries to 11 elements of 10: err %v, decoded %v", i, doc, err, v)
		case i == 3 && err != nil:
			t.Fatalf("entry %d (%s), the tenth element: %v", i, doc, err)
		case i == 4 && !errors.Is(err, ErrLimit):
			t.Fatalf("entry %d (%s), past the budget spent: err %v", i, doc, err)
		}
		got = append(got, v...)
	}
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 12]" {
		t.Errorf("decoded %v", got)
	}
	// An entry over its own bound is refused by it, whatever is left.
	if err := NewBudget(100).Unmarshal([]byte(`[1,2,3,4,5]`), new([]int), Limits{Elements: 4}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "more than 4 elements") {
		t.Errorf("an entry over its own bound: %v", err)
	}
}
