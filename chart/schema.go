package chart

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/skep-cd/skep/configfile"
)

// schema is a compiled values.schema.json.
type schema struct {
	file     string // as messages name it
	compiled *jsonschema.Schema
}

// schemaURL is the schema's address for the compiler. Nothing is ever
// fetched from it: the loader refuses every URL.
const schemaURL = "skep-chart:///values.schema.json"

// noLoader refuses every schema reference outside the chart's own schema,
// so that a $ref can neither read a file of the controller nor reach the
// network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema reference %s: only references within values.schema.json are allowed", url)
}

// schema compiles values.schema.json, when the chart has one.
func (l *loader) schema() {
	data, ok := l.chart.files[schemaFile]
	if !ok {
		return
	}
	file := l.file(schemaFile)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		l.problems = append(l.problems, configfile.Problem{File: file, Message: "invalid JSON: " + err.Error()})
		return
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		l.problems = append(l.problems, configfile.Problem{File: file, Message: err.Error()})
		return
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		l.problems = append(l.problems, configfile.Problem{File: file, Message: "invalid schema: " + strings.ReplaceAll(err.Error(), schemaURL, schemaFile)})
		return
	}
	l.chart.schema = &schema{file: file, compiled: compiled}
}

var printer = message.NewPrinter(language.English)

// validate checks values against the schema and returns one Problem per
// failing value, each naming the value's dotted path (image.tag,
// ports[0]).
func (s *schema) validate(values map[string]any) error {
	// Through JSON, so the validator sees exactly JSON's types.
	data, err := json.Marshal(values)
	if err != nil {
		return configfile.Problems{{File: s.file, Message: "values are not JSON: " + err.Error()}}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return configfile.Problems{{File: s.file, Message: "values are not JSON: " + err.Error()}}
	}
	err = s.compiled.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var problems configfile.Problems
	seen := map[string]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		p := configfile.Problem{File: s.file, Field: valuePath(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)}
		if p.Field == "" {
			p.Field = "(values)"
		}
		if !seen[p.String()] {
			seen[p.String()] = true
			problems = append(problems, p)
		}
	}
	walk(ve)
	// The validator visits object properties in map order; sorted, the
	// same values always give the same report (see
	// TestRenderReportsEveryProblemWithItsLocation).
	slices.SortFunc(problems, func(a, b configfile.Problem) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Message, b.Message))
	})
	return problems
}

// valuePath writes a JSON instance location as a dotted path with [i]
// for list indexes.
func valuePath(loc []string) string {
	var b strings.Builder
	for _, part := range loc {
		if _, err := strconv.Atoi(part); err == nil {
			b.WriteString("[" + part + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
	}
	return b.String()
}
