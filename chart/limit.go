package chart

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// The bounds of one render besides MaxRenderedSize. A template is code from
// a repository: what it builds, how long it runs and how many steps it
// takes are all bounded, and each bound is checked before the work it
// bounds, so that a render stops with a problem naming its template instead
// of exhausting the controller. docs/charts.md lists them; see
// TestRenderStopsAtItsBoundsNamingTheTemplate.
const (
	// MaxBuilt bounds the bytes the functions of one render build: strings
	// by their length, lists and dicts by their entries, counted as they are
	// made, garbage included. A function whose result would pass it is
	// refused before it starts.
	MaxBuilt = 64 << 20
	// MaxSteps bounds the steps of one render: function calls, evaluated
	// pipelines, range iterations and template calls.
	MaxSteps = 1_000_000
	// RenderTimeout is how long one render may take when
	// RenderOptions.Timeout is zero.
	RenderTimeout = 10 * time.Second
	// maxNesting bounds how deep a value may nest when it is printed,
	// encoded or copied; a value that holds itself nests without end.
	maxNesting = 1000
)

// errRenderTimeout is the cause of a render's context when the render ran
// past its time bound.
var errRenderTimeout = errors.New("render timeout")

// budget is what one render may still spend. It belongs to the goroutine
// executing the render; nothing else reads or writes it.
type budget struct {
	ctx   context.Context
	steps int
	built int
}

// step spends n steps. It also fails once the render's context is done, so
// that a render stops at its next step when it times out or is cancelled.
func (b *budget) step(n int) error {
	if err := b.ctx.Err(); err != nil {
		return context.Cause(b.ctx)
	}
	b.steps = addSat(b.steps, n)
	if b.steps > MaxSteps {
		return fmt.Errorf("more than %d steps (function calls, pipelines and range iterations) in one render", MaxSteps)
	}
	return nil
}

// fits fails when n more bytes would take the render past MaxBuilt; it
// spends nothing.
func (b *budget) fits(n int) error {
	if n <= MaxBuilt-b.built {
		return nil
	}
	if b.built > 0 {
		return fmt.Errorf("would build %d bytes; with the %d built before, that is past the %d MiB a render may build", n, b.built, MaxBuilt>>20)
	}
	return fmt.Errorf("would build %d bytes, past the %d MiB a render may build", n, MaxBuilt>>20)
}

// build spends n bytes built.
func (b *budget) build(n int) error {
	b.built = addSat(b.built, n)
	if b.built > MaxBuilt {
		return fmt.Errorf("the render built more than %d MiB, the most it may build", MaxBuilt>>20)
	}
	return nil
}

// errExpanded is the refusal of a value whose expanded size passes what
// the render may still build.
var errExpanded = fmt.Errorf("would build more than %d MiB, the most a render may build (the value's shared parts count each time they appear)", MaxBuilt>>20)

// errNested is the refusal of a value nested deeper than maxNesting.
var errNested = fmt.Errorf("nested deeper than %d (a value holding itself?)", maxNesting)

// expanded fails when printing, encoding or copying args, times factor
// (the most an encoding grows a byte), would build more than what is left
// of the render's MaxBuilt. A list or dict held twice counts twice, as it
// is written twice: a dict doubled 25 times is small in memory and
// gigabytes as YAML.
func (b *budget) expanded(factor int, args ...any) error {
	left := (MaxBuilt - b.built) / factor
	n := 0
	for _, a := range args {
		size, err := treeSize(reflect.ValueOf(a), left-n, 0)
		if err != nil {
			return err
		}
		n += size
	}
	return nil
}

// treeSize estimates the bytes v takes when written out, as YAML, JSON or
// fmt write it, at depth; it stops early with errExpanded once the
// estimate passes limit, and with errNested past maxNesting.
func treeSize(v reflect.Value, limit, depth int) (int, error) {
	if depth > maxNesting {
		return 0, errNested
	}
	indent := 4 * depth
	n := 0
	add := func(size int) error {
		n = addSat(n, size)
		if n > limit {
			return errExpanded
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Invalid:
		return 4, add(4)
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return 4, add(4)
		}
		return treeSize(v.Elem(), limit, depth+1)
	case reflect.String:
		return n, add(v.Len() + 2)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return n, add(v.Len() + 2)
		}
		if err := add(2); err != nil {
			return n, err
		}
		for i := range v.Len() {
			size, err := treeSize(v.Index(i), limit-n, depth+1)
			if err != nil {
				return n, err
			}
			if err := add(size + 2 + indent); err != nil {
				return n, err
			}
		}
	case reflect.Map:
		if err := add(2); err != nil {
			return n, err
		}
		it := v.MapRange()
		for it.Next() {
			key, err := treeSize(it.Key(), limit-n, depth+1)
			if err != nil {
				return n, err
			}
			if err := add(key); err != nil {
				return n, err
			}
			size, err := treeSize(it.Value(), limit-n, depth+1)
			if err != nil {
				return n, err
			}
			if err := add(size + 2 + indent); err != nil {
				return n, err
			}
		}
	case reflect.Struct:
		if err := add(2); err != nil {
			return n, err
		}
		for i := range v.NumField() {
			size, err := treeSize(v.Field(i), limit-n, depth+1)
			if err != nil {
				return n, err
			}
			if err := add(size + len(v.Type().Field(i).Name) + 2 + indent); err != nil {
				return n, err
			}
		}
	default:
		return n, add(24)
	}
	return n, nil
}

// shallowSize is what a function's result v counts against MaxBuilt: a
// string by its length, a list or dict by its entries (what they hold was
// counted when it was built).
func shallowSize(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return shallowSize(v.Elem())
	case reflect.String:
		return v.Len()
	case reflect.Slice, reflect.Array:
		return mulSat(v.Len(), itemSize(v.Type().Elem()))
	case reflect.Map:
		return mulSat(v.Len(), 2*(itemSize(v.Type().Key())+itemSize(v.Type().Elem())))
	}
	return 0
}

// itemSize is the bytes one entry of type t takes in a list or dict, with
// what an interface or string header points at.
func itemSize(t reflect.Type) int {
	size := int(t.Size())
	if k := t.Kind(); k == reflect.Interface || k == reflect.String {
		size += 16
	}
	return size
}

// listSize is what a result of n entries of type elem counts.
func listSize(n int, elem reflect.Type) int { return mulSat(n, itemSize(elem)) }

func addSat(a, b int) int {
	if b > 0 && a > maxInt-b {
		return maxInt
	}
	return a + b
}

func mulSat(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxInt/b {
		return maxInt
	}
	return a * b
}

const maxInt = int(^uint(0) >> 1)

// countOf is how many times sep occurs in s, as strings.Split and
// strings.Replace count it: the runes plus one for the empty separator.
func countOf(s, sep string) int {
	if sep == "" {
		return utf8.RuneCountInString(s) + 1
	}
	return strings.Count(s, sep)
}

// printfSize estimates the length of fmt.Sprintf(format, args...): the
// format, every width and precision (fmt takes at most 1e6 each), and
// every argument as often as a verb may print it.
func printfSize(format string, argSizes []int) int {
	const fmtMax = 1_000_000 // fmt refuses a larger width or precision
	n, verbs := len(format), 0
	number := func(i int) (int, int) {
		v := 0
		for i < len(format) && format[i] >= '0' && format[i] <= '9' {
			v = min(v*10+int(format[i]-'0'), fmtMax)
			i++
		}
		return v, i
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
	spec:
		for i < len(format) {
			switch {
			case format[i] == '[':
				end := strings.IndexByte(format[i:], ']')
				if end < 0 {
					i = len(format)
					break spec
				}
				i += end + 1
			case format[i] == '*':
				n = addSat(n, fmtMax)
				i++
			case format[i] == '.':
				i++
			case format[i] >= '0' && format[i] <= '9':
				var w int
				w, i = number(i)
				n = addSat(n, w)
			default:
				break spec
			}
		}
		if i < len(format) && format[i] != '%' {
			verbs++
		}
	}
	largest, sum := 0, 0
	for _, s := range argSizes {
		largest, sum = max(largest, s), addSat(sum, s)
	}
	return addSat(n, max(mulSat(verbs, largest), sum))
}
