package chart

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
)

// text/template cannot be interrupted, and a loop or a template call that
// calls no function runs without anything of Skep's seeing it. So every
// parsed tree is rewritten before it runs: each pipeline ends in a hidden
// function that spends a step (and sees the render's deadline), a range's
// in one that spends a step per item before the loop starts, and a printed
// value's in one that prints it with its size checked first, since fmt
// builds the whole text before the writer can refuse it. The hidden
// functions take the pipeline's own text, so that an error names what the
// chart wrote (see cleanMessage).
const (
	guardStep  = "skepStep"
	guardRange = "skepRange"
	guardPrint = "skepPrint"
)

// guard rewrites every tree of t not guarded before.
func (e *engine) guard(t *template.Template) {
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Tree.Root == nil || e.guarded[tt.Tree] {
			continue
		}
		e.guarded[tt.Tree] = true
		guardNode(tt.Tree, tt.Tree.Root)
	}
}

func guardNode(tr *parse.Tree, n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			guardNode(tr, c)
		}
	case *parse.ActionNode:
		if len(n.Pipe.Decl) == 0 {
			guardPipe(tr, n.Pipe, guardPrint)
		} else {
			guardPipe(tr, n.Pipe, guardStep)
		}
	case *parse.IfNode:
		guardBranch(tr, &n.BranchNode, guardStep)
	case *parse.WithNode:
		guardBranch(tr, &n.BranchNode, guardStep)
	case *parse.RangeNode:
		guardBranch(tr, &n.BranchNode, guardRange)
	case *parse.TemplateNode:
		if n.Pipe == nil {
			n.Pipe = &parse.PipeNode{NodeType: parse.NodePipe, Pos: n.Pos, Line: n.Line}
		}
		guardPipe(tr, n.Pipe, guardStep)
		if len(n.Pipe.Cmds) == 1 { // no pipeline of the chart's: name the call
			text := n.Pipe.Cmds[0].Args[1].(*parse.StringNode)
			text.Text = "template " + strconv.Quote(n.Name)
			text.Quoted = strconv.Quote(text.Text)
		}
	}
}

func guardBranch(tr *parse.Tree, b *parse.BranchNode, last string) {
	guardPipe(tr, b.Pipe, last)
	guardNode(tr, b.List)
	guardNode(tr, b.ElseList)
}

// guardPipe ends p in the hidden function last. A pipeline nested in an
// argument runs within the command holding it, and needs no step of its own.
func guardPipe(tr *parse.Tree, p *parse.PipeNode, last string) {
	var text []string
	for _, c := range p.Cmds {
		text = append(text, c.String())
	}
	source := strings.Join(text, " | ")
	fn := parse.NewIdentifier(last).SetTree(tr).SetPos(p.Pos)
	arg := &parse.StringNode{NodeType: parse.NodeString, Pos: p.Pos, Quoted: strconv.Quote(source), Text: source}
	p.Cmds = append(p.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: p.Pos, Args: []parse.Node{fn, arg}})
}

// hidden is the function map of the rewrite's hidden functions; their first
// argument is the text of the pipeline they end.
func (e *engine) hidden() template.FuncMap {
	return template.FuncMap{
		guardStep: func(_ string, v ...any) (any, error) {
			if err := e.b.step(1); err != nil {
				return nil, err
			}
			if len(v) == 0 {
				return nil, nil
			}
			return v[0], nil
		},
		guardRange: func(_ string, v any) (any, error) {
			n := rangeLen(reflect.ValueOf(v))
			if err := e.b.step(max(n, 1)); err != nil {
				return nil, fmt.Errorf("ranging over %d items: %w", n, err)
			}
			return v, nil
		},
		guardPrint: func(_ string, v ...any) (string, error) {
			if err := e.b.step(1); err != nil {
				return "", err
			}
			if len(v) == 0 || v[0] == nil {
				return "<no value>", nil // as text/template prints a missing value
			}
			if err := e.b.expanded(1, v[0]); err != nil {
				return "", fmt.Errorf("printing the value: %w", err)
			}
			return fmt.Sprint(printable(v[0])), nil
		},
	}
}

// rangeLen is how many times a range over v iterates, as text/template
// ranges: up to an integer, or over a list's or a dict's entries.
func rangeLen(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(max(v.Int(), 0))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int(min(v.Uint(), uint64(maxInt)))
	case reflect.Slice, reflect.Array, reflect.Map, reflect.Chan:
		return v.Len()
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return rangeLen(v.Elem())
		}
	}
	return 0
}

// printable is what text/template prints for v: the value a pointer points
// at, unless the pointer is what formats itself.
func printable(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return v
	}
	if _, ok := v.(fmt.Stringer); ok {
		return v
	}
	if _, ok := v.(error); ok {
		return v
	}
	return rv.Elem().Interface()
}

// hiddenCall matches the hidden functions in text/template's messages:
// `at <skepPrint "$d">: error calling skepPrint: `.
var hiddenCall = regexp.MustCompile(`at <(?:` + guardStep + `|` + guardRange + `|` + guardPrint + `) ("(?:[^"\\]|\\.)*")>: error calling (?:` + guardStep + `|` + guardRange + `|` + guardPrint + `): `)

// cleanMessage names, in a text/template message, the pipeline the chart
// wrote instead of the hidden function that ends it.
func cleanMessage(msg string) string {
	return hiddenCall.ReplaceAllStringFunc(msg, func(m string) string {
		quoted := hiddenCall.FindStringSubmatch(m)[1]
		text, err := strconv.Unquote(quoted)
		if err != nil {
			return m
		}
		return "at <" + text + ">: "
	})
}
