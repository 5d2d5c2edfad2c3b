package stack

import (
	"reflect"

	"github.com/skep-cd/skep/sops"
)

// Masked returns a copy of r in which every string field of every spec,
// hooks' included (names, labels, env, command, …), shows each of
// r.Sensitive as its mask (see sops.NewMasker). Byte payloads (config and
// secret Data) are left as they are: revisions and plans digest secrets
// whole. Map keys are not masked. r is not
// modified; the copy shares no changed map, slice or pointer with it. A
// release without Sensitive values is returned as it is.
func (r Release) Masked() Release {
	if len(r.Sensitive) == 0 {
		return r
	}
	mask := sops.NewMasker(r.Sensitive).Mask
	out := r
	out.Name = mask(r.Name)
	out.Services = maskMap(r.Services, mask)
	out.Networks = maskMap(r.Networks, mask)
	out.Configs = maskMap(r.Configs, mask)
	out.Secrets = maskMap(r.Secrets, mask)
	if r.Hooks != nil {
		out.Hooks = maskValue(reflect.ValueOf(r.Hooks), mask).Interface().([]Hook)
	}
	return out
}

func maskMap[T any](m map[string]T, mask func(string) string) map[string]T {
	if m == nil {
		return nil
	}
	out := make(map[string]T, len(m))
	for k, v := range m {
		out[k] = maskValue(reflect.ValueOf(v), mask).Interface().(T)
	}
	return out
}

// maskValue copies v deeply wherever it holds a string, masking each.
// Unexported fields are copied as they are.
func maskValue(v reflect.Value, mask func(string) string) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		out := reflect.New(v.Type()).Elem()
		out.SetString(mask(v.String()))
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(maskValue(v.Elem(), mask))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(maskValue(v.Elem(), mask))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(maskValue(v.Field(i), mask))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() || v.Type().Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(maskValue(v.Index(i), mask))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(maskValue(v.Index(i), mask))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), maskValue(it.Value(), mask))
		}
		return out
	}
	return v
}

// Mask returns s with each of r.Sensitive masked, for text made from r's
// specs outside a Release (a diff in a log line, a drift finding).
func (r Release) Mask(s string) string {
	return sops.Mask(s, r.Sensitive)
}
