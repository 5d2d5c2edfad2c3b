package plan

import "slices"

// Without returns r less every change other makes too: a create or a
// delete of the same kind and name, and of an update each field other
// changes alike (the same path, old and new value); an update left with
// no field goes. Action and Reason are recomputed from what is left
// (Unchanged and "" when nothing is). Neither plan is changed, and the
// result shares no slice with them.
//
// A plan made without decrypting (a sealed one) shows, besides what its
// commit changes, what sealing alone changes; the sealed plan of the
// commit the swarm runs shows exactly that, and Without takes it out (see
// TestWithoutTakesOutWhatBothPlansChange).
func (r Release) Without(other Release) Release {
	out := Release{Name: r.Name, Action: r.Action, Changes: []Change{}}
	for _, c := range r.Changes {
		i := slices.IndexFunc(other.Changes, func(o Change) bool { return o.Kind == c.Kind && o.Name == c.Name && o.Op == c.Op })
		switch {
		case i < 0:
			c.Fields = slices.Clone(c.Fields)
			out.Changes = append(out.Changes, c)
		case c.Op == Update:
			fields := slices.DeleteFunc(slices.Clone(c.Fields), func(f FieldDiff) bool { return slices.Contains(other.Changes[i].Fields, f) })
			if len(fields) > 0 {
				c.Fields = fields
				c.Reason = changedReason(areas(c.Kind, fields))
				out.Changes = append(out.Changes, c)
			}
		}
	}
	if len(out.Changes) == 0 {
		out.Action = Unchanged
		return out
	}
	out.Reason = releaseReason(out.Changes)
	return out
}
