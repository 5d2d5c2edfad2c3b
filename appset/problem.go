package appset

import (
	"fmt"
	"strconv"
	"strings"
)

// Problem is one thing wrong with an app-set file, located as precisely as
// the input allows.
type Problem struct {
	// File is the name the input was given under.
	File string `json:"file"`
	// Line and Column are 1-based; 0 when the problem has no position
	// (an unreadable file, a YAML syntax error without a column).
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
	// Field is the path of the value, like applications[2].syncPolicy.interval,
	// with 0-based indexes; "" for the document as a whole.
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// String formats p as file:line:col: field: message, leaving out the parts
// that are unknown.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":" + strconv.Itoa(p.Line))
		if p.Column > 0 {
			b.WriteString(":" + strconv.Itoa(p.Column))
		}
	}
	if p.Field != "" {
		b.WriteString(": " + p.Field)
	}
	b.WriteString(": " + p.Message)
	return b.String()
}

// Problems is every problem found in an app set, ordered by file, line and
// column. It is the error Parse, ParseFiles and the sources return for an
// invalid set; find it with errors.As.
type Problems []Problem

// Error returns one problem per line.
func (ps Problems) Error() string {
	switch len(ps) {
	case 0:
		return "no problems"
	case 1:
		return ps[0].String()
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%d problems:\n%s", len(ps), strings.Join(lines, "\n"))
}
