package api

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/secret"
)

// The tokens and webhooks files share one shape: a mapping with a single
// list key, each entry a mapping of known fields, decoded by configfile.

// maxConfigFile bounds what is read of a tokens or webhooks file.
const maxConfigFile = 1 << 20

// decodeList decodes a tokens or webhooks file into v, whose one field is
// the list listKey. example shows the accepted shape; it is part of every
// problem about the file's shape, since the list must sit under its key.
// Values are hidden from the decoder's messages: a token pasted where its
// file name belongs must not reach a log.
func decodeList(name string, data []byte, v any, listKey, example string) *configfile.Document {
	want := "a mapping with a " + listKey + " list"
	d := configfile.Decode(name, data, v, configfile.Options{Want: want, Example: example, HideValues: true})
	switch {
	case d.Empty():
		d.Add("", "empty; want %s; for example:\n%s", want, example)
	case !d.Present(listKey):
		d.Add(listKey, "missing; want %s; for example:\n%s", want, example)
	}
	return d
}

// ReadSecret reads the one secret source an entry at field names: fileKey
// (a file, relative to the config file's directory) or envKey (an
// environment variable). ok is false when neither is given; problems are
// recorded in d at the key that named the failing source. The files of
// every authorizer (tokens, webhooks, package identity's) read their
// secrets so.
func ReadSecret(d *configfile.Document, field, fileKey, file, envKey, env string, getenv func(string) string) (value string, ok bool) {
	switch {
	case file != "" && env != "":
		// ok is true: a source was named, so the caller must not add a
		// second "no secret" problem for the same entry.
		d.Add(field+"."+envKey, "give %s or %s, not both", fileKey, envKey)
		return "", true
	case file == "" && env == "":
		return "", false
	}
	src, key := secret.Source{Env: env}, envKey
	if file != "" {
		// Relative to the config file, as paths in a compose file are, not
		// to the controller's working directory, which nobody chooses.
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(d.File()), file)
		}
		src, key = secret.Source{File: file}, fileKey
	}
	v, err := src.Read(getenv)
	if err != nil {
		d.Add(field+"."+key, "%v", err)
	}
	return v, true
}

// ReadConfigFile reads name whole, refusing one larger than 1 MiB: the
// authorizers' files are small by nature, and a wrong path (a log, a
// device) must not exhaust memory.
func ReadConfigFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One byte past the limit tells a file of exactly the limit from a
	// larger one.
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxConfigFile)
	}
	return data, nil
}
