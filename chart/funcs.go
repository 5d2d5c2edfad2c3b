package chart

import (
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"unsafe"
)

// A check refuses a call whose result would pass what the render may
// still build, before the function starts; it reads the call's arguments,
// the variadic ones flattened.
type check func(b *budget, args []reflect.Value) error

// checks holds the functions whose result can be far larger than their
// arguments, or whose work grows faster than them.
var checks = map[string]check{
	"indent":                     func(b *budget, a []reflect.Value) error { return b.fits(indentSize(a)) },
	"nindent":                    func(b *budget, a []reflect.Value) error { return b.fits(addSat(indentSize(a), 1)) },
	"repeat":                     func(b *budget, a []reflect.Value) error { return b.fits(mulSat(intArg(a, 0), len(stringArg(a, 1)))) },
	"randAlphaNum":               func(b *budget, a []reflect.Value) error { return b.fits(intArg(a, 0)) },
	"randAlpha":                  func(b *budget, a []reflect.Value) error { return b.fits(intArg(a, 0)) },
	"randAscii":                  func(b *budget, a []reflect.Value) error { return b.fits(intArg(a, 0)) },
	"randNumeric":                func(b *budget, a []reflect.Value) error { return b.fits(intArg(a, 0)) },
	"randBytes":                  func(b *budget, a []reflect.Value) error { return b.fits(mulSat(intArg(a, 0), 2)) },
	"replace":                    checkReplace,
	"regexReplaceAll":            checkRegexReplace(false),
	"mustRegexReplaceAll":        checkRegexReplace(false),
	"regexReplaceAllLiteral":     checkRegexReplace(true),
	"mustRegexReplaceAllLiteral": checkRegexReplace(true),
	"wrap": func(b *budget, a []reflect.Value) error {
		return b.fits(addSat(mulSat(len(stringArg(a, 1)), 2), 1))
	},
	"wrapWith": func(b *budget, a []reflect.Value) error {
		s := stringArg(a, 2)
		return b.fits(addSat(len(s), mulSat(len(s)+1, len(stringArg(a, 1)))))
	},
	"splitList": func(b *budget, a []reflect.Value) error {
		return b.fits(listSize(countOf(stringArg(a, 1), stringArg(a, 0))+1, stringType))
	},
	"split": func(b *budget, a []reflect.Value) error {
		return b.fits(mulSat(countOf(stringArg(a, 1), stringArg(a, 0))+1, 4*itemSize(stringType)))
	},
	"regexFindAll":     checkMatches,
	"mustRegexFindAll": checkMatches,
	"regexSplit":       checkMatches,
	"mustRegexSplit":   checkMatches,
	"concat": func(b *budget, a []reflect.Value) error {
		n := 0
		for _, v := range a {
			n = addSat(n, rangeLen(v))
		}
		return b.fits(listSize(n, anyType))
	},
	"uniq":               checkQuadratic,
	"mustUniq":           checkQuadratic,
	"printf":             checkPrintf,
	"fromJson":           checkDecode,
	"mustFromJson":       checkDecode,
	"fromYaml":           checkDecode,
	"toYaml":             checkExpanded(6),
	"toJson":             checkExpanded(6),
	"mustToJson":         checkExpanded(6),
	"toPrettyJson":       checkExpanded(6),
	"mustToPrettyJson":   checkExpanded(6),
	"toRawJson":          checkExpanded(6),
	"mustToRawJson":      checkExpanded(6),
	"js":                 checkExpanded(6),
	"html":               checkExpanded(5),
	"quote":              checkExpanded(4),
	"squote":             checkExpanded(4),
	"urlquery":           checkExpanded(3),
	"print":              checkExpanded(1),
	"println":            checkExpanded(1),
	"cat":                checkExpanded(1),
	"join":               checkExpanded(1),
	"toString":           checkExpanded(1),
	"toStrings":          checkExpanded(1),
	"sortAlpha":          checkExpanded(1),
	"deepCopy":           checkExpanded(1),
	"mustDeepCopy":       checkExpanded(1),
	"merge":              checkExpanded(1),
	"mustMerge":          checkExpanded(1),
	"mergeOverwrite":     checkExpanded(1),
	"mustMergeOverwrite": checkExpanded(1),
	"fail":               checkExpanded(1),
}

var (
	stringType = reflect.TypeFor[string]()
	anyType    = reflect.TypeFor[any]()
)

// bounded wraps fn, the function name of the map: a call spends a step,
// passes name's check (and, for any function, its string arguments must
// fit what is left to build), and counts its result against MaxBuilt. A
// refusal panics with the error, which text/template returns as the call's
// error at its place in the template.
func (e *engine) bounded(name string, fn any) any {
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.Kind() != reflect.Func {
		return fn
	}
	check := checks[name]
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		flat := args
		if t.IsVariadic() && len(args) > 0 {
			last := args[len(args)-1]
			flat = append(args[:len(args)-1:len(args)-1], make([]reflect.Value, last.Len())...)
			for i := range last.Len() {
				flat[len(args)-1+i] = last.Index(i)
			}
		}
		if err := e.b.step(1); err != nil {
			panic(err)
		}
		strs := 0
		for _, a := range flat {
			if a.Kind() == reflect.String {
				strs = addSat(strs, a.Len())
			}
		}
		if err := e.b.fits(strs); err != nil {
			panic(err)
		}
		if check != nil {
			if err := check(e.b, flat); err != nil {
				panic(err)
			}
		}
		before := mapLens(flat)
		var out []reflect.Value
		if t.IsVariadic() {
			out = v.CallSlice(args)
		} else {
			out = v.Call(args)
		}
		if len(out) > 0 {
			if err := e.b.build(resultSize(name, out[0], flat, before)); err != nil {
				panic(err)
			}
		}
		return out
	}).Interface()
}

// mapLens records the length of every dict among args, by identity, so
// that a function that grows one in place (set, merge) counts the growth.
func mapLens(args []reflect.Value) map[uintptr]int {
	var out map[uintptr]int
	for _, a := range args {
		a = deref(a)
		if a.Kind() == reflect.Map && !a.IsNil() {
			if out == nil {
				out = map[uintptr]int{}
			}
			out[a.Pointer()] = a.Len()
		}
	}
	return out
}

// resultSize is what a result counts: nothing when it is one of the
// arguments (default, coalesce, first), the entries it gained when it is a
// dict of the arguments grown in place, and its shallowSize otherwise.
// Values decoded from text count whole.
func resultSize(name string, out reflect.Value, args []reflect.Value, before map[uintptr]int) int {
	out = deref(out)
	switch out.Kind() {
	case reflect.Map:
		if out.IsNil() {
			return 0
		}
		if n, ok := before[out.Pointer()]; ok {
			return mulSat(max(out.Len()-n, 0), 2*(itemSize(out.Type().Key())+itemSize(out.Type().Elem())))
		}
	case reflect.Slice:
		for _, a := range args {
			if a = deref(a); a.Kind() == reflect.Slice && a.Len() == out.Len() && a.Pointer() == out.Pointer() {
				return 0
			}
		}
	case reflect.String:
		s := out.String()
		for _, a := range args {
			if a = deref(a); a.Kind() == reflect.String && a.Len() == len(s) && unsafe.StringData(a.String()) == unsafe.StringData(s) {
				return 0
			}
		}
	}
	if name == "fromJson" || name == "mustFromJson" || name == "fromYaml" {
		n, _ := treeSize(out, maxInt, 0)
		return n
	}
	return shallowSize(out)
}

func deref(v reflect.Value) reflect.Value {
	for (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
		v = v.Elem()
	}
	return v
}

// intArg is argument i as an int, 0 when it is none.
func intArg(args []reflect.Value, i int) int {
	if i >= len(args) {
		return 0
	}
	switch v := deref(args[i]); v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int(min(v.Uint(), uint64(maxInt)))
	case reflect.Float32, reflect.Float64:
		return int(min(v.Float(), float64(maxInt)))
	}
	return 0
}

// stringArg is argument i as a string, "" when it is none.
func stringArg(args []reflect.Value, i int) string {
	if i >= len(args) {
		return ""
	}
	if v := deref(args[i]); v.Kind() == reflect.String {
		return v.String()
	}
	return ""
}

// indentSize is the length of indent N TEXT: the text with N spaces before
// each of its lines.
func indentSize(a []reflect.Value) int {
	s := stringArg(a, 1)
	return addSat(len(s), mulSat(intArg(a, 0), strings.Count(s, "\n")+1))
}

// checkReplace bounds replace OLD NEW TEXT: NEW once for every OLD, and
// for every rune and once more when OLD is empty.
func checkReplace(b *budget, a []reflect.Value) error {
	old, repl, s := stringArg(a, 0), stringArg(a, 1), stringArg(a, 2)
	return b.fits(addSat(len(s), mulSat(countOf(s, old), len(repl)-len(old))))
}

// checkRegexReplace bounds regexReplaceAll REGEX TEXT REPLACEMENT: a
// replacement for each possible match (an empty regex matches between every
// byte), each $ in it able to copy the whole text.
func checkRegexReplace(literal bool) check {
	return func(b *budget, a []reflect.Value) error {
		s, repl := stringArg(a, 1), stringArg(a, 2)
		n := addSat(len(s), mulSat(len(s)+1, len(repl)))
		if !literal {
			n = addSat(n, mulSat(strings.Count(repl, "$"), len(s)))
		}
		return b.fits(n)
	}
}

// checkMatches bounds regexFindAll and regexSplit REGEX TEXT N: at most N
// (or, when N is negative, one more than the text's bytes) strings.
func checkMatches(b *budget, a []reflect.Value) error {
	n, limit := len(stringArg(a, 1))+1, intArg(a, 2)
	if limit >= 0 {
		n = min(n, limit)
	}
	return b.fits(listSize(n, stringType))
}

// checkQuadratic spends the steps of uniq, which compares every item with
// every other.
func checkQuadratic(b *budget, a []reflect.Value) error {
	n := 0
	if len(a) > 0 {
		n = rangeLen(deref(a[0]))
	}
	const comparisonsPerStep = 100
	if err := b.step(mulSat(n, n) / 2 / comparisonsPerStep); err != nil {
		return fmt.Errorf("comparing %d items with each other: %w", n, err)
	}
	return nil
}

// checkPrintf bounds printf FORMAT ARGS...: see printfSize.
func checkPrintf(b *budget, a []reflect.Value) error {
	var sizes []int
	left := MaxBuilt - b.built
	for _, v := range a[min(1, len(a)):] {
		n, err := treeSize(v, left, 0)
		if err != nil {
			return err
		}
		sizes = append(sizes, n)
	}
	return b.fits(printfSize(stringArg(a, 0), sizes))
}

// checkDecode bounds fromYaml and fromJson: decoded values take far more
// memory than their text.
func checkDecode(b *budget, a []reflect.Value) error {
	const growth = 16
	return b.fits(mulSat(len(stringArg(a, 0)), growth))
}

// checkExpanded bounds a function that writes out or copies its arguments
// whole; factor is the most its encoding grows a byte (JSON writes < as
// \u003c).
func checkExpanded(factor int) check {
	return func(b *budget, a []reflect.Value) error {
		args := make([]any, 0, len(a))
		for _, v := range a {
			if v.IsValid() && v.CanInterface() {
				args = append(args, v.Interface())
			}
		}
		return b.expanded(factor, args...)
	}
}

// builtins are text/template's own functions that print their arguments
// whole; the chart's function map replaces them with bounded twins.
func builtins() template.FuncMap {
	return template.FuncMap{
		"print":    fmt.Sprint,
		"printf":   fmt.Sprintf,
		"println":  fmt.Sprintln,
		"html":     template.HTMLEscaper,
		"js":       template.JSEscaper,
		"urlquery": template.URLQueryEscaper,
	}
}
