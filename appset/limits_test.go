package appset

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/skep-cd/skep/configfile"
)

func TestAnAppSetPastMaxApplicationsIsOneProblem(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: skep/v1\napplications:\n")
	for i := range MaxApplications + 1 {
		fmt.Fprintf(&b, "  - {name: a%d, source: {repo: /srv/git/a}}\n", i)
	}
	_, err := Parse("big.yaml", []byte(b.String()))
	var problems configfile.Problems
	if !errors.As(err, &problems) || len(problems) != 1 || !strings.Contains(problems[0].String(), "more than 10000 applications") {
		t.Fatalf("Parse of %d applications = %v", MaxApplications+1, err)
	}
}
