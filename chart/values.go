package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
)

// maxValuesDepth bounds the nesting of values, so that merging, masking
// and the schema walk stay shallow whatever a values file holds.
const maxValuesDepth = 64

// parseValues decodes one values file: a YAML mapping, or nothing. Keys
// that are not strings are written as strings, as Helm does, so templates
// and the schema see JSON's shape.
func parseValues(file string, data []byte) (map[string]any, error) {
	if len(data) > MaxFileSize {
		return nil, configfile.Problems{{File: file, Message: fmt.Sprintf("larger than %d bytes", MaxFileSize)}}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]any{}, nil
		}
		return nil, yamlProblem(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, configfile.Problems{{File: file, Line: extra.Line, Message: "a second YAML document; a values file holds one"}}
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return map[string]any{}, nil
	}
	if doc.Kind != yaml.MappingNode {
		return nil, configfile.Problems{{File: file, Line: doc.Line, Column: doc.Column, Message: "want a mapping of values, got " + configfile.Describe(doc)}}
	}
	var v any
	if err := doc.Decode(&v); err != nil {
		return nil, yamlProblem(file, err)
	}
	out, err := normalize(v, 0)
	if err != nil {
		return nil, configfile.Problems{{File: file, Message: err.Error()}}
	}
	return out.(map[string]any), nil
}

var yamlLine = regexp.MustCompile(`^yaml: (?:unmarshal errors:\n\s*)?line (\d+): `)

// yamlProblem turns a yaml.v3 error into a Problem at its line.
func yamlProblem(file string, err error) configfile.Problems {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	return configfile.Problems{{File: file, Line: line, Message: "invalid YAML: " + msg}}
}

// problemsOf returns err's Problems, or err as one Problem without a file.
func problemsOf(err error) configfile.Problems {
	var ps configfile.Problems
	if errors.As(err, &ps) {
		return ps
	}
	return configfile.Problems{{Message: err.Error()}}
}

// normalize rewrites a decoded YAML tree into JSON's shape: string keys
// only, bounded depth.
func normalize(v any, depth int) (any, error) {
	if depth > maxValuesDepth {
		return nil, fmt.Errorf("values nested deeper than %d levels", maxValuesDepth)
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	return v, nil
}

// copyMap returns a deep copy of a values tree.
func copyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return copyMap(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	}
	return v
}

// mergeValues merges src into dst, which it modifies: mappings merge key
// by key, any other value of src replaces dst's (lists are replaced whole),
// and a null in src deletes the key, as in Helm. src is copied, never
// shared.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
			dm := map[string]any{}
			mergeValues(dm, sm)
			dst[k] = dm
			continue
		}
		dst[k] = copyValue(v)
	}
}

// MergeValues returns the values a render uses: the chart's defaults, then
// each of files in order, then set, each layer merged over the last (see
// mergeValues for the rule). Problems name the values file and line, or the
// --set key. It does not modify its arguments.
func (c *Chart) MergeValues(files []ValuesFile, set map[string]string) (map[string]any, error) {
	values := copyMap(c.values)
	var problems configfile.Problems
	for _, f := range files {
		v, err := parseValues(f.Name, f.Data)
		if err != nil {
			problems = append(problems, problemsOf(err)...)
			continue
		}
		mergeValues(values, v)
	}
	if len(set) > 0 {
		v, err := ParseSet(set)
		if err != nil {
			problems = append(problems, problemsOf(err)...)
		} else {
			mergeValues(values, v)
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return values, nil
}

// ParseSet turns --set pairs into a values tree. A key is a dotted path
// ("image.tag"; "\." is a literal dot in a key). A value is typed as Helm's
// --set types it: a whole number becomes an integer, true and false
// booleans, null deletes the key, {a,b} is a list of strings, and anything
// else is a string. Keys apply in sorted order, so "a=1" and "a.b=2"
// together give {a: {b: 2}}. Problems name the key under the file "--set".
func ParseSet(set map[string]string) (map[string]any, error) {
	out := map[string]any{}
	var problems configfile.Problems
	for _, key := range slices.Sorted(maps.Keys(set)) {
		parts, err := splitKey(key)
		if err != nil {
			problems = append(problems, configfile.Problem{File: "--set", Field: key, Message: err.Error()})
			continue
		}
		m := out
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = typedValue(set[key])
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return out, nil
}

// splitKey splits a dotted --set key, honouring "\." escapes.
func splitKey(key string) ([]string, error) {
	var parts []string
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		switch {
		case key[i] == '\\' && i+1 < len(key) && key[i+1] == '.':
			b.WriteByte('.')
			i++
		case key[i] == '.':
			parts = append(parts, b.String())
			b.Reset()
		default:
			b.WriteByte(key[i])
		}
	}
	parts = append(parts, b.String())
	if len(parts) > maxValuesDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxValuesDepth)
	}
	for _, p := range parts {
		if p == "" {
			return nil, errors.New(`want a dotted key like image.tag; a part is empty`)
		}
	}
	return parts, nil
}

var wholeNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// typedValue types one --set value; see ParseSet.
func typedValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if wholeNumber.MatchString(s) {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	}
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		items := []any{}
		if inner := s[1 : len(s)-1]; inner != "" {
			for _, item := range strings.Split(inner, ",") {
				items = append(items, item)
			}
		}
		return items
	}
	return s
}

// sensitiveKey matches the keys whose values a Manifest masks.
var sensitiveKey = regexp.MustCompile(`(?i)password|secret|token|key`)

// Masked replaces a masked value in a Manifest.
const Masked = "<masked>"

// maskValues returns a copy of values with every value under a key that
// matches sensitiveKey replaced by Masked; mappings and lists under such a
// key keep their shape with their leaves masked.
func maskValues(values map[string]any) map[string]any {
	out := make(map[string]any, len(values))
	for k, v := range values {
		if sensitiveKey.MatchString(k) {
			out[k] = maskAll(v)
			continue
		}
		switch v := v.(type) {
		case map[string]any:
			out[k] = maskValues(v)
		case []any:
			items := make([]any, len(v))
			for i, e := range v {
				if m, ok := e.(map[string]any); ok {
					items[i] = maskValues(m)
				} else {
					items[i] = e
				}
			}
			out[k] = items
		default:
			out[k] = v
		}
	}
	return out
}

// maskAll masks every leaf of v.
func maskAll(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = maskAll(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = maskAll(e)
		}
		return out
	case nil:
		return nil
	}
	return Masked
}
