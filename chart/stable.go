package chart

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
)

// CheckStable renders c twice with the same opts and returns the paths of
// the merged compose document that differ between the two, such as
// "services.web.environment.NONCE", sorted; nil when both renders are the
// same. A chart whose templates read the clock or a random source (now,
// randAlphaNum, uuidv4) would change at every render, and so be redeployed
// at every tick: the controller holds such a chart instead. A template
// that reads the clock at a coarse grain (now | date "2006") is seen only
// when the two renders straddle a change. The paths name fields, never
// values, so a secret cannot leak through them. It does no I/O and is safe
// to call concurrently.
func CheckStable(ctx context.Context, c *Chart, opts RenderOptions) ([]string, error) {
	first, _, err := c.renderCompose(ctx, opts)
	if err != nil {
		return nil, err
	}
	second, _, err := c.renderCompose(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("chart %s: second render: %w", c.metadata.Name, err)
	}
	var diffs []string
	diffPaths("", first, second, &diffs)
	slices.Sort(diffs)
	return diffs, nil
}

// diffPaths appends to out the path of every leaf where a and b differ.
func diffPaths(at string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := maps.Clone(am)
		maps.Copy(keys, bm)
		for k := range keys {
			diffPaths(join(at, k), am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			diffPaths(at+"["+strconv.Itoa(i)+"]", al[i], bl[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, at)
	}
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}
