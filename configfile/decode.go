package configfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Options says how Decode reports problems. The zero value quotes values in
// messages and describes the document as "a mapping".
type Options struct {
	// Want describes what the whole file holds, for the problem reported
	// when its document is not a mapping: "want <Want>, got a list".
	Want string
	// Example, when set, ends that problem's message to show the accepted
	// shape: a few lines of YAML.
	Example string
	// HideValues keeps the file's values out of Decode's own messages
	// ("want a list, got a string", not got "hunter2"). Set it for files
	// where a secret could be pasted where its file or variable name
	// belongs. Messages from a custom type's UnmarshalYAML are its own.
	HideValues bool
}

// ScalarUnmarshaler is implemented by a struct that a file may also write
// as one scalar, a short form of the mapping: `- traefik-public` for
// `- name: traefik-public`. Decode calls UnmarshalScalar for a scalar and
// decodes a mapping strictly into the struct's fields, as any other, so the
// long form keeps its unknown-key errors and field paths. An error returned
// is reported at the scalar's position and field path.
type ScalarUnmarshaler interface {
	UnmarshalScalar(n *yaml.Node) error
}

// nodeBudget bounds the nodes one file may make the decoder visit, aliases
// and merge keys expanded. It keeps a small file of nested aliases (a
// "billion laughs") from costing more than a large honest one.
const nodeBudget = 200_000

// position is a 1-based line and column in a file.
type position struct{ line, column int }

// Document is one decoded file: the problems found so far and the position
// of every field that was present. Decode returns it; a caller's validation
// adds its own problems with Add.
//
// It is yaml.v3's Decoder with KnownFields(true), rebuilt on the node tree:
// that Decoder reports type errors as "line N: ..." strings without column or
// field path, and stops at the first error from a custom unmarshaler. This one
// reports every problem with both and carries on. Scalars still go through
// yaml.v3, and custom types validate in their UnmarshalYAML.
type Document struct {
	file     string
	hide     bool
	empty    bool
	problems Problems
	// at holds the position of every field path that was present, so
	// validation can point at a value, or at the nearest parent of a
	// missing one.
	at map[string]position
	// failed holds the field paths whose value could not be decoded;
	// validation stays quiet about them and everything below them.
	failed map[string]bool
	budget int
}

// Decode decodes data, which should hold one YAML document with a mapping,
// into v, a pointer to a struct whose fields carry yaml tags; or, when v
// points to a slice, one document with a list, whose field paths then start
// with the index ("[2].deploy"). Fields may be
// structs, pointers, slices, maps with string keys, strings, bools, integers
// or types implementing yaml.Unmarshaler; a struct implementing
// ScalarUnmarshaler also takes a scalar. A key starting with "x-" is
// skipped anywhere, as in compose, to give anchors a home. A field absent or
// null in the file is left as v had it. file only labels problems.
//
// Decode always returns a Document; its Problems are empty when data
// decoded cleanly. An empty file is no problem here (see Document.Empty):
// whether it is allowed is the caller's rule.
func Decode(file string, data []byte, v any, opts Options) *Document {
	d := &Document{file: file, hide: opts.HideValues, at: map[string]position{}, failed: map[string]bool{}, budget: nodeBudget}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || (rv.Elem().Kind() != reflect.Struct && rv.Elem().Kind() != reflect.Slice) {
		d.failed[""] = true
		d.add(position{}, "", "cannot decode into %T", v)
		return d
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			d.empty = true
		} else {
			d.addSyntax(err)
		}
		return d
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.addSyntax(err)
	default:
		d.add(pos(&extra), "", "a second YAML document; a file holds one")
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	r := resolve(doc)
	if r != nil && isNull(r) {
		d.empty = true
		return d
	}
	wantKind, want := yaml.MappingNode, "a mapping"
	if rv.Elem().Kind() == reflect.Slice {
		wantKind, want = yaml.SequenceNode, "a list"
	}
	if r == nil || r.Kind != wantKind {
		msg := fmt.Sprintf("want %s, got %s", cmp.Or(opts.Want, want), d.describe(r))
		if opts.Example != "" {
			msg += "; for example:\n" + opts.Example
		}
		d.failed[""] = true
		d.add(pos(doc), "", "%s", msg)
		return d
	}
	d.decode(doc, "", rv.Elem())
	return d
}

var yamlErrorLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// addSyntax reports a YAML syntax error at the line yaml.v3 gives, if any.
// Nothing below the document is reported after it.
func (d *Document) addSyntax(err error) {
	d.failed[""] = true
	msg := err.Error()
	if m := yamlErrorLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.add(position{line: line}, "", "invalid YAML: %s", m[2])
		return
	}
	d.add(position{}, "", "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

// File returns the name the document was decoded under.
func (d *Document) File() string { return d.file }

// Empty reports whether the file held no document, or only a null one. v
// was left as it was, and no problem was recorded for it.
func (d *Document) Empty() bool { return d.empty }

// Problems returns a copy of the problems found so far, ordered by line and
// column; nil when there are none.
func (d *Document) Problems() Problems {
	if len(d.problems) == 0 {
		return nil
	}
	out := append(Problems(nil), d.problems...)
	out.Sort()
	return out
}

// Err returns Problems as an error, or nil when there are none.
func (d *Document) Err() error {
	if ps := d.Problems(); ps != nil {
		return ps
	}
	return nil
}

func (d *Document) add(pos position, field, format string, args ...any) {
	d.problems = append(d.problems, Problem{
		File:    d.file,
		Line:    pos.line,
		Column:  pos.column,
		Field:   field,
		Message: fmt.Sprintf(format, args...),
	})
}

// fail reports that n could not be decoded into field.
func (d *Document) fail(n *yaml.Node, field, format string, args ...any) {
	d.failed[field] = true
	d.add(pos(n), field, format, args...)
}

// Add records a problem at field, a path like "notifiers[1].match.types[0]",
// positioned at its value or, when field is absent from the file, at its
// nearest present parent. It records nothing when decoding field or a parent
// already failed: that problem was reported, and a second one about the same
// value would only repeat it.
func (d *Document) Add(field, format string, args ...any) {
	for f := field; ; f = parent(f) {
		if d.failed[f] {
			return
		}
		if f == "" {
			break
		}
	}
	d.add(d.position(field), field, format, args...)
}

// parent returns the field path one level up: "a.b[2]" gives "a.b".
func parent(field string) string {
	return field[:max(strings.LastIndexAny(field, ".["), 0)]
}

// Position returns the 1-based line and column of field's value, or of its
// nearest present parent when field is absent; 0, 0 when none is present.
func (d *Document) Position(field string) (line, column int) {
	p := d.position(field)
	return p.line, p.column
}

func (d *Document) position(field string) position {
	for {
		if p, ok := d.at[field]; ok {
			return p
		}
		if field == "" {
			return position{}
		}
		field = parent(field)
	}
}

// Present reports whether field was written in the file, even as null.
func (d *Document) Present(field string) bool {
	_, ok := d.at[field]
	return ok
}

func pos(n *yaml.Node) position { return position{n.Line, n.Column} }

// spend takes one node from the budget and reports whether any was left.
func (d *Document) spend(n *yaml.Node) bool {
	d.budget--
	if d.budget == -1 {
		d.failed[""] = true // what was left undecoded is not missing
		d.add(pos(n), "", "document too large or too deeply aliased: more than %d nodes", nodeBudget)
	}
	return d.budget >= 0
}

// decode stores n into v, which must be addressable. A null leaves v as it is.
func (d *Document) decode(n *yaml.Node, field string, v reflect.Value) {
	if !d.spend(n) {
		return
	}
	d.at[field] = pos(n)
	n = resolve(n)
	if n == nil || isNull(n) {
		return
	}
	d.decodeValue(n, field, v)
}

func (d *Document) decodeValue(n *yaml.Node, field string, v reflect.Value) {
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok {
		if err := u.UnmarshalYAML(n); err != nil {
			d.fail(n, field, "%s", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.decodeValue(n, field, elem.Elem())
		v.Set(elem)
	case reflect.Struct:
		if s, ok := v.Addr().Interface().(ScalarUnmarshaler); ok && n.Kind == yaml.ScalarNode {
			if err := s.UnmarshalScalar(n); err != nil {
				d.fail(n, field, "%s", err)
			}
			return
		}
		d.decodeStruct(n, field, v)
	case reflect.Slice:
		d.decodeSlice(n, field, v)
	case reflect.Map:
		d.decodeMap(n, field, v)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, field, "want a string, got %s", d.describe(n))
			return
		}
		// The raw text, so that `revision: 1.10` stays "1.10".
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.fail(n, field, "want true or false, got %s", d.describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.fail(n, field, "want a whole number, got %s", d.describe(n))
			return
		}
		v.SetInt(i)
	default:
		d.fail(n, field, "cannot decode into %s", v.Type())
	}
}

func (d *Document) decodeStruct(n *yaml.Node, field string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "want a mapping, got %s", d.describe(n))
		return
	}
	keys := yamlKeys(v.Type())
	for _, p := range d.pairs(n, field, 0) {
		i, ok := keys[p.key.Value]
		if !ok && strings.HasPrefix(p.key.Value, "x-") {
			continue // an extension field, as in compose: a home for anchors
		}
		if !ok {
			d.add(pos(p.key), join(field, p.key.Value), "unknown key; want one of %s", strings.Join(keyList(v.Type()), ", "))
			continue
		}
		d.decode(p.value, join(field, p.key.Value), v.Field(i))
	}
}

func (d *Document) decodeSlice(n *yaml.Node, field string, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, field, "want a list, got %s", d.describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, fmt.Sprintf("%s[%d]", field, i), out.Index(i))
	}
	v.Set(out)
}

func (d *Document) decodeMap(n *yaml.Node, field string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "want a mapping, got %s", d.describe(n))
		return
	}
	out := reflect.MakeMap(v.Type())
	for _, p := range d.pairs(n, field, 0) {
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(p.value, join(field, p.key.Value), elem)
		out.SetMapIndex(reflect.ValueOf(p.key.Value).Convert(v.Type().Key()), elem)
	}
	v.Set(out)
}

type pair struct{ key, value *yaml.Node }

// maxMergeDepth bounds merge keys that merge mappings that merge mappings.
const maxMergeDepth = 8

// pairs returns the key/value pairs of mapping n with merge keys (<<)
// expanded: a key written in n wins over a merged one, and an earlier merged
// mapping wins over a later one, as YAML's merge key type says. A key written
// twice is a problem.
func (d *Document) pairs(n *yaml.Node, field string, depth int) []pair {
	if d.budget < 0 {
		return nil
	}
	var out []pair
	seen := map[string]*yaml.Node{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !d.spend(k) {
			return out
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.add(pos(k), field, "want a string key, got %s", d.describe(resolve(k)))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(pos(k), join(field, k.Value), "key written twice; first at line %d", first.Line)
			continue
		}
		seen[k.Value] = k
		out = append(out, pair{k, v})
	}
	for _, m := range merges {
		if depth >= maxMergeDepth {
			d.add(pos(m), field, "merge keys nested more than %d deep", maxMergeDepth)
			break
		}
		m = resolve(m)
		if m == nil {
			continue
		}
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			src = resolve(src)
			if src == nil || src.Kind != yaml.MappingNode {
				d.add(pos(m), field, "want a mapping or a list of mappings to merge (<<), got %s", d.describe(src))
				continue
			}
			for _, p := range d.pairs(src, field, depth+1) {
				if _, ok := seen[p.key.Value]; ok {
					continue
				}
				seen[p.key.Value] = p.key
				out = append(out, p)
			}
		}
	}
	return out
}

// resolve follows an alias to the node it names. yaml.v3 never makes an alias
// of an alias, but a hand-built tree could.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Describe names what a node holds, for "want X, got Y" messages: "a
// mapping", "a list", "nothing", or a scalar's value quoted by Quote. A
// custom type's UnmarshalYAML uses it to word its errors as Decode does.
func Describe(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.ScalarNode && isNull(n):
		return "nothing"
	case n.Kind == yaml.ScalarNode:
		return Quote(n.Value)
	}
	return "an unexpected YAML node"
}

// describe is Describe, naming only a scalar's type when values are hidden.
func (d *Document) describe(n *yaml.Node) string {
	if !d.hide || n == nil || n.Kind != yaml.ScalarNode || isNull(n) {
		return Describe(n)
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true or false"
	}
	return "a string"
}

// Quote quotes s for a message, cut short so a huge value stays readable.
func Quote(s string) string {
	const max = 80
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// yamlKeys maps the yaml key of each field of struct type t to its index.
func yamlKeys(t reflect.Type) map[string]int {
	keys := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			keys[name] = i
		}
	}
	return keys
}

// keyList returns the yaml keys of struct type t in declaration order.
func keyList(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
