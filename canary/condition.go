package canary

import (
	"errors"
	"fmt"
	"math"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// maxConditionNodes bounds a condition's syntax tree: a condition is one
// comparison or a few joined, never a program.
const maxConditionNodes = 200

// Condition is a compiled boolean expression over one measurement's result,
// named result in it: a number (a Prometheus scalar, a job's exit code), a
// list of numbers (a Prometheus vector, in its order), or what a web
// metric's JSON decodes to (result.data.rate). The language is
// expr-lang/expr's, as in Argo Rollouts: comparisons, arithmetic, and, or,
// not, indexing, len, all, any; isNaN and isInf test a number. It has no
// side effects, no loops but over the result, and runs within expr's
// memory budget. A Condition is immutable and safe for concurrent use.
type Condition struct {
	src     string
	program *vm.Program
}

// conditionEnv is what a condition sees: result, of any type, so that
// the compiler checks the expression's shape and leaves the result's to
// the run.
type conditionEnv struct {
	Result any `expr:"result"`
}

// conditionOptions compile every condition: result of any type, a boolean
// answer, bounded size, and no builtin that reads the clock.
func conditionOptions() []expr.Option {
	return []expr.Option{
		expr.Env(conditionEnv{}),
		expr.AsBool(),
		expr.MaxNodes(maxConditionNodes),
		expr.DisableBuiltin("now"),
		expr.DisableBuiltin("date"),
		expr.Function("isNaN", func(args ...any) (any, error) {
			f, err := number(args)
			return err == nil && math.IsNaN(f), err
		}, new(func(float64) bool)),
		expr.Function("isInf", func(args ...any) (any, error) {
			f, err := number(args)
			return err == nil && math.IsInf(f, 0), err
		}, new(func(float64) bool)),
	}
}

// number is the one numeric argument of isNaN and isInf.
func number(args []any) (float64, error) {
	if len(args) != 1 {
		return 0, errors.New("want one number")
	}
	switch v := args[0].(type) {
	case float64:
		return v, nil
	case int:
		return float64(v), nil
	}
	return 0, fmt.Errorf("want a number, got %T", args[0])
}

// NewCondition compiles src; the error says what is wrong with it.
func NewCondition(src string) (*Condition, error) {
	p, err := expr.Compile(src, conditionOptions()...)
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", src, err)
	}
	return &Condition{src: src, program: p}, nil
}

// String is the condition as written.
func (c *Condition) String() string { return c.src }

// Eval runs c over result.
func (c *Condition) Eval(result any) (bool, error) {
	out, err := expr.Run(c.program, conditionEnv{Result: result})
	if err != nil {
		return false, fmt.Errorf("condition %q: %w", c.src, err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("condition %q: gave %T, want true or false", c.src, out)
	}
	return b, nil
}

// Judge is m's verdict on one result, as Argo Rollouts judges it: with
// neither condition a measured result succeeds; with one, its opposite
// decides the other way; with both, a result that meets neither is
// inconclusive, and a failure condition that holds fails whatever the
// success condition says. A condition that cannot be evaluated (a vector
// with no sample indexed) is an error: the measurement could not judge.
func (m Metric) Judge(result any) (Phase, error) {
	var ok, bad bool
	var err error
	if m.SuccessCondition != nil {
		if ok, err = m.SuccessCondition.Eval(result); err != nil {
			return PhaseError, err
		}
	}
	if m.FailureCondition != nil {
		if bad, err = m.FailureCondition.Eval(result); err != nil {
			return PhaseError, err
		}
	}
	switch {
	case m.SuccessCondition == nil && m.FailureCondition == nil:
		return PhaseSuccessful, nil
	case m.FailureCondition == nil:
		bad = !ok
	case m.SuccessCondition == nil:
		ok = !bad
	}
	switch {
	case bad:
		return PhaseFailed, nil
	case ok:
		return PhaseSuccessful, nil
	}
	return PhaseInconclusive, nil
}
