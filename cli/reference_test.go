package cli

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestEveryControllerFlagIsInTheConfigurationReference(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	root := NewRoot(io.Discard, io.Discard)
	checked := 0
	for _, name := range []string{"controller", "deploy"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil || cmd.Name() != name {
			t.Fatalf("command %s not found: %v", name, err)
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			checked++
			if !strings.Contains(string(doc), "`--"+f.Name+"`") {
				t.Errorf("flag --%s of skep %s is not documented in docs/configuration.md", f.Name, name)
			}
		})
	}
	if checked < 10 {
		t.Fatalf("checked only %d flags", checked)
	}
}
