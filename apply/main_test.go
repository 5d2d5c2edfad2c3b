package apply

import "flag"

var update = flag.Bool("update", false, "rewrite testdata fixtures")
