// Package zz pins modules that later packages import; it goes away once they do.
package zz

import (
	"github.com/docker/cli/cli/compose/convert"
	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/docker/docker/client"
	"github.com/go-git/go-git/v5"
	"github.com/google/go-containerregistry/pkg/registry"
)

var _ = convert.Service
var _ = loader.Load
var _ composetypes.Config
var _ = client.NewClientWithOpts
var _ = registry.New
var _ = git.PlainClone
