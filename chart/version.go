package chart

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/skep-cd/skep/version"
)

// parseConstraint parses Chart.yaml's skepVersion, a SemVer range in the
// syntax of Helm's kubeVersion (">=0.3", ">=0.3, <2", "~0.4", "^1").
func parseConstraint(s string) (*semver.Constraints, error) {
	c, err := semver.NewConstraint(s)
	if err != nil {
		return nil, fmt.Errorf("want a version range like \">=0.3\", got %q: %v", s, err)
	}
	return c, nil
}

// CheckSkepVersion reports an error when the chart's skepVersion range
// excludes skep, a version as version.Get reports it ("" means this
// build's). Only a release version (v1.2.3, without a pre-release or build
// suffix) is checked: a development build ("dev", a git describe string
// like v0.3.0-4-gabc1234, a pseudo-version) renders every chart, so that
// unreleased code can be tried on new charts.
func (c *Chart) CheckSkepVersion(skep string) error {
	if c.metadata.SkepVersion == "" {
		return nil
	}
	if skep == "" {
		skep = version.Get().Version
	}
	v, err := semver.StrictNewVersion(strings.TrimPrefix(skep, "v"))
	if err != nil || v.Prerelease() != "" || v.Metadata() != "" {
		return nil
	}
	cons, err := parseConstraint(c.metadata.SkepVersion)
	if err != nil {
		return fmt.Errorf("chart %s: skepVersion: %w", c.metadata.Name, err)
	}
	if !cons.Check(v) {
		return fmt.Errorf("chart %s %s needs Skep %s; this is Skep %s", c.metadata.Name, c.metadata.Version, c.metadata.SkepVersion, skep)
	}
	return nil
}
