// Package render turns the compose files of one release into one compose
// document, the way `docker stack deploy -c a -c b` reads them.
//
// It interpolates ${VAR}, ${VAR:-default} and ${VAR:?error} from env files
// and inline variables only (never from the process environment), keeps
// extension fields and anchors, merges several files in order with docker/cli's
// compose loader, and reads the content of file-based configs and secrets.
//
// Every read is confined to Input.Root: `..` and symbolic links that leave the
// tree are refused, and absolute paths are never opened. Render does no Docker,
// git or network I/O, and never lets docker/cli's loader touch the file system
// itself. Load renders a document held in memory (a chart's merged
// templates) through the same steps and reads nothing at all. Problems with
// the input are *Error values naming the file, and the line and field where
// the YAML gives one.
//
// Files encrypted with SOPS (see package sops) are decrypted in memory with
// Input.Keys where a secret may come from: a secret's file, an env file
// (source or env_file), and so interpolation variables. Values they held
// are listed in Document.Sensitive, and Document.Masked says which fields
// they went to, so that whatever shows the specs can mask those fields. An encrypted compose file or config file is refused: its
// plaintext would sit where anyone reading the stack can see it.
//
// Render never panics on input: docker/cli's loader, which assumes shapes
// its own callers checked, runs behind a recover, and YAML recursion is
// bounded (see the fuzz targets). It keeps no state between calls.
package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/canary"
	"github.com/skep-cd/skep/sops"
)

// DefaultFiles are the compose file names looked for, in this order, when
// Input.Files is empty; the first one present is used.
var DefaultFiles = []string{"compose.yaml", "compose.yml", "docker-compose.yml", "docker-stack.yml", "stack.yml"}

// DefaultEnvFile is read for interpolation when Input.EnvFiles is empty and
// the file exists.
const DefaultEnvFile = ".env"

// MaxFileSize bounds every file render reads (compose, env, config and secret
// files); Swarm itself caps configs at 1000 KiB and secrets at 500 KiB.
const MaxFileSize = 4 << 20

// MaxServices bounds the services of one release: far above what one stack
// holds, low enough that a generated file cannot make the controller plan
// and write without end.
const MaxServices = 1000

// virtualRoot is the working directory handed to docker/cli's loader. The
// loader makes relative paths absolute against it without reading them; render
// maps paths under it back into Input.Root and refuses every other absolute
// path, so the loader's view never meets the real file system.
const virtualRoot = "/skep-render-root"

// Input says what to render. Paths in Path, Files and EnvFiles are slash
// separated; Files and EnvFiles are relative to Path, which is relative to
// Root. The zero value of each optional field means its default.
type Input struct {
	// Root is the directory every read is confined to, normally a checkout.
	Root string
	// Path is the directory holding the compose files; "" means Root.
	Path string
	// Files are merged in order; empty means the first of DefaultFiles.
	Files []string
	// EnvFiles are read in order for interpolation, later ones winning;
	// empty means DefaultEnvFile when present.
	EnvFiles []string
	// Variables win over EnvFiles. Render does not modify the map.
	Variables map[string]string
	// Keys decrypt the SOPS-encrypted files the input reads; nil refuses
	// them with an error naming the file.
	Keys *sops.Keys
}

// Document is one rendered compose document.
type Document struct {
	// Config is the merged compose configuration. The File of every config
	// and secret that takes its content from a file is rewritten to the slash
	// path of that file relative to Input.Root.
	Config *composetypes.Config
	// Files holds the content of those files, keyed by that File value.
	Files map[string][]byte
	// Warnings lists options the input uses that Swarm ignores, as
	// `docker stack deploy` prints them.
	Warnings []string
	// Sensitive are the values decrypted from SOPS env files: they may
	// sit anywhere in Config, through interpolation or env_file. Callers
	// carry them to stack.Release.Sensitive. Nil when no env file was
	// encrypted; a secret's decrypted file is only in Files.
	Sensitive []string
	// Masked is Config as it reads with every value that came from an
	// encrypted input (a decrypted variable or env file entry) as its mask
	// (sops.MaskOf), and so every string interpolated from one: it tells
	// which fields hold a decrypted value (stack.Options.Masked). Nil when
	// Sensitive is, or when the masked document does not load (a decrypted
	// value where the schema wants a number or a boolean); whoever shows
	// the specs then masks every occurrence of Sensitive.
	Masked *composetypes.Config
	// Waves holds the wave of each service (by compose name) whose
	// WaveKey is not 0; a service not listed is in wave 0.
	Waves map[string]int
	// Hooks holds the services (by compose name) marked with HookKey:
	// jobs run before or after each sync, not services of the release.
	Hooks map[string]Hook
	// Canaries holds the canary strategy (canary.Key) of each service
	// (by compose name) that has one; at most one service of a document
	// has one.
	Canaries map[string]canary.Strategy
}

// Hook is what the compose file says of one hook service.
type Hook struct {
	// Phase is HookPreSync or HookPostSync.
	Phase string
	// Timeout is HookTimeoutKey's value; 0 when it is not set.
	Timeout time.Duration
}

// HookKey is the compose extension that makes a service a hook: a job run
// once per sync, before the apply (HookPreSync) or after it (HookPostSync),
// or as a canary's analysis asks (HookAnalysis: a job metric's Swarm job).
// HookTimeoutKey bounds one run, as a Go duration ("90s", "5m").
const (
	HookKey        = "x-skep-hook"
	HookTimeoutKey = "x-skep-hook-timeout"
	HookPreSync    = "pre-sync"
	HookPostSync   = "post-sync"
	HookAnalysis   = "analysis"
)

// WaveKey is the compose extension that puts a service in a wave: a whole
// number from 0 to MaxWave, as YAML or after interpolation. Lower waves
// are applied, converged and healthy before a higher one starts.
const WaveKey = "x-skep-wave"

// MaxWave is the highest wave a service may be in.
const MaxWave = 100

// Compose renders in into one document. It reads only below in.Root, stops
// early when ctx is cancelled, and returns an *Error for a problem with the
// input (joined with errors.Join when there are several). It is safe to call
// concurrently.
func Compose(ctx context.Context, in Input) (*Document, error) {
	if in.Root == "" {
		return nil, errors.New("render: no root directory")
	}
	dir, err := localPath(in.Path)
	if err != nil {
		return nil, &Error{File: in.Path, Err: err}
	}
	// os.Root, not path checks alone, so that a symbolic link planted in
	// the repository cannot lead a read outside it.
	root, err := os.OpenRoot(in.Root)
	if err != nil {
		return nil, fmt.Errorf("render: open root: %w", err)
	}
	defer root.Close()
	r := &renderer{ctx: ctx, fsys: root.FS(), dir: dir, keys: in.Keys}
	doc, err := r.compose(in)
	return doc, r.masked(err)
}

// compose is Compose once the root is open.
func (r *renderer) compose(in Input) (*Document, error) {
	env, err := r.environment(in.EnvFiles, in.Variables)
	if err != nil {
		return nil, err
	}
	names, err := r.composeFiles(in.Files)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if err := r.parse(name, env); err != nil {
			return nil, err
		}
	}
	return r.load(env)
}

// renderer holds the state of one Compose call.
type renderer struct {
	ctx   context.Context
	fsys  fs.FS  // the root: an os.Root's, or Load's files in memory
	dir   string // compose directory, relative to root
	files []*source
	keys  *sops.Keys
	// sensitive are the values decrypted from encrypted env files.
	sensitive []string
	// secretVars holds the interpolation variables whose value came from
	// an encrypted env file (and is not empty).
	secretVars map[string]bool
}

// source is one parsed compose file.
type source struct {
	name string     // slash path relative to the root
	doc  *yaml.Node // the top-level mapping
	dict map[string]any
	// maskedEnv holds, by service, the environment that inlineEnvFiles
	// made with every decrypted value as its mask (see masked).
	maskedEnv map[string]map[string]any
}

// workingDir is the compose directory as the loader sees it, under
// virtualRoot.
func (r *renderer) workingDir() string {
	return path.Join(virtualRoot, r.dir)
}

// localPath cleans p and refuses paths that are absolute or leave the tree.
func localPath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	clean := path.Clean(filepath.ToSlash(p))
	if !filepath.IsLocal(filepath.FromSlash(clean)) {
		return "", fmt.Errorf("path %q leaves the repository", p)
	}
	return clean, nil
}

// resolve joins name (relative to the compose directory) and checks that the
// result stays inside the root.
func (r *renderer) resolve(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty file name")
	}
	// Both forms: a slash path is absolute on every OS, and filepath.IsAbs
	// adds the controller OS's own (a drive letter on Windows).
	if path.IsAbs(filepath.ToSlash(name)) || filepath.IsAbs(name) {
		return "", fmt.Errorf("absolute path %q is outside the repository", name)
	}
	return localPath(path.Join(r.dir, filepath.ToSlash(name)))
}

// read reads a file relative to the root, a slash path. os.Root refuses
// symbolic links and `..` that would leave it.
func (r *renderer) read(name string) ([]byte, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f, err := r.fsys.Open(name)
	if err != nil {
		return nil, pathError(name, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, pathError(name, err)
	}
	if info.IsDir() {
		return nil, fmt.Errorf("%s: %w", name, errors.New("is a directory, not a file"))
	}
	// One byte past the limit tells a file at the limit from a bigger one
	// without reading the bigger one whole.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, pathError(name, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w", name, fmt.Errorf("larger than %d bytes", MaxFileSize))
	}
	return data, nil
}

// pathError drops the os.Root operation and absolute path from err, keeping
// the cause, so messages name the file as the repository knows it.
func pathError(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", name, pe.Err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// exists reports whether name is a regular file below the root. A
// directory of that name counts as absent, not as an error.
func (r *renderer) exists(name string) (bool, error) {
	info, err := fs.Stat(r.fsys, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, pathError(name, err)
	}
	return !info.IsDir(), nil
}

// composeFiles resolves the compose files to read: files as given, or the
// first of DefaultFiles present in the compose directory.
func (r *renderer) composeFiles(files []string) ([]string, error) {
	if len(files) > 0 {
		names := make([]string, 0, len(files))
		for _, f := range files {
			name, err := r.resolve(f)
			if err != nil {
				return nil, &Error{File: f, Err: err}
			}
			names = append(names, name)
		}
		return names, nil
	}
	for _, f := range DefaultFiles {
		name := path.Join(r.dir, f)
		ok, err := r.exists(name)
		if err != nil {
			return nil, &Error{File: name, Err: errors.Unwrap(err)}
		}
		if ok {
			return []string{name}, nil
		}
	}
	dir := r.dir
	if dir == "." {
		dir = ""
	}
	return nil, &Error{File: dir, Err: fmt.Errorf("no compose file found (looked for %s)", strings.Join(DefaultFiles, ", "))}
}

// parse reads one compose file, checks its YAML and interpolation with line
// numbers, and moves the service env_file entries into environment (read
// through the root) so that the loader never opens them.
func (r *renderer) parse(name string, env map[string]string) error {
	data, err := r.read(name)
	if err != nil {
		return &Error{File: name, Err: errors.Unwrap(err)}
	}
	if sops.Encrypted(name, data) {
		return &Error{File: name, Err: errors.New("a compose file encrypted with SOPS is refused: keep the compose file plain and its secrets in the files it names (secrets, env_file)")}
	}
	doc, err := parseNode(data)
	if err != nil {
		var le *lineError
		if errors.As(err, &le) {
			return &Error{File: name, Line: le.line, Err: le.err}
		}
		return &Error{File: name, Err: err}
	}
	if err := checkInterpolation(doc, env); err != nil {
		err.File = name
		return err
	}
	// Parsed twice: the yaml.v3 node tree keeps the lines that errors
	// need; the loader wants its own map form.
	dict, err := parseDict(data)
	if err != nil {
		return &Error{File: name, Err: err}
	}
	src := &source{name: name, doc: doc, dict: dict}
	if err := r.inlineEnvFiles(src, env); err != nil {
		return err
	}
	r.files = append(r.files, src)
	return nil
}

// parseDict is loader.ParseYAML behind a recover: the loader assumes input
// shapes its own callers checked, and render must never panic on input.
func parseDict(data []byte) (dict map[string]any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("invalid compose document: %v", p)
		}
	}()
	return loader.ParseYAML(data)
}

// loadConfig runs docker/cli's loader behind a recover (see parseDict).
func loadConfig(details composetypes.ConfigDetails) (cfg *composetypes.Config, err error) {
	defer func() {
		if p := recover(); p != nil {
			cfg, err = nil, fmt.Errorf("invalid compose document: %v", p)
		}
	}()
	return loader.Load(details)
}

// details is the loader's input for files: the virtual working directory
// and a copy of env, so that nothing the loader does reaches the caller's
// map.
func (r *renderer) details(env map[string]string, files ...*source) composetypes.ConfigDetails {
	details := composetypes.ConfigDetails{
		WorkingDir:  r.workingDir(),
		Environment: maps.Clone(env),
	}
	for _, f := range files {
		details.ConfigFiles = append(details.ConfigFiles, composetypes.ConfigFile{Filename: f.name, Config: f.dict})
	}
	return details
}

// load merges the parsed files with the loader, checks the services, and
// reads the files of configs and secrets. It returns every problem of the
// merged document, joined.
func (r *renderer) load(env map[string]string) (*Document, error) {
	// Load each file alone first so that an error names the file it is in;
	// the loader's own messages do not.
	for _, f := range r.files {
		if _, err := loadConfig(r.details(env, f)); err != nil {
			return nil, locate(f, err)
		}
	}
	cfg, err := loadConfig(r.details(env, r.files...))
	if err != nil {
		return nil, &Error{File: r.files[len(r.files)-1].name, Err: err}
	}
	if n := len(cfg.Services); n > MaxServices {
		return nil, &Error{File: r.files[len(r.files)-1].name, Err: fmt.Errorf("%d services; a release holds at most %d", n, MaxServices)}
	}
	// The loader builds the service list from a map: sort it, so the same
	// input renders the same document.
	sort.Slice(cfg.Services, func(i, j int) bool { return cfg.Services[i].Name < cfg.Services[j].Name })

	doc := &Document{Config: cfg, Files: map[string][]byte{}}
	var errs []error
	errs = append(errs, r.checkServices(cfg)...)
	errs = append(errs, r.checkLabels(cfg)...)
	doc.Waves, errs = r.waves(cfg, errs)
	doc.Hooks, errs = r.hooks(cfg, errs)
	doc.Canaries, errs = r.canaries(cfg, doc.Hooks, errs)
	for _, name := range slices.Sorted(maps.Keys(cfg.Configs)) {
		obj := composetypes.FileObjectConfig(cfg.Configs[name])
		if err := r.readObject(doc, "configs", name, &obj); err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.Configs[name] = composetypes.ConfigObjConfig(obj)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		obj := composetypes.FileObjectConfig(cfg.Secrets[name])
		if err := r.readObject(doc, "secrets", name, &obj); err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.Secrets[name] = composetypes.SecretConfig(obj)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	doc.Warnings = r.warnings()
	doc.Sensitive = slices.Clone(r.sensitive)
	if len(r.sensitive) > 0 {
		doc.Masked = r.maskedConfig(env, cfg)
	}
	return doc, nil
}

// maskedConfig loads the files again with every value that came from an
// encrypted input as its mask: the decrypted variables and env file
// entries, and so every string interpolated from them. Configs and
// secrets keep cfg's files, whose content was read once. It returns nil
// when the masked document does not load: a decrypted value where the
// schema wants a number, a boolean or a format a mask does not have.
func (r *renderer) maskedConfig(env map[string]string, cfg *composetypes.Config) *composetypes.Config {
	files := make([]*source, len(r.files))
	for i, f := range r.files {
		files[i] = f.masked()
	}
	masked, err := loadConfig(r.details(r.maskedEnvironment(env), files...))
	if err != nil {
		return nil
	}
	sort.Slice(masked.Services, func(i, j int) bool { return masked.Services[i].Name < masked.Services[j].Name })
	for name, c := range masked.Configs {
		real, ok := cfg.Configs[name]
		if !ok {
			return nil
		}
		c.File = real.File
		masked.Configs[name] = c
	}
	for name, s := range masked.Secrets {
		real, ok := cfg.Secrets[name]
		if !ok {
			return nil
		}
		s.File = real.File
		masked.Secrets[name] = s
	}
	return masked
}

// readObject reads the file of a config or secret through the root and
// rewrites obj.File to its path relative to the root.
func (r *renderer) readObject(doc *Document, kind, name string, obj *composetypes.FileObjectConfig) error {
	// No file to read: the value lives in the swarm or comes from a driver.
	if obj.External.External || obj.Driver != "" {
		return nil
	}
	field := kind + "." + name + ".file"
	file, line := r.find(field)
	if file == "" {
		file, line = r.find(kind + "." + name)
	}
	rel, ok := r.fromVirtual(obj.File)
	if !ok {
		return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf("absolute path %s is outside the repository", obj.File)}
	}
	// The loader turns a missing `file:` into the working directory itself.
	if rel == r.dir && obj.File == r.workingDir() {
		return &Error{File: file, Line: line, Field: kind + "." + name, Err: errors.New("needs file, external or driver")}
	}
	data, err := r.read(rel)
	if err != nil {
		return &Error{File: file, Line: line, Field: field, Err: err}
	}
	if sops.Encrypted(rel, data) {
		// A config's content is readable by anyone who can inspect it, and
		// revisions keep configs whole: a decrypted file must be a secret.
		if kind != "secrets" {
			return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf("%s is encrypted with SOPS; a config's content is readable in the swarm, declare it as a secret", rel)}
		}
		p, err := r.keys.Decrypt(rel, data)
		if err != nil {
			return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf("%s: %w", rel, err)}
		}
		data = p.Data
	}
	obj.File = rel
	doc.Files[rel] = data
	return nil
}

// readDecrypted reads name and, when it is a SOPS file, decrypts it in
// memory; the values it held encrypted join r.sensitive, as does the form
// an env file escapes them in. Errors read "name: cause", as read's do.
func (r *renderer) readDecrypted(name string) (data []byte, encrypted bool, err error) {
	data, err = r.read(name)
	if err != nil || !sops.Encrypted(name, data) {
		return data, false, err
	}
	p, err := r.keys.Decrypt(name, data)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", name, err)
	}
	for _, v := range p.Values {
		r.sensitive = append(r.sensitive, v)
		if escaped := strings.ReplaceAll(v, "\n", `\n`); escaped != v {
			r.sensitive = append(r.sensitive, escaped)
		}
	}
	return p.Data, true, nil
}

// masked hides decrypted values in err's message: docker/cli's loader
// quotes a value it refuses, and an interpolated one may be a secret.
func (r *renderer) masked(err error) error {
	if err == nil || len(r.sensitive) == 0 {
		return err
	}
	msg := err.Error()
	if masked := sops.Mask(msg, r.sensitive); masked != msg {
		// The causes keep the values: the masked message stands alone.
		return &Error{Err: errors.New(masked)}
	}
	return err
}

// fromVirtual maps a path the loader made absolute against virtualRoot back
// to a path relative to the root.
func (r *renderer) fromVirtual(p string) (string, bool) {
	p = filepath.ToSlash(p)
	if p == virtualRoot {
		return ".", true
	}
	rest, ok := strings.CutPrefix(p, virtualRoot+"/")
	if !ok {
		return "", false
	}
	return rest, true
}

// checkServices mirrors the checks `docker stack deploy` makes after loading
// (an image on every service) and refuses relative bind mounts, which name a
// directory of the controller's checkout rather than of a swarm node.
func (r *renderer) checkServices(cfg *composetypes.Config) []error {
	var errs []error
	for _, svc := range cfg.Services {
		field := "services." + svc.Name + ".image"
		switch file, line := r.find(field); {
		case svc.Image == "":
			file, line = r.find("services." + svc.Name)
			errs = append(errs, &Error{File: file, Line: line, Field: field, Err: errors.New("no image specified")})
		default:
			if _, err := reference.ParseAnyReference(svc.Image); err != nil {
				errs = append(errs, &Error{File: file, Line: line, Field: field, Err: fmt.Errorf("invalid image reference %q: %w", svc.Image, err)})
			}
		}
		for i, v := range svc.Volumes {
			if v.Type != "bind" {
				continue
			}
			if rel, ok := r.fromVirtual(v.Source); ok {
				field := "services." + svc.Name + ".volumes[" + strconv.Itoa(i) + "]"
				file, line := r.find("services." + svc.Name + ".volumes." + strconv.Itoa(i))
				if file == "" {
					file, line = r.find("services." + svc.Name + ".volumes")
				}
				errs = append(errs, &Error{File: file, Line: line, Field: field,
					Err: fmt.Errorf("relative host path %s names the checkout, not a swarm node; use an absolute path", rel)})
			}
		}
	}
	return errs
}

// waves reads each service's WaveKey, adding an error located at the key
// for a value that is not a whole number from 0 to MaxWave.
func (r *renderer) waves(cfg *composetypes.Config, errs []error) (map[string]int, []error) {
	var out map[string]int
	for _, svc := range cfg.Services {
		v, ok := svc.Extras[WaveKey]
		if !ok {
			continue
		}
		n, err := waveOf(v)
		if err != nil {
			field := "services." + svc.Name + "." + WaveKey
			file, line := r.find(field)
			errs = append(errs, &Error{File: file, Line: line, Field: field, Err: err})
			continue
		}
		if n != 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[svc.Name] = n
		}
	}
	return out, errs
}

// hooks reads each service's HookKey and HookTimeoutKey, adding an error
// located at the key for a phase that is not one, a timeout that is not a
// positive duration, or a timeout on a service that is no hook.
func (r *renderer) hooks(cfg *composetypes.Config, errs []error) (map[string]Hook, []error) {
	var out map[string]Hook
	fail := func(svc, key string, err error) {
		field := "services." + svc + "." + key
		file, line := r.find(field)
		errs = append(errs, &Error{File: file, Line: line, Field: field, Err: err})
	}
	for _, svc := range cfg.Services {
		phase, isHook := svc.Extras[HookKey]
		timeout, timed := svc.Extras[HookTimeoutKey]
		var h Hook
		if isHook {
			p, _ := phase.(string)
			if p = strings.TrimSpace(p); p != HookPreSync && p != HookPostSync && p != HookAnalysis {
				fail(svc.Name, HookKey, fmt.Errorf("want %s, %s or %s, got %v", HookPreSync, HookPostSync, HookAnalysis, phase))
				continue
			}
			h.Phase = p
		}
		if timed {
			if !isHook {
				fail(svc.Name, HookTimeoutKey, fmt.Errorf("set on a service that is no hook (%s is missing)", HookKey))
				continue
			}
			s, _ := timeout.(string)
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil || d <= 0 {
				fail(svc.Name, HookTimeoutKey, fmt.Errorf("want a positive duration such as 90s or 5m, got %v", timeout))
				continue
			}
			h.Timeout = d
		}
		if isHook {
			if out == nil {
				out = map[string]Hook{}
			}
			out[svc.Name] = h
		}
	}
	return out, errs
}

// waveOf reads a wave as the loader left it: a YAML integer, or a string
// after interpolation ("${WAVE}").
func waveOf(v any) (int, error) {
	var n int
	switch v := v.(type) {
	case int:
		n = v
	case string:
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return 0, fmt.Errorf("want a whole number from 0 to %d, got %q", MaxWave, v)
		}
	default:
		return 0, fmt.Errorf("want a whole number from 0 to %d, got %v", MaxWave, v)
	}
	if n < 0 || n > MaxWave {
		return 0, fmt.Errorf("want a whole number from 0 to %d, got %d", MaxWave, n)
	}
	return n, nil
}

// warnings lists the options of the input that Swarm ignores, in the
// words `docker stack deploy` prints them.
func (r *renderer) warnings() []string {
	dicts := make([]map[string]any, 0, len(r.files))
	for _, f := range r.files {
		dicts = append(dicts, f.dict)
	}
	var warnings []string
	if unsupported := loader.GetUnsupportedProperties(dicts...); len(unsupported) > 0 {
		warnings = append(warnings, "ignoring unsupported options: "+strings.Join(unsupported, ", "))
	}
	deprecated := loader.GetDeprecatedProperties(dicts...)
	for _, name := range slices.Sorted(maps.Keys(deprecated)) {
		warnings = append(warnings, "ignoring deprecated option "+name+": "+deprecated[name])
	}
	return warnings
}

// find returns the last file (the one that wins a merge) defining the dotted
// field, with its line; "" when no file has it.
func (r *renderer) find(field string) (string, int) {
	for i := len(r.files) - 1; i >= 0; i-- {
		if n := lookup(r.files[i].doc, field); n != nil {
			return r.files[i].name, n.Line
		}
	}
	return "", 0
}
