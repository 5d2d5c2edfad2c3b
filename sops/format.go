package sops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// document is a parsed file: its branches (YAML documents; one for the
// other formats) without the metadata, and the metadata as plain Go values
// (nil when the file has none).
type document struct {
	branches []mapping
	meta     map[string]any
}

// metadataKey holds the metadata in YAML and JSON; metadataPrefix starts
// its flattened keys in dotenv.
const (
	metadataKey    = "sops"
	metadataPrefix = "sops_"
)

// maxNodes bounds the values a YAML file may expand to through aliases.
const maxNodes = 1 << 20

// parse reads a file in its stored form: a YAML, JSON or dotenv document,
// or for Binary the JSON document holding "data".
func parse(f Format, data []byte) (document, error) {
	switch f {
	case YAML:
		return parseYAML(data)
	case JSON, Binary:
		return parseJSON(data)
	case Dotenv:
		return parseDotenv(data)
	}
	return document{}, fmt.Errorf("format %s is %w", f, ErrUnsupported)
}

// emit writes decrypted branches as `sops --decrypt` would, without comments.
func emit(f Format, branches []mapping) ([]byte, error) {
	switch f {
	case YAML:
		return emitYAML(branches)
	case JSON:
		if len(branches) != 1 {
			return nil, errors.New("a JSON file holds one document")
		}
		out, err := emitJSON(branches[0], "\t")
		return append(out, '\n'), err
	case Dotenv:
		return emitDotenv(branches)
	case Binary:
		if len(branches) == 1 {
			for _, it := range branches[0] {
				if s, ok := it.value.(string); ok && it.key == "data" {
					return []byte(s), nil
				}
			}
		}
		return nil, errors.New("a binary SOPS file holds one string under \"data\"")
	}
	return nil, fmt.Errorf("format %s is %w", f, ErrUnsupported)
}

// splitMetadata removes the metadata key from every branch, as sops does,
// and returns the first branch's.
func (d *document) splitMetadata() error {
	for i, branch := range d.branches {
		kept := branch[:0:0]
		for _, it := range branch {
			if it.key != metadataKey {
				kept = append(kept, it)
				continue
			}
			if i == 0 {
				if d.meta != nil {
					return errors.New("two sops keys")
				}
				m, ok := it.value.(mapping)
				if !ok {
					return errors.New("sops is not a mapping")
				}
				d.meta = toGo(m).(map[string]any)
			}
		}
		d.branches[i] = kept
	}
	return nil
}

// toGo turns a mapping into map[string]any, recursively.
func toGo(v any) any {
	switch v := v.(type) {
	case mapping:
		m := make(map[string]any, len(v))
		for _, it := range v {
			m[it.key] = toGo(it.value)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = toGo(e)
		}
		return out
	}
	return v
}

// fromGo is the inverse of toGo, with keys in sorted order (as sops writes
// its metadata).
func fromGo(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(mapping, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			m = append(m, item{key: k, value: fromGo(v[k])})
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = fromGo(e)
		}
		return out
	}
	return v
}

// yamlReader converts YAML nodes to values, counting them.
type yamlReader struct{ nodes int }

func parseYAML(data []byte) (document, error) {
	var doc document
	r := &yamlReader{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return document{}, err
		}
		m, err := r.document(&n)
		if err != nil {
			return document{}, err
		}
		doc.branches = append(doc.branches, m)
	}
	return doc, doc.splitMetadata()
}

func (r *yamlReader) document(n *yaml.Node) (mapping, error) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return mapping{}, nil
		}
		n = n.Content[0]
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch {
	case n.Kind == yaml.MappingNode:
		v, err := r.value(n, 0)
		if err != nil {
			return nil, err
		}
		return v.(mapping), nil
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return mapping{}, nil
	}
	return nil, errors.New("a YAML document must be a mapping")
}

func (r *yamlReader) value(n *yaml.Node, depth int) (any, error) {
	r.nodes++
	if depth > maxDepth || r.nodes > maxNodes {
		return nil, fmt.Errorf("nested deeper than %d or larger than %d values", maxDepth, maxNodes)
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(mapping, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			var key any
			if err := n.Content[i].Decode(&key); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Content[i].Line, err)
			}
			k, ok := key.(string)
			if !ok {
				return nil, fmt.Errorf("line %d: a key must be a string", n.Content[i].Line)
			}
			v, err := r.value(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			m = append(m, item{key: k, value: v})
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := r.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: alias to nothing", n.Line)
		}
		return r.value(n.Alias, depth+1)
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

func emitYAML(branches []mapping) ([]byte, error) {
	var b bytes.Buffer
	e := yaml.NewEncoder(&b)
	e.SetIndent(4) // sops's default
	for _, m := range branches {
		n, err := yamlNode(m)
		if err != nil {
			return nil, err
		}
		if err := e.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}); err != nil {
			return nil, err
		}
	}
	if err := e.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func yamlNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case mapping:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, it := range v {
			val, err := yamlNode(it.value)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: it.key}, val)
		}
		return n, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			en, err := yamlNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, en)
		}
		return n, nil
	case []byte:
		v2 := string(v)
		return yamlNode(v2)
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	return n, nil
}

// parseJSON reads a JSON object keeping its key order, numbers as int when
// they are integers and float64 otherwise (as sops reads them).
func parseJSON(data []byte) (document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return document{}, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return document{}, errors.New("a JSON document must be an object")
	}
	m, err := jsonObject(dec, 0)
	if err != nil {
		return document{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return document{}, errors.New("data after the JSON object")
	}
	doc := document{branches: []mapping{m}}
	return doc, doc.splitMetadata()
}

func jsonObject(dec *json.Decoder, depth int) (mapping, error) {
	m := mapping{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("a JSON key must be a string")
		}
		v, err := jsonValue(dec, depth+1)
		if err != nil {
			return nil, err
		}
		m = append(m, item{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	return m, nil
}

func jsonValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return jsonObject(dec, depth)
		case '[':
			s := []any{}
			for dec.More() {
				v, err := jsonValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				s = append(s, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return s, nil
		}
		return nil, errors.New("unexpected JSON delimiter")
	case json.Number:
		if i, err := t.Int64(); err == nil && int64(int(i)) == i {
			return int(i), nil
		}
		return t.Float64()
	}
	return tok, nil // string, bool or nil
}

// emitJSON writes m as sops does: keys in order, indented.
func emitJSON(m mapping, indent string) ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, m); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", indent); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case mapping:
		b.WriteByte('{')
		for i, it := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(it.key)
			b.Write(k)
			b.WriteString(": ")
			if err := writeJSON(b, it.value); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []byte:
		return writeJSON(b, string(v))
	default:
		out, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(out)
	}
	return nil
}

// parseDotenv reads KEY=VALUE lines as sops does: "#" lines are comments,
// "\n" in a value is a newline, and the metadata is the sops_ keys,
// flattened.
func parseDotenv(data []byte) (document, error) {
	var m mapping
	flat := map[string]any{}
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return document{}, fmt.Errorf("line %d: want KEY=VALUE", i+1)
		}
		value = strings.ReplaceAll(value, `\n`, "\n")
		if rest, ok := strings.CutPrefix(key, metadataPrefix); ok {
			flat[rest] = value
			continue
		}
		m = append(m, item{key: key, value: value})
	}
	doc := document{branches: []mapping{m}}
	if len(flat) > 0 {
		meta, err := unflatten(flat)
		if err != nil {
			return document{}, fmt.Errorf("sops metadata: %w", err)
		}
		doc.meta = meta
	}
	return doc, nil
}

func emitDotenv(branches []mapping) ([]byte, error) {
	var b bytes.Buffer
	for _, m := range branches {
		for _, it := range m {
			s, ok := it.value.(string)
			if !ok {
				return nil, fmt.Errorf("dotenv value %s is not a string", it.key)
			}
			fmt.Fprintf(&b, "%s=%s\n", it.key, strings.ReplaceAll(s, "\n", `\n`))
		}
	}
	return b.Bytes(), nil
}

// Flattened dotenv metadata keys: age__list_0__map_recipient.
const (
	mapSeparator  = "__map_"
	listSeparator = "__list_"
)

// unflatten rebuilds nested metadata from flattened keys.
func unflatten(flat map[string]any) (map[string]any, error) {
	root := map[string]any{}
	for _, key := range slices.Sorted(maps.Keys(flat)) {
		path, err := tokenize(key)
		if err != nil {
			return nil, err
		}
		var cur any = root
		for i, step := range path {
			child := flat[key]
			if i < len(path)-1 {
				child = map[string]any{}
				if _, index := path[i+1].(int); index {
					child = map[int]any{}
				}
			}
			switch c := cur.(type) {
			case map[string]any:
				k, ok := step.(string)
				if !ok {
					return nil, fmt.Errorf("key %s mixes a list and a mapping", key)
				}
				if existing, ok := c[k]; ok {
					child = existing
				} else {
					c[k] = child
				}
			case map[int]any:
				n, ok := step.(int)
				if !ok {
					return nil, fmt.Errorf("key %s mixes a list and a mapping", key)
				}
				if existing, ok := c[n]; ok {
					child = existing
				} else {
					c[n] = child
				}
			default:
				return nil, fmt.Errorf("key %s nests under a value", key)
			}
			cur = child
		}
	}
	return lists(root).(map[string]any), nil
}

// tokenize splits a flattened key into mapping keys (strings) and list
// indexes (ints).
func tokenize(key string) ([]any, error) {
	first, rest := cutToken(key)
	path := []any{first}
	for rest != "" {
		var tok string
		if r, ok := strings.CutPrefix(rest, mapSeparator); ok {
			tok, rest = cutToken(r)
			path = append(path, tok)
			continue
		}
		tok, rest = cutToken(strings.TrimPrefix(rest, listSeparator))
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > 1000 {
			return nil, fmt.Errorf("key %s: bad list index", key)
		}
		path = append(path, n)
	}
	return path, nil
}

// cutToken splits s before the next separator.
func cutToken(s string) (string, string) {
	i := len(s)
	for _, sep := range []string{mapSeparator, listSeparator} {
		if j := strings.Index(s, sep); j >= 0 && j < i {
			i = j
		}
	}
	return s[:i], s[i:]
}

// lists turns the map[int]any that unflatten builds into lists.
func lists(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = lists(e)
		}
		return v
	case map[int]any:
		out := make([]any, 0, len(v))
		for _, i := range slices.Sorted(maps.Keys(v)) {
			out = append(out, lists(v[i]))
		}
		return out
	}
	return v
}

// flatten is the inverse of unflatten, for Encrypt's dotenv output.
func flatten(prefix string, v any, out *mapping) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			flatten(prefix+mapSeparator+k, v[k], out)
		}
	case []any:
		for i, e := range v {
			flatten(prefix+listSeparator+strconv.Itoa(i), e, out)
		}
	default:
		*out = append(*out, item{key: prefix, value: fmt.Sprint(v)})
	}
}

// metadata is what Decrypt needs of a file's sops metadata.
type metadata struct {
	lastModified     string // RFC 3339, the MAC's additional data
	mac              string
	macOnlyEncrypted bool
	rules            rules
	age              []ageStanza
	others           []string // kinds of master keys other than age, for messages
}

type ageStanza struct{ recipient, enc string }

// describeRecipients lists who the file is encrypted for.
func (m metadata) describeRecipients() string {
	var who []string
	for _, s := range m.age {
		who = append(who, s.recipient)
	}
	who = append(who, m.others...)
	if len(who) == 0 {
		return "no one"
	}
	return strings.Join(who, ", ")
}

// keyKinds are the master keys sops knows besides age.
var keyKinds = []string{"kms", "gcp_kms", "azure_kv", "hc_vault", "hckms", "pgp"}

func parseMetadata(m map[string]any) (metadata, error) {
	var md metadata
	str := func(key string) string {
		switch v := m[key].(type) {
		case string:
			return v
		case time.Time:
			return v.UTC().Format(time.RFC3339)
		case nil:
			return ""
		default:
			return fmt.Sprint(v)
		}
	}
	lm, err := time.Parse(time.RFC3339, str("lastmodified"))
	if err != nil {
		return md, errors.New("lastmodified is not an RFC 3339 time")
	}
	// The MAC's additional data is the time as sops formats it again.
	md.lastModified = lm.Format(time.RFC3339)
	md.mac = str("mac")
	switch v := m["mac_only_encrypted"].(type) {
	case bool:
		md.macOnlyEncrypted = v
	case string:
		md.macOnlyEncrypted, _ = strconv.ParseBool(v)
	}
	var set []string
	for _, k := range []string{"unencrypted_suffix", "encrypted_suffix", "unencrypted_regex", "encrypted_regex", "unencrypted_comment_regex", "encrypted_comment_regex"} {
		if str(k) != "" {
			set = append(set, k)
		}
	}
	switch {
	case len(set) > 1:
		return md, fmt.Errorf("more than one of %s", strings.Join(set, ", "))
	case len(set) == 0:
		md.rules = defaultRules
	}
	for _, k := range set {
		switch k {
		case "unencrypted_suffix":
			md.rules.unencryptedSuffix = str(k)
		case "encrypted_suffix":
			md.rules.encryptedSuffix = str(k)
		case "unencrypted_regex", "encrypted_regex":
			re, err := regexp.Compile(str(k))
			if err != nil {
				return md, fmt.Errorf("%s: %w", k, err)
			}
			if k == "unencrypted_regex" {
				md.rules.unencryptedRegex = re
			} else {
				md.rules.encryptedRegex = re
			}
		default:
			return md, fmt.Errorf("%s is %w: Skep drops comments", k, ErrUnsupported)
		}
	}
	groups := []map[string]any{m}
	if kg, ok := m["key_groups"].([]any); ok && len(kg) > 0 {
		if len(kg) > 1 {
			return md, fmt.Errorf("%d key groups (Shamir secret sharing) are %w; encrypt to age recipients in one group", len(kg), ErrUnsupported)
		}
		g, ok := kg[0].(map[string]any)
		if !ok {
			return md, errors.New("key_groups[0] is not a mapping")
		}
		groups = []map[string]any{g}
	}
	for _, g := range groups {
		stanzas, _ := g["age"].([]any)
		for _, s := range stanzas {
			sm, ok := s.(map[string]any)
			if !ok {
				return md, errors.New("an age entry is not a mapping")
			}
			r, _ := sm["recipient"].(string)
			enc, _ := sm["enc"].(string)
			if enc == "" {
				return md, fmt.Errorf("the age entry of %s has no enc", r)
			}
			md.age = append(md.age, ageStanza{recipient: r, enc: enc})
		}
		for _, kind := range keyKinds {
			if l, ok := g[kind].([]any); ok && len(l) > 0 {
				md.others = append(md.others, fmt.Sprintf("%d %s key(s)", len(l), kind))
			}
		}
	}
	return md, nil
}
