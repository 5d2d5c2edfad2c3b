package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/golden"
)

const apiReferencePath = "../docs/api.md"

// TestAPIReferenceIsCurrent fails when docs/api.md is not what openapi.yaml
// and the route table generate; -update rewrites it.
func TestAPIReferenceIsCurrent(t *testing.T) {
	got := generateAPIReference(t)
	golden.Check(t, apiReferencePath, []byte(got))
}

func TestAPIReferenceDocumentsEveryOperationAndSchema(t *testing.T) {
	doc := loadOpenAPI(t)
	got := generateAPIReference(t)
	var want []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			want = append(want, "### `"+method+" "+path+"`")
		}
	}
	for name := range doc.Components.Schemas {
		want = append(want, "### "+name+"\n")
	}
	if len(want) < 20 {
		t.Fatalf("only %d operations and schemas in openapi.yaml", len(want))
	}
	for _, heading := range want {
		if !strings.Contains(got, heading) {
			t.Errorf("the API reference has no heading %q", heading)
		}
	}
}

func generateAPIReference(t *testing.T) string {
	t.Helper()
	doc := loadOpenAPI(t)
	var tree yaml.Node
	if err := yaml.Unmarshal(api.OpenAPI, &tree); err != nil {
		t.Fatal(err)
	}
	roles := map[string]api.Role{}
	for _, r := range newTestServer(t, api.Options{}).api.Routes() {
		roles[r.Method+" "+r.Pattern] = r.Role
	}
	out, err := apiReference(doc, &tree, roles)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// errorStatus maps each error code to its HTTP status; meaning is used only
// for codes no response of openapi.yaml describes.
var errorStatus = map[string]struct {
	status  int
	meaning string
}{
	"bad_request":            {status: http.StatusBadRequest},
	"unauthorized":           {status: http.StatusUnauthorized},
	"forbidden":              {status: http.StatusForbidden},
	"not_found":              {status: http.StatusNotFound},
	"method_not_allowed":     {status: http.StatusMethodNotAllowed, meaning: "The path exists but not with this method; `Allow` lists the methods it has."},
	"payload_too_large":      {status: http.StatusRequestEntityTooLarge},
	"unsupported_media_type": {status: http.StatusUnsupportedMediaType},
	"unavailable":            {status: http.StatusServiceUnavailable},
	"conflict":               {status: http.StatusConflict},
	"internal":               {status: http.StatusInternalServerError, meaning: "A bug in the controller; the controller log has the details."},
}

// apiReference renders docs/api.md from the loaded document, its YAML tree
// (for the authors' order of paths, operations and properties) and the
// least role of each served route, keyed "METHOD pattern".
func apiReference(doc *openapi3.T, tree *yaml.Node, roles map[string]api.Role) (string, error) {
	r := &apiRenderer{doc: doc, tree: tree}
	codeOf := map[int]string{}
	for code, e := range errorStatus {
		codeOf[e.status] = code
	}

	b := &r.b
	fmt.Fprintf(b, "# API reference\n\n")
	fmt.Fprintf(b, "<!-- Generated from api/openapi.yaml by `go test ./api/ -run TestAPIReferenceIsCurrent -update`. DO NOT EDIT. -->\n\n")
	fmt.Fprintf(b, "%s %s. Every path below is relative to the controller's address (`--listen`).\n\n", doc.Info.Title, doc.Info.Version)
	fmt.Fprintf(b, "%s\n\n", strings.TrimSpace(doc.Info.Description))

	type operation struct {
		method, path string
		op           *openapi3.Operation
		item         *openapi3.PathItem
	}
	var ops []operation
	for _, path := range orderedKeys(child(tree, "paths"), doc.Paths.Keys()) {
		item := doc.Paths.Value(path)
		var methods []string
		for m := range item.Operations() {
			methods = append(methods, strings.ToLower(m))
		}
		for _, m := range orderedKeys(child(tree, "paths", path), methods) {
			m = strings.ToUpper(m)
			ops = append(ops, operation{method: m, path: path, op: item.GetOperation(m), item: item})
		}
	}

	fmt.Fprintf(b, "## Endpoints\n\n| Method | Path | Role | Summary |\n|---|---|---|---|\n")
	for _, o := range ops {
		role, served := roles[o.method+" "+o.path]
		fmt.Fprintf(b, "| %s | [`%s`](#%s) | %s | %s |\n", o.method, o.path,
			anchor("`"+o.method+" "+o.path+"`"), roleCell(role, served), cell(o.op.Summary))
	}

	fmt.Fprintf(b, "\n## Errors\n\nEvery error answer is a JSON [Error](#error) object `{\"code\", \"message\"}`. The `code` is stable; the message is for people.\n\n")
	fmt.Fprintf(b, "| Code | Status | Meaning |\n|---|---|---|\n")
	meanings := r.errorMeanings()
	errSchema := doc.Components.Schemas["Error"]
	if errSchema == nil || errSchema.Value.Properties["code"] == nil {
		return "", fmt.Errorf("openapi.yaml: no components.schemas.Error.properties.code")
	}
	for _, v := range errSchema.Value.Properties["code"].Value.Enum {
		code := fmt.Sprint(v)
		e, ok := errorStatus[code]
		if !ok {
			return "", fmt.Errorf("error code %q of openapi.yaml has no HTTP status in errorStatus", code)
		}
		meaning := strings.Join(meanings[e.status], " ")
		if meaning == "" {
			meaning = e.meaning
		}
		fmt.Fprintf(b, "| `%s` | %d | %s |\n", code, e.status, cell(meaning))
	}

	fmt.Fprintf(b, "\n## Operations\n")
	for _, o := range ops {
		fmt.Fprintf(b, "\n### `%s %s`\n\n", o.method, o.path)
		fmt.Fprintf(b, "%s\n\n", sentence(o.op.Summary))
		if d := strings.TrimSpace(o.op.Description); d != "" {
			fmt.Fprintf(b, "%s\n\n", d)
		}
		role, served := roles[o.method+" "+o.path]
		fmt.Fprintf(b, "**Auth:** %s\n\n", authText(role, served, o.path))
		if o.op.OperationID != "" {
			fmt.Fprintf(b, "**Operation id:** `%s`\n\n", o.op.OperationID)
		}

		params := append(slices.Clone(o.item.Parameters), o.op.Parameters...)
		if len(params) > 0 {
			fmt.Fprintf(b, "**Parameters**\n\n| Name | In | Type | Required | Description |\n|---|---|---|---|---|\n")
			for _, p := range params {
				pv := p.Value
				fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", pv.Name, pv.In, r.typeOf(pv.Schema), yes(pv.Required), cell(pv.Description))
			}
			fmt.Fprintf(b, "\n")
		}

		if rb := o.op.RequestBody; rb != nil && rb.Value != nil {
			need := "optional"
			if rb.Value.Required {
				need = "required"
			}
			fmt.Fprintf(b, "**Request body** (%s)", need)
			if d := strings.TrimSpace(rb.Value.Description); d != "" {
				fmt.Fprintf(b, ": %s", d)
			}
			fmt.Fprintf(b, "\n\n")
			for _, ct := range sortedKeys(rb.Value.Content) {
				s := rb.Value.Content[ct].Schema
				fmt.Fprintf(b, "- `%s`: %s", ct, r.typeOf(s))
				if s != nil && s.Value != nil && s.Value.AdditionalProperties.Has != nil && !*s.Value.AdditionalProperties.Has {
					fmt.Fprintf(b, "; unknown fields are rejected")
				}
				fmt.Fprintf(b, "\n")
			}
			fmt.Fprintf(b, "\n")
			for _, ct := range sortedKeys(rb.Value.Content) {
				s := rb.Value.Content[ct].Schema
				if ct != "application/json" || s == nil || s.Value == nil || len(s.Value.Properties) == 0 {
					continue
				}
				ex, err := json.MarshalIndent(r.example(s, r.schemaNode(s, nil), 0), "", "  ")
				if err != nil {
					return "", err
				}
				fmt.Fprintf(b, "Example:\n\n```json\n%s\n```\n\n", ex)
			}
		}

		statuses := o.op.Responses.Keys()
		sort.Strings(statuses)
		fmt.Fprintf(b, "**Responses**\n\n| Status | Meaning | Body |\n|---|---|---|\n")
		var errs []string
		for _, status := range statuses {
			resp := o.op.Responses.Value(status).Value
			if n, _ := strconv.Atoi(status); n >= 400 {
				code, ok := codeOf[n]
				if !ok {
					return "", fmt.Errorf("%s %s: response %s has no error code in errorStatus", o.method, o.path, status)
				}
				errs = append(errs, fmt.Sprintf("| %s | `%s` | %s |\n", status, code, cell(deref(resp.Description))))
				continue
			}
			var bodies []string
			for _, ct := range sortedKeys(resp.Content) {
				bodies = append(bodies, fmt.Sprintf("`%s`: %s", ct, r.typeOf(resp.Content[ct].Schema)))
			}
			fmt.Fprintf(b, "| %s | %s | %s |\n", status, cell(deref(resp.Description)), strings.Join(bodies, "<br>"))
		}
		if len(errs) > 0 {
			fmt.Fprintf(b, "\n**Errors**\n\n| Status | Code | When |\n|---|---|---|\n%s", strings.Join(errs, ""))
		}
	}

	fmt.Fprintf(b, "\n## Schemas\n\nA field not marked required may be absent from an answer and may be left out of a request.\n")
	schemas := orderedKeys(child(tree, "components", "schemas"), sortedKeys(doc.Components.Schemas))
	for _, name := range schemas {
		s := doc.Components.Schemas[name]
		node := child(tree, "components", "schemas", name)
		fmt.Fprintf(b, "\n### %s\n\n", name)
		if d := strings.TrimSpace(s.Value.Description); d != "" {
			fmt.Fprintf(b, "%s\n\n", d)
		}
		if len(s.Value.Properties) == 0 {
			fmt.Fprintf(b, "Type: %s\n", r.typeOf(&openapi3.SchemaRef{Value: s.Value}))
			continue
		}
		fmt.Fprintf(b, "| Field | Type | Required | Description |\n|---|---|---|---|\n")
		r.fields("", s.Value, node)
	}
	return b.String(), nil
}

type apiRenderer struct {
	doc  *openapi3.T
	tree *yaml.Node
	b    strings.Builder
}

// fields writes one table row per property of s, in the order of node,
// descending into inline objects with dotted names.
func (r *apiRenderer) fields(prefix string, s *openapi3.Schema, node *yaml.Node) {
	for _, name := range orderedKeys(child(node, "properties"), sortedKeys(s.Properties)) {
		p := s.Properties[name]
		pnode := child(node, "properties", name)
		fmt.Fprintf(&r.b, "| `%s%s` | %s | %s | %s |\n", prefix, name, r.typeOf(p), yes(slices.Contains(s.Required, name)), cell(p.Value.Description))
		if p.Ref == "" && p.Value != nil && len(p.Value.Properties) > 0 {
			r.fields(prefix+name+".", p.Value, pnode)
		}
		if p.Ref == "" && p.Value != nil && p.Value.Items != nil && p.Value.Items.Ref == "" &&
			p.Value.Items.Value != nil && len(p.Value.Items.Value.Properties) > 0 {
			r.fields(prefix+name+"[].", p.Value.Items.Value, child(pnode, "items"))
		}
	}
}

// typeOf is a short Markdown description of a schema: a link for a named
// schema, otherwise the type with its format, bounds and enum.
func (r *apiRenderer) typeOf(s *openapi3.SchemaRef) string {
	if s == nil || s.Value == nil {
		return "any"
	}
	if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
		return fmt.Sprintf("[%s](#%s)", name, anchor(name))
	}
	v := s.Value
	typ := strings.Join(v.Type.Slice(), " or ")
	switch {
	case v.Type.Is("array"):
		typ = "array of " + r.typeOf(v.Items)
	case v.Type.Is("object") && v.AdditionalProperties.Schema != nil:
		typ = "map of string to " + r.typeOf(v.AdditionalProperties.Schema)
	case typ == "":
		typ = "any"
	}
	var notes []string
	if v.Format != "" {
		notes = append(notes, v.Format)
	}
	if v.Min != nil {
		notes = append(notes, "≥ "+strconv.FormatFloat(*v.Min, 'f', -1, 64))
	}
	if v.Max != nil {
		notes = append(notes, "≤ "+strconv.FormatFloat(*v.Max, 'f', -1, 64))
	}
	if len(notes) > 0 {
		typ += " (" + strings.Join(notes, ", ") + ")"
	}
	if len(v.Enum) > 0 {
		var values []string
		for _, e := range v.Enum {
			values = append(values, "`"+fmt.Sprint(e)+"`")
		}
		typ += ": " + strings.Join(values, ", ")
	}
	return typ
}

// schemaNode is the YAML node that defines s: the component for a
// reference, else inline (the node passed in).
func (r *apiRenderer) schemaNode(s *openapi3.SchemaRef, inline *yaml.Node) *yaml.Node {
	if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
		return child(r.tree, "components", "schemas", name)
	}
	return inline
}

// example is a compact value of schema s, properties in the authors' order.
func (r *apiRenderer) example(s *openapi3.SchemaRef, node *yaml.Node, depth int) any {
	if s == nil || s.Value == nil || depth > 4 {
		return nil
	}
	v := s.Value
	if len(v.Enum) > 0 {
		return v.Enum[0]
	}
	switch {
	case v.Type.Is("boolean"):
		return false
	case v.Type.Is("integer"), v.Type.Is("number"):
		if v.Min != nil {
			return *v.Min
		}
		return 0
	case v.Type.Is("string"):
		if v.Format == "date-time" {
			return "2025-01-02T15:04:05Z"
		}
		return "string"
	case v.Type.Is("array"):
		return []any{r.example(v.Items, r.schemaNode(v.Items, child(node, "items")), depth+1)}
	}
	obj := orderedObject{}
	for _, name := range orderedKeys(child(node, "properties"), sortedKeys(v.Properties)) {
		p := v.Properties[name]
		obj = append(obj, field{name, r.example(p, r.schemaNode(p, child(node, "properties", name)), depth+1)})
	}
	return obj
}

// errorMeanings collects, per error status, the distinct descriptions of
// the responses that answer it, in the authors' order of operations.
func (r *apiRenderer) errorMeanings() map[int][]string {
	out := map[int][]string{}
	for _, name := range orderedKeys(child(r.tree, "components", "responses"), sortedKeys(r.doc.Components.Responses)) {
		resp := r.doc.Components.Responses[name]
		for status := range errorStatusOf(r.doc, "#/components/responses/"+name) {
			if d := deref(resp.Value.Description); d != "" && !slices.Contains(out[status], d) {
				out[status] = append(out[status], d)
			}
		}
	}
	return out
}

// errorStatusOf returns the error statuses under which operations refer to
// the response ref.
func errorStatusOf(doc *openapi3.T, ref string) map[int]bool {
	out := map[int]bool{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for status, resp := range op.Responses.Map() {
				if n, _ := strconv.Atoi(status); n >= 400 && resp.Ref == ref {
					out[n] = true
				}
			}
		}
	}
	return out
}

// orderedObject marshals its fields in order.
type orderedObject []field

type field struct {
	name  string
	value any
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteString("{")
	for i, f := range o {
		if i > 0 {
			b.WriteString(", ")
		}
		k, err := json.Marshal(f.name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s: %s", k, v)
	}
	b.WriteString("}")
	return []byte(b.String()), nil
}

func roleCell(role api.Role, served bool) string {
	switch {
	case !served:
		return "not served"
	case role == "":
		return "none"
	}
	return "`" + string(role) + "`"
}

func authText(role api.Role, served bool, path string) string {
	switch {
	case !served:
		return "the server has no such route."
	case role == "":
		return "none; no bearer token is needed."
	}
	text := fmt.Sprintf("bearer token with role `%s`", role)
	if role != api.RoleAdmin {
		text += " or higher"
	}
	if strings.Contains(path, "{name}") {
		text += "; a token scoped to applications must match `{name}` (403 otherwise)"
	}
	return text + "."
}

// child walks a YAML tree by mapping keys; nil when a key is missing.
func child(n *yaml.Node, keys ...string) *yaml.Node {
	for n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}

// orderedKeys returns names in the order their keys appear in the mapping
// node, followed by any not in it, sorted.
func orderedKeys(node *yaml.Node, names []string) []string {
	var out []string
	if node != nil && node.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(node.Content); i += 2 {
			if k := node.Content[i].Value; slices.Contains(names, k) && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	var rest []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// anchor is the GitHub heading anchor of a heading's text.
func anchor(heading string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(heading) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		case c == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// cell makes text fit in one Markdown table cell.
func cell(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	return strings.ReplaceAll(text, "|", `\|`)
}

func sentence(text string) string {
	text = strings.TrimSpace(text)
	if text == "" || strings.HasSuffix(text, ".") {
		return text
	}
	return text + "."
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
