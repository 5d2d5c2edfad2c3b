package configfile

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a configuration file, located as
// precisely as the input allows.
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

// Problems is every problem found in one or more configuration files. It is
// the error every loader of a Skep configuration file returns for invalid
// input; find it with errors.As.
type Problems []Problem

// Error returns one problem per line, each formatted by Problem.String, so
// every line stands on its own in a log or a terminal.
func (ps Problems) Error() string {
	if len(ps) == 0 {
		return "no problems"
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Sort orders ps by line and then column, keeping the order of problems at
// the same place; files are kept in the order they first appear.
func (ps Problems) Sort() {
	order := map[string]int{}
	for _, p := range ps {
		if _, ok := order[p.File]; !ok {
			order[p.File] = len(order)
		}
	}
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(order[a.File], order[b.File]), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}
