package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/gitsource"
)

// newClient builds the API client from the environment and the client
// config file, or else the sign-in of `skep login` (renewed first when
// due); never from flags, so tokens stay out of shell histories.
func newClient(ctx context.Context) (*client.Client, error) {
	opts, err := client.OptionsFromEnvironment(os.Getenv)
	if err != nil {
		// A missing server or token is the environment's fault, not the
		// command line's: exit 1, not 2.
		return nil, &ExitError{Code: ExitFailure, Err: err}
	}
	if opts.Token.Empty() {
		tok, ok, err := loginToken(ctx, os.Getenv, opts.Server)
		if err != nil {
			return nil, &ExitError{Code: ExitFailure, Err: err}
		}
		if ok {
			opts.Token = tok
		}
	}
	c, err := client.New(opts)
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: err}
	}
	return c, nil
}

// apiFailure turns a client error into the command's exit error.
// apiFailure returns nil for nil, so a call's result can be passed
// through as it is.
func apiFailure(err error) error {
	if err == nil {
		return nil
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return err
	}
	return &ExitError{Code: ExitFailure, Err: err}
}

// output is the -o flag of commands that talk to the API: "" (a table for
// people), json or yaml (the server's response, unmodified in content).
type output string

// register adds -o/--output to cmd; the zero value "" is the table.
func (o *output) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP((*string)(o), "output", "o", "", "output format: json or yaml (the server's response); default a table")
}

// check is called before any request is made, so a bad -o costs no
// call to the controller.
func (o output) check() error {
	switch o {
	case "", "json", "yaml":
		return nil
	}
	return usageError("--output: want json or yaml, got %q", string(o))
}

// raw reports whether the server's answer is printed as it came.
func (o output) raw() bool { return o != "" }

// print writes an API response body in the chosen format: json as the
// server sent it, yaml converted key for key in the server's order.
func (o output) print(w io.Writer, body []byte) error {
	if o == "yaml" {
		var doc yaml.Node
		if err := yaml.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("convert answer to yaml: %w", err)
		}
		// JSON is valid YAML, so the node tree decodes as flow style ({...}) and
		// would be printed back that way.
		blockStyle(&doc)
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(&doc); err != nil {
			return err
		}
		return enc.Close()
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	// A terminal prompt after the last brace, or two documents on one line
	// of a pipe, is what this prevents.
	if !bytes.HasSuffix(body, []byte("\n")) {
		_, err := io.WriteString(w, "\n")
		return err
	}
	return nil
}

// blockStyle undoes the flow style YAML gives a decoded JSON document.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle
	// Decoded JSON strings are double-quoted; plain style is dropped back
	// to quoting by the encoder wherever YAML needs it ("yes", "1.0").
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Style &^= yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// short is a commit (or another long id) as tables print it; "-" for none.
func short(commit string) string {
	return orDash(gitsource.ShortCommit(commit))
}

// orDash prints "-" for an empty value in a table.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps the first line of s, cut to n runes.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	r := []rune(s)
	// Runes, not bytes: a cut must not split a UTF-8 character.
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
