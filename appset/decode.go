package appset

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// nodeBudget bounds the nodes one file may make the decoder visit, aliases
// and merge keys expanded. It keeps a small file of nested aliases (a
// "billion laughs") from costing more than a large honest one.
const nodeBudget = 200_000

// position is a 1-based line and column in a file.
type position struct{ line, column int }

// decoder turns a yaml.Node tree into the file-form structs of schema.go.
//
// It is yaml.v3's Decoder with KnownFields(true), rebuilt on the node tree:
// that Decoder reports type errors as "line N: ..." strings without column or
// field path, and stops at the first error from a custom unmarshaler. This one
// reports every problem with both and carries on. Scalars still go through
// yaml.v3, and custom types (duration, ResolveImage) validate in their
// UnmarshalYAML.
type decoder struct {
	file     string
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

func newDecoder(file string) *decoder {
	return &decoder{file: file, at: map[string]position{}, failed: map[string]bool{}, budget: nodeBudget}
}

func (d *decoder) add(pos position, field, format string, args ...any) {
	d.problems = append(d.problems, Problem{
		File:    d.file,
		Line:    pos.line,
		Column:  pos.column,
		Field:   field,
		Message: fmt.Sprintf(format, args...),
	})
}

// fail reports that n could not be decoded into field.
func (d *decoder) fail(n *yaml.Node, field, format string, args ...any) {
	d.failed[field] = true
	d.add(pos(n), field, format, args...)
}

// addField reports a problem at field, or at its nearest present parent,
// unless decoding field or a parent already failed.
func (d *decoder) addField(field, format string, args ...any) {
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

func (d *decoder) position(field string) position {
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

func (d *decoder) present(field string) bool {
	_, ok := d.at[field]
	return ok
}

func pos(n *yaml.Node) position { return position{n.Line, n.Column} }

// spend takes one node from the budget and reports whether any was left.
func (d *decoder) spend(n *yaml.Node) bool {
	d.budget--
	if d.budget == -1 {
		d.failed[""] = true // what was left undecoded is not missing
		d.add(pos(n), "", "document too large or too deeply aliased: more than %d nodes", nodeBudget)
	}
	return d.budget >= 0
}

// decode stores n into v, which must be addressable. A null leaves v zero.
func (d *decoder) decode(n *yaml.Node, field string, v reflect.Value) {
	if !d.spend(n) {
		return
	}
	d.at[field] = pos(n)
	n = resolve(n)
	if n == nil || isNull(n) {
		return
	}
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok {
		if err := u.UnmarshalYAML(n); err != nil {
			d.fail(n, field, "%s", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, field, v)
	case reflect.Slice:
		d.decodeSlice(n, field, v)
	case reflect.Map:
		d.decodeMap(n, field, v)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, field, "want a string, got %s", describe(n))
			return
		}
		// The raw text, so that `revision: 1.10` stays "1.10".
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.fail(n, field, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	default:
		// Only the types of schema.go reach here; see TestSchemaTypesAreDecodable.
		d.fail(n, field, "cannot decode into %s", v.Type())
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, field string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "want a mapping, got %s", describe(n))
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

func (d *decoder) decodeSlice(n *yaml.Node, field string, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, field, "want a list, got %s", describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, fmt.Sprintf("%s[%d]", field, i), out.Index(i))
	}
	v.Set(out)
}

func (d *decoder) decodeMap(n *yaml.Node, field string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "want a mapping, got %s", describe(n))
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
func (d *decoder) pairs(n *yaml.Node, field string, depth int) []pair {
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
			d.add(pos(k), field, "want a string key, got %s", describe(resolve(k)))
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
				d.add(pos(m), field, "want a mapping or a list of mappings to merge (<<), got %s", describe(src))
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

// describe names what a node holds, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
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
		return quote(n.Value)
	}
	return "an unexpected YAML node"
}

// quote quotes s for a message, cut short so a huge value stays readable.
func quote(s string) string {
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
