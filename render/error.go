package render

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/cli/cli/compose/loader"
	"go.yaml.in/yaml/v3"
)

// Error is a problem with the input, located in a file. Callers test for
// it with errors.As; several come joined with errors.Join.
type Error struct {
	// File is the slash path of the file, relative to Input.Root.
	File string
	// Line is 1-based; 0 when the problem has no line.
	Line int
	// Field is the compose path, such as "services.web.image"; "" when the
	// problem is not about one field.
	Field string
	// Err is the problem itself, without the location.
	Err error
}

// Error reads "file:line: field: message", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Err, so errors.Is sees causes such as fs.ErrNotExist.
func (e *Error) Unwrap() error { return e.Err }

// The loader's messages carry no line, only a field in its own words;
// these pick the field out so locate can find its line in the YAML.
var (
	interpolating      = regexp.MustCompile(`^(?:error while interpolating|invalid interpolation format for) ([^:\s]+): (.*)$`)
	additionalProperty = regexp.MustCompile(`Additional property (\S+) is not allowed`)
)

// locate turns an error of docker/cli's loader about file f into an *Error,
// finding the field and its line from the message where it names one.
func locate(f *source, err error) *Error {
	var forbidden *loader.ForbiddenPropertiesError
	if errors.As(err, &forbidden) {
		return forbiddenError(f, forbidden)
	}
	msg := err.Error()
	if m := interpolating.FindStringSubmatch(msg); m != nil {
		field, _, _ := strings.Cut(m[1], ".[]")
		e := &Error{File: f.name, Field: m[1], Err: errors.New(m[2])}
		if n := lookup(f.doc, field); n != nil {
			e.Line = n.Line
		}
		return e
	}
	// Schema errors read "<field> <description>", the field in the
	// validator's dotted form, "(root)" for the top level.
	field, desc, ok := strings.Cut(msg, " ")
	if !ok {
		return &Error{File: f.name, Err: err}
	}
	var parent *yaml.Node
	if field == "(root)" {
		parent = f.doc
		field = ""
	} else if n := lookupValue(f.doc, field); n != nil {
		parent = n
	} else {
		return &Error{File: f.name, Err: err}
	}
	e := &Error{File: f.name, Field: field, Err: errors.New(desc)}
	if k := lookup(f.doc, field); k != nil {
		e.Line = k.Line
	}
	if m := additionalProperty.FindStringSubmatch(desc); m != nil {
		if k, _ := entry(parent, m[1], 0); k != nil {
			e.Line = k.Line
			e.Field = joinField(field, m[1])
			e.Err = errors.New("unknown key")
		}
	}
	return e
}

// lookupValue is lookup returning the value node rather than the key.
func lookupValue(n *yaml.Node, field string) *yaml.Node {
	_, v := find(n, strings.Split(field, "."), 0)
	// An alias stands for its anchor's value; callers walk into that.
	for v != nil && v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	return v
}

// forbiddenError reports the options docker stack deploy refuses (such as
// build or links) at the first service, in file order, that uses one.
func forbiddenError(f *source, forbidden *loader.ForbiddenPropertiesError) *Error {
	names := slices.Sorted(maps.Keys(forbidden.Properties))
	e := &Error{File: f.name, Field: "services"}
	var msgs []string
	for _, name := range names {
		msgs = append(msgs, fmt.Sprintf("unsupported option %s: %s", name, forbidden.Properties[name]))
	}
	e.Err = errors.New(strings.Join(msgs, "; "))
	// Point at the first service, in file order, using one of them.
	if services := lookupValue(f.doc, "services"); services != nil && services.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(services.Content); i += 2 {
			for _, name := range names {
				if k, _ := entry(services.Content[i+1], name, 0); k != nil {
					e.Line = k.Line
					e.Field = "services." + services.Content[i].Value + "." + name
					e.Err = fmt.Errorf("unsupported option: %s", forbidden.Properties[name])
					return e
				}
			}
		}
	}
	return e
}
