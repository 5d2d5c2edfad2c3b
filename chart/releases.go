package chart

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/skep-cd/skep/configfile"
)

// MaxReleases bounds the releases one release file declares.
const MaxReleases = 50

// ReleaseSpec is one release a release file declares: a chart in the
// application's repository, its values, and the wave it deploys in.
type ReleaseSpec struct {
	// Name is the release's own name; its stack is the application's
	// release, a dash and Name ("shop-db").
	Name string
	// Chart is the chart's directory in the repository.
	Chart string
	// Values are values files in the repository, merged in order.
	Values []string
	// Set holds inline values, merged last.
	Set map[string]string
	// Wave orders the releases: every release of a wave converges before
	// the next wave starts; a failing wave stops the later ones.
	Wave int
}

// releaseFile is the file form of a release file.
type releaseFile struct {
	Releases []releaseEntry `yaml:"releases"`
}

type releaseEntry struct {
	Name   string            `yaml:"name"`
	Chart  string            `yaml:"chart"`
	Values []string          `yaml:"values"`
	Set    map[string]string `yaml:"set"`
	Wave   int               `yaml:"wave"`
}

var (
	// releaseName keeps a release's stack name a valid, readable one.
	releaseName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
	// hashLike is the form of a preview's suffix, which a release name
	// must not take.
	hashLike = regexp.MustCompile(`^[0-9a-f]{8}$`)
)

// LoadReleases reads the release file name of fsys: a mapping with a
// `releases` list, each entry {name, chart, values, set, wave}. Every
// problem comes back at once as configfile.Problems with file, line and
// field. The releases are returned in wave order, then file order.
func LoadReleases(fsys fs.FS, name string) ([]ReleaseSpec, error) {
	data, err := readFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("release file %s: %w", name, err)
	}
	var doc releaseFile
	d := configfile.Decode(name, data, &doc, configfile.Options{
		Want:    "a mapping with a releases list",
		Example: "releases:\n  - name: db\n    chart: charts/postgres\n    values: [envs/testing/db.yaml]\n    wave: 0",
	})
	if !d.Present("releases") {
		d.Add("releases", "missing; want a list of {name, chart, values, set, wave}")
	}
	if len(doc.Releases) > MaxReleases {
		d.Add("releases", "%d releases; at most %d", len(doc.Releases), MaxReleases)
	}
	first := map[string]int{}
	var out []ReleaseSpec
	for i, e := range doc.Releases {
		field := fmt.Sprintf("releases[%d]", i)
		switch {
		case !releaseName.MatchString(e.Name):
			d.Add(field+".name", "want lower-case letters, digits and '-' (at most 32), got %s", configfile.Quote(e.Name))
		case hashLike.MatchString(e.Name):
			d.Add(field+".name", "%s looks like a preview's hash; choose another name", configfile.Quote(e.Name))
		default:
			if j, dup := first[e.Name]; dup {
				d.Add(field+".name", "%s is declared twice; first as releases[%d]", configfile.Quote(e.Name), j)
			}
			first[e.Name] = i
		}
		if e.Chart == "" || path.IsAbs(e.Chart) || strings.HasPrefix(path.Clean(e.Chart), "..") {
			d.Add(field+".chart", "want the chart's directory relative to the repository root, got %s", configfile.Quote(e.Chart))
		}
		for k, v := range e.Values {
			if v == "" || path.IsAbs(v) || strings.HasPrefix(path.Clean(v), "..") {
				d.Add(fmt.Sprintf("%s.values[%d]", field, k), "want a values file relative to the repository root, got %s", configfile.Quote(v))
			}
		}
		if e.Wave < 0 || e.Wave > 100 {
			d.Add(field+".wave", "want 0 to 100, got %d", e.Wave)
		}
		out = append(out, ReleaseSpec{Name: e.Name, Chart: path.Clean(e.Chart), Values: e.Values, Set: e.Set, Wave: e.Wave})
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	// Stable by wave: the file's order stays within a wave.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Wave < out[j-1].Wave; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}
