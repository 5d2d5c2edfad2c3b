package stack

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/skep-cd/skep/sops"
)

// FieldMasks maps the path of each string of a release's specs that
// holds a decrypted value to what it reads in plain and masked. A path
// reads like Go ("Services[web_api].TaskTemplate.ContainerSpec.Image")
// with every slice position as [*], so an entry of a list is known by its
// plain value, wherever it sits in the list.
type FieldMasks map[string][]FieldMask

// FieldMask is one string that holds a decrypted value.
type FieldMask struct {
	Plain, Masked string
}

// Masked returns a copy of r in which every string that came from an
// encrypted input shows as its mask, hooks' included: what Convert found
// by converting the masked document (Options.Masked), the env entry
// "REV=" + mask where REV was decrypted, "rev-" + mask where a label
// interpolated it. A string where the value merely appears (an image tag
// with the same digits) is left as it is: the masks are by provenance,
// never by text. Only a field that came from an encrypted input and was
// changed since (outside a list) is masked by text, as a whole release is
// when Convert had no masked document: every occurrence of each of
// r.Sensitive becomes its mask (see sops.NewMasker).
//
// Byte payloads (config and secret Data) are left as they are: revisions
// and plans digest secrets whole. Map keys are not masked. r is not
// modified; the copy shares no changed map, slice or pointer with it. A
// release with nothing to mask is returned as it is. See
// TestMaskedMasksByProvenanceNotByText.
func (r Release) Masked() Release {
	if len(r.Sensitive) == 0 && r.Masks == nil || r.Masks != nil && len(r.Masks) == 0 {
		return r
	}
	text := sops.NewMasker(r.Sensitive).Mask
	out := r
	mask := func(_, s string) string { return text(s) }
	if r.Masks == nil {
		out.Name = text(r.Name)
	} else {
		mask = func(path, s string) string {
			entries := r.Masks[path]
			for _, e := range entries {
				switch s {
				case e.Plain:
					return e.Masked
				case e.Masked:
					return s
				}
			}
			// A list's other entries did not come from an encrypted
			// input; a single field that did was changed since Convert.
			if len(entries) > 0 && !strings.HasSuffix(path, "[*]") {
				return text(s)
			}
			return s
		}
	}
	out.Services = maskMap("Services", r.Services, mask)
	out.Networks = maskMap("Networks", r.Networks, mask)
	out.Configs = maskMap("Configs", r.Configs, mask)
	out.Secrets = maskMap("Secrets", r.Secrets, mask)
	if r.Hooks != nil {
		out.Hooks = maskValue(reflect.ValueOf(r.Hooks), "Hooks", mask).Interface().([]Hook)
	}
	return out
}

func maskMap[T any](path string, m map[string]T, mask func(path, s string) string) map[string]T {
	if m == nil {
		return nil
	}
	out := make(map[string]T, len(m))
	for k, v := range m {
		out[k] = maskValue(reflect.ValueOf(v), keyPath(path, k), mask).Interface().(T)
	}
	return out
}

// keyPath is the path of a map's entry.
func keyPath(path string, key any) string {
	return fmt.Sprintf("%s[%v]", path, key)
}

// maskValue copies v, at path, deeply wherever it holds a string, masking
// each. Unexported fields are copied as they are.
func maskValue(v reflect.Value, path string, mask func(path, s string) string) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		out := reflect.New(v.Type()).Elem()
		out.SetString(mask(path, v.String()))
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(maskValue(v.Elem(), path, mask))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(maskValue(v.Elem(), path, mask))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				out.Field(i).Set(maskValue(v.Field(i), path+"."+f.Name, mask))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() || v.Type().Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(maskValue(v.Index(i), path+"[*]", mask))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(maskValue(v.Index(i), path+"[*]", mask))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), maskValue(it.Value(), keyPath(path, it.Key()), mask))
		}
		return out
	}
	return v
}

// diffMasks walks plain and masked, the same document converted with and
// without its decrypted values, and returns every string where they
// differ. A release of another shape (other map keys, list lengths or
// types: a mask in a name or a sorted field) tells nothing, and gives nil.
func diffMasks(plain, masked Release) FieldMasks {
	out := FieldMasks{}
	a, b := reflect.ValueOf(plain), reflect.ValueOf(masked)
	for _, field := range []string{"Services", "Networks", "Configs", "Secrets", "Hooks"} {
		if !diffValue(a.FieldByName(field), b.FieldByName(field), field, out) {
			return nil
		}
	}
	return out
}

// diffValue is diffMasks of two values at path; false when their shapes
// differ. Byte payloads are not compared: they are the same files.
func diffValue(a, b reflect.Value, path string, out FieldMasks) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.String:
		if a.String() != b.String() {
			out[path] = append(out[path], FieldMask{Plain: a.String(), Masked: b.String()})
		}
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return diffValue(a.Elem(), b.Elem(), path, out)
	case reflect.Struct:
		for i := range a.NumField() {
			if f := a.Type().Field(i); f.IsExported() && !diffValue(a.Field(i), b.Field(i), path+"."+f.Name, out) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		if a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Uint8 {
			return true
		}
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !diffValue(a.Index(i), b.Index(i), path+"[*]", out) {
				return false
			}
		}
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for it := a.MapRange(); it.Next(); {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !diffValue(it.Value(), bv, keyPath(path, it.Key()), out) {
				return false
			}
		}
	}
	return true
}

// Mask returns s with each of r.Sensitive masked, for text made from r's
// specs outside a Release (a diff in a log line, a drift finding).
func (r Release) Mask(s string) string {
	return sops.Mask(s, r.Sensitive)
}
