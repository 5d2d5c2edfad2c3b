package render

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/docker/cli/cli/compose/template"
	"go.yaml.in/yaml/v3"
)

// lineError is a YAML problem at a line of the file being parsed.
type lineError struct {
	line int
	err  error
}

// Error reads "line N: message".
func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }

// yamlLine matches the line the YAML parser puts in its messages.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?(?:unmarshal errors:\s*)?line (\d+): (.*)$`)

// yamlError turns a YAML parser error into a lineError when it names a line.
func yamlError(err error) error {
	msg := strings.TrimSpace(err.Error())
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &lineError{line: line, err: errors.New(m[2])}
	}
	return errors.New(strings.TrimPrefix(msg, "yaml: "))
}

// problemLine corrects the line of a YAML syntax error. The parser reports
// where the enclosing block started (often line 1), not where it broke; the
// first line at which a prefix of the file stops parsing is where it broke.
// A binary search keeps this to a few parses even for large files.
func problemLine(data []byte, err error) error {
	var le *lineError
	if !errors.As(err, &le) {
		return err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	fails := func(n int) bool {
		var doc yaml.Node
		return yaml.Unmarshal(bytes.Join(lines[:n], nil), &doc) != nil
	}
	lo, hi := le.line, len(lines) // the break is after the block start
	if lo < 1 || lo > hi || !fails(hi) {
		return err
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return &lineError{line: lo, err: le.err}
}

// parseNode parses one compose file into its top-level mapping node, and
// refuses what docker/cli's loader would misread: a top level that is not a
// mapping, keys that are not strings, and keys given twice.
func parseNode(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, problemLine(data, yamlError(err))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, errors.New("empty compose file")
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, &lineError{line: top.Line, err: errors.New("top-level object must be a mapping")}
	}
	if err := checkKeys(top, 0); err != nil {
		return nil, err
	}
	return top, nil
}

// maxDepth bounds recursion over a YAML tree; a compose file is never this
// deep, and a fuzzer's input must not exhaust the stack.
const maxDepth = 200

// checkKeys refuses non-string and duplicate mapping keys below n. YAML
// merge keys (`<<`) may repeat; they are not keys of the mapping itself.
func checkKeys(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return &lineError{line: n.Line, err: errors.New("document nests too deeply")}
	}
	switch n.Kind {
	case yaml.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!merge") {
				return &lineError{line: k.Line, err: fmt.Errorf("mapping key %q must be a string", k.Value)}
			}
			if first, ok := seen[k.Value]; ok && k.Tag != "!!merge" {
				return &lineError{line: k.Line, err: fmt.Errorf("key %q already defined at line %d", k.Value, first)}
			}
			seen[k.Value] = k.Line
			if err := checkKeys(n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if err := checkKeys(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// lookup finds the node of a dotted field such as "services.web.ports.0"
// (the form the compose schema validator reports) below the mapping n. Keys
// that contain dots themselves, such as label names, are matched greedily.
// It returns the key node for a mapping entry and the item for a list entry,
// or nil.
func lookup(n *yaml.Node, field string) *yaml.Node {
	if n == nil || field == "" {
		return nil
	}
	key, _ := find(n, strings.Split(field, "."), 0)
	return key
}

// find walks parts (a dotted field split at every dot) down from n and
// returns the key and value nodes of the last part. In a mapping it tries
// the longest joined prefix first, so a key containing dots matches whole.
func find(n *yaml.Node, parts []string, depth int) (key, value *yaml.Node) {
	if depth > maxDepth {
		return nil, nil
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		for j := len(parts); j >= 1; j-- {
			name := strings.Join(parts[:j], ".")
			k, v := entry(n, name, depth)
			if k == nil {
				continue
			}
			if j == len(parts) {
				return k, v
			}
			if k2, v2 := find(v, parts[j:], depth+1); k2 != nil {
				return k2, v2
			}
		}
	case yaml.SequenceNode:
		i, err := strconv.Atoi(parts[0])
		if err != nil || i < 0 || i >= len(n.Content) {
			return nil, nil
		}
		item := n.Content[i]
		if len(parts) == 1 {
			return item, item
		}
		return find(item, parts[1:], depth+1)
	}
	return nil, nil
}

// entry returns the key and value of name in mapping n, following YAML merge
// keys (`<<: *anchor`) when the mapping does not define name itself.
func entry(n *yaml.Node, name string, depth int) (key, value *yaml.Node) {
	if depth > maxDepth {
		return nil, nil
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Tag == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if k.Value == name {
			return k, n.Content[i+1]
		}
	}
	// Keys of the mapping itself win over merged ones; among merge
	// sources the first that defines name wins, as YAML specifies.
	for _, m := range merges {
		for m.Kind == yaml.AliasNode && m.Alias != nil {
			m = m.Alias
		}
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, s := range sources {
			for s.Kind == yaml.AliasNode && s.Alias != nil {
				s = s.Alias
			}
			if s.Kind != yaml.MappingNode {
				continue
			}
			if k, v := entry(s, name, depth+1); k != nil {
				return k, v
			}
		}
	}
	return nil, nil
}

// checkInterpolation substitutes every string value of the document in
// document order, so that a bad or missing variable is reported with its line
// and field (the loader reports neither the line nor a stable choice among
// several problems). Keys are not interpolated, as in the loader.
func checkInterpolation(top *yaml.Node, env map[string]string) *Error {
	lookupEnv := func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	return walkStrings(top, "", 0, func(n *yaml.Node, field string) *Error {
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		for _, token := range variableTokens(n.Value) {
			if _, err := template.Substitute(token, lookupEnv); err != nil {
				return &Error{Line: n.Line, Field: field, Err: interpolationError(err)}
			}
		}
		return nil
	})
}

// variableTokens returns each ${...} or $NAME occurrence in s on its own, so
// that every one is checked (docker's substitution can lose an error when a
// later variable in the same string resolves). `$$` is an escaped dollar.
func variableTokens(s string) []string {
	var tokens []string
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			continue
		}
		if i+1 == len(s) {
			return append(tokens, "$")
		}
		switch next := s[i+1]; {
		case next == '$':
			i++
		case next == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				tokens = append(tokens, s[i:])
				return tokens
			}
			tokens = append(tokens, s[i:i+end+1])
			i += end
		default:
			tokens = append(tokens, s[i:i+2])
		}
	}
	return tokens
}

// interpolationError rewords docker/cli's template errors: a missing
// required variable keeps its own message, and any other bad template
// says how to write a literal dollar, the usual cause.
func interpolationError(err error) error {
	var invalid *template.InvalidTemplateError
	if errors.As(err, &invalid) {
		if strings.HasPrefix(invalid.Template, "required variable ") {
			return errors.New(invalid.Template)
		}
		return fmt.Errorf("invalid interpolation %q; write a literal $ as $$", invalid.Template)
	}
	return err
}

// walkStrings calls fn for every string scalar value below n, in document
// order, with its field path ("services.web.environment[0]"). Aliases are
// skipped: their anchor is visited where it is defined.
func walkStrings(n *yaml.Node, field string, depth int, fn func(*yaml.Node, string) *Error) *Error {
	if depth > maxDepth {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			child := field
			if k.Tag != "!!merge" {
				child = joinField(field, k.Value)
			}
			if err := walkStrings(n.Content[i+1], child, depth+1, fn); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := walkStrings(c, field+"["+strconv.Itoa(i)+"]", depth+1, fn); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			return fn(n, field)
		}
	}
	return nil
}

// joinField appends key to a dotted field path.
func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
