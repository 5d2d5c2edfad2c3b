package render

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/cli/cli/compose/template"
	"github.com/docker/cli/pkg/kvfile"

	"github.com/skep-cd/skep/sops"
)

// environment builds the interpolation variables: the env files in order,
// then vars on top. The controller's own environment is never consulted.
func (r *renderer) environment(envFiles []string, vars map[string]string) (map[string]string, error) {
	env := map[string]string{}
	names := make([]string, 0, len(envFiles))
	for _, f := range envFiles {
		name, err := r.resolve(f)
		if err != nil {
			return nil, &Error{File: f, Err: err}
		}
		names = append(names, name)
	}
	if len(envFiles) == 0 {
		name := path.Join(r.dir, DefaultEnvFile)
		ok, err := r.exists(name)
		if err != nil {
			return nil, &Error{File: name, Err: errors.Unwrap(err)}
		}
		if ok {
			names = append(names, name)
		}
	}
	// A nil lookup: a bare KEY in an env file must not reach into the
	// controller's own environment.
	r.secretVars = map[string]bool{}
	for _, name := range names {
		lines, encrypted, err := r.readEnvFile(name, nil)
		if err != nil {
			return nil, &Error{File: name, Err: errors.Unwrap(err)}
		}
		for _, line := range lines {
			k, v, _ := strings.Cut(line, "=")
			env[k] = v
			r.secretVars[k] = encrypted && v != ""
		}
	}
	maps.Copy(env, vars)
	for k := range vars {
		r.secretVars[k] = false
	}
	maps.DeleteFunc(r.secretVars, func(_ string, secret bool) bool { return !secret })
	return env, nil
}

// maskedEnvironment is env with the value of every variable that came
// from an encrypted env file replaced by its mask, in a new map.
func (r *renderer) maskedEnvironment(env map[string]string) map[string]string {
	out := maps.Clone(env)
	for k := range r.secretVars {
		out[k] = sops.MaskOf(env[k])
	}
	return out
}

// readEnvFile reads KEY=VALUE lines the way `docker run --env-file` and the
// compose loader do: no quoting, no interpolation, "#" comments. A bare KEY
// takes its value from lookup, or is left out. A SOPS-encrypted file is
// decrypted first (see readDecrypted), and encrypted says it was.
func (r *renderer) readEnvFile(name string, lookup func(string) (string, bool)) (lines []string, encrypted bool, err error) {
	data, encrypted, err := r.readDecrypted(name)
	if err != nil {
		return nil, false, err
	}
	lines, err = kvfile.ParseFromReader(bytes.NewReader(data), lookup)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", name, err)
	}
	return lines, encrypted, nil
}

// inlineEnvFiles replaces every service's env_file with the variables it
// names, merged under the service's own environment, as the loader would
// merge them. The loader reads env_file paths from the real file system, so
// they must never reach it. Values are escaped ($ → $$) because the loader
// interpolates environment but never env_file content.
//
// A service whose env files hold a decrypted value, or a bare KEY taking
// an encrypted variable's value, also gets its masked environment in
// src.maskedEnv: the same entries with those values as their masks.
func (r *renderer) inlineEnvFiles(src *source, env map[string]string) error {
	services, ok := src.dict["services"].(map[string]any)
	if !ok {
		return nil
	}
	lookupEnv := func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	for _, svcName := range slices.Sorted(maps.Keys(services)) {
		svc, ok := services[svcName].(map[string]any)
		if !ok {
			continue
		}
		raw, ok := svc["env_file"]
		if !ok {
			continue
		}
		var files []string
		switch v := raw.(type) {
		case string:
			files = []string{v}
		case []any:
			for _, f := range v {
				s, ok := f.(string)
				if !ok {
					continue
				}
				files = append(files, s)
			}
		}
		delete(svc, "env_file")

		field := "services." + svcName + ".env_file"
		line := 0
		if n := lookup(src.doc, field); n != nil {
			line = n.Line
		}
		fromFiles := map[string]any{}
		// secret holds the mask of each entry whose value came from an
		// encrypted input; a later plain entry of the same key clears it.
		secret := map[string]string{}
		for i, f := range files {
			itemField := field
			if _, isList := raw.([]any); isList {
				itemField += "[" + strconv.Itoa(i) + "]"
			}
			fail := func(err error) error {
				return &Error{File: src.name, Line: line, Field: itemField, Err: err}
			}
			// The loader interpolates env_file paths; so must we.
			p, err := template.Substitute(f, lookupEnv)
			if err != nil {
				return fail(interpolationError(err))
			}
			name, err := r.resolve(p)
			if err != nil {
				return fail(err)
			}
			// A bare KEY takes the variable's value: secret when the
			// variable came from an encrypted file.
			looked := map[string]bool{}
			lines, encrypted, err := r.readEnvFile(name, func(k string) (string, bool) {
				looked[k] = true
				return lookupEnv(k)
			})
			if err != nil {
				return fail(err)
			}
			for _, l := range lines {
				k, v, _ := strings.Cut(l, "=")
				fromFiles[k] = strings.ReplaceAll(v, "$", "$$")
				delete(secret, k)
				if v != "" && (encrypted || looked[k] && r.secretVars[k]) {
					secret[k] = sops.MaskOf(v)
				}
			}
		}
		// The service's own environment wins over its env files, as in
		// the loader. A shape the schema will refuse is left as it is.
		switch own := svc["environment"].(type) {
		case nil:
		case map[string]any:
			maps.Copy(fromFiles, own)
			for k := range own {
				delete(secret, k)
			}
		case []any:
			for _, item := range own {
				s, ok := item.(string)
				if !ok {
					// Leave a malformed list for the schema to report.
					fromFiles = nil
					break
				}
				k, v, ok := strings.Cut(s, "=")
				if ok {
					fromFiles[k] = v
				} else {
					fromFiles[s] = nil
				}
				delete(secret, k)
			}
		default:
			fromFiles = nil
		}
		if len(fromFiles) > 0 {
			svc["environment"] = fromFiles
			if len(secret) > 0 {
				masked := maps.Clone(fromFiles)
				for k, m := range secret {
					masked[k] = m
				}
				if src.maskedEnv == nil {
					src.maskedEnv = map[string]map[string]any{}
				}
				src.maskedEnv[svcName] = masked
			}
		}
	}
	return nil
}

// masked returns src's dictionary with each service's environment as
// maskedEnv holds it, sharing everything else with src.dict; src itself
// when no env file held a decrypted value.
func (src *source) masked() *source {
	if len(src.maskedEnv) == 0 {
		return src
	}
	dict := maps.Clone(src.dict)
	services := maps.Clone(dict["services"].(map[string]any))
	for name, env := range src.maskedEnv {
		svc := maps.Clone(services[name].(map[string]any))
		svc["environment"] = env
		services[name] = svc
	}
	dict["services"] = services
	return &source{name: src.name, doc: src.doc, dict: dict}
}
