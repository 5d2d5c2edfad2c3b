package plan

import (
	"fmt"
	"io"
	"strings"
)

// opMarks are the diff marks of each op, as in a unified diff.
var opMarks = map[Op]string{Create: "+", Update: "~", Delete: "-"}

// absent stands for a missing side of a FieldDiff in the human diff.
const absent = "(absent)"

// Render writes plans as a human diff, one block per release:
//
//	release web: upgrade (image changed)
//	  ~ service web_app
//	      TaskTemplate.ContainerSpec.Image: "app:v1" → "app:v2"
//	  + config web_settings-3f2a9c01be
//
// It makes one Write call, so a plan is never half written to a shared
// stream. Secret payloads appear only as digests, as in the plan itself.
func Render(w io.Writer, plans []Release) error {
	var b strings.Builder
	for i, r := range plans {
		if i > 0 {
			b.WriteByte('\n')
		}
		if r.Action == Unchanged {
			fmt.Fprintf(&b, "release %s: %s\n", r.Name, r.Action)
		} else {
			fmt.Fprintf(&b, "release %s: %s (%s)\n", r.Name, r.Action, r.Reason)
		}
		for _, c := range r.Changes {
			fmt.Fprintf(&b, "  %s %s %s\n", opMarks[c.Op], c.Kind, c.Name)
			for _, f := range c.Fields {
				old, desired := f.Old, f.New
				if f.Added {
					old = absent
				}
				if f.Removed {
					desired = absent
				}
				fmt.Fprintf(&b, "      %s: %s → %s\n", f.Path, old, desired)
			}
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}
