package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
)

// Spec is a Swarm object spec that a release holds: the type parameter of
// Fields, which walks any of them by reflection.
type Spec interface {
	swarm.ServiceSpec | network.CreateOptions | swarm.ConfigSpec | swarm.SecretSpec
}

// Fields returns one FieldDiff per leaf that differs between old and desired,
// in spec field order. The result is nil when they are equal. Rules:
//   - a zero scalar, a nil pointer and an empty map, list or struct are all
//     absent; a pointer to a zero scalar (Replicas: 0) is present;
//   - maps and env (KEY=VALUE) are compared by key, labels and env order is
//     irrelevant; ports by target/protocol, mounts by target, secret and
//     config references by target file, networks by target, ulimits by name;
//     other lists of structs by index;
//   - lists of scalars are one leaf; constraints, capabilities, groups and
//     network aliases are compared as sets;
//   - a struct present on one side only is one leaf, rendered whole;
//   - SecretID and ConfigID are ignored: apply resolves them from names.
func Fields[S Spec](old, desired S, opts Options) []FieldDiff {
	d := differ{opts: opts}
	d.walkStruct("", reflect.ValueOf(old), reflect.ValueOf(desired))
	return d.diffs
}

// differ collects the FieldDiffs of one Fields call, in walk order.
type differ struct {
	opts  Options
	diffs []FieldDiff
}

// hint says how a field is compared beyond what its type tells.
type hint int

const (
	hintNone hint = iota
	hintEnv       // []string of KEY=VALUE, keyed by KEY
	hintSet       // []string whose order Swarm ignores
)

// fieldID names a struct field by its parent type, for the hint and ignore
// tables: the same field name means different things in different types.
type fieldID struct {
	parent reflect.Type
	name   string
}

var (
	fieldHints = map[fieldID]hint{
		{reflect.TypeFor[swarm.ContainerSpec](), "Env"}:               hintEnv,
		{reflect.TypeFor[swarm.ContainerSpec](), "CapabilityAdd"}:     hintSet,
		{reflect.TypeFor[swarm.ContainerSpec](), "CapabilityDrop"}:    hintSet,
		{reflect.TypeFor[swarm.ContainerSpec](), "Groups"}:            hintSet,
		{reflect.TypeFor[swarm.Placement](), "Constraints"}:           hintSet,
		{reflect.TypeFor[swarm.NetworkAttachmentConfig](), "Aliases"}: hintSet,
	}
	// ignored fields are filled in by apply from names that are compared.
	ignored = map[fieldID]bool{
		{reflect.TypeFor[swarm.SecretReference](), "SecretID"}: true,
		{reflect.TypeFor[swarm.ConfigReference](), "ConfigID"}: true,
	}
)

// walk compares a and b, both resolved: an invalid Value is absent.
func (d *differ) walk(path string, a, b reflect.Value, h hint) {
	if !a.IsValid() && !b.IsValid() {
		return
	}
	var t reflect.Type
	if a.IsValid() {
		t = a.Type()
	} else {
		t = b.Type()
	}
	switch {
	case t.Kind() == reflect.Struct:
		if !a.IsValid() || !b.IsValid() || t.NumField() == 0 {
			d.leaf(path, a, b, h)
			return
		}
		d.walkStruct(path, a, b)
	case t.Kind() == reflect.Map:
		d.walkMap(path, a, b)
	case h == hintEnv:
		d.walkEnv(path, a, b)
	case t.Kind() == reflect.Slice && isStructy(t.Elem()):
		d.walkList(path, a, b)
	default:
		d.leaf(path, a, b, h)
	}
}

// walkStruct compares the fields of two values of one struct type, in
// declaration order, under their JSON names.
func (d *differ) walkStruct(path string, a, b reflect.Value) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := fieldName(f)
		if !ok || ignored[fieldID{t, f.Name}] {
			continue
		}
		if name == "" {
			// An embedded struct (Annotations) flattens into its parent, so
			// it is walked even when empty on one side.
			d.walkStruct(path, a.Field(i), b.Field(i))
			continue
		}
		d.walk(joinPath(path, name), resolve(a.Field(i)), resolve(b.Field(i)), fieldHints[fieldID{t, f.Name}])
	}
}

// walkMap compares maps key by key, in key order; a key on one side only
// is an Added or Removed leaf.
func (d *differ) walkMap(path string, a, b reflect.Value) {
	keys := map[string][2]reflect.Value{}
	for side, m := range []reflect.Value{a, b} {
		if !m.IsValid() {
			continue
		}
		for it := m.MapRange(); it.Next(); {
			k := fmt.Sprint(it.Key().Interface())
			pair := keys[k]
			pair[side] = deref(it.Value())
			keys[k] = pair
		}
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		pair := keys[k]
		d.walk(path+"["+strconv.Quote(k)+"]", pair[0], pair[1], hintNone)
	}
}

// walkEnv compares KEY=VALUE lists by key. A key given twice keeps its last
// value, as the container runtime does.
func (d *differ) walkEnv(path string, a, b reflect.Value) {
	ea, eb := envMap(a), envMap(b)
	keys := slices.Sorted(maps.Keys(ea))
	for k := range eb {
		if _, ok := ea[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, aok := ea[k]
		vb, bok := eb[k]
		if aok && bok && va == vb {
			continue
		}
		var ra, rb string
		if aok {
			ra = d.envValue(va)
		}
		if bok {
			rb = d.envValue(vb)
		}
		d.emit(path+"["+strconv.Quote(k)+"]", ra, rb, aok, bok)
	}
}

// walkList compares lists of structs by natural key where the element type
// has one, else by index.
func (d *differ) walkList(path string, a, b reflect.Value) {
	ka, kb := listEntries(a), listEntries(b)
	keys := slices.Collect(maps.Keys(ka))
	for k := range kb {
		if _, ok := ka[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareListKeys)
	for _, k := range keys {
		d.walk(path+"["+k+"]", ka[k], kb[k], hintNone)
	}
}

// leaf compares a and b as wholes and records them when they differ.
func (d *differ) leaf(path string, a, b reflect.Value, h hint) {
	ra, rb := d.render(a, h), d.render(b, h)
	if a.IsValid() && b.IsValid() && ra == rb && sameBytes(a, b) {
		return
	}
	d.emit(path, ra, rb, a.IsValid(), b.IsValid())
}

// emit records one differing leaf; a missing side is Added or Removed.
func (d *differ) emit(path, old, desired string, hasOld, hasNew bool) {
	d.diffs = append(d.diffs, FieldDiff{
		Path: path, Old: old, New: desired,
		Added: !hasOld, Removed: !hasNew,
	})
}

// sameBytes guards digest rendering: equal 12-hex digests of different
// payloads must still count as a change.
func sameBytes(a, b reflect.Value) bool {
	if a.Kind() != reflect.Slice || a.Type().Elem().Kind() != reflect.Uint8 {
		return true
	}
	return bytes.Equal(a.Bytes(), b.Bytes())
}

// render formats a resolved value for a diff; "" means absent.
func (d *differ) render(v reflect.Value, h hint) string {
	if !v.IsValid() {
		return ""
	}
	switch x := v.Interface().(type) {
	case time.Duration:
		return x.String()
	case os.FileMode:
		return fmt.Sprintf("%#o", uint32(x))
	}
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
		return digest(v.Bytes())
	}
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Struct:
		return d.renderStruct(v)
	case reflect.Map:
		keys := mapKeys(v)
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			parts = append(parts, strconv.Quote(k)+": "+d.render(deref(v.MapIndex(keys[k])), hintNone))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case reflect.Slice, reflect.Array:
		return d.renderList(v, h)
	}
	return fmt.Sprint(v.Interface())
}

// renderStruct renders a whole struct as "{Name: value, ...}", for a struct
// present on one side only.
func (d *differ) renderStruct(v reflect.Value) string {
	return "{" + strings.Join(d.structParts(v), ", ") + "}"
}

// structParts renders the present fields of v as "Name: value", with an
// embedded struct's fields inline, as JSON flattens them.
func (d *differ) structParts(v reflect.Value) []string {
	var parts []string
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := fieldName(f)
		if !ok || ignored[fieldID{t, f.Name}] {
			continue
		}
		if name == "" {
			parts = append(parts, d.structParts(v.Field(i))...)
			continue
		}
		if fv := resolve(v.Field(i)); fv.IsValid() {
			parts = append(parts, name+": "+d.render(fv, fieldHints[fieldID{t, f.Name}]))
		}
	}
	return parts
}

// renderList renders a list as one leaf. A set is sorted, so that order
// Swarm ignores never reads as a change.
func (d *differ) renderList(v reflect.Value, h hint) string {
	items := make([]string, 0, v.Len())
	for i := range v.Len() {
		e := deref(v.Index(i))
		switch {
		case !e.IsValid():
			items = append(items, "null")
		case h == hintEnv:
			items = append(items, d.envEntry(e.String()))
		default:
			items = append(items, d.render(e, hintNone))
		}
	}
	if h == hintSet {
		slices.Sort(items)
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// envValue is one variable of an env list.
type envValue struct {
	value string
	set   bool // false for an entry without "=", which passes no value
}

// envMap keys a KEY=VALUE list by KEY; a later entry wins.
func envMap(v reflect.Value) map[string]envValue {
	m := map[string]envValue{}
	if !v.IsValid() {
		return m
	}
	for i := range v.Len() {
		k, val, set := strings.Cut(v.Index(i).String(), "=")
		m[k] = envValue{val, set}
	}
	return m
}

// envEntry renders one KEY=VALUE entry whole, masked like envValue.
func (d *differ) envEntry(entry string) string {
	k, _, set := strings.Cut(entry, "=")
	if set && d.opts.MaskEnv {
		return strconv.Quote(k + "=***")
	}
	return strconv.Quote(entry)
}

// envValue renders one variable's value for a diff, masked with MaskEnv:
// a live value may be a credential set outside git.
func (d *differ) envValue(v envValue) string {
	switch {
	case !v.set:
		return "(no value)"
	case d.opts.MaskEnv:
		return "***"
	}
	return strconv.Quote(v.value)
}

// listEntries keys the elements of a list of structs. Keys are rendered
// ready for a path: quoted natural keys, or bare indexes. A natural key seen
// twice gets a "#2" suffix so no element is lost.
func listEntries(v reflect.Value) map[string]reflect.Value {
	m := map[string]reflect.Value{}
	if !v.IsValid() {
		return m
	}
	seen := map[string]int{}
	for i := range v.Len() {
		e := deref(v.Index(i))
		k, ok := naturalKey(e)
		if !ok {
			m[strconv.Itoa(i)] = e
			continue
		}
		seen[k]++
		if n := seen[k]; n > 1 {
			k = fmt.Sprintf("%s#%d", k, n)
		}
		m[strconv.Quote(k)] = e
	}
	return m
}

// naturalKey identifies an element of a list by what it is for, so that
// inserting or removing one does not shift the others.
func naturalKey(e reflect.Value) (string, bool) {
	if !e.IsValid() {
		return "", false
	}
	switch x := e.Interface().(type) {
	case swarm.PortConfig:
		proto := string(x.Protocol)
		if proto == "" {
			proto = string(swarm.PortConfigProtocolTCP)
		}
		return fmt.Sprintf("%d/%s", x.TargetPort, proto), true
	case mount.Mount:
		return x.Target, true
	case swarm.SecretReference:
		if x.File != nil {
			return x.File.Name, true
		}
		return x.SecretName, true
	case swarm.ConfigReference:
		if x.File != nil {
			return x.File.Name, true
		}
		return x.ConfigName, true
	case swarm.NetworkAttachmentConfig:
		return x.Target, true
	case container.Ulimit:
		return x.Name, true
	}
	return "", false
}

// compareListKeys orders quoted natural keys by text and bare indexes by
// number.
func compareListKeys(a, b string) int {
	ia, errA := strconv.Atoi(a)
	ib, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return ia - ib
	}
	return strings.Compare(a, b)
}

// isStructy reports whether elements of this type are walked field by field.
func isStructy(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct || t.Kind() == reflect.Map
}

// fieldName is the name a field has in paths: its JSON name, or "" for an
// embedded struct that JSON flattens. ok is false for fields JSON skips.
func fieldName(f reflect.StructField) (name string, ok bool) {
	if !f.IsExported() {
		return "", false
	}
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case tag == "-":
		return "", false
	case tag != "":
		return tag, true
	case f.Anonymous && f.Type.Kind() == reflect.Struct:
		return "", true
	}
	return f.Name, true
}

// joinPath appends a field name to a dotted path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// resolve dereferences v, and returns the invalid Value when v holds
// nothing (see Fields for what counts as absent).
func resolve(v reflect.Value) reflect.Value {
	if isEmpty(v) {
		return reflect.Value{}
	}
	return deref(v)
}

// deref follows pointers and interfaces to the value they hold; the
// invalid Value for nil.
func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// isEmpty reports whether v counts as absent under the rules of Fields.
func isEmpty(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return true
		}
		e := v.Elem()
		switch e.Kind() {
		case reflect.Struct:
			// A pointer to an empty struct is a flag: Mode.Global is set.
			return e.NumField() > 0 && isEmpty(e)
		case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
			return isEmpty(e)
		}
		// A pointer to a scalar is set even to zero: Replicas: 0.
		return false
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if _, ok := fieldName(f); !ok || ignored[fieldID{t, f.Name}] {
				continue
			}
			if !isEmpty(v.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	}
	return v.IsZero()
}

// mapKeys indexes a map's keys by their printed form, so keys of any type
// sort and render as text.
func mapKeys(v reflect.Value) map[string]reflect.Value {
	m := make(map[string]reflect.Value, v.Len())
	for _, k := range v.MapKeys() {
		m[fmt.Sprint(k.Interface())] = k
	}
	return m
}

// digest renders a payload without revealing it. Twelve hex digits are
// enough to read; sameBytes keeps a collision from hiding a change.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}
