package stack

import "reflect"

// deepCopy returns a copy of v that shares no map, slice or pointer with it,
// keeping nil and empty apart. docker/cli's converter writes labels into the
// maps it is given and returns specs that alias its input; copying on the
// way in and out keeps Convert's input untouched and its Release its own.
func deepCopy[T any](v T) T {
	var out T
	src := reflect.ValueOf(&v).Elem()
	dst := reflect.ValueOf(&out).Elem()
	copyValue(dst, src)
	return out
}

// copyValue deep-copies src into dst, which must be settable and of the
// same type. A nil pointer, interface, slice or map stays nil.
func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyValue(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := reflect.New(src.Elem().Type()).Elem()
		copyValue(e, src.Elem())
		dst.Set(e)
	case reflect.Struct:
		// Unexported fields cannot be set through reflection; copy the
		// struct whole first so they keep their (shared) value.
		dst.Set(src)
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				copyValue(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyValue(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Array:
		for i := range src.Len() {
			copyValue(dst.Index(i), src.Index(i))
		}
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		iter := src.MapRange()
		for iter.Next() {
			k := reflect.New(src.Type().Key()).Elem()
			copyValue(k, iter.Key())
			val := reflect.New(src.Type().Elem()).Elem()
			copyValue(val, iter.Value())
			m.SetMapIndex(k, val)
		}
		dst.Set(m)
	default:
		dst.Set(src)
	}
}
