package appset

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// yamlPaths lists every key path of t as the reference writes it:
// "applications[].source.repo".
func yamlPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		path := tag
		if prefix != "" {
			path = prefix + "." + tag
		}
		out = append(out, path)
		// A generator's template takes the keys of applications[], which
		// are documented there once.
		if path == "generators[].template" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			out = append(out, yamlPaths(ft.Elem(), path+"[]")...)
		} else if ft.Kind() == reflect.Struct && ft.NumField() > 0 && ft.Field(0).Tag.Get("yaml") != "" {
			out = append(out, yamlPaths(ft, path)...)
		}
	}
	return out
}

func TestEveryAppSetKeyIsInTheConfigurationReference(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := yamlPaths(reflect.TypeFor[fileDoc](), "")
	if len(paths) < 20 {
		t.Fatalf("found only %d keys: %v", len(paths), paths)
	}
	for _, p := range paths {
		if !strings.Contains(string(doc), "`"+p+"`") {
			t.Errorf("app-set key %s is not documented in docs/configuration.md", p)
		}
	}
}
