package swarm

import (
	"encoding/binary"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/swarm"
)

// compactServices returns the services of one list, sharing what they
// hold alike: one copy of each string, and one of each map, slice and
// pointed-to value of equal content. The Engine's JSON decodes every
// service into its own maps and structs, though a stack's services carry
// the same labels, policies and update configs: at 10,000 services the
// list took 2.6 KB a service, about half of it such copies. The services
// keep their content; they may share it afterwards, which the snapshot's
// read-only contract allows.
//
// What it returns is all newly allocated, one value after the other, and
// holds nothing of the decoded list (whose values it rewrites on the
// way; maps keyed by other than strings, which services do not hold,
// would be left as decoded): what the decoder allocated becomes garbage
// whole. Kept in place,
// the few values each service keeps alone (its id, name, addresses) held
// on to most of the heap's pages, each among the decoder's dead copies:
// 80 MiB of heap in use for 43 MB of values at 10,000 services.
func compactServices(services []swarm.Service) []swarm.Service {
	c := compactor{strings: map[string]string{}, shared: map[reflect.Type]map[string]reflect.Value{}}
	out := make([]swarm.Service, len(services))
	for i := range services {
		c.value(reflect.ValueOf(&services[i]).Elem())
		out[i] = services[i]
	}
	return out
}

// compactor holds the canonical values of one compaction, each a new
// copy: by content for strings, by type and key (see key) for the rest.
type compactor struct {
	strings map[string]string
	shared  map[reflect.Type]map[string]reflect.Value
	buf     []byte
}

// value makes the settable v, and everything it holds, canonical:
// children first, so that a parent's key can name each child by its
// address (equal children are one child by then). What v refers to is
// replaced by the canonical copy; v's own fields are set in place.
func (c *compactor) value(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() && v.Len() > 0 {
			v.SetString(c.intern(v.String()))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				c.value(f)
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			c.value(v.Index(i))
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		c.value(v.Elem())
		c.share(v, v.Elem(), func() reflect.Value {
			p := reflect.New(v.Type().Elem())
			p.Elem().Set(v.Elem())
			return p
		})
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		for i := range v.Len() {
			c.value(v.Index(i))
		}
		c.share(v, v, func() reflect.Value {
			s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(s, v)
			return s
		})
	case reflect.Map:
		if v.IsNil() || v.Type().Key().Kind() != reflect.String {
			return
		}
		if labels, ok := v.Interface().(map[string]string); ok {
			c.stringMap(v, labels)
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			k := reflect.New(v.Type().Key()).Elem()
			k.SetString(c.intern(it.Key().String()))
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			c.value(e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
		c.share(v, v, func() reflect.Value { return m })
	}
}

// stringMap is value for the most common map, labels: the canonical map
// is looked up before a new one is built, which most maps then need not.
func (c *compactor) stringMap(v reflect.Value, m map[string]string) {
	keys := slices.Sorted(maps.Keys(m))
	c.buf = binary.AppendUvarint(c.buf[:0], uint64(len(keys)))
	for _, k := range keys {
		c.buf = binary.AppendUvarint(c.buf, uint64(len(k)))
		c.buf = append(c.buf, k...)
		c.buf = binary.AppendUvarint(c.buf, uint64(len(m[k])))
		c.buf = append(c.buf, m[k]...)
	}
	byKey := c.byType(v.Type())
	if same, found := byKey[string(c.buf)]; found {
		v.Set(same)
		return
	}
	canonical := make(map[string]string, len(m))
	for k, val := range m {
		canonical[c.intern(k)] = c.intern(val)
	}
	v.Set(reflect.ValueOf(canonical))
	byKey[string(c.buf)] = reflect.ValueOf(canonical)
}

// byType returns the canonical values of type t, by key.
func (c *compactor) byType(t reflect.Type) map[string]reflect.Value {
	byKey := c.shared[t]
	if byKey == nil {
		byKey = map[string]reflect.Value{}
		c.shared[t] = byKey
	}
	return byKey
}

// share replaces v by the canonical value of its type whose content
// (what key makes of content) is that of v, or by a copy of v (what
// fresh makes) that becomes that value. A value key cannot tell apart is
// copied and not shared.
func (c *compactor) share(v, content reflect.Value, fresh func() reflect.Value) {
	var ok bool
	if c.buf, ok = c.key(c.buf[:0], content, true); !ok {
		v.Set(fresh())
		return
	}
	byKey := c.byType(v.Type())
	if same, found := byKey[string(c.buf)]; found {
		v.Set(same)
		return
	}
	canonical := fresh()
	v.Set(canonical)
	byKey[string(c.buf)] = canonical
}

// key appends what identifies the content of v: scalars and strings by
// value, structs and arrays field by field, and reports false for what it
// cannot tell apart safely (interfaces, functions, channels). What v
// points to, or holds in a slice or map, is named by its address: it is
// canonical already (see value), or else unique. content is false below
// the top: the top slice or map is the one being made canonical, and is
// named by its elements.
func (c *compactor) key(b []byte, v reflect.Value, content bool) ([]byte, bool) {
	ok := true
	switch v.Kind() {
	case reflect.String:
		b = binary.AppendUvarint(b, uint64(v.Len()))
		b = append(b, v.String()...)
	case reflect.Bool:
		b = append(b, boolByte(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b = binary.AppendVarint(b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		b = binary.AppendUvarint(b, v.Uint())
	case reflect.Float32, reflect.Float64:
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float()))
	case reflect.Struct:
		// Unexported fields too (a time.Time's): read, never set.
		for i := 0; i < v.NumField() && ok; i++ {
			b, ok = c.key(b, v.Field(i), false)
		}
	case reflect.Array:
		for i := 0; i < v.Len() && ok; i++ {
			b, ok = c.key(b, v.Index(i), false)
		}
	case reflect.Pointer:
		b = binary.AppendUvarint(b, uint64(v.Pointer()))
	case reflect.Slice, reflect.Map:
		// Two empty slices may share an address, and a nil one has none:
		// the length and nil-ness tell them apart.
		b = append(b, boolByte(v.IsNil()))
		b = binary.AppendUvarint(b, uint64(v.Len()))
		if !content {
			b = binary.AppendUvarint(b, uint64(v.Pointer()))
		} else if v.Kind() == reflect.Slice {
			for i := 0; i < v.Len() && ok; i++ {
				b, ok = c.key(b, v.Index(i), false)
			}
		} else {
			// Generic maps only: labels go through stringMap.
			if v.Type().Key().Kind() != reflect.String {
				return b, false
			}
			keys := v.MapKeys()
			slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
			for i := 0; i < len(keys) && ok; i++ {
				b, _ = c.key(b, keys[i], false)
				b, ok = c.key(b, v.MapIndex(keys[i]), false)
			}
		}
	default:
		return b, false
	}
	return b, ok
}

func (c *compactor) intern(s string) string {
	if same, ok := c.strings[s]; ok {
		return same
	}
	s = strings.Clone(s)
	c.strings[s] = s
	return s
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
