package api

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/appset"
)

// The tokens and webhooks files share one shape: a mapping with a single
// list key, each entry a mapping of known scalar or list fields. Every
// problem is collected with its file, line and field path.

// maxConfigFile bounds what is read of a tokens or webhooks file.
const maxConfigFile = 1 << 20

// entry is one list item of a config file being decoded.
type entry struct {
	file     string
	path     string // e.g. tokens[2]
	node     *yaml.Node
	fields   map[string]*yaml.Node
	problems *appset.Problems
}

// parseEntries decodes data as {listKey: [ {field: ...}, ... ]} and returns
// one entry per item, having reported unknown keys and non-mappings.
func parseEntries(file string, data []byte, listKey string, known []string, problems *appset.Problems) []*entry {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		*problems = append(*problems, appset.Problem{File: file, Message: strings.TrimPrefix(err.Error(), "yaml: ")})
		return nil
	}
	if len(doc.Content) == 0 {
		*problems = append(*problems, appset.Problem{File: file, Message: "file is empty; want a " + listKey + " list"})
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		*problems = append(*problems, appset.Problem{File: file, Line: root.Line, Column: root.Column, Message: "want a mapping with a " + listKey + " list"})
		return nil
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != listKey {
			*problems = append(*problems, appset.Problem{File: file, Line: k.Line, Column: k.Column, Field: k.Value, Message: "unknown key"})
			continue
		}
		list = v
	}
	if list == nil {
		*problems = append(*problems, appset.Problem{File: file, Line: root.Line, Column: root.Column, Field: listKey, Message: "missing"})
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		*problems = append(*problems, appset.Problem{File: file, Line: list.Line, Column: list.Column, Field: listKey, Message: "want a list"})
		return nil
	}
	var out []*entry
	for i, item := range list.Content {
		e := &entry{file: file, path: fmt.Sprintf("%s[%d]", listKey, i), node: item, fields: map[string]*yaml.Node{}, problems: problems}
		if item.Kind != yaml.MappingNode {
			e.problem(item, "", "want a mapping")
			continue
		}
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, v := item.Content[j], item.Content[j+1]
			switch {
			case !slices.Contains(known, k.Value):
				e.problem(k, k.Value, "unknown key (want one of %s)", strings.Join(known, ", "))
			case e.fields[k.Value] != nil:
				e.problem(k, k.Value, "given twice")
			default:
				e.fields[k.Value] = v
			}
		}
		out = append(out, e)
	}
	return out
}

func (e *entry) problem(at *yaml.Node, field, format string, args ...any) {
	path := e.path
	if field != "" {
		path += "." + field
	}
	*e.problems = append(*e.problems, appset.Problem{File: e.file, Line: at.Line, Column: at.Column, Field: path, Message: fmt.Sprintf(format, args...)})
}

// str returns the scalar string of field, "" when absent.
func (e *entry) str(field string) string {
	n := e.fields[field]
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		e.problem(n, field, "want a string")
		return ""
	}
	return n.Value
}

// strs returns the list of strings of field, nil when absent.
func (e *entry) strs(field string) []string {
	n := e.fields[field]
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		e.problem(n, field, "want a list of strings")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		if item.Kind != yaml.ScalarNode || item.Value == "" {
			e.problem(item, fmt.Sprintf("%s[%d]", field, i), "want a non-empty string")
			continue
		}
		out = append(out, item.Value)
	}
	return out
}

// at returns the node of field, or the entry's own node when absent, for
// problems about a field that is missing.
func (e *entry) at(field string) *yaml.Node {
	if n := e.fields[field]; n != nil {
		return n
	}
	return e.node
}

// secret reads the one secret source an entry names: fileKey (a file,
// relative to the config file's directory) or envKey (an environment
// variable). ok is false when neither is given; problems are recorded.
func (e *entry) secret(fileKey, envKey string, getenv func(string) string) (value string, ok bool) {
	file, env := e.str(fileKey), e.str(envKey)
	switch {
	case file != "" && env != "":
		e.problem(e.at(envKey), envKey, "give %s or %s, not both", fileKey, envKey)
		return "", true
	case file != "":
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(e.file), file)
		}
		data, err := readSmallFile(file)
		if err != nil {
			e.problem(e.at(fileKey), fileKey, "%v", err)
			return "", true
		}
		v := strings.TrimSpace(string(data))
		if v == "" {
			e.problem(e.at(fileKey), fileKey, "file %s is empty", file)
		}
		return v, true
	case env != "":
		v := strings.TrimSpace(getenv(env))
		if v == "" {
			e.problem(e.at(envKey), envKey, "environment variable %s is not set or empty", env)
		}
		return v, true
	}
	return "", false
}

func readSmallFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxConfigFile)
	}
	return data, nil
}

// problemsErr returns problems as an error, or nil when there are none.
func problemsErr(problems appset.Problems) error {
	if len(problems) == 0 {
		return nil
	}
	return problems
}
