package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skep-cd/skep/golden"
)

const cliReferencePath = "../docs/cli.md"

// TestCLIReferenceIsCurrent fails when docs/cli.md is not what the command
// tree generates; -update rewrites it.
func TestCLIReferenceIsCurrent(t *testing.T) {
	got := cliReference(NewRoot(io.Discard, io.Discard))
	golden.Check(t, cliReferencePath, []byte(got))
}

func TestCLIReferenceDocumentsEveryVisibleCommandAndFlag(t *testing.T) {
	root := NewRoot(io.Discard, io.Discard)
	got := cliReference(root)
	commands, flags := 0, 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		heading := "\n## " + c.CommandPath() + "\n"
		if visible(c) != strings.Contains(got, heading) {
			t.Errorf("command %q: visible=%t, but documented=%t", c.CommandPath(), visible(c), !visible(c))
		}
		if !visible(c) {
			return
		}
		commands++
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !flagShown(f) {
				return
			}
			flags++
			row := fmt.Sprintf("| `--%s` |", f.Name)
			if !strings.Contains(sectionOf(got, heading), row) {
				t.Errorf("flag --%s of %q is not documented under its command", f.Name, c.CommandPath())
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if strings.Contains(got, "## skep demo-app") {
		t.Errorf("the hidden command demo-app is documented")
	}
	if commands < 10 || flags < 20 {
		t.Fatalf("only %d commands and %d flags documented; is the tree empty?", commands, flags)
	}
}

// sectionOf returns the part of doc from heading to the next section.
func sectionOf(doc, heading string) string {
	i := strings.Index(doc, heading)
	if i < 0 {
		return ""
	}
	section := doc[i+len(heading):]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	return section
}

// visible reports whether c belongs in the reference: the root, and every
// command a user can run that is neither hidden nor deprecated.
func visible(c *cobra.Command) bool {
	if !c.HasParent() {
		return true
	}
	return c.IsAvailableCommand() && visible(c.Parent())
}

// flagShown leaves out hidden and deprecated flags, and cobra's help flag,
// which exists only once a command has run.
func flagShown(f *pflag.Flag) bool {
	return !f.Hidden && f.Deprecated == "" && f.Name != "help"
}

// cliReference renders docs/cli.md: every visible command, depth first in
// name order, with its usage, descriptions, flags and subcommands.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# CLI reference\n\n")
	fmt.Fprintf(&b, "<!-- Generated from the command tree by `go test ./cli/ -run TestCLIReferenceIsCurrent -update`. DO NOT EDIT. -->\n\n")
	fmt.Fprintf(&b, "`%s`: %s Every command also takes `-h`/`--help`.", root.Name(), sentenceOf(root.Short))
	if !root.CompletionOptions.DisableDefaultCmd {
		fmt.Fprintf(&b, " `%[1]s help [command]` prints the same help, and `%[1]s completion <shell>` a shell completion script.", root.Name())
	}
	fmt.Fprintf(&b, "\n\nExit status: %d success, %d failure, %d usage error.\n\n## Commands\n\n", ExitOK, ExitFailure, ExitUsage)
	var index func(c *cobra.Command, depth int)
	index = func(c *cobra.Command, depth int) {
		for _, sub := range sortedCommands(c) {
			fmt.Fprintf(&b, "%s- [%s](#%s): %s\n", strings.Repeat("  ", depth), sub.CommandPath(), commandAnchor(sub), sub.Short)
			index(sub, depth+1)
		}
	}
	index(root, 0)
	fmt.Fprintf(&b, "\n")

	var section func(c *cobra.Command)
	section = func(c *cobra.Command) {
		fmt.Fprintf(&b, "## %s\n\n", c.CommandPath())
		fmt.Fprintf(&b, "%s\n\n", sentenceOf(c.Short))
		var usage []string
		if c.Runnable() {
			usage = append(usage, c.UseLine())
		}
		if c.HasAvailableSubCommands() {
			usage = append(usage, c.CommandPath()+" [command]")
		}
		fmt.Fprintf(&b, "```text\n%s\n```\n\n", strings.Join(usage, "\n"))
		if len(c.Aliases) > 0 {
			fmt.Fprintf(&b, "Aliases: `%s`\n\n", strings.Join(c.Aliases, "`, `"))
		}
		if long := strings.TrimSpace(c.Long); long != "" {
			fmt.Fprintf(&b, "```text\n%s\n```\n\n", long)
		}
		if ex := strings.TrimRight(c.Example, " \n"); ex != "" {
			fmt.Fprintf(&b, "Examples:\n\n```text\n%s\n```\n\n", ex)
		}
		flagTable(&b, "Flags", c.LocalFlags())
		flagTable(&b, "Inherited flags", c.InheritedFlags())
		if subs := sortedCommands(c); len(subs) > 0 {
			fmt.Fprintf(&b, "Subcommands:\n\n")
			for _, sub := range subs {
				fmt.Fprintf(&b, "- [%s](#%s): %s\n", sub.CommandPath(), commandAnchor(sub), sub.Short)
			}
			fmt.Fprintf(&b, "\n")
		}
		for _, sub := range sortedCommands(c) {
			section(sub)
		}
	}
	section(root)
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// sortedCommands returns c's visible subcommands by name.
func sortedCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if visible(sub) {
			out = append(out, sub)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// flagTable writes the shown flags of fs by name, if there are any.
func flagTable(b *strings.Builder, title string, fs *pflag.FlagSet) {
	var flags []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if flagShown(f) {
			flags = append(flags, f)
		}
	})
	if len(flags) == 0 {
		return
	}
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	fmt.Fprintf(b, "%s:\n\n| Flag | Short | Type | Default | Usage |\n|---|---|---|---|---|\n", title)
	for _, f := range flags {
		short := ""
		if f.Shorthand != "" {
			short = "`-" + f.Shorthand + "`"
		}
		// Like cobra's help, a zero default is left out.
		def := f.DefValue
		switch def {
		case "", "[]", "false", "0", "0s":
			def = ""
		}
		if def != "" {
			def = "`" + def + "`"
		}
		usage := strings.ReplaceAll(strings.Join(strings.Fields(f.Usage), " "), "|", `\|`)
		fmt.Fprintf(b, "| `--%s` | %s | %s | %s | %s |\n", f.Name, short, f.Value.Type(), def, usage)
	}
	fmt.Fprintf(b, "\n")
}

// commandAnchor is the GitHub anchor of c's section heading.
func commandAnchor(c *cobra.Command) string {
	return strings.ToLower(strings.ReplaceAll(c.CommandPath(), " ", "-"))
}

func sentenceOf(text string) string {
	text = strings.TrimSpace(text)
	if text == "" || strings.HasSuffix(text, ".") {
		return text
	}
	return text + "."
}
