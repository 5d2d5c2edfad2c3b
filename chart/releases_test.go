package chart

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
)

func TestLoadReleasesOrdersByWaveAndKeepsFileOrderWithin(t *testing.T) {
	fsys := fstest.MapFS{"releases.yaml": {Data: []byte(`releases:
  - name: web
    chart: charts/web
    values: [envs/testing/web.yaml]
    wave: 1
  - name: db
    chart: charts/postgres
  - name: cache
    chart: charts/redis
    set: {maxmemory: 64mb}
`)}}
	got, err := LoadReleases(fsys, "releases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []ReleaseSpec{
		{Name: "db", Chart: "charts/postgres"},
		{Name: "cache", Chart: "charts/redis", Set: map[string]string{"maxmemory": "64mb"}},
		{Name: "web", Chart: "charts/web", Values: []string{"envs/testing/web.yaml"}, Wave: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("LoadReleases (-want +got):\n%s", d)
	}
}

func TestLoadReleasesReportsEveryProblemWithItsLine(t *testing.T) {
	fsys := fstest.MapFS{"releases.yaml": {Data: []byte(`releases:
  - name: Web
    chart: ../outside
  - name: db
    chart: charts/db
    wave: 101
  - name: db
    chart: charts/db
  - name: 1d0fd508
    chart: charts/x
    colour: red
`)}}
	_, err := LoadReleases(fsys, "releases.yaml")
	var problems configfile.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("LoadReleases = %v, want problems", err)
	}
	text := problems.Error()
	for _, want := range []string{
		"releases.yaml:2:11: releases[0].name: want lower-case letters",
		"releases[0].chart: want the chart's directory relative to the repository root",
		"releases[1].wave: want 0 to 100, got 101",
		`releases[2].name: "db" is declared twice; first as releases[1]`,
		"releases[3].name: \"1d0fd508\" looks like a preview's hash",
		"releases[3].colour: unknown key",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("problems lack %q:\n%s", want, text)
		}
	}
}
