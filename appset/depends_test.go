package appset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDependsOnProblemsNameTheEntry(t *testing.T) {
	const head = "apiVersion: skep/v1\napplications:\n"
	for _, tc := range []struct {
		name, apps string
		problems   []string
	}{
		{
			name: "an unknown name is refused at its entry",
			apps: "  - {name: web, source: {repo: /r}, dependsOn: [db]}\n",
			problems: []string{
				`3:49 applications[0].dependsOn[0]: unknown application "db"; want the name of an application of the set`,
			},
		},
		{
			name:     "an application depending on itself is refused",
			apps:     "  - {name: web, source: {repo: /r}, dependsOn: [web]}\n",
			problems: []string{"3:49 applications[0].dependsOn[0]: an application cannot depend on itself"},
		},
		{
			name: "a name listed twice is refused",
			apps: "  - {name: db, source: {repo: /r}}\n  - {name: web, source: {repo: /r}, dependsOn: [db, db]}\n",
			problems: []string{
				`4:53 applications[1].dependsOn[1]: "db" is listed twice`,
			},
		},
		{
			name: "a cycle is refused once, at the entry that closes it, with its path",
			apps: "  - {name: web, source: {repo: /r}, dependsOn: [api]}\n" +
				"  - {name: api, source: {repo: /r}, dependsOn: [db]}\n" +
				"  - {name: db, source: {repo: /r}, dependsOn: [web]}\n",
			problems: []string{
				"5:48 applications[2].dependsOn[0]: dependency cycle web → api → db → web; an application in a cycle could never sync",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("apps.yaml", []byte(head+tc.apps))
			if d := cmp.Diff(tc.problems, problemsOf(t, err)); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

func TestDependsOnAcrossFilesIsKeptInOrder(t *testing.T) {
	set, err := ParseFiles([]File{
		{Name: "web.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: web, source: {repo: /r}, dependsOn: [db, cache]}\n")},
		{Name: "data.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: db, source: {repo: /r}}\n  - {name: cache, source: {repo: /r}, dependsOn: [db]}\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	web, _ := set.Lookup("web")
	if d := cmp.Diff([]string{"db", "cache"}, web.DependsOn); d != "" {
		t.Errorf("web's dependsOn (-want +got):\n%s", d)
	}
	assertRoundTrip(t, set)
}

func TestDependsOnCycleAcrossFilesNamesTheOtherFilesEntry(t *testing.T) {
	_, err := ParseFiles([]File{
		{Name: "web.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: web, source: {repo: /r}, dependsOn: [db]}\n")},
		{Name: "db.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: db, source: {repo: /r}, dependsOn: [web]}\n")},
	})
	if d := cmp.Diff([]string{"3:48 applications[0].dependsOn[0]: dependency cycle web → db → web; an application in a cycle could never sync"}, problemsOf(t, err)); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
}
